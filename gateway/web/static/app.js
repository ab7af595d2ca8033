// Mirror web client: one WebSocket at /ws speaking docs/protocol.md.
//
// DOM contract (stable; browser tests rely on it):
//
//   #status                       connection status; text "Connecting…", "Connected",
//                                 "Reconnecting…"; attribute data-state =
//                                 connecting | connected | reconnecting
//   #new-chat                     button: chat.create, then opens the new chat
//   #chat-list                    <ul> of the chats: by latest activity when the socket
//                                 connects, new chats on top; it does not reorder while live
//   .chat-item[data-chat=ID]      one chat (click to open); class .active when shown,
//                                 class .busy while its state is "running" (a spinner
//                                 .spinner shows), .badge holds the pending count and
//                                 exists only while that count is > 0; .chat-name = title
//   #chat-title                   title of the open chat
//   #messages                     the conversation (role=log, aria-live=polite)
//   .msg.user[data-message=ID]    a user message the assistant has picked up
//   .msg.assistant[data-message=ID]  a stored assistant reply; class .stopped and a
//                                 .stopped-mark ("Stopped") when it ended with stopped:true;
//                                 class .failed for the partial reply of a failed turn
//   .msg.streaming[data-turn=T]   the live reply (also .msg.assistant); .caret inside
//   .msg.error                    a turn.failed error shown in the conversation
//   .msg.pending[data-message=ID] a queued message (state pending), data-mode = queue |
//                                 redirect; holds button.edit and button.delete
//     in edit mode: class .editing, a textarea, button.save and button.cancel
//   .notice.in-use                on the bubble of a message whose edit or delete was
//                                 refused with in_use; text "Already in use — the
//                                 assistant picked this message up."
//   .msg.outbox[data-client-id=K] a sent message not yet accepted (optimistic); class
//                                 .failed with button.retry and button.discard if refused
//   .card.approval[data-approval=ID]  button.allow, button.deny
//   .card.recovery[data-recovery=ID]  button.repeat, button.skip
//   #composer textarea            the message box (#input): Enter sends, Shift+Enter
//                                 is a new line
//   #send                         send button (an empty box sends nothing)
//   #stop                         stop button, shown (not [hidden]) while a turn runs
//   #mode                         "Steer" toggle, shown while a turn runs: aria-pressed
//                                 = true sends with mode "redirect"
//   #toasts .toast                transient errors that belong to no bubble;
//                                 .toast.command shows what a /changes, /rewind or
//                                 /stop typed in the composer answered
//
// The open chat is kept in location.hash as "#" + encodeURIComponent(chat id).
//
// Protocol notes: the socket sends hello {client:"mirror-web"} first (the
// mirror_token cookie authenticates the upgrade); close code 4401 goes to
// /login. Reconnects back off 0.5 s doubling to 5 s with jitter. Per chat the
// client keeps the last durable seq it applied; an event whose seq is not above
// it is skipped, except reply.delta (reply = reply[:offset] + text, offsets in
// Unicode code points). Switching chats sends chat.close for the old one and
// chat.open for the new one, with since = last seq when the chat's state is
// cached, so missed events apply and chat.resumed brings running and pending.
// Messages are sent with a fresh client_id and stay in an outbox (kept in
// sessionStorage) until message.accepted; after a reconnect they are resent
// with the same client_id, which the server dedupes.

import { renderMarkdown } from './markdown.js';

const IN_USE_TEXT = 'Already in use — the assistant picked this message up.';
const OUTBOX_KEY = 'mirror.outbox.v1';
const LAST_KEY = 'mirror.lastChat';
const MAX_VIEWS = 24;

const $ = (sel) => document.querySelector(sel);
const dom = {
  app: $('#app'),
  list: $('#chat-list'),
  listEmpty: $('#chat-list-empty'),
  newChat: $('#new-chat'),
  status: $('#status'),
  title: $('#chat-title'),
  chatState: $('#chat-state'),
  context: $('#context'),
  scroller: $('#scroller'),
  messages: $('#messages'),
  composer: $('#composer'),
  input: $('#input'),
  send: $('#send'),
  stop: $('#stop'),
  mode: $('#mode'),
  menu: $('#menu'),
  backdrop: $('#backdrop'),
  toasts: $('#toasts'),
};

// ---------------------------------------------------------------- state

const S = {
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
};

function newView(id) {
  return {
    id,
    loaded: false, // a snapshot or resume has been applied
    opening: false, // chat.open without since is in flight: events wait for the snapshot
    subscribed: false, // this socket receives the chat's live events
    lastSeq: 0,
    history: [], // {kind:'msg', m} | {kind:'error'|'divider', key, ...}
    index: new Map(), // message id -> history entry
    pending: new Map(), // message id -> MESSAGE (state pending)
    running: null, // {turn, text, len, seq, tools: [], wait}
    finished: new Set(), // turns that ended
    approvals: new Map(),
    recoveries: new Map(),
    editing: new Map(), // message id -> {draft, saving, picked, error}
    deferred: new Set(), // picked while being edited: stays in the pending area until the edit ends
    notices: new Map(), // message id -> in-use text
    errors: new Map(), // message id -> error text of a refused edit/delete
    busy: new Map(), // message id -> 'deleting'
    stopping: false,
    context: null,
  };
}

function viewFor(id) {
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

function currentView() {
  return S.current ? S.views.get(S.current) || null : null;
}

function loadOutbox() {
  try {
    const raw = JSON.parse(sessionStorage.getItem(OUTBOX_KEY) || '[]');
    return Array.isArray(raw) ? raw.filter((e) => e && e.chat && e.client_id && typeof e.text === 'string') : [];
  } catch {
    return [];
  }
}

function saveOutbox() {
  try {
    sessionStorage.setItem(OUTBOX_KEY, JSON.stringify(S.outbox.map(({ chat, text, client_id, mode, error }) => ({ chat, text, client_id, mode, error }))));
  } catch {
    // storage full or disabled: the outbox still lives in memory
  }
}

function uuid() {
  if (globalThis.crypto && typeof crypto.randomUUID === 'function') return crypto.randomUUID();
  // crypto.randomUUID needs a secure context; plain http on a LAN address is not one.
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

// ---------------------------------------------------------------- socket

function connect() {
  clearTimeout(S.timer);
  S.timer = null;
  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  let ws;
  try {
    ws = new WebSocket(`${proto}//${location.host}/ws`);
  } catch {
    scheduleReconnect();
    return;
  }
  S.ws = ws;
  S.connected = false;
  S.opened = false;
  setStatus(S.attempt === 0 && !S.session ? 'connecting' : 'reconnecting');
  ws.onopen = () => {
    if (S.ws !== ws) return;
    S.opened = true;
    ws.send(JSON.stringify({ type: 'hello', client: 'mirror-web' }));
  };
  ws.onmessage = (e) => {
    if (S.ws !== ws) return;
    let f;
    try {
      f = JSON.parse(e.data);
    } catch {
      return;
    }
    if (f && typeof f === 'object') handleFrame(f);
  };
  ws.onclose = (e) => {
    if (S.ws !== ws) return;
    onDisconnect(e.code);
  };
  ws.onerror = () => {}; // a close event follows
}

function onDisconnect(code) {
  const neverOpened = !S.opened;
  S.ws = null;
  S.connected = false;
  S.opened = false;
  if (code === 4401) {
    goLogin();
    return;
  }
  // Answers to requests in flight are lost; the state they guard is reset so
  // the person can try again, and the outbox resends on its own.
  S.reqs.clear();
  for (const v of S.views.values()) {
    v.subscribed = false;
    v.opening = false;
    v.stopping = false;
    v.busy.clear();
    for (const ed of v.editing.values()) ed.saving = false;
  }
  setStatus('reconnecting');
  scheduleReconnect(neverOpened);
  render();
}

function scheduleReconnect(neverOpened = true) {
  clearTimeout(S.timer);
  const base = Math.min(5000, 500 * 2 ** S.attempt);
  S.attempt++;
  const delay = Math.round(base * (0.75 + Math.random() * 0.5));
  S.timer = setTimeout(connect, Math.min(delay, 5000));
  // A refused upgrade (401 when the cookie is gone) never reaches onopen and
  // shows no close code; after a few of those, ask plain HTTP whether we are
  // still signed in.
  if (neverOpened && S.attempt >= 3 && S.attempt % 3 === 0) probeAuth();
}

async function probeAuth() {
  try {
    const r = await fetch('/api/chats', { credentials: 'same-origin', cache: 'no-store', redirect: 'manual' });
    if (r.status === 401) goLogin();
  } catch {
    // the server is down: keep retrying
  }
}

function goLogin() {
  clearTimeout(S.timer);
  location.assign('/login');
}

function reconnectNow() {
  if (!S.ws && S.timer) {
    S.attempt = 0;
    connect();
  }
}

function sendFrame(frame) {
  if (!S.ws || S.ws.readyState !== WebSocket.OPEN || !S.connected) return false;
  S.ws.send(JSON.stringify(frame));
  return true;
}

// request sends frame with a fresh req and remembers meta for its answer.
function request(frame, meta) {
  const req = 'w' + ++S.reqN;
  frame.req = req;
  if (!sendFrame(frame)) return null;
  if (meta) S.reqs.set(req, meta);
  return req;
}

function takeReq(f) {
  if (!f.req) return null;
  const m = S.reqs.get(f.req) || null;
  S.reqs.delete(f.req);
  return m;
}

// ---------------------------------------------------------------- frames

function handleFrame(f) {
  switch (f.type) {
    case 'welcome':
      return onWelcome(f);
    case 'chat.created':
      return onChatCreated(f);
    case 'chat.updated':
      upsertChat(f.chat);
      return render();
    case 'chat.snapshot':
      return onSnapshot(f);
    case 'chat.resumed':
      return onResumed(f);
    case 'chat.closed':
      takeReq(f);
      return;
    case 'error':
      return onError(f);
    case 'recovery.answered':
      return onRecoveryAnswered(f);
    case 'command.result':
      takeReq(f);
      return toast(String(f.text || 'Done.'), 'command');
    default:
      if (f.chat && typeof f.chat === 'string') return onChatEvent(f);
      takeReq(f);
  }
}

function onWelcome(f) {
  S.connected = true;
  S.attempt = 0;
  S.session = f.session || null;
  setStatus('connected');
  const chats = new Map();
  for (const c of Array.isArray(f.chats) ? f.chats : []) if (c && c.id) chats.set(c.id, c);
  S.chats = chats;
  S.order = byActivity([...chats.values()]).map((c) => c.id);
  for (const id of [...S.views.keys()]) if (!chats.has(id)) S.views.delete(id);

  let target = S.current;
  if (target && !chats.has(target)) {
    if (target === hashChat()) toast('That chat was not found.');
    target = null;
  }
  if (!target) target = mostRecentChat();
  if (target) {
    if (target !== S.current) {
      selectChat(target);
    } else {
      setHash(target);
      subscribe(target);
    }
  } else if (S.current) {
    S.current = null;
    setHash(null);
  }

  if (S.wantCreate) {
    const w = S.wantCreate;
    S.wantCreate = null;
    createChat(w.then);
  }
  for (const e of S.outbox) if (!e.error) transmit(e);
  render();
}

function mostRecentChat() {
  return S.order.length ? S.order[0] : null;
}

function upsertChat(c) {
  if (!c || !c.id) return;
  const old = S.chats.get(c.id);
  if (old && typeof old.seq === 'number' && typeof c.seq === 'number' && c.seq < old.seq) return;
  S.chats.set(c.id, { ...old, ...c });
  if (!old) S.order.unshift(c.id);
}

function onChatCreated(f) {
  const meta = takeReq(f);
  upsertChat(f.chat);
  if (meta && meta.kind === 'create' && f.chat && f.chat.id) {
    selectChat(f.chat.id);
    if (meta.then) sendMessage(f.chat.id, meta.then.text, meta.then.mode);
    dom.input.focus();
  }
  render();
}

function onSnapshot(f) {
  takeReq(f);
  const id = f.chat && f.chat.id;
  if (!id) return;
  upsertChat(f.chat);
  const v = S.views.get(id);
  if (!v || id !== S.current || !v.subscribed) return render();
  v.loaded = true;
  v.opening = false;
  v.lastSeq = num(f.seq, num(f.chat.seq, 0));
  v.history = [];
  v.index = new Map();
  v.pending = new Map();
  for (const m of Array.isArray(f.messages) ? f.messages : []) {
    if (!m || !m.id || m.state === 'deleted') continue;
    if (m.state === 'pending') v.pending.set(m.id, m);
    else addHistory(v, m);
  }
  for (const m of Array.isArray(f.pending) ? f.pending : []) if (m && m.id) v.pending.set(m.id, m);
  v.running = f.running ? runningFrom(f.running) : null;
  v.approvals = listToMap(f.approvals, approvalId);
  v.recoveries = listToMap(f.recoveries, recoveryId);
  reconcileEditing(v);
  S.stick = true;
  render();
}

function onResumed(f) {
  takeReq(f);
  const id = f.chat && f.chat.id;
  if (!id) return;
  upsertChat(f.chat);
  const v = S.views.get(id);
  if (!v || id !== S.current || !v.subscribed) return render();
  v.loaded = true;
  v.opening = false;
  v.lastSeq = Math.max(v.lastSeq, num(f.seq, num(f.chat.seq, 0)));
  if (Array.isArray(f.pending)) {
    const next = new Map();
    for (const m of f.pending) if (m && m.id && !v.index.has(m.id)) next.set(m.id, m);
    v.pending = next;
  }
  if (f.running) {
    if (v.running && v.running.turn === f.running.turn) {
      const r = runningFrom(f.running);
      v.running.text = r.text;
      v.running.len = r.len;
    } else {
      v.running = runningFrom(f.running);
    }
  } else if ('running' in f) {
    v.running = null;
  }
  if (Array.isArray(f.approvals)) v.approvals = listToMap(f.approvals, approvalId);
  if (Array.isArray(f.recoveries)) v.recoveries = listToMap(f.recoveries, recoveryId);
  reconcileEditing(v);
  render();
}

// reconcileEditing keeps edit state only for messages that can still be
// edited, and marks the ones picked meanwhile.
function reconcileEditing(v) {
  for (const id of [...v.editing.keys()]) {
    if (v.pending.has(id)) continue;
    if (v.index.has(id)) {
      v.editing.get(id).picked = true;
      v.deferred.add(id);
      v.notices.set(id, IN_USE_TEXT);
    } else {
      v.editing.delete(id);
    }
  }
  for (const id of [...v.deferred]) if (!v.editing.has(id)) v.deferred.delete(id);
}

function onChatEvent(ev) {
  const meta = takeReq(ev);
  if (ev.type === 'message.accepted' && ev.message) settleOutbox(ev.message.client_id || (meta && meta.kind === 'send' ? meta.client_id : ''));
  const v = ev.chat === S.current ? S.views.get(ev.chat) : null;
  if (!v || !v.subscribed) {
    if (meta) render();
    return; // not open here: chat.updated keeps the list current
  }
  if (ev.type === 'reply.delta') {
    applyDelta(v, ev);
    return render();
  }
  if (v.opening) return; // the snapshot is authoritative and comes first
  if (typeof ev.seq === 'number') {
    if (ev.seq <= v.lastSeq) {
      if (meta) render();
      return;
    }
    v.lastSeq = ev.seq;
  }
  applyEvent(v, ev);
  render();
}

function applyEvent(v, ev) {
  const m = ev.message;
  switch (ev.type) {
    case 'message.accepted':
      if (!m || !m.id) return;
      if (m.state === 'picked' || m.state === 'done') addHistory(v, m);
      else if (m.state !== 'deleted' && !v.index.has(m.id)) v.pending.set(m.id, m);
      return;
    case 'message.updated':
      if (!m || !m.id) return;
      if (v.pending.has(m.id)) v.pending.set(m.id, { ...v.pending.get(m.id), ...m });
      else if (v.index.has(m.id)) v.index.get(m.id).m = { ...v.index.get(m.id).m, ...m };
      if (v.editing.get(m.id)?.saving) v.editing.delete(m.id);
      v.errors.delete(m.id);
      return;
    case 'message.deleted':
      if (!m || !m.id) return;
      v.pending.delete(m.id);
      v.editing.delete(m.id);
      v.deferred.delete(m.id);
      v.busy.delete(m.id);
      v.errors.delete(m.id);
      return;
    case 'message.picked': {
      if (!m || !m.id) return;
      const old = v.pending.get(m.id);
      v.pending.delete(m.id);
      addHistory(v, { ...old, ...m, state: 'picked' });
      const ed = v.editing.get(m.id);
      if (ed) {
        ed.picked = true;
        v.deferred.add(m.id);
        v.notices.set(m.id, IN_USE_TEXT);
      }
      return;
    }
    case 'turn.started':
      if (!v.running || v.running.turn !== ev.turn) v.running = runningFrom({ turn: ev.turn, text: '', seq: ev.seq });
      return;
    case 'turn.finished':
      return finishTurn(v, ev, false);
    case 'turn.failed':
      return finishTurn(v, ev, true);
    case 'tool.call': {
      const r = v.running;
      if (!r) return;
      const c = typeof ev.call === 'object' && ev.call ? ev.call : { id: ev.call };
      r.tools.push({ id: c.id ?? ev.id, name: c.name || c.tool || ev.name || 'tool', done: false });
      return;
    }
    case 'tool.result': {
      const r = v.running;
      if (!r) return;
      const id = typeof ev.call === 'object' && ev.call ? ev.call.id : ev.call ?? ev.call_id ?? ev.id;
      const t = r.tools.find((x) => x.id === id && !x.done) || r.tools.find((x) => !x.done);
      if (t) {
        t.done = true;
        t.failed = Boolean(ev.error);
      }
      return;
    }
    case 'approval.requested': {
      const a = typeof ev.approval === 'object' && ev.approval ? ev.approval : { ...ev, id: ev.approval ?? ev.id };
      const id = approvalId(a);
      if (id) v.approvals.set(id, a);
      return;
    }
    case 'approval.resolved':
      v.approvals.delete(approvalId(ev.approval) ?? ev.id);
      return;
    case 'recovery.requested': {
      const r = typeof ev.recovery === 'object' && ev.recovery ? ev.recovery : { id: ev.recovery ?? ev.id, call: ev.call };
      const id = recoveryId(r);
      if (id) v.recoveries.set(id, r);
      return;
    }
    case 'recovery.resolved':
      v.recoveries.delete(recoveryId(ev.recovery) ?? ev.id);
      return;
    case 'context':
      v.context = ev;
      return;
    case 'quota.wait':
      if (v.running) v.running.wait = { ms: num(ev.wait_ms, 0), at: Date.now() };
      return;
    case 'boundary':
      addItem(v, {
        kind: 'divider',
        key: `b:${ev.seq}`,
        text: (ev.reason === 'hard' ? 'The conversation reached its limit and was written down and cleared.' : 'The assistant consolidated the conversation and cleared it.') +
          (ev.continued ? ' The work carries on.' : ' It waits for you.'),
      });
      return;
    default:
      // checkpoint, breaker, message.pinned, … only advance seq
  }
}

function finishTurn(v, ev, failed) {
  const r = v.running;
  v.running = null;
  if (ev.turn) v.finished.add(ev.turn);
  v.stopping = false;
  let m = ev.message && typeof ev.message === 'object' ? { ...ev.message } : null;
  if (!m && !failed) {
    m = { id: `turn-${ev.turn ?? ev.seq}`, role: 'assistant', text: ev.reply ?? r?.text ?? '', turn: ev.turn, seq: ev.seq };
  }
  if (m) {
    m.role = m.role || 'assistant';
    if (!m.text && ev.reply) m.text = ev.reply;
    if (ev.stopped) m.stopped = true;
    if (failed) m.failed = true;
    if (!failed || m.text) {
      if (ev.turn) S.rekeys.push({ from: `t:${ev.turn}`, to: `m:${m.id}` });
      addHistory(v, m);
    }
  }
  if (failed) {
    addItem(v, { kind: 'error', key: `e:${ev.turn ?? ''}:${ev.seq}`, text: errorText(ev.error), cls: ev.class || '' });
  }
}

function applyDelta(v, ev) {
  if (!ev.turn || v.finished.has(ev.turn)) return;
  if (!v.running || v.running.turn !== ev.turn) v.running = runningFrom({ turn: ev.turn, text: '', seq: ev.seq });
  const r = v.running;
  const text = String(ev.text ?? '');
  const offset = Math.max(0, num(ev.offset, r.len));
  if (offset === r.len) {
    r.text += text;
  } else if (offset < r.len) {
    r.text = cpSlice(r.text, offset) + text;
  } else {
    r.text += text; // a gap should not happen; keep what we have
  }
  r.len = cpLen(r.text);
  r.wait = null;
}

function runningFrom(x) {
  const text = String(x.text ?? '');
  return { turn: x.turn, text, len: cpLen(text), seq: x.seq, tools: [], wait: null };
}

function cpLen(s) {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

function cpSlice(s, n) {
  let i = 0;
  for (let k = 0; k < n && i < s.length; k++) {
    const c = s.charCodeAt(i);
    i += c >= 0xd800 && c <= 0xdbff && i + 1 < s.length ? 2 : 1;
  }
  return s.slice(0, i);
}

function addHistory(v, m) {
  const e = v.index.get(m.id);
  if (e) {
    e.m = { ...e.m, ...m };
    return;
  }
  const entry = { kind: 'msg', m };
  v.history.push(entry);
  v.index.set(m.id, entry);
}

function addItem(v, item) {
  if (v.history.some((e) => e.key === item.key)) return;
  v.history.push(item);
}

function listToMap(list, idOf) {
  const out = new Map();
  for (const x of Array.isArray(list) ? list : []) {
    const id = idOf(x);
    if (id) out.set(id, x);
  }
  return out;
}

function approvalId(a) {
  return typeof a === 'string' ? a : a?.id ?? a?.approval ?? null;
}

function recoveryId(r) {
  return typeof r === 'string' ? r : r?.id ?? r?.recovery ?? null;
}

function num(x, dflt) {
  return typeof x === 'number' && Number.isFinite(x) ? x : dflt;
}

function errorText(e) {
  if (!e) return 'The reply failed.';
  if (typeof e === 'string') return e;
  return e.message || e.error || JSON.stringify(e);
}

function onError(f) {
  const meta = takeReq(f);
  if (f.code === 'unauthorized') return goLogin();
  const msg = f.message || describeCode(f.code);
  if (!meta) {
    toast(msg);
    return render();
  }
  const v = meta.chat ? S.views.get(meta.chat) : null;
  switch (meta.kind) {
    case 'edit':
    case 'delete':
      if (!v) break;
      v.busy.delete(meta.message);
      if (f.code === 'in_use') {
        markInUse(v, meta.message);
      } else if (f.code === 'not_found' && meta.kind === 'delete') {
        v.pending.delete(meta.message);
      } else {
        const ed = v.editing.get(meta.message);
        if (ed) {
          ed.saving = false;
          ed.error = msg;
        } else {
          v.errors.set(meta.message, msg);
        }
      }
      break;
    case 'send': {
      const e = S.outbox.find((x) => x.client_id === meta.client_id);
      if (e) {
        e.error = msg;
        saveOutbox();
      }
      break;
    }
    case 'stop':
      if (v) v.stopping = false;
      if (f.code !== 'not_found') toast(msg);
      break;
    case 'open':
      if (v) v.opening = false;
      toast(f.code === 'not_found' ? 'That chat was not found.' : msg);
      break;
    default:
      toast(msg);
  }
  render();
}

function markInUse(v, id) {
  v.notices.set(id, IN_USE_TEXT);
  v.editing.delete(id);
  v.deferred.delete(id);
  v.errors.delete(id);
  const m = v.pending.get(id);
  if (m) {
    v.pending.delete(id);
    addHistory(v, { ...m, state: 'picked' });
  }
}

function onRecoveryAnswered(f) {
  const meta = takeReq(f);
  if (meta && meta.kind === 'recovery' && f.delivered === false) {
    const v = S.views.get(meta.chat);
    const r = v && v.recoveries.get(meta.recovery);
    if (r) r._held = true;
  }
  render();
}

function describeCode(code) {
  switch (code) {
    case 'rate_limited': return 'Too many requests — wait a moment and try again.';
    case 'budget': return 'This would go over the budget.';
    case 'too_large': return 'That is too large to send.';
    case 'not_found': return 'Not found.';
    case 'in_use': return IN_USE_TEXT;
    case 'internal': return 'Something went wrong on the server.';
    default: return code ? `Error: ${code}` : 'Something went wrong.';
  }
}

// ---------------------------------------------------------------- actions

function subscribe(id) {
  const v = viewFor(id);
  v.subscribed = true;
  if (v.loaded) {
    v.opening = false;
    request({ type: 'chat.open', chat: id, since: v.lastSeq }, { kind: 'open', chat: id });
  } else {
    v.opening = true;
    request({ type: 'chat.open', chat: id }, { kind: 'open', chat: id });
  }
}

function selectChat(id) {
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
  viewFor(id);
  if (S.connected) subscribe(id);
  S.stick = true;
  closeSidebar();
  render();
}

function createChat(then) {
  if (!S.connected) {
    S.wantCreate = { then };
    toast('Not connected — the chat will be created when the connection is back.');
    return;
  }
  request({ type: 'chat.create' }, { kind: 'create', then });
}

// Chat commands the gateway runs itself rather than the model.
const COMMAND = /^\/(changes|rewind|stop)(\s|$)/;

function sendMessage(chat, text, mode) {
  if (chat && COMMAND.test(text.trim())) {
    if (!request({ type: 'chat.command', chat, text: text.trim() }, { kind: 'command', chat })) toast('Not connected — try again in a moment.');
    return;
  }
  if (!chat) {
    createChat({ text, mode });
    return;
  }
  const e = { chat, text, client_id: uuid(), mode: mode === 'redirect' ? 'redirect' : 'queue', error: null };
  S.outbox.push(e);
  saveOutbox();
  transmit(e);
  S.stick = true;
  render();
}

function transmit(e) {
  const frame = { type: 'message.send', chat: e.chat, text: e.text, client_id: e.client_id };
  if (e.mode === 'redirect') frame.mode = 'redirect';
  request(frame, { kind: 'send', chat: e.chat, client_id: e.client_id });
}

function settleOutbox(clientId) {
  if (!clientId) return;
  const i = S.outbox.findIndex((e) => e.client_id === clientId);
  if (i < 0) return;
  const e = S.outbox[i];
  S.outbox.splice(i, 1);
  saveOutbox();
  // the optimistic bubble becomes the accepted message's bubble
  S.rekeys.push({ from: `o:${e.client_id}`, to: null, clientId });
}

function startEdit(v, id) {
  const m = v.pending.get(id);
  if (!m) return;
  v.errors.delete(id);
  v.editing.set(id, { draft: m.text || '', saving: false, picked: false, error: null, focus: true });
  render();
}

function saveEdit(v, id, text) {
  const ed = v.editing.get(id);
  if (!ed || ed.saving) return;
  text = text.trim();
  ed.draft = text;
  const m = v.pending.get(id) || v.index.get(id)?.m;
  if (!text) {
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

function cancelEdit(v, id) {
  v.editing.delete(id);
  v.deferred.delete(id);
  render();
}

function deleteMessage(v, id) {
  if (v.busy.get(id)) return;
  v.errors.delete(id);
  const req = request({ type: 'message.delete', chat: v.id, message: id }, { kind: 'delete', chat: v.id, message: id });
  if (!req) v.errors.set(id, 'Not connected — try again in a moment.');
  else v.busy.set(id, 'deleting');
  render();
}

function stopTurn() {
  const v = currentView();
  if (!v) return;
  if (request({ type: 'turn.stop', chat: v.id }, { kind: 'stop', chat: v.id })) v.stopping = true;
  else toast('Not connected — try again in a moment.');
  render();
}

function answerApproval(v, id, allow) {
  const a = v.approvals.get(id);
  if (!a || a._answering) return;
  if (request({ type: 'approval.answer', approval: id, allow }, { kind: 'approval', chat: v.id, approval: id })) a._answering = true;
  else toast('Not connected — try again in a moment.');
  render();
}

function answerRecovery(v, id, action) {
  const r = v.recoveries.get(id);
  if (!r || r._answering) return;
  if (request({ type: 'recovery.answer', recovery: id, action }, { kind: 'recovery', chat: v.id, recovery: id })) r._answering = true;
  else toast('Not connected — try again in a moment.');
  render();
}

// ---------------------------------------------------------------- rendering

let renderQueued = false;

function render() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(flushRender);
  setTimeout(flushRender, 150); // rAF does not run in hidden tabs
}

function flushRender() {
  if (!renderQueued) return;
  renderQueued = false;
  renderList();
  renderHeader();
  renderConversation();
  renderComposer();
}

function setStatus(state) {
  const text = { connecting: 'Connecting…', connected: 'Connected', reconnecting: 'Reconnecting…' }[state] || state;
  dom.status.dataset.state = state;
  dom.status.textContent = text;
  dom.app.dataset.conn = state;
}

function sortedChats() {
  return S.order.map((id) => S.chats.get(id)).filter(Boolean);
}

function byActivity(list) {
  const t = (c) => Date.parse(c.updated_at || '') || 0;
  return list.sort((a, b) => {
    const ta = t(a);
    const tb = t(b);
    if (ta !== tb) return tb - ta;
    return a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
  });
}

function chatName(c) {
  return (c && c.title && String(c.title).trim()) || 'New chat';
}

function isRunning(id) {
  const v = S.views.get(id);
  const c = S.chats.get(id);
  if (id === S.current && v && v.subscribed && v.loaded) return Boolean(v.running) || c?.state === 'running';
  return c?.state === 'running';
}

function renderList() {
  const chats = sortedChats();
  dom.listEmpty.hidden = chats.length > 0;
  const items = chats.map((c) => {
    const running = isRunning(c.id);
    const pending = num(c.pending, 0);
    const active = c.id === S.current;
    return {
      key: c.id,
      sig: JSON.stringify([chatName(c), running, pending, active, c.updated_at ? shortTime(c.updated_at) : '']),
      render(li) {
        li.className = 'chat-item' + (running ? ' busy' : '') + (active ? ' active' : '');
        li.dataset.chat = c.id;
        const btn = h('button', { class: 'chat-link', type: 'button' });
        if (active) btn.setAttribute('aria-current', 'page');
        const name = h('span', { class: 'chat-name' }, chatName(c));
        const meta = h('span', { class: 'chat-meta' });
        if (running) meta.append(h('span', { class: 'spinner', role: 'img', 'aria-label': 'Working' }));
        if (pending > 0) meta.append(h('span', { class: 'badge', 'aria-label': `${pending} pending` }, String(pending)));
        if (!running && pending === 0 && c.updated_at) meta.append(h('time', { class: 'chat-time', datetime: c.updated_at }, shortTime(c.updated_at)));
        btn.append(name, meta);
        li.replaceChildren(btn);
      },
    };
  });
  reconcile(dom.list, items, 'li');
}

function renderHeader() {
  const c = S.current ? S.chats.get(S.current) : null;
  const name = c ? chatName(c) : 'Mirror';
  if (dom.title.textContent !== name) dom.title.textContent = name;
  const running = S.current ? isRunning(S.current) : false;
  dom.chatState.hidden = !running;
  document.title = c ? `${running ? '● ' : ''}${name} · Mirror` : 'Mirror';
  const v = currentView();
  const ctx = v && v.context;
  if (ctx && num(ctx.window, 0) > 0) {
    const pct = Math.min(100, Math.round((num(ctx.used, 0) / ctx.window) * 100));
    dom.context.hidden = false;
    dom.context.textContent = `${fmtTokens(ctx.used)} / ${fmtTokens(ctx.window)}`;
    dom.context.title = `Context: ${num(ctx.used, 0)} of ${ctx.window} tokens. Soft ${ctx.soft ?? '?'}: ${ctx.soft_reached ? 'reached' : 'not reached'}. Hard ${ctx.hard ?? '?'}: ${ctx.hard_reached ? 'reached' : 'not reached'}.`;
    dom.context.dataset.level = ctx.hard_reached ? 'hard' : ctx.soft_reached ? 'soft' : 'ok';
    dom.context.style.setProperty('--pct', pct + '%');
  } else {
    dom.context.hidden = true;
  }
}

function renderComposer() {
  const running = S.current ? isRunning(S.current) : false;
  const v = currentView();
  dom.stop.hidden = !running;
  dom.stop.disabled = Boolean(v && v.stopping);
  dom.stop.querySelector('span').textContent = v && v.stopping ? 'Stopping…' : 'Stop';
  dom.mode.hidden = !running;
  if (!running) S.redirect = false;
  dom.mode.setAttribute('aria-pressed', String(S.redirect));
  dom.input.placeholder = S.redirect ? 'Steer the running turn…' : running ? 'Queue a message…' : 'Message Mirror…';
}

function renderConversation() {
  const v = currentView();
  const sc = dom.scroller;
  const atBottom = S.stick;
  const items = [];
  if (!S.current) {
    items.push(emptyItem(S.chats.size ? 'Pick a chat on the left, or start a new one.' : 'Start a conversation — type a message below.'));
  } else if (!v || (!v.loaded && !hasOutbox(S.current))) {
    items.push({ key: 'loading', sig: 'loading', render: (el) => { el.className = 'loading'; el.replaceChildren(h('span', { class: 'spinner' }), document.createTextNode(' Loading…')); } });
  } else {
    for (const e of v.history) {
      if (e.kind === 'msg') {
        if (v.deferred.has(e.m.id)) continue;
        items.push(messageItem(v, e.m));
      } else if (e.kind === 'error') {
        items.push(errorItem(e));
      } else if (e.kind === 'divider') {
        items.push(dividerItem(e));
      }
    }
    if (v.running) items.push(streamingItem(v.running));
    for (const [id, a] of v.approvals) items.push(approvalItem(v, id, a));
    for (const [id, r] of v.recoveries) items.push(recoveryItem(v, id, r));
    const pend = [...v.pending.values()].sort((a, b) => num(a.seq, 0) - num(b.seq, 0));
    for (const id of v.deferred) {
      const e = v.index.get(id);
      if (e) items.push(pendingItem(v, e.m));
    }
    for (const m of pend) items.push(pendingItem(v, m));
    for (const e of S.outbox) if (e.chat === v.id) items.push(outboxItem(e));
    if (items.length === 0) items.push(emptyItem('No messages yet. Say hello.'));
  }
  applyRekeys(dom.messages);
  reconcile(dom.messages, items, 'div');
  if (atBottom) sc.scrollTop = sc.scrollHeight;
}

function hasOutbox(chat) {
  return S.outbox.some((e) => e.chat === chat);
}

function applyRekeys(container) {
  if (!S.rekeys.length) return;
  const byKey = new Map();
  for (const c of container.children) byKey.set(c.dataset.key, c);
  for (const r of S.rekeys) {
    const node = byKey.get(r.from);
    if (!node) continue;
    let to = r.to;
    if (!to && r.clientId) {
      const v = currentView();
      const m = v && [...v.pending.values(), ...v.history.map((e) => e.m).filter(Boolean)].find((x) => x.client_id === r.clientId);
      to = m ? `m:${m.id}` : null;
    }
    if (to && !byKey.has(to)) {
      node.dataset.key = to;
      node._sig = null;
      byKey.set(to, node);
    }
  }
  S.rekeys = [];
}

// reconcile makes container's children the rendered items, in order, reusing
// the element of each key and re-rendering it only when its sig changed.
function reconcile(container, items, tag) {
  const existing = new Map();
  for (const c of container.children) if (c.dataset.key) existing.set(c.dataset.key, c);
  const keep = new Set();
  let prev = null;
  for (const it of items) {
    let node = existing.get(it.key);
    if (!node || node.tagName.toLowerCase() !== tag) {
      node = document.createElement(tag);
      node.dataset.key = it.key;
    }
    if (node._sig !== it.sig) {
      it.render(node);
      node.dataset.key = it.key;
      node._sig = it.sig;
    }
    keep.add(node);
    const want = prev ? prev.nextSibling : container.firstChild;
    if (want !== node) container.insertBefore(node, want);
    prev = node;
  }
  for (const c of [...container.children]) if (!keep.has(c)) c.remove();
}

function h(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, val] of Object.entries(attrs || {})) {
    if (val === false || val == null) continue;
    if (k === 'class') e.className = val;
    else e.setAttribute(k, val === true ? '' : String(val));
  }
  for (const c of children) {
    if (c == null || c === false) continue;
    e.append(typeof c === 'string' ? document.createTextNode(c) : c);
  }
  return e;
}

function emptyItem(text) {
  return {
    key: 'empty',
    sig: 'empty:' + text,
    render(el) {
      el.className = 'empty';
      const logo = document.querySelector('.brand .logo').cloneNode(true);
      el.replaceChildren(logo, h('p', null, text));
    },
  };
}

function noticeEls(v, id) {
  const out = [];
  if (v.notices.has(id)) out.push(h('p', { class: 'notice in-use', role: 'status' }, v.notices.get(id)));
  if (v.errors.has(id)) out.push(h('p', { class: 'notice error', role: 'alert' }, v.errors.get(id)));
  return out;
}

const oids = new WeakMap();
let oidN = 0;
// oid names an object; history entries are replaced, never mutated, when a
// message changes, so the id stands for its content in a render signature.
function oid(o) {
  let n = oids.get(o);
  if (!n) oids.set(o, (n = ++oidN));
  return n;
}

function messageItem(v, m) {
  const role = m.role === 'assistant' ? 'assistant' : 'user';
  const notice = v.notices.get(m.id) || '';
  return {
    key: `m:${m.id}`,
    sig: JSON.stringify(['msg', oid(m), notice, v.errors.get(m.id) || '']),
    render(el) {
      el.className = `msg ${role}` + (m.stopped ? ' stopped' : '') + (m.failed ? ' failed' : '');
      el.dataset.message = m.id;
      el.removeAttribute('data-turn');
      el.removeAttribute('aria-busy');
      el.removeAttribute('data-mode');
      el.removeAttribute('data-state');
      el.removeAttribute('data-client-id');
      if (m.turn) el.dataset.turn = m.turn;
      const body = h('div', { class: 'bubble' });
      if (role === 'assistant') {
        const md = h('div', { class: 'md' });
        md.append(renderMarkdown(m.text || ''));
        body.append(md);
      } else {
        body.append(h('div', { class: 'text' }, m.text || ''));
      }
      const meta = h('div', { class: 'meta' });
      if (m.stopped) meta.append(h('span', { class: 'stopped-mark' }, 'Stopped'));
      if (m.failed) meta.append(h('span', { class: 'failed-mark' }, 'Incomplete'));
      if (m.time) meta.append(h('time', { datetime: m.time }, shortTime(m.time)));
      const parts = [];
      if (role === 'assistant') parts.push(avatar());
      const col = h('div', { class: 'col' }, body, meta, ...noticeEls(v, m.id));
      parts.push(col);
      el.replaceChildren(...parts);
    },
  };
}

function avatar() {
  const a = h('div', { class: 'avatar', 'aria-hidden': 'true' });
  a.append(document.querySelector('.brand .logo').cloneNode(true));
  return a;
}

function streamingItem(r) {
  return {
    key: `t:${r.turn}`,
    sig: JSON.stringify(['stream', r.text, r.tools, r.wait]),
    render(el) {
      el.className = 'msg assistant streaming';
      el.dataset.turn = r.turn;
      el.removeAttribute('data-message');
      el.setAttribute('aria-busy', 'true');
      const md = h('div', { class: 'md' });
      const caret = h('span', { class: 'caret', 'aria-hidden': 'true' });
      if (r.text) {
        md.append(renderMarkdown(r.text));
        const last = md.lastElementChild;
        if (last && /^(P|LI|H\d)$/.test(last.tagName)) last.append(caret);
        else if (last && (last.tagName === 'UL' || last.tagName === 'OL') && last.lastElementChild) last.lastElementChild.append(caret);
        else md.append(caret);
      } else {
        md.append(h('span', { class: 'typing', 'aria-label': 'The assistant is writing' }, h('i'), h('i'), h('i')));
      }
      const body = h('div', { class: 'bubble' }, md);
      const col = h('div', { class: 'col' });
      if (r.tools.length) {
        const tools = h('div', { class: 'tools' });
        for (const t of r.tools) tools.append(h('span', { class: 'tool' + (t.done ? ' done' : '') + (t.failed ? ' failed' : '') }, t.name));
        col.append(tools);
      }
      col.append(body);
      if (r.wait) col.append(h('p', { class: 'notice wait', role: 'status' }, `Waiting for the provider's quota — about ${Math.max(1, Math.round(r.wait.ms / 1000))} s, then it continues.`));
      el.replaceChildren(avatar(), col);
    },
  };
}

function errorItem(e) {
  return {
    key: e.key,
    sig: JSON.stringify(['err', e.text, e.cls]),
    render(el) {
      el.className = 'msg error';
      el.setAttribute('role', 'alert');
      el.replaceChildren(h('div', { class: 'bubble' }, h('strong', null, 'The reply failed'), h('span', null, ': ' + e.text), e.cls ? h('span', { class: 'error-class' }, e.cls) : null));
    },
  };
}

function dividerItem(e) {
  return {
    key: e.key,
    sig: 'div:' + e.text,
    render(el) {
      el.className = 'divider';
      el.setAttribute('role', 'separator');
      el.replaceChildren(h('span', null, e.text));
    },
  };
}

function pendingItem(v, m) {
  const ed = v.editing.get(m.id);
  const busy = v.busy.get(m.id) || '';
  const mode = m.mode === 'redirect' ? 'redirect' : 'queue';
  return {
    key: `m:${m.id}`,
    sig: JSON.stringify(['pending', m.text, mode, busy, ed ? [ed.saving, ed.picked, ed.error] : null, v.notices.get(m.id) || '', v.errors.get(m.id) || '']),
    render(el) {
      el.className = 'msg pending' + (ed ? ' editing' : '') + (busy ? ' ' + busy : '');
      el.dataset.message = m.id;
      el.dataset.mode = mode;
      el.dataset.state = ed && ed.picked ? 'picked' : 'pending';
      el.removeAttribute('data-turn');
      el.removeAttribute('aria-busy');
      el.removeAttribute('data-client-id');
      const label = mode === 'redirect' ? 'Steering · waits for the next tool step' : 'Queued';
      if (ed) {
        // Keep the column, its box and the textarea in place across renders:
        // moving a focused textarea would lose its focus and caret.
        let col = el.querySelector(':scope > .col.edit-col');
        let ta = col && col.querySelector(':scope > .edit-box > textarea');
        if (!ta) {
          ta = h('textarea', { rows: '2', 'aria-label': 'Edit queued message' });
          ta.value = ed.draft;
          col = h('div', { class: 'col edit-col' }, h('div', { class: 'bubble edit-box' }, ta));
          el.replaceChildren(col);
        }
        for (const c of [...col.children]) if (!c.classList.contains('edit-box')) c.remove();
        ta.disabled = ed.saving;
        const bar = h('div', { class: 'pending-bar' },
          h('span', { class: 'pending-label' }, ed.saving ? 'Saving…' : 'Editing'),
          h('span', { class: 'spacer' }),
          h('button', { class: 'cancel btn btn-ghost btn-sm', type: 'button', disabled: ed.saving }, 'Cancel'),
          h('button', { class: 'save btn btn-primary btn-sm', type: 'button', disabled: ed.saving }, 'Save'));
        col.append(bar, ...noticeEls(v, m.id));
        if (ed.error) col.append(h('p', { class: 'notice error', role: 'alert' }, ed.error));
        autosize(ta);
        if (ed.focus) {
          ed.focus = false;
          requestAnimationFrame(() => {
            ta.focus();
            ta.setSelectionRange(ta.value.length, ta.value.length);
          });
        }
        return;
      }
      const bar = h('div', { class: 'pending-bar' },
        h('span', { class: 'pending-label' }, h('span', { class: 'clock', 'aria-hidden': 'true' }), busy === 'deleting' ? 'Deleting…' : label),
        h('span', { class: 'spacer' }),
        h('button', { class: 'edit btn btn-ghost btn-sm', type: 'button', disabled: Boolean(busy), 'aria-label': 'Edit queued message' }, 'Edit'),
        h('button', { class: 'delete btn btn-ghost btn-sm', type: 'button', disabled: Boolean(busy), 'aria-label': 'Delete queued message' }, 'Delete'));
      el.replaceChildren(h('div', { class: 'col' }, h('div', { class: 'bubble' }, h('div', { class: 'text' }, m.text || '')), bar, ...noticeEls(v, m.id)));
    },
  };
}

function outboxItem(e) {
  const waiting = !S.connected;
  return {
    key: `o:${e.client_id}`,
    sig: JSON.stringify(['outbox', e.text, e.error, waiting]),
    render(el) {
      el.className = 'msg outbox' + (e.error ? ' failed' : '');
      el.dataset.clientId = e.client_id;
      el.removeAttribute('data-message');
      const bar = h('div', { class: 'pending-bar' });
      if (e.error) {
        bar.append(h('span', { class: 'pending-label' }, 'Not sent'), h('span', { class: 'spacer' }),
          h('button', { class: 'discard btn btn-ghost btn-sm', type: 'button' }, 'Discard'),
          h('button', { class: 'retry btn btn-ghost btn-sm', type: 'button' }, 'Retry'));
      } else {
        bar.append(h('span', { class: 'pending-label' }, h('span', { class: 'spinner sm', 'aria-hidden': 'true' }), waiting ? 'Waiting for the connection…' : 'Sending…'));
      }
      const col = h('div', { class: 'col' }, h('div', { class: 'bubble' }, h('div', { class: 'text' }, e.text)), bar);
      if (e.error) col.append(h('p', { class: 'notice error', role: 'alert' }, e.error));
      el.replaceChildren(col);
    },
  };
}

function approvalItem(v, id, a) {
  return {
    key: `a:${id}`,
    sig: JSON.stringify(['appr', a, Boolean(a._answering)]),
    render(el) {
      el.className = 'card approval';
      el.dataset.approval = id;
      const call = typeof a.call === 'object' && a.call ? a.call : {};
      const tool = a.tool || call.name || call.tool || a.name || 'a tool';
      const what = a.summary || a.reason || a.description || a.text || '';
      const args = call.arguments ?? call.args ?? call.input ?? a.args ?? a.input;
      const parts = [h('p', { class: 'card-title' }, 'Permission needed'), h('p', null, 'The assistant wants to use ', h('code', null, String(tool)), '.')];
      if (what) parts.push(h('p', { class: 'card-text' }, String(what)));
      if (args !== undefined) parts.push(h('pre', { class: 'card-args' }, clip(typeof args === 'string' ? args : JSON.stringify(args, null, 2), 2000)));
      parts.push(h('div', { class: 'card-actions' },
        h('button', { class: 'deny btn btn-ghost btn-sm', type: 'button', disabled: Boolean(a._answering) }, 'Deny'),
        h('button', { class: 'allow btn btn-primary btn-sm', type: 'button', disabled: Boolean(a._answering) }, 'Allow')));
      el.replaceChildren(...parts);
    },
  };
}

function recoveryItem(v, id, r) {
  return {
    key: `r:${id}`,
    sig: JSON.stringify(['rec', r, Boolean(r._answering), Boolean(r._held)]),
    render(el) {
      el.className = 'card recovery';
      el.dataset.recovery = id;
      const call = typeof r.call === 'object' && r.call ? r.call : {};
      const tool = call.name || call.tool || r.tool || 'a tool call';
      const parts = [h('p', { class: 'card-title' }, 'A tool call was interrupted'),
        h('p', null, h('code', null, String(tool)), ' was running when the connection or the process went away. Repeat it, or skip it and carry on?')];
      if (r._held) parts.push(h('p', { class: 'notice wait' }, 'Your answer is held until this conversation is back.'));
      parts.push(h('div', { class: 'card-actions' },
        h('button', { class: 'skip btn btn-ghost btn-sm', type: 'button', disabled: Boolean(r._answering) }, 'Skip'),
        h('button', { class: 'repeat btn btn-primary btn-sm', type: 'button', disabled: Boolean(r._answering) }, 'Repeat')));
      el.replaceChildren(...parts);
    },
  };
}

function clip(s, n) {
  return s.length > n ? s.slice(0, n) + '…' : s;
}

function shortTime(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  const now = new Date();
  if (d.toDateString() === now.toDateString()) return d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  return d.toLocaleDateString([], { month: 'short', day: 'numeric' });
}

function fmtTokens(n) {
  n = num(n, 0);
  if (n >= 1e6) return (n / 1e6).toFixed(n >= 1e7 ? 0 : 1) + 'M';
  if (n >= 1e3) return (n / 1e3).toFixed(n >= 1e4 ? 0 : 1) + 'k';
  return String(n);
}

let toastN = 0;
function toast(text, kind) {
  const id = ++toastN;
  const t = h('div', { class: kind ? 'toast ' + kind : 'toast', role: 'alert', 'data-toast': id }, h('span', null, text), h('button', { class: 'toast-close', type: 'button', 'aria-label': 'Dismiss' }, '×'));
  dom.toasts.append(t);
  while (dom.toasts.children.length > 3) dom.toasts.firstChild.remove();
  setTimeout(() => t.remove(), kind === 'command' ? 20000 : 7000);
}

function autosize(ta) {
  ta.style.height = 'auto';
  ta.style.height = Math.min(ta.scrollHeight + 2, Math.round(window.innerHeight * 0.4)) + 'px';
}

// ---------------------------------------------------------------- hash and sidebar

function hashChat() {
  const raw = location.hash.replace(/^#/, '');
  if (!raw) return null;
  try {
    return decodeURIComponent(raw);
  } catch {
    return null;
  }
}

function setHash(id) {
  const want = id ? '#' + encodeURIComponent(id) : '';
  if (location.hash === want || (!id && !location.hash)) return;
  if (id) location.hash = want;
  else history.replaceState(null, '', location.pathname + location.search);
}

function openSidebar() {
  dom.app.dataset.sidebar = 'open';
  dom.menu.setAttribute('aria-expanded', 'true');
  dom.backdrop.hidden = false;
  const active = dom.list.querySelector('.chat-item.active .chat-link') || dom.newChat;
  active.focus();
}

function closeSidebar() {
  if (dom.app.dataset.sidebar !== 'open') return;
  dom.app.dataset.sidebar = 'closed';
  dom.menu.setAttribute('aria-expanded', 'false');
  dom.backdrop.hidden = true;
}

// ---------------------------------------------------------------- events

// An Enter that sent or saved must not also insert a line break: some input
// paths (synthetic key events, some IMEs) deliver the character separately
// from the keydown whose default was prevented.
let swallowNewline = false;
function swallowEnter(e) {
  if (swallowNewline && (e.inputType === 'insertLineBreak' || e.inputType === 'insertParagraph')) {
    e.preventDefault();
  }
  swallowNewline = false;
}

function bind() {
  dom.newChat.addEventListener('click', () => {
    createChat(null);
    closeSidebar();
  });

  dom.list.addEventListener('click', (e) => {
    const item = e.target.closest('.chat-item');
    if (item && item.dataset.chat) selectChat(item.dataset.chat);
  });

  dom.composer.addEventListener('submit', (e) => {
    e.preventDefault();
    const text = dom.input.value.trim();
    if (!text) return;
    sendMessage(S.current, text, S.redirect ? 'redirect' : 'queue');
    dom.input.value = '';
    if (S.current) S.drafts.delete(S.current);
    S.redirect = false;
    autosize(dom.input);
    dom.input.focus();
    render();
  });

  dom.input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.altKey && !e.ctrlKey && !e.metaKey && !e.isComposing && e.keyCode !== 229) {
      e.preventDefault();
      swallowNewline = true;
      dom.composer.requestSubmit();
    }
  });
  dom.input.addEventListener('beforeinput', swallowEnter);
  dom.input.addEventListener('input', () => autosize(dom.input));

  dom.stop.addEventListener('click', stopTurn);
  dom.mode.addEventListener('click', () => {
    S.redirect = !S.redirect;
    render();
    dom.input.focus();
  });

  dom.messages.addEventListener('click', (e) => {
    const btn = e.target.closest('button');
    if (!btn || btn.disabled) return;
    const v = currentView();
    if (btn.classList.contains('copy')) return copyCode(btn);
    if (!v) return;
    const msg = btn.closest('[data-message]');
    const id = msg && msg.dataset.message;
    if (id) {
      if (btn.classList.contains('edit')) return startEdit(v, id);
      if (btn.classList.contains('delete')) return deleteMessage(v, id);
      if (btn.classList.contains('save')) return saveEdit(v, id, msg.querySelector('textarea').value);
      if (btn.classList.contains('cancel')) return cancelEdit(v, id);
    }
    const ob = btn.closest('.msg.outbox');
    if (ob) {
      const i = S.outbox.findIndex((x) => x.client_id === ob.dataset.clientId);
      if (i < 0) return;
      if (btn.classList.contains('discard')) S.outbox.splice(i, 1);
      if (btn.classList.contains('retry')) {
        S.outbox[i].error = null;
        transmit(S.outbox[i]);
      }
      saveOutbox();
      return render();
    }
    const ap = btn.closest('.card.approval');
    if (ap) return answerApproval(v, ap.dataset.approval, btn.classList.contains('allow'));
    const rc = btn.closest('.card.recovery');
    if (rc) return answerRecovery(v, rc.dataset.recovery, btn.classList.contains('repeat') ? 'repeat' : 'skip');
  });

  dom.messages.addEventListener('input', (e) => {
    const ta = e.target;
    if (ta.tagName !== 'TEXTAREA') return;
    const msg = ta.closest('[data-message]');
    const v = currentView();
    const ed = v && msg && v.editing.get(msg.dataset.message);
    if (ed) ed.draft = ta.value;
    autosize(ta);
  });

  dom.messages.addEventListener('keydown', (e) => {
    const ta = e.target;
    if (ta.tagName !== 'TEXTAREA') return;
    const msg = ta.closest('[data-message]');
    const v = currentView();
    if (!v || !msg) return;
    if (e.key === 'Escape') {
      e.preventDefault();
      cancelEdit(v, msg.dataset.message);
      dom.input.focus();
    } else if (e.key === 'Enter' && !e.shiftKey && !e.isComposing && e.keyCode !== 229) {
      e.preventDefault();
      swallowNewline = true;
      saveEdit(v, msg.dataset.message, ta.value);
    }
  });
  dom.messages.addEventListener('beforeinput', swallowEnter);
  document.addEventListener('keyup', () => (swallowNewline = false), true);

  dom.scroller.addEventListener('scroll', () => {
    const sc = dom.scroller;
    S.stick = sc.scrollTop + sc.clientHeight >= sc.scrollHeight - 48;
  }, { passive: true });

  dom.toasts.addEventListener('click', (e) => {
    if (e.target.closest('.toast-close')) e.target.closest('.toast').remove();
  });

  dom.menu.addEventListener('click', () => (dom.app.dataset.sidebar === 'open' ? closeSidebar() : openSidebar()));
  dom.backdrop.addEventListener('click', closeSidebar);
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && dom.app.dataset.sidebar === 'open') {
      closeSidebar();
      dom.menu.focus();
    }
  });

  window.addEventListener('hashchange', () => {
    const id = hashChat();
    if (id && id !== S.current) {
      if (S.connected && !S.chats.has(id)) {
        toast('That chat was not found.');
        setHash(S.current);
        return;
      }
      selectChat(id);
    }
  });
  window.addEventListener('online', reconnectNow);
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') reconnectNow();
  });
}

async function copyCode(btn) {
  const code = btn.closest('.code-block')?.querySelector('code');
  if (!code) return;
  try {
    await navigator.clipboard.writeText(code.textContent);
    btn.textContent = 'Copied';
  } catch {
    const r = document.createRange();
    r.selectNodeContents(code);
    const sel = getSelection();
    sel.removeAllRanges();
    sel.addRange(r);
    btn.textContent = 'Selected';
  }
  setTimeout(() => (btn.textContent = 'Copy'), 1500);
}

// ---------------------------------------------------------------- start

function start() {
  bind();
  let initial = hashChat();
  if (!initial) {
    try {
      initial = localStorage.getItem(LAST_KEY);
    } catch {
      initial = null;
    }
  }
  S.current = initial || null;
  if (S.current) viewFor(S.current);
  setStatus('connecting');
  render();
  connect();
}

start();
