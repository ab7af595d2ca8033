// Approvals you can judge: what a waiting call would do, drawn in its card,
// and the tools a chat allowed for every call (shown in the details panel,
// each with Revoke). The gateway computes a file tool's change when it
// asks (APPROVAL.change, docs/protocol.md): the browser never sees the
// workspace, it only draws what it is given.
//
// DOM contract (browser tests rely on it):
//   .card.approval .approval-detail         what the call would do:
//     pre.code.shell                        a shell command (wraps; never scrolls the page sideways)
//     .change[data-status=S]                a file change: .change-head (path, status, +A −R),
//       pre.diff > span.line.add|del|hunk|ctx   a modified file's diff, one span a line
//       pre.code.preview                    a created file's head
//       .change-note                        lines left out, a hidden file, why it would fail
//     pre.card-args                         any other call's arguments
//   .card.approval button.allow-chat        Allow for this chat
//   section.allowed-tools[data-chat=ID]     the details panel's list: li[data-tool=T] button.revoke

import { el } from './dom.js';
import { render, toast } from './render.js';
import { request } from './socket.js';
import { currentView, S } from './state.js';

const clip = (s, n) => (s.length > n ? s.slice(0, n) + '…' : s);

// approvalDetail draws what the call of approval a would do.
export function approvalDetail(a) {
  const wrap = el('div', { class: 'approval-detail' });
  const args = typeof a?.call?.arguments === 'string' ? a.call.arguments : '';
  const c = a?.change && typeof a.change === 'object' ? a.change : null;
  let cmd = '';
  if ((a?.tool || a?.call?.name) === 'shell') {
    try {
      const parsed = JSON.parse(args);
      if (typeof parsed?.command === 'string') cmd = parsed.command;
    } catch {
      // not JSON: the arguments are shown as they are below
    }
  }
  if (cmd) {
    wrap.append(el('pre', { class: 'code shell', 'aria-label': 'Command' }, el('code', null, clip(cmd, 8000))));
  } else if (c) {
    wrap.append(changeEl(c));
  } else if (args) {
    wrap.append(el('pre', { class: 'card-args' }, clip(args, 2000)));
  }
  return wrap;
}

// changeEl draws a PROPOSAL: a diff, a new file's head, or why it would fail.
function changeEl(c) {
  const n = (x) => (Number.isFinite(x) ? x : 0);
  const status = typeof c.status === 'string' ? c.status : '';
  const box = el('div', { class: 'change', 'data-status': status || 'error' });
  const head = el('div', { class: 'change-head' }, el('code', { class: 'change-path' }, String(c.path || '')));
  if (status) head.append(el('span', { class: 'change-status' }, status));
  if (status && status !== 'unchanged') {
    head.append(el('span', { class: 'change-count add', title: 'lines added' }, `+${n(c.added)}`),
      el('span', { class: 'change-count del', title: 'lines removed' }, `−${n(c.removed)}`));
  }
  box.append(head);
  if (c.error) {
    box.append(el('p', { class: 'change-note error' }, `This call would fail now: ${c.error}`));
    return box;
  }
  if (c.hidden) box.append(el('p', { class: 'change-note' }, 'The path looks like it holds a secret, so its text is not shown.'));
  if (typeof c.diff === 'string' && c.diff) {
    const pre = el('pre', { class: 'diff', 'aria-label': `Changes to ${c.path || 'the file'}` });
    for (const line of c.diff.replace(/\n$/, '').split('\n')) {
      const k = line.startsWith('@@') ? 'hunk' : line[0] === '+' ? 'add' : line[0] === '-' ? 'del' : line[0] === '\\' ? 'note' : 'ctx';
      pre.append(el('span', { class: `line ${k}` }, line || ' ')); // a block each: no newline between
    }
    box.append(pre);
  } else if (typeof c.content === 'string' && c.content) {
    box.append(el('pre', { class: 'code preview', 'aria-label': `New file ${c.path || ''}` }, el('code', null, c.content)));
  } else if (status === 'created' && !c.hidden) {
    box.append(el('p', { class: 'change-note' }, 'An empty file.'));
  } else if (status === 'unchanged') {
    box.append(el('p', { class: 'change-note' }, 'The file already has this content: nothing would change.'));
  }
  if (n(c.omitted) > 0) box.append(el('p', { class: 'change-note omitted' }, `${n(c.omitted)} more lines are not shown.`));
  return box;
}

// allowChatButton is the card's third button.
export function allowChatButton(a, disabled) {
  const tool = a?.tool || a?.call?.name || 'this tool';
  return el('button', { class: 'allow-chat btn btn-ghost btn-sm', type: 'button', disabled: Boolean(disabled),
    title: `Allow this call, and every later ${tool} call in this chat (revocable in the model details)` }, 'Allow for this chat');
}

// allowForChat answers approval id of view v with "Allow for this chat":
// the call runs and its tool is allowed for every later call of the chat.
export function allowForChat(v, id) {
  const a = v.approvals.get(id);
  if (!a || a._answering) return;
  if (request({ type: 'approval.answer', approval: id, allow: true, for_chat: true }, { kind: 'approval', chat: v.id, approval: id })) a._answering = true;
  else toast('Not connected — try again in a moment.');
  render();
}

// onToolRevoked takes tool.revoked, the answer to tool.revoke: the chat's
// allowed tools as they are now (its tool.allowed event, when there was
// one, came first and took the request's req), and the details panel's
// list follows.
export function onToolRevoked(f) {
  if (f.req) S.reqs.delete(f.req);
  const v = S.views.get(f.chat);
  if (v) v.allowedTools = Array.isArray(f.allowed_tools) ? f.allowed_tools.filter((t) => typeof t === 'string').sort() : [];
  const sec = document.querySelector(`section.allowed-tools[data-chat="${CSS.escape(String(f.chat))}"]`);
  if (sec) {
    const keep = new Set(v ? v.allowedTools : []);
    for (const li of sec.querySelectorAll('li[data-tool]')) if (!keep.has(li.dataset.tool)) li.remove();
    if (!sec.querySelector('li[data-tool]')) sec.remove();
  }
  render();
}

// chatToolsSection is the details panel's section for the chat shown:
// its allowed tools, each with Revoke; null when it allows none.
export function chatToolsSection() {
  const v = currentView();
  if (!v) return null;
  return allowedToolsSection(v.id, v.allowedTools, (tool, li) => {
    if (!request({ type: 'tool.revoke', chat: v.id, tool }, { kind: 'revoke', chat: v.id, tool })) {
      toast('Not connected — try again in a moment.');
      li.querySelector('button.revoke').disabled = false;
    }
  });
}

// allowedToolsSection lists the tools chat allowed for every call, each
// with Revoke (onRevoke(tool, li)); null when there are none.
export function allowedToolsSection(chat, tools, onRevoke) {
  if (!chat || !Array.isArray(tools) || !tools.length) return null;
  const list = el('ul', { class: 'allowed-list' });
  for (const t of tools) {
    if (typeof t !== 'string') continue;
    const b = el('button', { class: 'revoke btn btn-ghost btn-sm', type: 'button', 'aria-label': `Revoke ${t}` }, 'Revoke');
    const li = el('li', { 'data-tool': t }, el('code', null, t), b);
    b.addEventListener('click', () => {
      b.disabled = true;
      onRevoke(t, li);
    });
    list.append(li);
  }
  return el('section', { class: 'allowed-tools', 'data-chat': chat },
    el('h3', null, 'Allowed for this chat'),
    el('p', { class: 'hint' }, 'These tools run without asking in this chat. Revoke one to be asked again.'),
    list);
}
