// Managing chats (docs/protocol.md, "Managing chats"): the open chat's
// menu (rename, archive, export, delete), the Archived list, and the undo
// bar after a delete. It speaks the HTTP routes; the chat list itself
// learns of every change from the socket (chat.updated), as app.js shows it.
//
// DOM contract (browser tests rely on it):
//   #chat-menu-btn                the open chat's menu button (header)
//   #chat-menu [data-act=rename|archive|export-md|export-json|delete]
//                                 its items; archive reads "Unarchive" for an
//                                 archived chat; the exports are download links
//   #rename-dialog #rename-input  the rename form; #rename-save, #rename-cancel
//   #archived                     <details> shown while archived chats exist;
//     #archived-list .archived-item[data-chat=ID]  button.archived-open opens
//                                 it, button.unarchive brings it back
//   #undo-bar #undo               shown after a delete until its undo window ends

import { $, el } from './dom.js';

const dom = {
  btn: $('chat-menu-btn'),
  menu: $('chat-menu'),
  dialog: $('rename-dialog'),
  form: $('rename-form'),
  input: $('rename-input'),
  error: $('rename-error'),
  cancel: $('rename-cancel'),
  archived: $('archived'),
  archivedList: $('archived-list'),
  undoBar: $('undo-bar'),
  undoText: $('undo-text'),
  undo: $('undo'),
  list: $('chat-list'),
};

let chats = []; // every chat app.js knows, from its mirror:chats event
let undoTimer = null;
let undoChat = null;

function current() {
  const raw = location.hash.replace(/^#/, '');
  if (!raw) return null;
  try {
    return decodeURIComponent(raw);
  } catch {
    return null;
  }
}

function chatOf(id) {
  return chats.find((c) => c.id === id) || null;
}

async function call(method, path, body) {
  const r = await fetch(path, {
    method,
    credentials: 'same-origin',
    headers: body ? { 'Content-Type': 'application/json' } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  let data = {};
  try {
    data = await r.json();
  } catch {
    data = {};
  }
  if (!r.ok) throw new Error(data.error || `HTTP ${r.status}`);
  return data;
}

function say(text) {
  // A short note in the toast area, the way app.js reports what belongs to no bubble.
  const toasts = $('toasts');
  const t = el('div', { class: 'toast', role: 'alert' }, el('span', null, text));
  toasts.append(t);
  setTimeout(() => t.remove(), 7000);
}

// ---------------------------------------------------------------- menu

function syncButton() {
  const id = current();
  const c = id ? chatOf(id) : null;
  dom.btn.hidden = !c || !!c.delete_at;
  if (dom.btn.hidden) closeMenu();
}

function openMenu() {
  const id = current();
  if (!id) return;
  const c = chatOf(id);
  const base = `/api/chats/${encodeURIComponent(id)}/export`;
  dom.menu.querySelector('[data-act=export-md]').setAttribute('href', base + '?format=markdown');
  dom.menu.querySelector('[data-act=export-json]').setAttribute('href', base + '?format=json');
  dom.menu.querySelector('[data-act=archive]').textContent = c && c.archived ? 'Unarchive' : 'Archive';
  dom.menu.hidden = false;
  const r = dom.btn.getBoundingClientRect();
  dom.menu.style.top = `${Math.round(r.bottom + 6)}px`;
  dom.menu.style.right = `${Math.max(8, Math.round(window.innerWidth - r.right))}px`;
  dom.btn.setAttribute('aria-expanded', 'true');
  dom.menu.querySelector('[role=menuitem]').focus();
}

function closeMenu(focusBack) {
  if (dom.menu.hidden) return;
  dom.menu.hidden = true;
  dom.btn.setAttribute('aria-expanded', 'false');
  if (focusBack) dom.btn.focus();
}

async function act(what, id) {
  const c = chatOf(id);
  const path = `/api/chats/${encodeURIComponent(id)}`;
  try {
    switch (what) {
      case 'rename':
        dom.input.value = c ? c.title : '';
        dom.error.hidden = true;
        dom.dialog.dataset.chat = id;
        dom.dialog.showModal();
        dom.input.select();
        return;
      case 'archive':
        await call('PATCH', path, { archived: !(c && c.archived) });
        return;
      case 'delete': {
        const r = await call('DELETE', path);
        showUndo(id, r.chat ? r.chat.title : '', Date.parse(r.undo_until));
        // Show another chat instead of the deleted one.
        const next = [...dom.list.querySelectorAll('.chat-item[data-chat]')].map((e) => e.dataset.chat).find((x) => x !== id);
        if (next) location.hash = '#' + encodeURIComponent(next);
        return;
      }
    }
  } catch (e) {
    say(`Could not ${what} the chat: ${e.message}`);
  }
}

async function saveRename(e) {
  e.preventDefault();
  const id = dom.dialog.dataset.chat;
  const title = dom.input.value.trim();
  if (!title) {
    dom.error.textContent = 'A title cannot be empty.';
    dom.error.hidden = false;
    return;
  }
  try {
    await call('PATCH', `/api/chats/${encodeURIComponent(id)}`, { title });
    dom.dialog.close();
    dom.btn.focus();
  } catch (err) {
    dom.error.textContent = err.message;
    dom.error.hidden = false;
  }
}

// ---------------------------------------------------------------- undo

function showUndo(id, title, until) {
  clearTimeout(undoTimer);
  undoChat = id;
  dom.undoText.textContent = `Deleted “${title || 'chat'}”.`;
  dom.undoBar.hidden = false;
  const left = Number.isFinite(until) ? until - Date.now() : 8000;
  undoTimer = setTimeout(hideUndo, Math.max(0, left - 300));
}

function hideUndo() {
  clearTimeout(undoTimer);
  undoChat = null;
  dom.undoBar.hidden = true;
}

async function undo() {
  const id = undoChat;
  if (!id) return;
  hideUndo();
  try {
    await call('POST', `/api/chats/${encodeURIComponent(id)}/restore`);
    location.hash = '#' + encodeURIComponent(id);
  } catch (e) {
    say(`Could not undo: ${e.message}`);
  }
}

// ---------------------------------------------------------------- archived

let archivedSig = '';
function renderArchived() {
  const list = chats.filter((c) => c.archived && !c.delete_at);
  const sig = JSON.stringify(list.map((c) => [c.id, c.title]));
  if (sig === archivedSig) return;
  archivedSig = sig;
  dom.archived.hidden = list.length === 0;
  dom.archived.querySelector('.archived-count').textContent = `(${list.length})`;
  dom.archivedList.replaceChildren(
    ...list.map((c) =>
      el('li', { class: 'archived-item', 'data-chat': c.id },
        el('button', { type: 'button', class: 'chat-link archived-open' }, el('span', { class: 'chat-name' }, c.title || 'New chat')),
        el('button', { type: 'button', class: 'btn btn-ghost btn-sm unarchive', 'aria-label': `Unarchive ${c.title}` }, 'Unarchive'))));
}

// ---------------------------------------------------------------- wiring

document.addEventListener('mirror:chats', (e) => {
  chats = Array.isArray(e.detail) ? e.detail : [];
  syncButton();
  renderArchived();
});
window.addEventListener('hashchange', syncButton);

dom.btn.addEventListener('click', (e) => {
  e.stopPropagation();
  if (dom.menu.hidden) openMenu();
  else closeMenu(true);
});
dom.menu.addEventListener('click', (e) => {
  const item = e.target.closest('[data-act]');
  const id = current();
  if (!item || !id) return;
  closeMenu();
  if (item.tagName !== 'A') act(item.dataset.act, id); // a download link does its own work
});
dom.menu.addEventListener('keydown', (e) => {
  const items = [...dom.menu.querySelectorAll('[role=menuitem]')];
  const i = items.indexOf(document.activeElement);
  if (e.key === 'Escape') {
    e.preventDefault();
    e.stopPropagation();
    closeMenu(true);
  } else if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
    e.preventDefault();
    items[(i + (e.key === 'ArrowDown' ? 1 : items.length - 1)) % items.length].focus();
  }
});
document.addEventListener('click', (e) => {
  if (!dom.menu.hidden && !dom.menu.contains(e.target)) closeMenu();
});
dom.form.addEventListener('submit', saveRename);
dom.cancel.addEventListener('click', () => dom.dialog.close());
dom.undo.addEventListener('click', undo);
dom.archivedList.addEventListener('click', async (e) => {
  const li = e.target.closest('.archived-item');
  if (!li) return;
  const id = li.dataset.chat;
  if (e.target.closest('.unarchive')) {
    try {
      await call('PATCH', `/api/chats/${encodeURIComponent(id)}`, { archived: false });
    } catch (err) {
      say(`Could not unarchive the chat: ${err.message}`);
    }
  } else {
    location.hash = '#' + encodeURIComponent(id);
  }
});
