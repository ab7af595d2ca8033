// Mirror browser client: what the person's actions send (open, send,
// edit, delete, stop, pin, approve, recover) and the local state they set.

import { el as h } from './dom.js';
import { closeSidebar, setHash } from './nav.js';
import { dom } from './page.js';
import { autosize, render, toast } from './render.js';
import { request } from './socket.js';
import { currentView, LAST_KEY, S, saveOutbox, uuid, viewFor } from './state.js';

// loadOlder asks for the page of messages before the oldest one shown.
export function loadOlder() {
  const v = currentView();
  if (!v || !v.loaded || !v.subscribed || !v.before || v.loadingOlder || !S.connected) return;
  if (request({ type: 'chat.history', chat: v.id, before: v.before }, { kind: 'history', chat: v.id })) {
    v.loadingOlder = true;
    render();
  }
}

export function subscribe(id) {
  const v = viewFor(id);
  v.subscribed = true;
  v.loadingOlder = false;
  if (v.loaded) {
    v.opening = false;
    request({ type: 'chat.open', chat: id, since: v.lastSeq }, { kind: 'open', chat: id });
  } else {
    v.opening = true;
    request({ type: 'chat.open', chat: id }, { kind: 'open', chat: id });
  }
}

export function selectChat(id) {
  if (!id) return;
  if (S.current === id) {
    const v = S.views.get(id);
    if (S.connected && (!v || !v.subscribed)) subscribe(id);
    closeSidebar();
    render();
    return;
  }
  const prev = S.current;
  if (prev) {
    S.drafts.set(prev, dom.input.value);
    const pv = S.views.get(prev);
    if (pv && pv.subscribed) {
      request({ type: 'chat.close', chat: prev }, { kind: 'close', chat: prev });
      pv.subscribed = false;
      pv.opening = false;
    }
  }
  S.current = id;
  S.redirect = false;
  try {
    localStorage.setItem(LAST_KEY, id);
  } catch {
    // private mode
  }
  setHash(id);
  dom.input.value = S.drafts.get(id) || '';
  autosize(dom.input);
  showCommandHints();
  viewFor(id);
  if (S.connected) subscribe(id);
  S.stick = true;
  closeSidebar();
  render();
}

export function createChat(then) {
  if (!S.connected) {
    S.wantCreate = { then };
    toast('Not connected — the chat will be created when the connection is back.');
    return;
  }
  request({ type: 'chat.create', reuse: true }, { kind: 'create', then });
}

// isCommand says whether text is a chat command the gateway runs itself
// rather than the model: its first word names one of the server's table
// (welcome.commands). null while no welcome has told which they are, so a
// slash text then is held back rather than sent to the assistant.
export function isCommand(text) {
  const m = /^(\/\S+)(\s|$)/.exec(text.trim());
  if (!m) return false;
  if (!S.commands) return null;
  return S.commands.some((c) => c.name === m[1]);
}

export function sendMessage(chat, text, mode, attachments = []) {
  // A text with attachments is a message, whatever it starts with.
  const cmd = chat && !attachments.length ? isCommand(text) : false;
  if (cmd === null) {
    toast('Not connected — try again in a moment.');
    return;
  }
  if (cmd) {
    if (!request({ type: 'chat.command', chat, text: text.trim() }, { kind: 'command', chat, text: text.trim() })) toast('Not connected — try again in a moment.');
    return;
  }
  if (!chat) {
    createChat({ text, mode, attachments });
    return;
  }
  const e = { chat, text, client_id: uuid(), mode: mode === 'redirect' ? 'redirect' : 'queue', error: null, attachments };
  S.outbox.push(e);
  saveOutbox();
  transmit(e);
  S.stick = true;
  render();
}

// showCommandHints lists the chat commands matching the slash word the
// composer holds, from the server's table; hidden otherwise.
export function showCommandHints() {
  const el = dom.commandHints;
  if (!el) return;
  const m = /^(\/\S*)$/.exec(dom.input.value.trimStart());
  const list = m && S.commands ? S.commands.filter((c) => c.name.startsWith(m[1])) : [];
  el.replaceChildren(
    ...list.map((c) =>
      h('li', null,
        h('button', { type: 'button', class: 'command-hint', 'data-command': c.name },
          h('code', null, c.args ? `${c.name} ${c.args}` : c.name), h('span', null, ` — ${String(c.help || '')}`))),
    ),
  );
  el.hidden = list.length === 0;
}

export function transmit(e) {
  const frame = { type: 'message.send', chat: e.chat, text: e.text, client_id: e.client_id };
  if (e.mode === 'redirect') frame.mode = 'redirect';
  if (e.attachments?.length) frame.attachments = e.attachments.map((a) => a.sha256);
  request(frame, { kind: 'send', chat: e.chat, client_id: e.client_id });
}

export function settleOutbox(clientId) {
  if (!clientId) return;
  const i = S.outbox.findIndex((e) => e.client_id === clientId);
  if (i < 0) return;
  const e = S.outbox[i];
  S.outbox.splice(i, 1);
  saveOutbox();
  // the optimistic bubble becomes the accepted message's bubble
  S.rekeys.push({ from: `o:${e.client_id}`, to: null, clientId });
}

export function startEdit(v, id) {
  const m = v.pending.get(id);
  if (!m) return;
  v.errors.delete(id);
  v.editing.set(id, { draft: m.text || '', saving: false, picked: false, error: null, focus: true });
  render();
}

export function saveEdit(v, id, text) {
  const ed = v.editing.get(id);
  if (!ed || ed.saving) return;
  text = text.trim();
  ed.draft = text;
  const m = v.pending.get(id) || v.index.get(id)?.m;
  if (!text && !m?.attachments?.length) {
    ed.error = 'A message cannot be empty — use Delete to remove it.';
    return render();
  }
  if (m && text === m.text && !ed.picked) {
    v.editing.delete(id);
    return render();
  }
  const req = request({ type: 'message.edit', chat: v.id, message: id, text }, { kind: 'edit', chat: v.id, message: id });
  if (!req) {
    ed.error = 'Not connected — try again in a moment.';
  } else {
    ed.saving = true;
    ed.error = null;
  }
  render();
}

export function cancelEdit(v, id) {
  v.editing.delete(id);
  v.deferred.delete(id);
  render();
}

export function deleteMessage(v, id) {
  if (v.busy.get(id)) return;
  v.errors.delete(id);
  const req = request({ type: 'message.delete', chat: v.id, message: id }, { kind: 'delete', chat: v.id, message: id });
  if (!req) v.errors.set(id, 'Not connected — try again in a moment.');
  else v.busy.set(id, 'deleting');
  render();
}

// removeAttachment drops one file of a queued message: message.edit with
// the attachments it keeps.
export function removeAttachment(v, id, sha) {
  const m = v.pending.get(id);
  if (!m || v.busy.get(id)) return;
  const keep = (m.attachments || []).map((a) => a.sha256).filter((x) => x !== sha);
  v.errors.delete(id);
  if (!keep.length && !String(m.text || '').trim()) v.errors.set(id, 'The message would be empty — use Delete to remove it.');
  else if (request({ type: 'message.edit', chat: v.id, message: id, attachments: keep }, { kind: 'edit', chat: v.id, message: id })) v.busy.set(id, 'saving');
  else v.errors.set(id, 'Not connected — try again in a moment.');
  render();
}

export function stopTurn() {
  const v = currentView();
  if (!v) return;
  if (request({ type: 'turn.stop', chat: v.id }, { kind: 'stop', chat: v.id })) v.stopping = true;
  else toast('Not connected — try again in a moment.');
  render();
}

export function toggleMenu(v, id) {
  const open = S.menu && S.menu.chat === v.id && S.menu.message === id;
  S.menu = open ? null : { chat: v.id, message: id };
  render();
}

export function closeMenu(focusBack) {
  if (!S.menu) return;
  const id = S.menu.message;
  S.menu = null;
  render();
  if (focusBack) requestAnimationFrame(() => dom.messages.querySelector(`[data-message="${CSS.escape(id)}"] .msg-menu-btn`)?.focus());
}

// pinMessage asks to pin (or unpin) a message in the assistant's view; the
// mark changes when message.pinned comes back.
export function pinMessage(v, id) {
  const e = v.index.get(id);
  S.menu = null;
  if (!e) return render();
  const pinned = !e.m.pinned;
  if (!request({ type: 'message.pin', chat: v.id, message: id, pinned }, { kind: 'pin', chat: v.id, message: id })) toast('Not connected — try again in a moment.');
  render();
}

export function toggleExpanded(v, key) {
  if (v.expanded.has(key)) v.expanded.delete(key);
  else v.expanded.add(key);
  render();
}

export function answerApproval(v, id, allow) {
  const a = v.approvals.get(id);
  if (!a || a._answering) return;
  if (request({ type: 'approval.answer', approval: id, allow }, { kind: 'approval', chat: v.id, approval: id })) a._answering = true;
  else toast('Not connected — try again in a moment.');
  render();
}

export function answerRecovery(v, id, action) {
  const r = v.recoveries.get(id);
  if (!r || r._answering) return;
  if (request({ type: 'recovery.answer', recovery: id, action }, { kind: 'recovery', chat: v.id, recovery: id })) r._answering = true;
  else toast('Not connected — try again in a moment.');
  render();
}
