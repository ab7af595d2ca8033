// Mirror browser client: what each server frame does. The chat state
// changes go through reducer.js; here are the requests' answers, the
// outbox, toasts, the fetches a change needs, and the render.

import { createChat, selectChat, sendMessage, settleOutbox, showCommandHints, subscribe, transmit } from './actions.js';
import { onToolRevoked } from './approvals.js';
import { pageChats } from './chatlist.js';
import { readEvent } from './events.js';
import { commandNote } from './notes.js';
import { hashChat, setHash } from './nav.js';
import { dom } from './page.js';
import { applyHistory, applyResumed, applySnapshot, IN_USE_TEXT, markInUse, num, reduceEvent } from './reducer.js';
import { render, renderList, setStatus, toast } from './render.js';
import { getJSON, goLogin, takeReq } from './socket.js';
import { mostRecentChat, S, saveOutbox, upsertChat } from './state.js';

export function handleFrame(f) {
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
    case 'tool.revoked':
      return onToolRevoked(f);
    case 'command.result':
      return onCommandResult(f);
    default:
      if (f.chat && typeof f.chat === 'string') return onChatEvent(f);
      takeReq(f);
  }
}

// onCommandResult shows what a chat command answered as a note in its
// chat's conversation, after what is there (notes.js): not a toast over
// the buttons. Not stored: a reload shows the record only.
function onCommandResult(f) {
  const meta = takeReq(f);
  const id = typeof f.chat === 'string' && f.chat ? f.chat : meta?.chat;
  const v = id ? S.views.get(id) : null;
  if (!v) return toast(String(f.text || 'Done.'));
  v.history.push(commandNote(f.text, meta?.text, v.lastSeq));
  if (id === S.current) S.stick = true;
  render();
}

export function onWelcome(f) {
  S.connected = true;
  S.attempt = 0;
  S.session = f.session || null;
  S.commands = Array.isArray(f.commands) ? f.commands.filter((c) => c && typeof c.name === 'string') : [];
  showCommandHints();
  setStatus('connected');
  const chats = new Map();
  for (const c of Array.isArray(f.chats) ? f.chats : []) if (c && c.id) chats.set(c.id, c);
  S.chats = chats;
  // The server's order, as sent: its index orders by update time to the
  // nanosecond, then by id. Sorting again here by Date.parse (milliseconds)
  // would reorder chats updated within one millisecond, and the pages that
  // follow continue the server's order, not ours.
  S.order = [...chats.keys()];
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

export function onChatCreated(f) {
  const meta = takeReq(f);
  upsertChat(f.chat);
  if (meta && meta.kind === 'create' && f.chat && f.chat.id) {
    selectChat(f.chat.id);
    if (meta.then) sendMessage(f.chat.id, meta.then.text, meta.then.mode, meta.then.attachments);
    dom.input.focus();
  }
  render();
}

// subscribedView settles a chat.snapshot or chat.resumed frame's request
// and files its chat; it returns the view the frame is for when that chat
// is open and subscribed, else null (having rendered the list).
function subscribedView(f) {
  takeReq(f);
  const id = f.chat && f.chat.id;
  if (!id) return null;
  upsertChat(f.chat);
  const v = S.views.get(id);
  if (!v || id !== S.current || !v.subscribed) {
    render();
    return null;
  }
  return v;
}

export function onSnapshot(f) {
  const v = subscribedView(f);
  if (!v) return;
  applySnapshot(S, v, f);
  fetchWanted(v);
  fetchBoundaryMeta(v);
  S.stick = true;
  render();
}

// onHistory puts an older page of the transcript (chat.history) above what
// the view holds, and keeps the reader's place.
export function onHistory(f) {
  takeReq(f);
  const v = S.views.get(f.chat);
  if (!v || !v.loaded) return;
  applyHistory(S, v, f);
  fetchWanted(v);
  fetchBoundaryMeta(v);
  if (f.chat !== S.current) return;
  const sc = dom.scroller;
  const fromBottom = sc.scrollHeight - sc.scrollTop;
  render();
  sc.scrollTop = sc.scrollHeight - fromBottom;
}

export function onResumed(f) {
  const v = subscribedView(f);
  if (!v) return;
  applyResumed(S, v, f);
  render();
}

export function onChatEvent(f) {
  const meta = takeReq(f);
  const ev = readEvent(f);
  if (!ev) {
    if (meta) render();
    return; // a type this client does not know
  }
  if (ev.type === 'message.accepted' && ev.message) settleOutbox(ev.message.client_id || (meta && meta.kind === 'send' ? meta.client_id : ''));
  if (reduceEvent(S, ev)) {
    fetchWanted(S.views.get(ev.chat));
    render();
  } else if (meta) {
    render();
  }
}

// fetchWanted fetches what the reducer left wanted on the view.
function fetchWanted(v) {
  if (!v.wantTitles) return;
  v.wantTitles = false;
  loadNoteTitles(v);
}

// fetchBoundaryMeta asks for what a snapshot's boundary messages do not
// carry: the reason (past handoffs) and the memory notes each wrote.
export async function fetchBoundaryMeta(v) {
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
export async function loadNoteTitles(v) {
  keepTitles(await getJSON('/api/memory'));
  for (const e of v.history) if (e.kind === 'boundary') e.rev = (e.rev || 0) + 1;
  render();
}

export function keepTitles(list) {
  for (const n of list?.notes || []) if (n.name && n.title) S.noteTitles.set(n.name, n.title);
}

export function onError(f) {
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
    case 'approval': {
      // Refused (Allow for this chat past the person's role, say): the
      // card can be answered again.
      const a = v?.approvals.get(meta.approval);
      if (a) a._answering = false;
      toast(msg);
      break;
    }
    default:
      toast(msg);
  }
  render();
}

export function onRecoveryAnswered(f) {
  const meta = takeReq(f);
  if (meta && meta.kind === 'recovery' && f.delivered === false) {
    const v = S.views.get(meta.chat);
    const r = v && v.recoveries.get(meta.recovery);
    if (r) r._held = true;
  }
  render();
}

export function describeCode(code) {
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
