// Search across every chat's title and messages (GET /api/search, see
// docs/protocol.md "Managing chats"). Results show the matched words
// highlighted; picking one opens its chat and scrolls to the message,
// loading earlier pages of the chat until it is there.
//
// DOM contract (browser tests rely on it):
//   #search                       the search box (sidebar); Escape clears it,
//                                 ArrowDown moves into the results
//   #search-panel                 shown instead of the chat list while the box
//                                 holds a query; #search-status says how many
//   .search-result[data-chat=ID][data-message=MID]  one hit (data-message
//                                 empty for a title hit): .result-title, and
//                                 .result-snippet whose <mark> elements are the
//                                 matched words
//   .search-hit                   the message a result jumped to (class added
//                                 for a few seconds)

import { $, el } from './dom.js';

const dom = {
  input: $('search'),
  panel: $('search-panel'),
  status: $('search-status'),
  results: $('search-results'),
  nav: document.querySelector('.chat-nav'),
  messages: $('messages'),
};

let seq = 0; // the newest query sent; older answers are dropped
let timer = null;
let inflight = null;
let words = [];

function showPanel(on) {
  dom.panel.hidden = !on;
  dom.nav.hidden = on;
}

function schedule() {
  clearTimeout(timer);
  const q = dom.input.value.trim();
  if (!q) {
    seq++;
    if (inflight) inflight.abort();
    dom.results.replaceChildren();
    dom.status.textContent = '';
    showPanel(false);
    return;
  }
  showPanel(true);
  timer = setTimeout(() => run(q), 150);
}

async function run(q) {
  const mine = ++seq;
  if (inflight) inflight.abort();
  inflight = new AbortController();
  dom.status.textContent = 'Searching…';
  try {
    const r = await fetch(`/api/search?q=${encodeURIComponent(q)}&limit=50`, { credentials: 'same-origin', signal: inflight.signal });
    const data = await r.json().catch(() => ({}));
    if (mine !== seq) return;
    if (!r.ok) {
      dom.status.textContent = data.error || `Search failed (HTTP ${r.status}).`;
      dom.results.replaceChildren();
      return;
    }
    words = q.toLowerCase().split(/\s+/).filter(Boolean);
    render(Array.isArray(data.hits) ? data.hits : []);
  } catch (e) {
    if (e.name !== 'AbortError' && mine === seq) dom.status.textContent = 'Search failed: ' + e.message;
  }
}

function snippet(parts) {
  const p = el('span', { class: 'result-snippet' });
  for (const part of Array.isArray(parts) ? parts : []) {
    p.append(part.hit ? el('mark', null, String(part.text)) : document.createTextNode(String(part.text)));
  }
  return p;
}

function render(hits) {
  dom.status.textContent = hits.length ? `${hits.length}${hits.length >= 50 ? '+' : ''} found` : 'Nothing found.';
  dom.results.replaceChildren(
    ...hits.map((h) => {
      const who = h.kind === 'title' ? 'Title' : h.role === 'user' ? 'You' : h.role === 'boundary' ? 'Handoff' : 'Assistant';
      const btn = el('button', { type: 'button', class: 'result-link' },
        el('span', { class: 'result-head' },
          el('span', { class: 'result-title' }, h.title || 'Chat'),
          h.archived ? el('span', { class: 'result-tag' }, 'Archived') : null),
        el('span', { class: 'result-who' }, who),
        snippet(h.snippet));
      return el('li', { class: 'search-result', 'data-chat': h.chat, 'data-message': h.message || '', 'data-seq': h.seq || '', 'data-role': h.role || '' }, btn);
    }));
}

// ---------------------------------------------------------------- jump

function target(li) {
  if (li.dataset.role === 'boundary') return `[data-boundary="${CSS.escape(li.dataset.seq)}"]`;
  return li.dataset.message ? `[data-message="${CSS.escape(li.dataset.message)}"]` : null;
}

// jump opens the chat and scrolls to the message, paging earlier messages
// in (the "Load earlier messages" button) until it is shown; bounded.
function jump(li) {
  const chat = li.dataset.chat;
  const want = '#' + encodeURIComponent(chat);
  if (location.hash !== want) location.hash = want;
  const sel = target(li);
  if (!sel) return;
  const deadline = Date.now() + 15000;
  const step = () => {
    if (location.hash !== want || Date.now() > deadline) return;
    const m = dom.messages.querySelector(sel);
    if (m) return mark(m);
    const older = dom.messages.querySelector('.load-older');
    if (older && !older.disabled && /Load earlier/.test(older.textContent)) older.click();
    setTimeout(step, 100);
  };
  step();
}

function mark(m) {
  for (const old of dom.messages.querySelectorAll('.search-hit')) old.classList.remove('search-hit');
  m.classList.add('search-hit');
  m.scrollIntoView({ block: 'center' });
  // app.js may still scroll to the bottom on the render that showed it.
  requestAnimationFrame(() => requestAnimationFrame(() => m.scrollIntoView({ block: 'center' })));
  highlight(m);
  setTimeout(() => m.classList.remove('search-hit'), 4000);
}

// highlight marks the query's words inside the message with the CSS Custom
// Highlight API, which leaves the DOM (app.js's) as it is.
function highlight(m) {
  if (!window.CSS || !CSS.highlights || typeof Highlight === 'undefined') return;
  const ranges = [];
  const walk = document.createTreeWalker(m, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    const text = n.data.toLowerCase();
    for (const w of words) {
      if (w.length < 2) continue;
      for (let i = text.indexOf(w); i >= 0; i = text.indexOf(w, i + w.length)) {
        const r = new Range();
        r.setStart(n, i);
        r.setEnd(n, i + w.length);
        ranges.push(r);
      }
    }
  }
  CSS.highlights.set('search-hit', new Highlight(...ranges));
}

// ---------------------------------------------------------------- wiring

dom.input.addEventListener('input', schedule);
dom.input.addEventListener('keydown', (e) => {
  if (e.key === 'Escape') {
    e.preventDefault();
    dom.input.value = '';
    schedule();
  } else if (e.key === 'ArrowDown') {
    const first = dom.results.querySelector('.result-link');
    if (first) {
      e.preventDefault();
      first.focus();
    }
  } else if (e.key === 'Enter') {
    clearTimeout(timer);
    const q = dom.input.value.trim();
    if (q) run(q);
  }
});
dom.results.addEventListener('click', (e) => {
  const li = e.target.closest('.search-result');
  if (li) jump(li);
});
dom.results.addEventListener('keydown', (e) => {
  const links = [...dom.results.querySelectorAll('.result-link')];
  const i = links.indexOf(document.activeElement);
  if (i < 0) return;
  if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
    e.preventDefault();
    const j = i + (e.key === 'ArrowDown' ? 1 : -1);
    if (j < 0) dom.input.focus();
    else links[Math.min(j, links.length - 1)].focus();
  } else if (e.key === 'Escape') {
    dom.input.focus();
  }
});
