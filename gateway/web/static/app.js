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
//   .msg.error                    a turn.failed error shown in the conversation; data-turn = T
//   details.diagnostics[data-turn=T]  under a turn's answer, or its error when it failed:
//                                 closed by default; summary "Details · N model attempts";
//                                 li.diag[data-kind=attempt|hook][data-outcome=O] per row,
//                                 its facts in span.diag-field[data-field=attempt|purpose|
//                                 model|answered|outcome|status|latency|request-id|error]
//   .note.diag-note               a failed slash command's diagnostic (li.diag[data-kind=
//                                 command]), in the conversation where it happened
//   A reload draws the same items in the same places as the live page did: the snapshot's
//   marks go through the same code as the live events.
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
//                                 .toast.command shows what a chat command typed in
//                                 the composer answered
//   #command-hints                shown while the composer holds a slash word: one
//                                 li > button.command-hint[data-command=NAME] per
//                                 matching chat command (welcome.commands, the
//                                 server's table: name, args, help); a click puts
//                                 the command in the composer
//
// Long conversations:
//   #context                      the usage ring (role=meter): .ring-value is the
//                                 request size (or used) against the ceiling (or the
//                                 window), .ring-marks "Soft S · Hard H"; its title and
//                                 aria-valuetext add "Next checkpoint at N" when known
//   .boundary[data-boundary=SEQ]  where a boundary archived and cleared the
//                                 conversation; data-reason = hard | assistant,
//                                 data-continued = true | false; button.toggle-record
//                                 (aria-expanded) shows .record, the handoff record
//                                 rendered as markdown; a.note-link[data-note=NAME]
//                                 for each memory note it wrote
//   .msg.runtime-note[data-message=ID]  the continuity message the runtime opened
//                                 the fresh conversation with (not a user bubble)
//   .divider.checkpoint           "Earlier turns checkpointed", after the last
//                                 message the checkpoint in force evicted (one only)
//   .divider.cleared              "Context cleared here" (/clear)
//   .note.compact                 "Checkpoint requested" (/compact)
//   .msg.error.boundary-failed    a boundary that did not happen
//   button.msg-menu-btn           on user and assistant messages: opens .msg-menu
//                                 (also on right-click) with button.pin "Pin to agent
//                                 context" / "Unpin from agent context"
//   .pinned-mark                  under a pinned message
//   #memory-open                  opens #panel (a dialog) on the memory notes:
//                                 .note-item[data-note=NAME] opens one (.panel-note)
//   #handoffs-open                opens #panel on the open chat's past handoffs
//                                 (.handoff-item)
//   #model-open                   opens #panel on the model details (so does a click on
//                                 #context): .model-details[data-model=NAME] for the
//                                 chat's model (the last context reading's, else the
//                                 first); dd[data-field=window|reserve|ceiling|mark|
//                                 warn|limit] hold the numbers; select#context-limit
//                                 (options value = auto | a step such as 600k | full)
//                                 PUTs the choice; .model-status says what was saved,
//                                 .model-error (role=alert) what the server refused;
//                                 .model-none replaces the select when the model's Auto
//                                 already is its whole window; section.compaction
//                                 ("Conversation limits"): dd[data-field=soft|hard|
//                                 configured-compaction], form.compaction-form with
//                                 input#soft-ratio and input#hard-ratio (percent of the
//                                 window) and button.compaction-save, which PUTs
//                                 /compaction (soft not below hard is refused before
//                                 sending); .compaction-status says what was saved,
//                                 .compaction-error (role=alert) what was refused;
//                                 section.model-quota: dd[data-field=quota-quota|
//                                 quota-usage|quota-wait] per key (see quota.js)
//   .notice.quota-wait            a quota wait in the live reply (see quota.js)
//   #settings-open                opens #panel on Settings: Chat and Chains (see
//                                 settings.js)
//   #attach, #attachments         the composer's files (see attach.js); a message's
//                                 files under its text, removable while queued
//                                 (see media.js)
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

import { readEvent } from './events.js';
import { renderMarkdown } from './markdown.js';
import { modelQuotaSection, startTicker, waitFrom, waitNotice } from './quota.js';
import { chatCostSection } from './cost.js';
import { settingsView } from './settings.js';
import { initAttach } from './attach.js';
import { attachmentsEl, attachmentsSig, withTranscripts } from './media.js';
import { pageChats } from './chatlist.js';

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
  handoffsOpen: $('#handoffs-open'),
  modelOpen: $('#model-open'),
  memoryOpen: $('#memory-open'),
  settingsOpen: $('#settings-open'),
  panel: $('#panel'),
  panelTitle: $('#panel-title'),
  panelBody: $('#panel-body'),
  panelBack: $('#panel-back'),
  panelClose: $('#panel-close'),
  commandHints: $('#command-hints'),
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
  boundaries: new Map(), // chat id -> Map(boundary seq -> {reason, continued, notes, why}) as events told
  menu: null, // {chat, message}: the open message menu
  noteTitles: new Map(), // memory note file name -> its title, from GET /api/memory
  commands: null, // [{name, args, help}]: the chat commands, from welcome; null until one came
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
    context: null, // the last context reading (the usage ring)
    checkpointThrough: 0, // the "Earlier turns checkpointed" divider goes after this seq
    expanded: new Set(), // keys of expanded records and runtime notes
    diags: new Map(), // turn -> [{seq, ...diagnostic}]: what each attempt of the turn left
    metaAsked: false, // the boundaries' reasons and notes were asked for over HTTP
    before: 0, // older messages exist before this seq: chat.history loads them
    loadingOlder: false, // a chat.history is in flight
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
    sessionStorage.setItem(OUTBOX_KEY, JSON.stringify(S.outbox.map(({ chat, text, client_id, mode, error, attachments }) => ({ chat, text, client_id, mode, error, attachments }))));
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
      // The answer to chat.create carries CHAT; the record's first event
      // (replayed with since) carries the chat's id, as every event does.
      return typeof f.chat === 'string' ? onChatEvent(f) : onChatCreated(f);
    case 'chat.updated':
      upsertChat(f.chat);
      return render();
    case 'chat.snapshot':
      return onSnapshot(f);
    case 'chat.resumed':
      return onResumed(f);
    case 'chat.history':
      return onHistory(f);
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
  S.commands = Array.isArray(f.commands) ? f.commands.filter((c) => c && typeof c.name === 'string') : [];
  showCommandHints();
  setStatus('connected');
  const chats = new Map();
  for (const c of Array.isArray(f.chats) ? f.chats : []) if (c && c.id) chats.set(c.id, c);
  S.chats = chats;
  S.order = byActivity([...chats.values()]).map((c) => c.id);
  for (const id of [...S.views.keys()]) if (!chats.has(id)) S.views.delete(id);
  // Older chats load page by page below these as the list scrolls (chatlist.js).
  pageChats(dom.list, f.next, (more) => {
    for (const c of more) if (c && c.id && !S.chats.has(c.id)) { S.chats.set(c.id, c); S.order.push(c.id); }
    renderList();
  });

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
    if (meta.then) sendMessage(f.chat.id, meta.then.text, meta.then.mode, meta.then.attachments);
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
  v.diags = new Map();
  applyPage(v, f, (m) => {
    if (m.role === 'boundary') addBoundary(v, { seq: m.seq, record: m.text, time: m.time });
    else if (m.role !== 'user' && m.role !== 'assistant') return;
    else if (m.state === 'pending') v.pending.set(m.id, m);
    else addHistory(v, m);
  });
  for (const m of Array.isArray(f.pending) ? f.pending : []) if (m && m.id) v.pending.set(m.id, m);
  v.context = f.context && typeof f.context === 'object' ? f.context : v.context;
  v.checkpointThrough = num(f.checkpoint_through, 0);
  v.before = f.more ? num(f.before, 0) : 0;
  v.loadingOlder = false;
  inferContinued(v);
  v.metaAsked = false;
  fetchBoundaryMeta(v);
  v.running = f.running ? runningFrom(f.running) : null;
  if (v.running && f.running.wait) v.running.wait = waitFrom(f.running.wait);
  v.approvals = listToMap(f.approvals);
  v.recoveries = listToMap(f.recoveries);
  reconcileEditing(v);
  S.stick = true;
  render();
}

// onHistory puts an older page of the transcript (chat.history) above what
// the view holds, and keeps the reader's place.
function onHistory(f) {
  takeReq(f);
  const v = S.views.get(f.chat);
  if (!v || !v.loaded) return;
  v.loadingOlder = false;
  const newer = v.history;
  v.history = [];
  applyPage(v, f, (m) => {
    if (v.index.has(m.id)) return;
    if (m.role === 'boundary') {
      if (!newer.some((e) => e.key === `b:${m.seq}`)) addBoundary(v, { seq: m.seq, record: m.text, time: m.time });
    } else if (m.role === 'user' || m.role === 'assistant') addHistory(v, m);
  }, newer);
  v.history.push(...newer);
  v.before = f.more ? num(f.before, 0) : 0;
  inferContinued(v);
  v.metaAsked = false;
  fetchBoundaryMeta(v);
  if (f.chat !== S.current) return;
  const sc = dom.scroller;
  const fromBottom = sc.scrollHeight - sc.scrollTop;
  render();
  sc.scrollTop = sc.scrollHeight - fromBottom;
}

// applyPage puts a snapshot's or history page's messages into the view in
// order, each through add, with the page's marks where they fell among
// them (mark.at messages before each), drawn by the same applyMark the
// live events go through: a reload draws what live drew. newer is what
// the view holds already (a history page goes above it); a mark it holds
// is not added again.
function applyPage(v, f, add, newer = []) {
  const msgs = (Array.isArray(f.messages) ? f.messages : []).filter((m) => m && m.id && m.state !== 'deleted');
  const marks = Array.isArray(f.marks) ? f.marks : [];
  let k = 0;
  const marksUpTo = (i) => {
    for (; k < marks.length && num(marks[k].at, 0) <= i; k++) {
      const ev = readEvent(marks[k]);
      if (!ev || newer.some((e) => e.seq === ev.seq && e.mark)) continue;
      applyMark(v, ev, false);
    }
  };
  msgs.forEach((m, i) => {
    marksUpTo(i);
    add(m);
  });
  marksUpTo(Infinity);
}

// loadOlder asks for the page of messages before the oldest one shown.
function loadOlder() {
  const v = currentView();
  if (!v || !v.loaded || !v.subscribed || !v.before || v.loadingOlder || !S.connected) return;
  if (request({ type: 'chat.history', chat: v.id, before: v.before }, { kind: 'history', chat: v.id })) {
    v.loadingOlder = true;
    render();
  }
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
    if (f.running.wait) v.running.wait = waitFrom(f.running.wait);
  } else if ('running' in f) {
    v.running = null;
  }
  if (Array.isArray(f.approvals)) v.approvals = listToMap(f.approvals);
  if (Array.isArray(f.recoveries)) v.recoveries = listToMap(f.recoveries);
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

function onChatEvent(f) {
  const meta = takeReq(f);
  const ev = readEvent(f);
  if (!ev) {
    if (meta) render();
    return; // a type this client does not know
  }
  if (ev.type === 'message.accepted' && ev.message) settleOutbox(ev.message.client_id || (meta && meta.kind === 'send' ? meta.client_id : ''));
  const v = ev.chat === S.current ? S.views.get(ev.chat) : null;
  if (!v || !v.subscribed) {
    if (meta) render();
    return; // not open here: chat.updated keeps the list current
  }
  if (ev.type === 'reply.delta' || ev.type === 'quota.wait' || ev.type === 'tool.progress') {
    // Not durable: they carry the seq of the last durable event, so the
    // seq check below would drop them.
    APPLY[ev.type](v, ev);
    return render();
  }
  if (v.opening) return; // the snapshot is authoritative and comes first
  if (ev.seq <= v.lastSeq) {
    if (meta) render();
    return;
  }
  v.lastSeq = ev.seq;
  APPLY[ev.type]?.(v, ev);
  render();
}

// APPLY applies each event type, as its reader (events.js) read it, to the
// chat's view. Types without an entry (assistant.message, runtime.context,
// handoff.updated, rewind, chat.created) only advance seq.
const APPLY = {
  'message.accepted'(v, { message: m }) {
    if (!m || !m.id) return;
    if (m.state === 'picked' || m.state === 'done') addHistory(v, m);
    else if (m.state !== 'deleted' && !v.index.has(m.id)) v.pending.set(m.id, m);
  },
  'message.updated'(v, { message: m }) {
    if (!m || !m.id) return;
    if (v.pending.has(m.id)) v.pending.set(m.id, { ...v.pending.get(m.id), ...m });
    else if (v.index.has(m.id)) v.index.get(m.id).m = { ...v.index.get(m.id).m, ...m };
    if (v.editing.get(m.id)?.saving) v.editing.delete(m.id);
    v.errors.delete(m.id);
    v.busy.delete(m.id);
  },
  'message.transcribed'(v, ev) {
    const m = ev.message;
    if (!m || !m.id) return;
    if (v.pending.has(m.id)) v.pending.set(m.id, withTranscripts(v.pending.get(m.id), ev));
    else if (v.index.has(m.id)) v.index.get(m.id).m = withTranscripts(v.index.get(m.id).m, ev);
  },
  'file.sent'(v, { message: m }) {
    if (m && m.id) addHistory(v, { role: 'assistant', state: 'done', ...m });
  },
  'message.deleted'(v, { message: m }) {
    if (!m || !m.id) return;
    v.pending.delete(m.id);
    v.editing.delete(m.id);
    v.deferred.delete(m.id);
    v.busy.delete(m.id);
    v.errors.delete(m.id);
  },
  'message.picked'(v, { message: m }) {
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
  },
  'turn.started'(v, ev) {
    if (!v.running || v.running.turn !== ev.turn) v.running = runningFrom({ turn: ev.turn, text: '', seq: ev.seq });
  },
  'reply.delta'(v, ev) {
    if (!ev.turn || v.finished.has(ev.turn)) return;
    if (!v.running || v.running.turn !== ev.turn) v.running = runningFrom({ turn: ev.turn, text: '', seq: ev.seq });
    const r = v.running;
    if (ev.offset === r.len) {
      r.text += ev.text;
    } else if (ev.offset < r.len) {
      r.text = cpSlice(r.text, ev.offset) + ev.text;
    } else {
      r.text += ev.text; // a gap should not happen; keep what we have
    }
    r.len = cpLen(r.text);
    r.wait = null;
  },
  'quota.wait'(v, ev) {
    // It says what the running turn does now, until a delta, a tool call
    // or the turn's end shows it went on.
    if (!ev.turn || v.finished.has(ev.turn)) return;
    if (!v.running || v.running.turn !== ev.turn) v.running = runningFrom({ turn: ev.turn, text: '', seq: ev.seq });
    v.running.wait = waitFrom(ev);
  },
  'turn.finished'(v, ev) {
    endTurn(v, ev.turn);
    const m = ev.message
      ? { ...ev.message, text: ev.message.text || ev.reply }
      : { id: `turn-${ev.turn}`, role: 'assistant', text: ev.reply, turn: ev.turn, seq: ev.seq };
    if (ev.stopped) m.stopped = true;
    showReply(v, ev.turn, m);
  },
  'turn.failed'(v, ev) {
    endTurn(v, ev.turn);
    if (ev.message && ev.message.text) showReply(v, ev.turn, { ...ev.message, failed: true });
    applyMark(v, ev, true);
  },
  'tool.call'(v, ev) {
    const r = v.running;
    if (!r) return;
    r.wait = null; // the request went through
    r.tools.push({ id: ev.call.id, name: ev.call.name || 'tool', done: false });
  },
  'tool.result'(v, ev) {
    const r = v.running;
    if (!r) return;
    const t = r.tools.find((x) => x.id === ev.callId && !x.done) || r.tools.find((x) => !x.done);
    if (t) {
      t.done = true;
      t.failed = ev.failed;
    }
  },
  'tool.progress'(v, ev) {
    // What a running call (an MCP tool) reports, shown on its chip until
    // its result.
    const r = v.running;
    if (!r || !ev.call.id) return;
    const t = r.tools.find((x) => x.id === ev.call.id);
    if (t && !t.done) t.progress = ev.text;
  },
  'approval.requested'(v, { approval: a }) {
    if (a && a.id) v.approvals.set(a.id, a);
  },
  'approval.resolved'(v, ev) {
    v.approvals.delete(ev.id);
  },
  'recovery.requested'(v, { recovery: r }) {
    if (r && r.id) v.recoveries.set(r.id, r);
  },
  'recovery.resolved'(v, ev) {
    v.recoveries.delete(ev.id);
  },
  context(v, { context: c }) {
    // A reading without its model name keeps the one the chat had.
    v.context = !c.model && v.context?.model ? { ...c, model: v.context.model } : c;
  },
  checkpoint(v, ev) {
    v.checkpointThrough = ev.through;
  },
  'message.pinned'(v, ev) {
    const e = ev.id ? v.index.get(ev.id) : null;
    if (e) e.m = { ...e.m, pinned: ev.pinned };
  },
  continuity(v, { message: m }) {
    if (m && m.id) addHistory(v, { ...m, state: 'continuity' });
  },
  clear(v, ev) {
    v.checkpointThrough = 0;
    applyMark(v, ev, true);
  },
  'boundary.failed'(v, ev) {
    applyMark(v, ev, true);
  },
  compact(v, ev) {
    applyMark(v, ev, true);
  },
  diagnostic(v, ev) {
    applyMark(v, ev, true);
  },
  boundary(v, ev) {
    v.checkpointThrough = 0;
    applyMark(v, ev, true);
  },
};

// applyMark draws a stored event that is no message, as events.js read
// it: a /clear divider, a /compact note, a boundary's details, a boundary
// that did not happen, a failed turn's error, a diagnostic. Live events
// and the marks of a snapshot or history page (live false) come through
// here alike.
function applyMark(v, ev, live) {
  switch (ev.type) {
    case 'clear':
      return addItem(v, { kind: 'divider', key: `cl:${ev.seq}`, seq: ev.seq, mark: true, text: 'Context cleared here', cls: 'cleared' });
    case 'compact':
      return addItem(v, { kind: 'note', key: `cp:${ev.seq}`, seq: ev.seq, mark: true, text: 'Checkpoint requested — the next turn takes one.', cls: 'compact' });
    case 'boundary.failed':
      return addItem(v, { kind: 'error', key: `bf:${ev.seq}`, seq: ev.seq, mark: true, title: 'The boundary did not happen', cls: '', extra: 'boundary-failed',
        text: `${ev.error || 'The boundary failed'}. Nothing changed; the next turn tries again.` });
    case 'turn.failed':
      if (ev.turn) v.finished.add(ev.turn);
      return addItem(v, { kind: 'error', key: `e:${ev.turn}:${ev.seq}`, seq: ev.seq, mark: true, turn: ev.turn, text: ev.error || 'The reply failed.', cls: ev.class });
    case 'diagnostic':
      return addDiag(v, ev);
    case 'boundary': {
      const meta = { reason: ev.reason, continued: ev.continued, notes: ev.notes, why: ev.why, through: ev.through };
      if (!S.boundaries.has(v.id)) S.boundaries.set(v.id, new Map());
      S.boundaries.get(v.id).set(ev.seq, meta);
      const b = { seq: ev.seq, time: ev.time, ...meta };
      if (live || ev.record) b.record = ev.record; // a mark leaves the record to its message
      addBoundary(v, b);
      if (meta.notes.length) loadNoteTitles(v);
      return;
    }
  }
}

// addDiag keeps a diagnostic: a turn's go under its answer or its error
// (the details), one of no turn (a failed command) stands on its own.
function addDiag(v, ev) {
  const d = { ...(ev.diagnostic || {}), seq: ev.seq, time: ev.time };
  if (!ev.turn) {
    return addItem(v, { kind: 'diag', key: `d:${ev.seq}`, seq: ev.seq, mark: true, d });
  }
  const list = v.diags.get(ev.turn) || [];
  if (list.some((x) => x.seq === ev.seq)) return;
  list.push(d);
  list.sort((a, b) => a.seq - b.seq);
  v.diags.set(ev.turn, list);
}

// endTurn ends the running turn of a turn.finished or turn.failed.
function endTurn(v, turn) {
  v.running = null;
  if (turn) v.finished.add(turn);
  v.stopping = false;
}

// showReply adds a turn's stored reply to the transcript, in the place of
// its streamed text.
function showReply(v, turn, m) {
  m.role = m.role || 'assistant';
  if (turn) S.rekeys.push({ from: `t:${turn}`, to: `m:${m.id}` });
  addHistory(v, m);
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
    // A message picked again after a boundary was carried into the fresh
    // conversation: it moves below the boundary, next to its answer.
    if (m.state === 'picked') {
      const i = v.history.indexOf(e);
      const b = v.history.findLastIndex((x) => x.kind === 'boundary');
      if (b > i) {
        v.history.splice(i, 1);
        v.history.push(e);
      }
    }
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

// addBoundary adds (or completes) the boundary divider of seq: from the
// snapshot's boundary message (the record only) or the boundary event (all).
function addBoundary(v, b) {
  const key = `b:${b.seq}`;
  const known = S.boundaries.get(v.id)?.get(b.seq) || {};
  const old = v.history.find((e) => e.key === key);
  if (old) {
    Object.assign(old, { ...known, ...b, record: b.record || old.record || '' });
    old.rev = (old.rev || 0) + 1;
    return;
  }
  v.history.push({ kind: 'boundary', key, ...known, ...b, record: b.record || '', rev: 0 });
}

// inferContinued: a snapshot's boundary continued when a continuity
// message follows it before the next boundary.
function inferContinued(v) {
  let open = null;
  for (const e of v.history) {
    if (e.kind === 'boundary') {
      if (open && open.continued === undefined) open.continued = false;
      open = e;
    } else if (open && e.kind === 'msg' && e.m.state === 'continuity') {
      if (open.continued === undefined) open.continued = true;
      open = null;
    }
  }
  if (open && open.continued === undefined) open.continued = false;
}

// fetchBoundaryMeta asks for what a snapshot's boundary messages do not
// carry: the reason (past handoffs) and the memory notes each wrote.
async function fetchBoundaryMeta(v) {
  const missing = v.history.filter((e) => e.kind === 'boundary' && (!e.reason || !e.notes));
  if (!missing.length || v.metaAsked) return;
  v.metaAsked = true;
  const [handoffs, notes] = await Promise.all([getJSON(`/api/chats/${encodeURIComponent(v.id)}/handoffs`), getJSON('/api/memory')]);
  for (const e of missing) {
    const h = (handoffs?.handoffs || []).find((x) => x.boundary === e.seq);
    if (h && !e.reason) e.reason = h.reason;
    if (h && !e.through) e.through = h.through;
    // A note names its boundary by the last event that boundary archived.
    const mine = (n) => n.chat === v.id && num(n.through, 0) > 0 && n.through === e.through;
    if (!e.notes) e.notes = (notes?.notes || []).filter(mine).map((n) => n.name);
    e.rev = (e.rev || 0) + 1;
  }
  keepTitles(notes);
  render();
}

// loadNoteTitles reads the memory notes' titles, for the links under
// boundaries.
async function loadNoteTitles(v) {
  keepTitles(await getJSON('/api/memory'));
  for (const e of v.history) if (e.kind === 'boundary') e.rev = (e.rev || 0) + 1;
  render();
}

function keepTitles(list) {
  for (const n of list?.notes || []) if (n.name && n.title) S.noteTitles.set(n.name, n.title);
}

async function getJSON(url) {
  try {
    const r = await fetch(url, { credentials: 'same-origin', cache: 'no-store' });
    if (r.status === 401) {
      goLogin();
      return null;
    }
    return r.ok ? await r.json() : null;
  } catch {
    return null;
  }
}

// listToMap keys a snapshot's APPROVAL or RECOVERY list by id.
function listToMap(list) {
  const out = new Map();
  for (const x of Array.isArray(list) ? list : []) if (x && typeof x.id === 'string' && x.id) out.set(x.id, x);
  return out;
}

function num(x, dflt) {
  return typeof x === 'number' && Number.isFinite(x) ? x : dflt;
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
  v.loadingOlder = false;
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
  showCommandHints();
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
  request({ type: 'chat.create', reuse: true }, { kind: 'create', then });
}

// isCommand says whether text is a chat command the gateway runs itself
// rather than the model: its first word names one of the server's table
// (welcome.commands). null while no welcome has told which they are, so a
// slash text then is held back rather than sent to the assistant.
function isCommand(text) {
  const m = /^(\/\S+)(\s|$)/.exec(text.trim());
  if (!m) return false;
  if (!S.commands) return null;
  return S.commands.some((c) => c.name === m[1]);
}

function sendMessage(chat, text, mode, attachments = []) {
  // A text with attachments is a message, whatever it starts with.
  const cmd = chat && !attachments.length ? isCommand(text) : false;
  if (cmd === null) {
    toast('Not connected — try again in a moment.');
    return;
  }
  if (cmd) {
    if (!request({ type: 'chat.command', chat, text: text.trim() }, { kind: 'command', chat })) toast('Not connected — try again in a moment.');
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
function showCommandHints() {
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

function transmit(e) {
  const frame = { type: 'message.send', chat: e.chat, text: e.text, client_id: e.client_id };
  if (e.mode === 'redirect') frame.mode = 'redirect';
  if (e.attachments?.length) frame.attachments = e.attachments.map((a) => a.sha256);
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

// removeAttachment drops one file of a queued message: message.edit with
// the attachments it keeps.
function removeAttachment(v, id, sha) {
  const m = v.pending.get(id);
  if (!m || v.busy.get(id)) return;
  const keep = (m.attachments || []).map((a) => a.sha256).filter((x) => x !== sha);
  v.errors.delete(id);
  if (!keep.length && !String(m.text || '').trim()) v.errors.set(id, 'The message would be empty — use Delete to remove it.');
  else if (request({ type: 'message.edit', chat: v.id, message: id, attachments: keep }, { kind: 'edit', chat: v.id, message: id })) v.busy.set(id, 'saving');
  else v.errors.set(id, 'Not connected — try again in a moment.');
  render();
}

function stopTurn() {
  const v = currentView();
  if (!v) return;
  if (request({ type: 'turn.stop', chat: v.id }, { kind: 'stop', chat: v.id })) v.stopping = true;
  else toast('Not connected — try again in a moment.');
  render();
}

function toggleMenu(v, id) {
  const open = S.menu && S.menu.chat === v.id && S.menu.message === id;
  S.menu = open ? null : { chat: v.id, message: id };
  render();
}

function closeMenu(focusBack) {
  if (!S.menu) return;
  const id = S.menu.message;
  S.menu = null;
  render();
  if (focusBack) requestAnimationFrame(() => dom.messages.querySelector(`[data-message="${CSS.escape(id)}"] .msg-menu-btn`)?.focus());
}

// pinMessage asks to pin (or unpin) a message in the assistant's view; the
// mark changes when message.pinned comes back.
function pinMessage(v, id) {
  const e = v.index.get(id);
  S.menu = null;
  if (!e) return render();
  const pinned = !e.m.pinned;
  if (!request({ type: 'message.pin', chat: v.id, message: id, pinned }, { kind: 'pin', chat: v.id, message: id })) toast('Not connected — try again in a moment.');
  render();
}

function toggleExpanded(v, key) {
  if (v.expanded.has(key)) v.expanded.delete(key);
  else v.expanded.add(key);
  render();
}

// ---------------------------------------------------------------- panel: memory and past handoffs

const panel = { kind: null, note: null, chat: null, seq: 0, opener: null, models: null, quotas: null };

function openPanel(kind, arg) {
  panel.kind = kind;
  panel.note = null;
  panel.chat = kind === 'handoffs' ? arg : null;
  panel.models = null;
  panel.opener = document.activeElement;
  if (!dom.panel.open) dom.panel.showModal();
  if (kind === 'memory') {
    if (arg) return showNote(arg, false);
    return showMemory();
  }
  if (kind === 'model') return showModel(arg);
  if (kind === 'settings') return showSettings(arg || 'chat');
  return showHandoffs(arg);
}

function panelState(title, ...body) {
  dom.panelTitle.textContent = title;
  dom.panelBody.replaceChildren(...body);
  dom.panelBody.scrollTop = 0;
}

function panelLoading(title) {
  dom.panelBack.hidden = true;
  panelState(title, h('p', { class: 'panel-empty' }, h('span', { class: 'spinner sm', 'aria-hidden': 'true' }), 'Loading…'));
  return ++panel.seq;
}

async function showMemory() {
  const seq = panelLoading('Memory');
  const data = await getJSON('/api/memory');
  if (seq !== panel.seq || !dom.panel.open) return;
  const notes = data?.notes;
  if (!Array.isArray(notes)) return panelState('Memory', h('p', { class: 'panel-empty error' }, 'The memory notes could not be read.'));
  const intro = h('p', { class: 'panel-intro' }, 'What boundaries taught: each note was written when a long conversation was archived and cleared. The assistant reads them back with its memory tools.');
  if (!notes.length) return panelState('Memory', intro, h('p', { class: 'panel-empty' }, 'No memory notes yet.'));
  const list = h('ul', { class: 'panel-list' });
  for (const n of notes) {
    const chat = n.chat && S.chats.get(n.chat);
    list.append(h('li', null, h('button', { class: 'note-item', type: 'button', 'data-note': n.name },
      h('span', { class: 'item-title' }, n.title || n.name),
      h('span', { class: 'item-meta' }, [n.modified ? longTime(n.modified) : '', chat ? `from “${chatName(chat)}”` : '', fmtBytes(n.size)].filter(Boolean).join(' · ')))));
  }
  panelState('Memory', intro, list);
}

async function showNote(name, back = true) {
  panel.note = name;
  const seq = panelLoading(noteTitle(name));
  let text = null;
  try {
    const r = await fetch(`/api/memory/${encodeURIComponent(name)}`, { credentials: 'same-origin', cache: 'no-store' });
    if (r.status === 401) return goLogin();
    if (r.ok) text = await r.text();
  } catch {
    text = null;
  }
  if (seq !== panel.seq || !dom.panel.open) return;
  dom.panelBack.hidden = !back;
  if (text == null) return panelState(noteTitle(name), h('p', { class: 'panel-empty error' }, 'That memory note was not found.'));
  const md = h('div', { class: 'md panel-note', 'data-note': name });
  md.append(renderMarkdown(text));
  panelState(noteTitle(name), md, h('p', { class: 'panel-foot' }, h('code', null, name)));
}

async function showHandoffs(chat) {
  const c = S.chats.get(chat);
  const title = `Past handoffs · ${chatName(c)}`;
  const seq = panelLoading(title);
  const data = await getJSON(`/api/chats/${encodeURIComponent(chat)}/handoffs`);
  if (seq !== panel.seq || !dom.panel.open) return;
  const list = data?.handoffs;
  if (!Array.isArray(list)) return panelState(title, h('p', { class: 'panel-empty error' }, 'The past handoffs could not be read.'));
  const intro = h('p', { class: 'panel-intro' }, 'Each boundary wrote down where the work stood before it archived and cleared the conversation.');
  if (!list.length) return panelState(title, intro, h('p', { class: 'panel-empty' }, 'No boundary has happened in this chat yet.'));
  const ul = h('ul', { class: 'panel-list' });
  for (const e of [...list].reverse()) {
    const d = h('details', { class: 'handoff-item', 'data-boundary': e.boundary });
    d.append(h('summary', null,
      h('span', { class: 'item-title' }, `Handoff ${e.number}`),
      h('span', { class: 'item-meta' }, [e.reason === 'hard' ? 'hard limit' : e.reason === 'assistant' ? 'the assistant consolidated' : e.reason,
        e.time ? longTime(e.time) : '', `events ${e.from}–${e.through}`].filter(Boolean).join(' · '))));
    const md = h('div', { class: 'md record' });
    md.append(renderMarkdown(e.record || '(no record)'));
    d.append(md);
    ul.append(h('li', null, d));
  }
  ul.querySelector('details')?.setAttribute('open', '');
  panelState(title, intro, ul);
}

// ---------------------------------------------------------------- panel: settings

// showSettings draws Settings on tab (chat or chains) from fresh answers of
// the gateway: the quotas and the reading change while the panel is away.
async function showSettings(tab) {
  const seq = panelLoading('Settings');
  const [chains, models, quotas] = await Promise.all([getJSON('/api/chains'), getJSON('/api/models'), getJSON('/api/quotas')]);
  if (seq !== panel.seq || !dom.panel.open) return;
  if (!chains && !models) return panelState('Settings', h('p', { class: 'panel-empty error' }, 'The settings could not be read.'));
  const v = currentView();
  const data = {
    chains: chains?.chains || [], roles: chains?.roles || {}, models: models?.models || [], quotas: quotas?.quotas || [],
    chat: v ? { id: v.id, ...(S.chats.get(v.id) || {}) } : null, reading: v?.context || null,
  };
  panelState('Settings', settingsView(h, tab, data));
  dom.panelBody.querySelector(`.settings-tab[data-tab="${tab}"]`)?.focus();
}

// ---------------------------------------------------------------- panel: model details

// chatModel is the model the open chat's last context reading names.
function chatModel() {
  const m = currentView()?.context?.model;
  return typeof m === 'string' && m ? m : null;
}

async function showModel(name) {
  const seq = panelLoading('Model details');
  const [data, quotas] = await Promise.all([getJSON('/api/models'), getJSON('/api/quotas')]);
  if (seq !== panel.seq || !dom.panel.open) return;
  panel.quotas = quotas?.quotas ?? null;
  const models = data?.models;
  if (!Array.isArray(models) || !models.length) return panelState('Model details', h('p', { class: 'panel-empty error' }, 'The models could not be read.'));
  panel.models = models;
  const want = name || chatModel();
  drawModel(models.find((m) => m.name === want) || models[0]);
}

// limitName spells a context limit as the select offers it.
function limitName(l) {
  if (!l || l === 'auto') return 'Auto';
  if (l === 'full') return 'Full';
  return l;
}

function tokens(n) {
  return `${num(n, 0).toLocaleString()} tokens`;
}

// drawModel shows one model's request budget, when it has choices the
// context limit select, and its conversation limits (soft and hard); note
// is {ok} or {error}, a line under the context limit, or under the
// conversation limits when its for is 'compaction'.
function drawModel(m, note) {
  const limitNote = note?.for === 'compaction' ? null : note;
  const b = m.budget || {};
  const title = `Model details · ${m.name}`;
  const wrap = h('div', { class: 'model-details', 'data-model': m.name, 'data-limit': b.limit || m.context_limit || 'auto' });
  const others = (panel.models || []).filter((x) => x.name !== m.name);
  if (others.length) {
    const pick = h('select', { id: 'model-pick', class: 'model-select' });
    for (const x of panel.models) {
      const o = h('option', { value: x.name }, x.name === chatModel() ? `${x.name} (this chat)` : x.name);
      o.selected = x.name === m.name;
      pick.append(o);
    }
    wrap.append(h('div', { class: 'model-field' }, h('label', { for: 'model-pick' }, 'Model'), pick));
  }
  wrap.append(h('p', { class: 'panel-intro model-intro' },
    `${[m.provider, m.model].filter(Boolean).join(' · ') || m.name}${chatModel() === m.name ? ', the model of this chat' : ''}. `,
    'Every request must fit the request ceiling; the usage ring measures against it.'));
  const win = num(b.window, num(m.window, 0));
  const limitIn = b.limit || m.context_limit || 'auto';
  const ceilingWhy = b.policy_window && b.policy_window < win
    ? `the context limit (${limitName(limitIn)})`
    : 'the window minus the response reserve';
  const rows = [
    ['window', 'Window', tokens(win), m.window > 0 ? '' : 'unknown to the catalog: assumed'],
    ['reserve', 'Response reserve', tokens(b.reserve), 'kept free for the reply'],
    ['ceiling', 'Request ceiling', tokens(b.ceiling), ceilingWhy],
    ['mark', 'Checkpoint mark (85 %)', tokens(b.mark), 'a measured request past it checkpoints the next turn'],
    ['warn', 'Warning (72 %)', tokens(b.warn), 'the agent is told once that a checkpoint is near'],
    ['limit', 'Limit in force', limitName(limitIn),
      m.configured && limitName(m.configured) !== limitName(limitIn) ? `runtime.yaml says ${limitName(m.configured)}; chosen here` : m.configured ? 'from runtime.yaml' : 'the default'],
  ];
  const dl = h('dl', { class: 'model-facts' });
  for (const [field, label, value, hint] of rows) {
    dl.append(h('div', { class: 'model-fact' },
      h('dt', null, label),
      h('dd', { 'data-field': field }, h('span', { class: 'fact-value' }, value), hint ? h('span', { class: 'fact-hint' }, hint) : null)));
  }
  wrap.append(dl);
  const choices = Array.isArray(m.choices) ? m.choices : [];
  if (choices.length) {
    const sel = h('select', { id: 'context-limit', class: 'model-select', 'aria-describedby': 'context-limit-hint', 'data-model': m.name });
    for (const c of choices) {
      const o = h('option', { value: c.limit }, `${limitName(c.limit)} — ${tokens(c.ceiling)}`);
      o.selected = c.limit === limitIn;
      sel.append(o);
    }
    const status = h('p', { class: 'model-status', role: 'status' }, limitNote?.ok || '');
    const err = h('p', { class: 'model-error', role: 'alert' }, limitNote?.error || '');
    err.hidden = !limitNote?.error;
    wrap.append(h('div', { class: 'model-field limit-field' },
      h('label', { for: 'context-limit' }, 'Context limit'), sel,
      h('p', { id: 'context-limit-hint', class: 'fact-hint' },
        'Auto stops at 272k even on a larger window: long requests cost more on every turn and recall worse. Choose a larger step when a task needs it, or a smaller one to save cost. The next turn of every chat on this model uses it.'),
      status, err));
  } else {
    wrap.append(h('p', { class: 'model-none' },
      `The Auto limit of ${m.name} already is its whole window (a request ceiling of ${tokens(b.ceiling)}), so there is nothing to set.`));
  }
  wrap.append(compactionSection(m, note?.for === 'compaction' ? note : null));
  wrap.append(modelQuotaSection(h, m, panel.quotas));
  wrap.append(chatCostSection(h, S.current));
  panelState(title, wrap);
}

// pct spells a share of the window as a percentage: 0.2 → "20", 0.225 →
// "22.5".
function pct(r) {
  return String(Math.round(num(r, 0) * 1000) / 10);
}

// shareTokens is ratio of window in tokens, rounded down as the runtime
// rounds it.
function shareTokens(window, ratio) {
  return window > 0 && ratio > 0 ? Math.floor(window * Math.min(ratio, 1)) : 0;
}

// compactionSection shows a model's conversation limits, soft and hard,
// as shares of its window and in tokens, with runtime.yaml's shares for
// reference, and the form that moves them; note is {ok} or {error}.
function compactionSection(m, note) {
  const win = num(m.window, 0) || num(m.budget?.window, 0);
  const soft = num(m.soft_ratio, 0);
  const hard = num(m.hard_ratio, 0);
  const softTok = num(m.soft, 0);
  const hardTok = num(m.hard, 0);
  const hardCapped = hardTok < shareTokens(win, hard);
  const softCapped = softTok < shareTokens(win, soft);
  const cfg = m.configured_compaction || {};
  const chosen = num(cfg.soft_ratio, 0) !== soft || num(cfg.hard_ratio, 0) !== hard;
  const rows = [
    ['soft', `Soft (${pct(soft)} %)`, tokens(softTok), softCapped
      ? `lowered with hard, in proportion, so the warning still comes first: ${pct(soft)} % of the window would be ${tokens(shareTokens(win, soft))}`
      : 'the assistant is told to finish its step and bring its handoff up to date; nothing is cleared'],
    ['hard', `Hard (${pct(hard)} %)`, tokens(hardTok), hardCapped
      ? `capped by the checkpoint mark: ${pct(hard)} % of the window would be ${tokens(shareTokens(win, hard))}`
      : 'the conversation is written down and started fresh'],
    ['configured-compaction', 'runtime.yaml', `soft ${pct(cfg.soft_ratio)} % · hard ${pct(cfg.hard_ratio)} %`,
      chosen ? 'chosen here instead' : 'in force'],
  ];
  const dl = h('dl', { class: 'model-facts compaction-facts' });
  for (const [field, label, value, hint] of rows) {
    dl.append(h('div', { class: 'model-fact' },
      h('dt', null, label),
      h('dd', { 'data-field': field }, h('span', { class: 'fact-value' }, value), hint ? h('span', { class: 'fact-hint' }, hint) : null)));
  }
  const input = (id, label, ratio) => {
    const inp = h('input', { type: 'number', id, name: id, class: 'compaction-input', min: 1, max: 100, step: 1, required: true,
      inputmode: 'decimal', value: pct(ratio), 'aria-describedby': `${id}-tokens` });
    return h('div', { class: 'compaction-input-row' },
      h('label', { for: id }, label),
      h('span', { class: 'compaction-number' }, inp, h('span', { class: 'compaction-unit', 'aria-hidden': 'true' }, '%')),
      h('output', { id: `${id}-tokens`, for: id, class: 'fact-hint compaction-preview' }, previewText(win, ratio)));
  };
  const status = h('p', { class: 'compaction-status', role: 'status' }, note?.ok || '');
  const err = h('p', { class: 'compaction-error', role: 'alert' }, note?.error || '');
  err.hidden = !note?.error;
  const form = h('form', { class: 'compaction-form', 'data-model': m.name, 'data-window': win, novalidate: true },
    h('div', { class: 'compaction-inputs' },
      input('soft-ratio', 'Soft, % of the window', soft),
      input('hard-ratio', 'Hard, % of the window', hard)),
    h('div', { class: 'compaction-actions' },
      h('button', { type: 'submit', class: 'btn btn-primary btn-sm compaction-save' }, 'Save'),
      h('span', { class: 'fact-hint' }, 'Soft must stay below hard. Checked before every request from the next one on.')),
    status, err);
  return h('section', { class: 'compaction', 'aria-labelledby': 'compaction-title', 'data-soft': soft, 'data-hard': hard },
    h('h3', { id: 'compaction-title', class: 'compaction-title' }, 'Conversation limits'),
    h('p', { class: 'panel-intro compaction-intro' },
      'Counted on the conversation itself, as shares of the window. Lower hard and the assistant consolidates more often and spends less per turn; soft decides how early before that it wraps up its step.'),
    dl, form);
}

function previewText(win, ratio) {
  return ratio > 0 && win > 0 ? `${tokens(shareTokens(win, ratio))} of the window` : '';
}

// compactionRefusal is why the form's shares cannot be sent, or ''.
function compactionRefusal(soft, hard) {
  if (!Number.isFinite(soft) || !Number.isFinite(hard)) return 'give soft and hard as percentages of the window.';
  if (!(soft > 0) || hard > 1) return 'both must be more than 0 % and at most 100 % of the window.';
  if (!(soft < hard)) return `soft must stay below hard, and soft ${pct(soft)} % is not below hard ${pct(hard)} %.`;
  return '';
}

// setCompaction PUTs the form's soft and hard shares and redraws the model
// from the server's answer, or says why they were refused: by this page
// (soft not below hard) before anything is sent, or by the server.
async function setCompaction(form) {
  const name = form.dataset.model;
  const m = panel.models?.find((x) => x.name === name);
  const share = (id) => {
    const v = form.querySelector(`#${id}`)?.value.trim();
    return v ? Number(v) / 100 : NaN;
  };
  const soft = share('soft-ratio');
  const hard = share('hard-ratio');
  const status = form.querySelector('.compaction-status');
  const err = form.querySelector('.compaction-error');
  const refusal = compactionRefusal(soft, hard);
  if (refusal) {
    status.textContent = '';
    err.textContent = `The limits were not changed: ${refusal}`;
    err.hidden = false;
    return;
  }
  const seq = ++panel.seq;
  for (const el of form.querySelectorAll('input, button')) el.disabled = true;
  status.textContent = 'Saving…';
  err.hidden = true;
  let r = null;
  let body = null;
  try {
    r = await fetch(`/api/models/${encodeURIComponent(name)}/compaction`, {
      method: 'PUT', credentials: 'same-origin', cache: 'no-store',
      headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ soft_ratio: soft, hard_ratio: hard }),
    });
    body = await r.json().catch(() => null);
  } catch {
    r = null;
  }
  if (r?.status === 401) return goLogin();
  if (seq !== panel.seq || !dom.panel.open) return;
  if (r?.ok && body?.model) {
    const nm = body.model;
    panel.models = (panel.models || []).map((x) => (x.name === nm.name ? nm : x));
    drawModel(nm, { for: 'compaction', ok: `Saved: soft ${pct(nm.soft_ratio)} %, hard ${pct(nm.hard_ratio)} %. From the next request on: soft at ${tokens(nm.soft)}, hard at ${tokens(nm.hard)}.` });
  } else {
    const why = body?.error || (r ? `the gateway answered ${r.status}` : 'the gateway could not be reached');
    if (m) drawModel(m, { for: 'compaction', error: `The limits were not changed: ${why}` });
    else {
      for (const el of form.querySelectorAll('input, button')) el.disabled = false;
      status.textContent = '';
      err.textContent = `The limits were not changed: ${why}`;
      err.hidden = false;
    }
  }
  dom.panelBody.querySelector('.compaction-save')?.focus();
}

// setContextLimit PUTs the model's context limit and shows the budget the
// server answers with, or why it refused.
async function setContextLimit(name, limit) {
  const m = panel.models?.find((x) => x.name === name);
  if (!m) return;
  const seq = ++panel.seq;
  const sel = dom.panelBody.querySelector('#context-limit');
  if (sel) sel.disabled = true;
  const status = dom.panelBody.querySelector('.model-status');
  if (status) status.textContent = 'Saving…';
  let r = null;
  let body = null;
  try {
    r = await fetch(`/api/models/${encodeURIComponent(name)}/context_limit`, {
      method: 'PUT', credentials: 'same-origin', cache: 'no-store',
      headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ context_limit: limit }),
    });
    body = await r.json().catch(() => null);
  } catch {
    r = null;
  }
  if (r?.status === 401) return goLogin();
  if (seq !== panel.seq || !dom.panel.open) return;
  if (r?.ok && body?.model) {
    const nm = body.model;
    panel.models = panel.models.map((x) => (x.name === nm.name ? nm : x));
    drawModel(nm, { ok: `Saved: ${limitName(nm.budget?.limit || limit)}. The next turn uses a request ceiling of ${tokens(nm.budget?.ceiling)}.` });
  } else {
    const why = body?.error || (r ? `the gateway answered ${r.status}` : 'the gateway could not be reached');
    drawModel(m, { error: `The context limit was not changed: ${why}` });
  }
  dom.panelBody.querySelector('#context-limit')?.focus();
}

function closePanel() {
  if (dom.panel.open) dom.panel.close();
}

function longTime(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  return d.toLocaleString([], { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
}

function fmtBytes(n) {
  n = num(n, 0);
  return n >= 1024 ? `${(n / 1024).toFixed(n >= 10240 ? 0 : 1)} KB` : `${n} B`;
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
  // Archived chats are listed by manage.js under Archived; deleted ones nowhere.
  return S.order.map((id) => S.chats.get(id)).filter((c) => c && !c.archived && !c.delete_at);
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
  document.dispatchEvent(new CustomEvent('mirror:chats', { detail: S.order.map((id) => S.chats.get(id)).filter(Boolean) }));
}

function renderHeader() {
  const c = S.current ? S.chats.get(S.current) : null;
  const name = c ? chatName(c) : 'Mirror';
  if (dom.title.textContent !== name) dom.title.textContent = name;
  const running = S.current ? isRunning(S.current) : false;
  dom.chatState.hidden = !running;
  document.title = c ? `${running ? '● ' : ''}${name} · Mirror` : 'Mirror';
  const v = currentView();
  dom.handoffsOpen.hidden = !c;
  renderRing(v && v.loaded ? v.context : null);
}

// renderRing draws the usage ring: the request's size (or the
// conversation's, when the reading has no request) against the ceiling (or
// the window), with the soft and hard marks, or the next checkpoint.
function renderRing(ctx) {
  const el = dom.context;
  const ceiling = num(ctx?.ceiling, 0);
  const den = ceiling > 0 ? ceiling : num(ctx?.window, 0);
  if (!ctx || den <= 0) {
    el.hidden = true;
    el._sig = null;
    return;
  }
  const request = num(ctx.request, 0);
  const val = request > 0 ? request : num(ctx.used, 0);
  const soft = num(ctx.soft, 0);
  const hard = num(ctx.hard, 0);
  const next = num(ctx.next_checkpoint, 0);
  const level = ctx.hard_reached ? 'hard' : ctx.soft_reached ? 'soft' : 'ok';
  const sig = JSON.stringify([val, den, soft, hard, next, level, request > 0, ctx.line || '']);
  el.hidden = false;
  if (el._sig === sig) return;
  el._sig = sig;
  const frac = Math.max(0, Math.min(1, val / den));
  const marks = `Soft ${fmtTokens(soft)} · Hard ${fmtTokens(hard)}`;
  const lines = [
    `${request > 0 ? 'Request' : 'Conversation'}: ${val.toLocaleString()} of ${den.toLocaleString()} tokens (${ceiling > 0 ? 'the ceiling' : 'the window'}), ${Math.round(frac * 100)}%.`,
  ];
  if (next > 0) lines.push(`Next checkpoint at ${next.toLocaleString()}.`);
  lines.push(`Soft ${soft.toLocaleString()}: ${ctx.soft_reached ? 'reached' : 'not reached'} · Hard ${hard.toLocaleString()}: ${ctx.hard_reached ? 'reached' : 'not reached'}.`);
  el.dataset.level = level;
  el.title = [...lines, 'Click for the model details.'].join('\n');
  el.setAttribute('aria-valuenow', String(val));
  el.setAttribute('aria-valuemax', String(den));
  el.setAttribute('aria-valuetext', lines.join(' '));
  // The ring: a circle of circumference 100, so the dash is the percentage.
  const NS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('viewBox', '0 0 36 36');
  svg.setAttribute('class', 'ring');
  svg.setAttribute('aria-hidden', 'true');
  const circle = (cls, dash) => {
    const c = document.createElementNS(NS, 'circle');
    c.setAttribute('cx', '18');
    c.setAttribute('cy', '18');
    c.setAttribute('r', '15.9155');
    c.setAttribute('class', cls);
    if (dash != null) c.setAttribute('stroke-dasharray', `${dash} 100`);
    return c;
  };
  svg.append(circle('ring-track'), circle('ring-fill', (frac * 100).toFixed(2)));
  // Marks where the lines are: soft and hard against the window, or the
  // next checkpoint against the ceiling.
  const ticks = ceiling > 0 ? [[next, 'tick-next']] : [[soft, 'tick-soft'], [hard, 'tick-hard']];
  for (const [at, cls] of ticks) {
    if (at <= 0 || at > den) continue;
    const a = (at / den) * 2 * Math.PI - Math.PI / 2;
    const t = document.createElementNS(NS, 'line');
    t.setAttribute('x1', (18 + 12.5 * Math.cos(a)).toFixed(2));
    t.setAttribute('y1', (18 + 12.5 * Math.sin(a)).toFixed(2));
    t.setAttribute('x2', (18 + 19.5 * Math.cos(a)).toFixed(2));
    t.setAttribute('y2', (18 + 19.5 * Math.sin(a)).toFixed(2));
    t.setAttribute('class', 'tick ' + cls);
    svg.append(t);
  }
  const text = h('span', { class: 'ring-text' },
    h('span', { class: 'ring-value' }, `${fmtTokens(val)} / ${fmtTokens(den)}`),
    h('span', { class: 'ring-marks' }, marks));
  el.replaceChildren(svg, text);
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
    // The one checkpoint divider goes after the last message the
    // checkpoint in force evicted.
    if (v.before) items.push(olderItem(v));
    let cp = null;
    if (v.checkpointThrough > 0) {
      for (const e of v.history) if (e.kind === 'msg' && num(e.m.seq, 0) > 0 && num(e.m.seq, 0) <= v.checkpointThrough) cp = e;
    }
    for (const e of v.history) {
      if (e.kind === 'msg') {
        if (v.deferred.has(e.m.id)) continue;
        items.push(e.m.state === 'continuity' ? continuityItem(v, e.m) : messageItem(v, e.m));
        if (e === cp) items.push(dividerItem({ key: 'checkpoint', text: 'Earlier turns checkpointed', cls: 'checkpoint' }));
      } else if (e.kind === 'error') {
        items.push(errorItem(v, e));
      } else if (e.kind === 'diag') {
        items.push(diagItem(v, e));
      } else if (e.kind === 'divider') {
        items.push(dividerItem(e));
      } else if (e.kind === 'boundary') {
        items.push(boundaryItem(v, e));
      } else if (e.kind === 'note') {
        items.push(noteItem(e));
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
  // Nothing to scroll yet: the older page comes without asking.
  if (v && v.before && !v.loadingOlder && sc.scrollHeight <= sc.clientHeight) queueMicrotask(loadOlder);
}

// olderItem heads a chat whose older messages are not loaded yet.
function olderItem(v) {
  return {
    key: 'older',
    sig: 'older:' + v.loadingOlder,
    render(el) {
      el.className = 'older';
      const b = h('button', { type: 'button', class: 'btn btn-ghost btn-sm load-older' }, v.loadingOlder ? 'Loading earlier messages…' : 'Load earlier messages');
      b.disabled = v.loadingOlder;
      b.addEventListener('click', loadOlder);
      el.replaceChildren(b);
    },
  };
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
  const menuable = !String(m.id).startsWith('turn-');
  const menuOpen = menuable && S.menu && S.menu.chat === v.id && S.menu.message === m.id;
  // A turn's details go under its answer; a failed turn's under its error.
  const diags = role === 'assistant' && m.turn && m.state !== 'step' && m.state !== 'failed' && !m.failed ? v.diags.get(m.turn) || [] : [];
  const diagOpen = v.expanded.has(`d:${m.turn}`);
  return {
    key: `m:${m.id}`,
    sig: JSON.stringify(['msg', oid(m), notice, v.errors.get(m.id) || '', menuOpen, diags.length, diagOpen]),
    render(el) {
      // A failed turn's partial answer: failed live, state failed when stored.
      const failed = m.failed || m.state === 'failed';
      el.className = `msg ${role}` + (m.stopped ? ' stopped' : '') + (failed ? ' failed' : '');
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
      } else if (m.text || !m.attachments?.length) {
        body.append(h('div', { class: 'text' }, m.text || ''));
      }
      const files = attachmentsEl(m, { large: role === 'assistant' });
      if (files) body.append(files);
      el.classList.toggle('pinned', Boolean(m.pinned));
      const meta = h('div', { class: 'meta' });
      if (m.stopped) meta.append(h('span', { class: 'stopped-mark' }, 'Stopped'));
      if (failed) meta.append(h('span', { class: 'failed-mark' }, 'Incomplete'));
      if (m.time) meta.append(h('time', { datetime: m.time }, shortTime(m.time)));
      let menu = null;
      if (menuable) {
        const menuId = `menu-${m.id}`;
        meta.append(h('button', { class: 'msg-menu-btn', type: 'button', 'aria-label': 'Message actions', 'aria-haspopup': 'menu',
          'aria-expanded': String(menuOpen), 'aria-controls': menuOpen ? menuId : null, title: 'Message actions' }, '⋯'));
        if (menuOpen) {
          menu = h('div', { class: 'msg-menu', role: 'menu', id: menuId, 'aria-label': 'Message actions' },
            h('button', { class: 'pin', type: 'button', role: 'menuitem' }, m.pinned ? 'Unpin from agent context' : 'Pin to agent context'));
        }
      }
      const pinned = m.pinned ? h('div', { class: 'pinned-mark', title: 'The next checkpoint keeps this message whole' },
        h('span', { class: 'pin-icon', 'aria-hidden': 'true' }), 'Pinned to agent context') : null;
      const parts = [];
      if (role === 'assistant') parts.push(avatar());
      const col = h('div', { class: 'col' }, body, meta, menu, pinned, diagDetails(v, m.turn, diags), ...noticeEls(v, m.id));
      if (menuOpen) requestAnimationFrame(() => col.querySelector('.msg-menu button')?.focus());
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
        for (const t of r.tools) {
          const label = t.progress && !t.done ? `${t.name}: ${t.progress}` : t.name;
          tools.append(h('span', { class: 'tool' + (t.done ? ' done' : '') + (t.failed ? ' failed' : ''), role: t.progress ? 'status' : null }, label));
        }
        col.append(tools);
      }
      col.append(body);
      if (r.wait) col.append(waitNotice(h, r.wait));
      el.replaceChildren(avatar(), col);
    },
  };
}

function errorItem(v, e) {
  const diags = e.turn ? v.diags.get(e.turn) || [] : [];
  const open = v.expanded.has(`d:${e.turn}`);
  return {
    key: e.key,
    sig: JSON.stringify(['err', e.text, e.cls, e.title || '', diags.length, open]),
    render(el) {
      el.className = 'msg error' + (e.extra ? ' ' + e.extra : '');
      el.setAttribute('role', 'alert');
      if (e.turn) el.dataset.turn = e.turn;
      el.replaceChildren(h('div', { class: 'bubble' }, h('strong', null, e.title || 'The reply failed'), h('span', null, ': ' + e.text), e.cls ? h('span', { class: 'error-class' }, e.cls) : null),
        diagDetails(v, e.turn, diags));
    },
  };
}

// diagDetails is the expandable details of a turn: one row per model
// attempt (and hook block), as the record kept them; null when none.
function diagDetails(v, turn, diags) {
  if (!diags.length) return null;
  const key = `d:${turn}`;
  const d = h('details', { class: 'diagnostics', 'data-turn': turn, open: v.expanded.has(key) });
  const attempts = diags.filter((x) => x.kind === 'attempt').length;
  d.append(h('summary', null, `Details · ${attempts === 1 ? '1 model attempt' : `${attempts} model attempts`}`));
  const list = h('ol', { class: 'diag-list' });
  for (const x of diags) list.append(diagRow(x));
  d.append(list);
  d.addEventListener('toggle', () => {
    if (d.open) v.expanded.add(key);
    else v.expanded.delete(key);
  });
  return d;
}

// diagRow is one diagnostic, each fact in a span[data-field].
function diagRow(x) {
  const li = h('li', { class: 'diag', 'data-kind': x.kind || '', 'data-outcome': x.outcome || '' });
  const field = (name, label, value) => {
    if (value === undefined || value === null || value === '' || value === 0) return;
    li.append(h('span', { class: 'diag-field', 'data-field': name }, h('span', { class: 'diag-label' }, label + ' '), String(value)));
  };
  if (x.kind === 'attempt') {
    field('attempt', '#', x.attempt);
    field('purpose', 'for', x.purpose && x.purpose !== 'turn' ? x.purpose : '');
    field('model', 'asked', x.remote ? `${x.model} (${x.remote})` : x.model);
    field('answered', 'answered by', x.answered);
    field('outcome', 'outcome', x.outcome);
    field('status', 'HTTP', x.status);
    field('latency', 'took', x.latency_ms !== undefined ? `${x.latency_ms} ms` : '');
    field('request-id', 'request id', x.request_id);
  } else {
    field('kind', x.kind === 'hook' ? 'hook' : 'command', x.name);
    field('outcome', 'outcome', x.outcome);
  }
  field('error', '—', x.error);
  return li;
}

// diagItem is a diagnostic of no turn (a failed command), collapsed.
function diagItem(v, e) {
  const key = `dx:${e.seq}`;
  const open = v.expanded.has(key);
  return {
    key: e.key,
    sig: JSON.stringify(['diag', e.seq, open]),
    render(el) {
      el.className = 'note diag-note';
      el.dataset.seq = String(e.seq);
      const d = h('details', { class: 'diagnostics', open }, h('summary', null, `${e.d.name || 'A command'} failed`), h('ol', { class: 'diag-list' }, diagRow(e.d)));
      d.addEventListener('toggle', () => {
        if (d.open) v.expanded.add(key);
        else v.expanded.delete(key);
      });
      el.replaceChildren(d);
    },
  };
}

function dividerItem(e) {
  return {
    key: e.key,
    sig: 'div:' + e.text + ':' + (e.cls || ''),
    render(el) {
      el.className = 'divider' + (e.cls ? ' ' + e.cls : '');
      el.setAttribute('role', 'separator');
      el.replaceChildren(h('span', null, e.text));
    },
  };
}

function noteItem(e) {
  return {
    key: e.key,
    sig: 'note:' + e.text,
    render(el) {
      el.className = 'note' + (e.cls ? ' ' + e.cls : '');
      el.setAttribute('role', 'status');
      el.replaceChildren(h('span', null, e.text));
    },
  };
}

function noteLink(name) {
  return h('a', { class: 'note-link', href: `/api/memory/${encodeURIComponent(name)}`, 'data-note': name, title: name }, S.noteTitles.get(name) || noteTitle(name));
}

// noteTitle makes a memory note's file name readable: the date and chat
// prefix and .md go.
function noteTitle(name) {
  const t = String(name).replace(/\.md$/, '').replace(/^\d{4}-\d{2}-\d{2}-c_[0-9a-zA-Z]+-/, '').replace(/-/g, ' ');
  return t || name;
}

function boundaryItem(v, e) {
  const open = v.expanded.has(e.key);
  const recId = `record-${e.seq}`;
  return {
    key: e.key,
    sig: JSON.stringify(['boundary', e.rev, open, e.record.length]),
    render(el) {
      el.className = 'boundary';
      el.dataset.boundary = String(e.seq);
      el.dataset.reason = e.reason || '';
      el.dataset.continued = String(Boolean(e.continued));
      el.setAttribute('role', 'group');
      el.setAttribute('aria-label', 'Conversation boundary');
      const why = e.reason === 'hard' ? 'Hard limit reached' : e.reason === 'assistant' ? 'The assistant consolidated' : 'Consolidated';
      const then = e.continued ? 'the work carried on from the record below' : 'the conversation ended here and waits for you';
      const line = h('div', { class: 'boundary-line', role: 'separator' },
        h('span', { class: 'boundary-title' }, h('span', { class: 'boundary-icon', 'aria-hidden': 'true' }), 'Conversation archived and cleared'));
      const summary = h('p', { class: 'boundary-summary' }, h('strong', null, why), ' — ', then, '.');
      const parts = [summary];
      if (e.why) parts.push(h('p', { class: 'boundary-why' }, e.why));
      const notes = Array.isArray(e.notes) ? e.notes : [];
      if (notes.length) {
        const list = h('span', { class: 'boundary-notes-list' });
        notes.forEach((n, i) => {
          if (i) list.append(', ');
          list.append(noteLink(n));
        });
        parts.push(h('p', { class: 'boundary-notes' }, `Memory ${notes.length === 1 ? 'note' : 'notes'} written: `, list));
      }
      const toggle = h('button', { class: 'toggle-record btn btn-ghost btn-sm', type: 'button', 'aria-expanded': String(open), 'aria-controls': recId },
        open ? 'Hide the handoff record' : 'Show the handoff record');
      parts.push(h('div', { class: 'boundary-actions' }, toggle));
      const rec = h('div', { class: 'record md', id: recId });
      rec.hidden = !open;
      if (open) rec.append(renderMarkdown(e.record || '(no record)'));
      parts.push(rec);
      el.replaceChildren(line, h('div', { class: 'boundary-card' }, ...parts));
    },
  };
}

// continuityItem shows the message the runtime opened the fresh
// conversation with as a runtime note: its opening in full, the record it
// carries behind a toggle.
function continuityItem(v, m) {
  const key = `n:${m.id}`;
  const open = v.expanded.has(key);
  const text = String(m.text || '');
  const cut = text.search(/^# /m);
  const intro = cut > 0 ? text.slice(0, cut) : text;
  const rest = cut > 0 ? text.slice(cut) : '';
  return {
    key: `m:${m.id}`,
    sig: JSON.stringify(['cont', oid(m), open]),
    render(el) {
      el.className = 'msg runtime-note';
      el.dataset.message = m.id;
      el.dataset.state = 'continuity';
      el.removeAttribute('data-mode');
      el.removeAttribute('data-client-id');
      const card = h('div', { class: 'runtime-card', role: 'note', 'aria-label': 'Runtime note' });
      card.append(h('p', { class: 'runtime-label' }, h('span', { class: 'runtime-icon', 'aria-hidden': 'true' }), 'Runtime note · the fresh conversation opened with this'));
      const md = h('div', { class: 'md' });
      md.append(renderMarkdown(intro));
      card.append(md);
      if (rest) {
        const id = `cont-${m.id}`;
        card.append(h('button', { class: 'toggle-record btn btn-ghost btn-sm', type: 'button', 'aria-expanded': String(open), 'aria-controls': id },
          open ? 'Hide the record it carries' : 'Show the record it carries'));
        const full = h('div', { class: 'record md', id });
        full.hidden = !open;
        if (open) full.append(renderMarkdown(rest));
        card.append(full);
      }
      el.replaceChildren(h('div', { class: 'col' }, card));
    },
  };
}

function pendingItem(v, m) {
  const ed = v.editing.get(m.id);
  const busy = v.busy.get(m.id) || '';
  const mode = m.mode === 'redirect' ? 'redirect' : 'queue';
  return {
    key: `m:${m.id}`,
    sig: JSON.stringify(['pending', m.text, mode, busy, ed ? [ed.saving, ed.picked, ed.error] : null, v.notices.get(m.id) || '', v.errors.get(m.id) || '', attachmentsSig(m)]),
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
      const bubble = h('div', { class: 'bubble' }, m.text || !m.attachments?.length ? h('div', { class: 'text' }, m.text || '') : null,
        attachmentsEl(m, { removable: true, busy: Boolean(busy) }));
      el.replaceChildren(h('div', { class: 'col' }, bubble, bar, ...noticeEls(v, m.id)));
    },
  };
}

function outboxItem(e) {
  const waiting = !S.connected;
  return {
    key: `o:${e.client_id}`,
    sig: JSON.stringify(['outbox', e.text, e.error, waiting, attachmentsSig(e)]),
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
      const col = h('div', { class: 'col' }, h('div', { class: 'bubble' }, e.text ? h('div', { class: 'text' }, e.text) : null, attachmentsEl(e)), bar);
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
      // APPROVAL: {id, call: CALL, tool, turn, requested_at}.
      const tool = a.tool || a.call?.name || 'a tool';
      const args = typeof a.call?.arguments === 'string' ? a.call.arguments : '';
      const parts = [h('p', { class: 'card-title' }, 'Permission needed'), h('p', null, 'The assistant wants to use ', h('code', null, String(tool)), '.')];
      if (args) parts.push(h('pre', { class: 'card-args' }, clip(args, 2000)));
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
      // RECOVERY: {id, call: CALL, turn, created_at, process?}.
      const tool = r.call?.name || 'a tool call';
      const parts = [h('p', { class: 'card-title' }, 'A tool call was interrupted'),
        h('p', null, h('code', null, String(tool)), ' was running when the connection or the process went away. Repeat it, or skip it and carry on?')];
      // What the gateway found of the call's process when it came back.
      if (r.process === 'stopped') parts.push(h('p', { class: 'card-text' }, 'Its process was still running when the gateway came back; it was stopped, so a repeat does not run beside it.'));
      else if (r.process === 'ended') parts.push(h('p', { class: 'card-text' }, 'Its process was no longer running when the gateway came back.'));
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
  if (n >= 1e6) return (n / 1e6).toFixed(n >= 1e7 ? 0 : 1).replace(/\.0$/, '') + 'M';
  if (n >= 1e3) return (n / 1e3).toFixed(n >= 1e4 ? 0 : 1).replace(/\.0$/, '') + 'k';
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

  const files = initAttach({ form: dom.composer, input: dom.input, onChange: render, chat: () => S.current });
  dom.composer.addEventListener('submit', (e) => {
    e.preventDefault();
    const text = dom.input.value.trim();
    if (!text && !files.count()) return;
    if (files.busy()) return files.afterUploads(() => dom.composer.requestSubmit());
    // A command leaves the attached files for the next message.
    sendMessage(S.current, text, S.redirect ? 'redirect' : 'queue', isCommand(text) !== false ? [] : files.take());
    dom.input.value = '';
    showCommandHints();
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
  dom.input.addEventListener('input', () => {
    autosize(dom.input);
    showCommandHints();
  });
  dom.commandHints?.addEventListener('click', (e) => {
    const b = e.target.closest('button.command-hint');
    if (!b) return;
    const c = (S.commands || []).find((x) => x.name === b.dataset.command);
    dom.input.value = c && c.args ? `${c.name} ` : c ? c.name : '';
    autosize(dom.input);
    showCommandHints();
    dom.input.focus();
  });

  dom.stop.addEventListener('click', stopTurn);
  dom.mode.addEventListener('click', () => {
    S.redirect = !S.redirect;
    render();
    dom.input.focus();
  });

  dom.messages.addEventListener('click', (e) => {
    const link = e.target.closest('a.note-link');
    if (link && !e.ctrlKey && !e.metaKey && !e.shiftKey && e.button === 0) {
      e.preventDefault();
      openPanel('memory', link.dataset.note);
      return;
    }
    const btn = e.target.closest('button');
    if (!btn || btn.disabled) return;
    const v = currentView();
    if (btn.classList.contains('copy')) return copyCode(btn);
    if (!v) return;
    if (btn.classList.contains('toggle-record')) {
      const b = btn.closest('[data-boundary]');
      if (b) return toggleExpanded(v, `b:${b.dataset.boundary}`);
      const n = btn.closest('.runtime-note[data-message]');
      if (n) return toggleExpanded(v, `n:${n.dataset.message}`);
      return;
    }
    const msg = btn.closest('[data-message]');
    const id = msg && msg.dataset.message;
    if (id) {
      if (btn.classList.contains('msg-menu-btn')) return toggleMenu(v, id);
      if (btn.classList.contains('pin')) return pinMessage(v, id);
      if (btn.classList.contains('edit')) return startEdit(v, id);
      if (btn.classList.contains('delete')) return deleteMessage(v, id);
      if (btn.classList.contains('save')) return saveEdit(v, id, msg.querySelector('textarea').value);
      if (btn.classList.contains('cancel')) return cancelEdit(v, id);
      if (btn.classList.contains('remove-attachment')) return removeAttachment(v, id, btn.dataset.sha256);
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

  // Right-click a message for its menu (unless text is selected, so the
  // browser's own menu still copies it).
  dom.messages.addEventListener('contextmenu', (e) => {
    const msg = e.target.closest('.msg.user[data-message], .msg.assistant[data-message]');
    const v = currentView();
    if (!msg || !v || msg.classList.contains('streaming') || String(getSelection() || '').trim()) return;
    if (!msg.querySelector('.msg-menu-btn')) return;
    e.preventDefault();
    S.menu = { chat: v.id, message: msg.dataset.message };
    render();
  });
  document.addEventListener('click', (e) => {
    if (S.menu && !e.target.closest('.msg-menu, .msg-menu-btn')) closeMenu(false);
  });
  dom.memoryOpen.addEventListener('click', () => {
    closeSidebar();
    openPanel('memory');
  });
  dom.handoffsOpen.addEventListener('click', () => {
    if (S.current) openPanel('handoffs', S.current);
  });
  dom.modelOpen.addEventListener('click', () => openPanel('model'));
  dom.settingsOpen.addEventListener('click', () => {
    closeSidebar();
    openPanel('settings');
  });
  startTicker(dom.messages);
  dom.context.addEventListener('click', () => openPanel('model'));
  dom.context.addEventListener('keydown', (e) => {
    if (e.key !== 'Enter' && e.key !== ' ') return;
    e.preventDefault();
    openPanel('model');
  });
  dom.panel.addEventListener('submit', (e) => {
    const form = e.target.closest('.compaction-form');
    if (!form) return;
    e.preventDefault();
    setCompaction(form);
  });
  dom.panel.addEventListener('input', (e) => {
    const inp = e.target.closest('.compaction-input');
    if (!inp) return;
    const out = inp.form?.querySelector(`output[for="${inp.id}"]`);
    if (out) out.textContent = previewText(num(Number(inp.form.dataset.window), 0), Number(inp.value) / 100);
  });
  dom.panel.addEventListener('change', (e) => {
    const sel = e.target;
    if (sel.id === 'context-limit') return setContextLimit(sel.dataset.model, sel.value);
    if (sel.id === 'model-pick') {
      const m = panel.models?.find((x) => x.name === sel.value);
      if (m) drawModel(m);
    }
  });
  dom.panelClose.addEventListener('click', closePanel);
  dom.panelBack.addEventListener('click', () => showMemory());
  dom.panel.addEventListener('click', (e) => {
    if (e.target === dom.panel) return closePanel(); // the backdrop
    const item = e.target.closest('button.note-item');
    if (item) showNote(item.dataset.note);
    const tab = e.target.closest('button.settings-tab');
    if (tab) showSettings(tab.dataset.tab);
    const model = e.target.closest('button.open-model');
    if (model) {
      // Same dialog, so the focus still goes back to what opened Settings.
      panel.kind = 'model';
      showModel(model.dataset.model);
    }
  });
  dom.panel.addEventListener('close', () => {
    // The close event comes late: the panel may be open again meanwhile.
    if (!dom.panel.open) panel.opener?.focus?.();
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
    if (sc.scrollTop < 200) loadOlder();
  }, { passive: true });

  dom.toasts.addEventListener('click', (e) => {
    if (e.target.closest('.toast-close')) e.target.closest('.toast').remove();
  });

  dom.menu.addEventListener('click', () => (dom.app.dataset.sidebar === 'open' ? closeSidebar() : openSidebar()));
  dom.backdrop.addEventListener('click', closeSidebar);
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && S.menu) {
      e.preventDefault();
      closeMenu(true);
      return;
    }
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
