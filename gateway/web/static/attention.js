// Attention: which chats wait for the person. A chat whose tool call
// waits for Allow or Deny, or whose interrupted call waits for repeat or
// skip, is marked in the chat list apart from one that is generating (an
// icon and words, not a colour alone), and the page title counts the
// chats that wait: "(2) Mirror". It reads the list entries' waiting field
// (docs/protocol.md, "The chat list"), which chat.updated keeps current,
// from app.js's mirror:chats event.
//
// DOM contract (browser tests rely on it):
//   .chat-item.waiting[data-waiting=approval|recovery]  a chat that waits;
//                       its .attn (an icon and "Needs approval" or "Needs
//                       answer") stands where a working chat's spinner is
//   document.title      starts with "(N) " while N chats wait

const LABEL = { approval: 'Needs approval', recovery: 'Needs answer' };
const HINT = {
  approval: 'A tool call waits for your Allow or Deny',
  recovery: 'A tool call was interrupted: it waits for you to repeat or skip it',
};

// waitingKind is what chat c waits for: 'approval', 'recovery' or ''.
export function waitingKind(c) {
  return c && Object.hasOwn(LABEL, c.waiting) ? c.waiting : '';
}

// waitingCount counts the chats of list that wait.
export function waitingCount(list) {
  let n = 0;
  for (const c of list || []) if (waitingKind(c)) n++;
  return n;
}

// titleWith is title with the count of waiting chats in front ("(2) …"),
// an older count taken off first.
export function titleWith(title, n) {
  const bare = String(title || '').replace(/^\(\d+\) /, '');
  return n > 0 ? `(${n}) ${bare}` : bare;
}

let count = 0;

// waiting is how many chats wait, as the last list said.
export function waiting() {
  return count;
}

function icon() {
  const NS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('viewBox', '0 0 16 16');
  svg.setAttribute('aria-hidden', 'true');
  svg.setAttribute('class', 'attn-icon');
  const p = document.createElementNS(NS, 'path');
  // A hand raised: "your turn".
  p.setAttribute('d', 'M8 1.5a6.5 6.5 0 1 0 0 13a6.5 6.5 0 0 0 0-13zM8 4.2v4.6M8 10.9v.1');
  p.setAttribute('fill', 'none');
  p.setAttribute('stroke', 'currentColor');
  p.setAttribute('stroke-width', '1.7');
  p.setAttribute('stroke-linecap', 'round');
  svg.append(p);
  return svg;
}

// decorate marks the items of the chat list (ul) whose chats wait, and
// unmarks the others; items app.js re-rendered are marked again.
export function decorate(ul, list) {
  if (!ul) return;
  const byId = new Map((list || []).map((c) => [c.id, c]));
  for (const li of ul.querySelectorAll('.chat-item[data-chat]')) {
    const kind = waitingKind(byId.get(li.dataset.chat));
    let mark = li.querySelector('.attn');
    if (!kind) {
      li.classList.remove('waiting');
      delete li.dataset.waiting;
      mark?.remove();
      continue;
    }
    li.classList.add('waiting');
    li.dataset.waiting = kind;
    if (mark && mark.dataset.kind === kind) continue;
    mark?.remove();
    mark = document.createElement('span');
    mark.className = 'attn';
    mark.dataset.kind = kind;
    mark.title = HINT[kind];
    const words = document.createElement('span');
    words.className = 'attn-text';
    words.textContent = LABEL[kind];
    mark.append(icon(), words);
    const meta = li.querySelector('.chat-meta') || li.querySelector('.chat-link') || li;
    meta.prepend(mark);
  }
}

if (typeof document !== 'undefined') document.addEventListener('mirror:chats', (e) => {
  const list = Array.isArray(e.detail) ? e.detail : [];
  count = waitingCount(list);
  decorate(document.getElementById('chat-list'), list);
  decorate(document.getElementById('archived-list'), list);
  // The title's count is set by the page's header (render.js, titleWith).
});
