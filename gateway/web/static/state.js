// Mirror browser client: the one state object (S), the per-chat views it
// caches, and the outbox kept in sessionStorage.

import { newView } from './reducer.js';

export const OUTBOX_KEY = 'mirror.outbox.v1';

export const LAST_KEY = 'mirror.lastChat';

export const MAX_VIEWS = 24;

const $ = (sel) => document.querySelector(sel);

export const S = {
  ws: null,
  connected: false, // welcome received on the current socket
  opened: false, // the current socket reached onopen
  attempt: 0, // consecutive failed connects
  timer: null,
  session: null,
  chats: new Map(), // id -> CHAT
  order: [], // chat ids as listed: by latest activity at welcome, new chats on top, no reordering while live
  current: null, // id of the chat shown
  views: new Map(), // id -> view (cached per chat)
  outbox: loadOutbox(), // [{chat, text, client_id, mode, error}]
  reqN: 0,
  reqs: new Map(), // req -> {kind, chat, message, client_id}
  wantCreate: null, // {then: {text, mode}} a chat.create waiting for the socket
  drafts: new Map(), // chat id -> unsent composer text
  redirect: false, // the Steer toggle
  stick: true, // keep the conversation scrolled to the bottom
  rekeys: [], // [{from, to}] DOM keys to carry over on the next render
  boundaries: new Map(), // chat id -> Map(boundary seq -> {reason, continued, notes, why}) as events told
  menu: null, // {chat, message}: the open message menu
  noteTitles: new Map(), // memory note file name -> its title, from GET /api/memory
  commands: null, // [{name, args, help}]: the chat commands, from welcome; null until one came
};

export function viewFor(id) {
  let v = S.views.get(id);
  if (v) {
    S.views.delete(id); // keep most recently used last
  } else {
    v = newView(id);
  }
  S.views.set(id, v);
  for (const key of S.views.keys()) {
    if (S.views.size <= MAX_VIEWS) break;
    if (key !== S.current && key !== id) S.views.delete(key);
  }
  return v;
}

export function currentView() {
  return S.current ? S.views.get(S.current) || null : null;
}

export function loadOutbox() {
  try {
    const raw = JSON.parse(sessionStorage.getItem(OUTBOX_KEY) || '[]');
    return Array.isArray(raw) ? raw.filter((e) => e && e.chat && e.client_id && typeof e.text === 'string') : [];
  } catch {
    return [];
  }
}

export function saveOutbox() {
  try {
    sessionStorage.setItem(OUTBOX_KEY, JSON.stringify(S.outbox.map(({ chat, text, client_id, mode, error, attachments }) => ({ chat, text, client_id, mode, error, attachments }))));
  } catch {
    // storage full or disabled: the outbox still lives in memory
  }
}

export function uuid() {
  if (globalThis.crypto && typeof crypto.randomUUID === 'function') return crypto.randomUUID();
  // crypto.randomUUID needs a secure context; plain http on a LAN address is not one.
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export function mostRecentChat() {
  return S.order.length ? S.order[0] : null;
}

export function upsertChat(c) {
  if (!c || !c.id) return;
  const old = S.chats.get(c.id);
  if (old && typeof old.seq === 'number' && typeof c.seq === 'number' && c.seq < old.seq) return;
  S.chats.set(c.id, { ...old, ...c });
  if (!old) S.order.unshift(c.id);
}
