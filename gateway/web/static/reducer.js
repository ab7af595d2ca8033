// Mirror browser client: the events reducer.
//
// What the server's frames about a chat do to the client's state, with no
// DOM, no socket and no timers, so it runs under node's test runner
// (gateway/web/testdata/reducer.test.mjs, run by TestReducerInNode). st is
// the client's state (state.js's S: views, current, boundaries, rekeys);
// v is one chat's view (newView). What needs the network after a change
// is left as a flag on the view for frames.js: wantTitles (the memory
// notes' titles for a boundary's links).

import { readEvent } from './events.js';
import { withTranscripts } from './media.js';
import { waitFrom } from './quota.js';
import { heldNote, interrupted, interruptedNote } from './notes.js';

// IN_USE_TEXT is what a message shows when the assistant picked it up
// while it was being edited or deleted.
export const IN_USE_TEXT = 'Already in use — the assistant picked this message up.';

// newView is the state of one chat as the client holds it.
export function newView(id) {
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
    wantTitles: false, // a boundary with notes came: frames.js loads the notes' titles
    allowedTools: [], // tools allowed for every call of the chat (CHAT.allowed_tools, tool.allowed)
  };
}

// NOT_DURABLE are the events that are not stored: they carry the seq of
// the last durable event, so the seq check would drop them.
const NOT_DURABLE = new Set(['reply.delta', 'quota.wait', 'tool.progress']);

// reduceEvent applies a chat event, as readEvent (events.js) read it, to
// the view of the chat shown, when this socket is subscribed to it. It
// returns whether the view took it: false for another chat, a snapshot
// still awaited (it is authoritative and comes first) or a seq already
// seen (a resume replays from since; nothing is applied twice).
export function reduceEvent(st, ev) {
  const v = ev.chat === st.current ? st.views.get(ev.chat) : null;
  if (!v || !v.subscribed) return false; // not open here: chat.updated keeps the list current
  if (NOT_DURABLE.has(ev.type)) {
    APPLY[ev.type](st, v, ev);
    return true;
  }
  if (v.opening || ev.seq <= v.lastSeq) return false;
  v.lastSeq = ev.seq;
  APPLY[ev.type]?.(st, v, ev);
  return true;
}

// applySnapshot replaces the view's transcript with a chat.snapshot's.
export function applySnapshot(st, v, f) {
  v.loaded = true;
  v.opening = false;
  v.lastSeq = num(f.seq, num(f.chat.seq, 0));
  v.history = [];
  v.index = new Map();
  v.pending = new Map();
  v.diags = new Map();
  applyPage(st, v, f, (m) => {
    if (m.role === 'boundary') addBoundary(st, v, { seq: m.seq, record: m.text, time: m.time });
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
  v.running = f.running ? runningFrom(f.running) : null;
  if (v.running && f.running.wait) v.running.wait = waitFrom(f.running.wait);
  v.approvals = listToMap(f.approvals);
  v.recoveries = listToMap(f.recoveries);
  v.allowedTools = toolList(f.chat);
  reconcileEditing(v);
}

// toolList is a CHAT's allowed_tools, sorted.
const toolList = (c) => (Array.isArray(c?.allowed_tools) ? c.allowed_tools.filter((t) => typeof t === 'string').sort() : []);

// applyHistory puts an older page of the transcript (chat.history) above
// what the view holds.
export function applyHistory(st, v, f) {
  v.loadingOlder = false;
  const newer = v.history;
  v.history = [];
  applyPage(st, v, f, (m) => {
    if (v.index.has(m.id)) return;
    if (m.role === 'boundary') {
      if (!newer.some((e) => e.key === `b:${m.seq}`)) addBoundary(st, v, { seq: m.seq, record: m.text, time: m.time });
    } else if (m.role === 'user' || m.role === 'assistant') addHistory(v, m);
  }, newer);
  v.history.push(...newer);
  v.before = f.more ? num(f.before, 0) : 0;
  inferContinued(v);
  v.metaAsked = false;
}

// applyResumed takes a chat.resumed: the events since the view's lastSeq
// follow it (reduceEvent); it brings what is not an event (the queue, the
// running turn, open approvals and recoveries).
export function applyResumed(st, v, f) {
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
  if (f.chat && typeof f.chat === 'object') v.allowedTools = toolList(f.chat);
  reconcileEditing(v);
}

// applyPage puts a snapshot's or history page's messages into the view in
// order, each through add, with the page's marks where they fell among
// them (mark.at messages before each), drawn by the same applyMark the
// live events go through: a reload draws what live drew. newer is what
// the view holds already (a history page goes above it); a mark it holds
// is not added again.
export function applyPage(st, v, f, add, newer = []) {
  const msgs = (Array.isArray(f.messages) ? f.messages : []).filter((m) => m && m.id && m.state !== 'deleted');
  const marks = Array.isArray(f.marks) ? f.marks : [];
  let k = 0;
  const marksUpTo = (i) => {
    for (; k < marks.length && num(marks[k].at, 0) <= i; k++) {
      const ev = readEvent(marks[k]);
      if (!ev || newer.some((e) => e.seq === ev.seq && e.mark)) continue;
      applyMark(st, v, ev, false);
    }
  };
  msgs.forEach((m, i) => {
    marksUpTo(i);
    add(m);
  });
  marksUpTo(Infinity);
}

// reconcileEditing keeps edit state only for messages that can still be
// edited, and marks the ones picked meanwhile.
export function reconcileEditing(v) {
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

// APPLY applies each event type, as its reader (events.js) read it, to the
// chat's view. Types without an entry (assistant.message, runtime.context,
// handoff.updated, rewind, chat.created) only advance seq.
export const APPLY = {
  'message.accepted'(st, v, { message: m }) {
    if (!m || !m.id) return;
    if (m.state === 'picked' || m.state === 'done') addHistory(v, m);
    else if (m.state !== 'deleted' && !v.index.has(m.id)) v.pending.set(m.id, m);
  },
  'message.updated'(st, v, { message: m }) {
    if (!m || !m.id) return;
    if (v.pending.has(m.id)) v.pending.set(m.id, { ...v.pending.get(m.id), ...m });
    else if (v.index.has(m.id)) v.index.get(m.id).m = { ...v.index.get(m.id).m, ...m };
    if (v.editing.get(m.id)?.saving) v.editing.delete(m.id);
    v.errors.delete(m.id);
    v.busy.delete(m.id);
  },
  'message.transcribed'(st, v, ev) {
    const m = ev.message;
    if (!m || !m.id) return;
    if (v.pending.has(m.id)) v.pending.set(m.id, withTranscripts(v.pending.get(m.id), ev));
    else if (v.index.has(m.id)) v.index.get(m.id).m = withTranscripts(v.index.get(m.id).m, ev);
  },
  'file.sent'(st, v, { message: m }) {
    if (m && m.id) addHistory(v, { role: 'assistant', state: 'done', ...m });
  },
  'message.deleted'(st, v, { message: m }) {
    if (!m || !m.id) return;
    v.pending.delete(m.id);
    v.editing.delete(m.id);
    v.deferred.delete(m.id);
    v.busy.delete(m.id);
    v.errors.delete(m.id);
  },
  'message.picked'(st, v, { message: m }) {
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
  'turn.started'(st, v, ev) {
    if (!v.running || v.running.turn !== ev.turn) v.running = runningFrom({ turn: ev.turn, text: '', seq: ev.seq });
  },
  'reply.delta'(st, v, ev) {
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
  'quota.wait'(st, v, ev) {
    // It says what the running turn does now, until a delta, a tool call
    // or the turn's end shows it went on.
    if (!ev.turn || v.finished.has(ev.turn)) return;
    if (!v.running || v.running.turn !== ev.turn) v.running = runningFrom({ turn: ev.turn, text: '', seq: ev.seq });
    v.running.wait = waitFrom(ev);
  },
  'turn.finished'(st, v, ev) {
    endTurn(v, ev.turn);
    const m = ev.message
      ? { ...ev.message, text: ev.message.text || ev.reply }
      : { id: `turn-${ev.turn}`, role: 'assistant', text: ev.reply, turn: ev.turn, seq: ev.seq };
    if (ev.stopped) m.stopped = true;
    showReply(st, v, ev.turn, m);
    // Stop held the queue: say so where it happened (notes.js).
    if (ev.held > 0) addItem(v, heldNote(ev));
  },
  'turn.failed'(st, v, ev) {
    endTurn(v, ev.turn);
    if (ev.message && ev.message.text) showReply(st, v, ev.turn, { ...ev.message, failed: true });
    applyMark(st, v, ev, true);
  },
  'tool.call'(st, v, ev) {
    const r = v.running;
    if (!r) return;
    r.wait = null; // the request went through
    r.tools.push({ id: ev.call.id, name: ev.call.name || 'tool', done: false });
  },
  'tool.result'(st, v, ev) {
    const r = v.running;
    if (!r) return;
    const t = r.tools.find((x) => x.id === ev.callId && !x.done) || r.tools.find((x) => !x.done);
    if (t) {
      t.done = true;
      t.failed = ev.failed;
    }
  },
  'tool.progress'(st, v, ev) {
    // What a running call (an MCP tool) reports, shown on its chip until
    // its result.
    const r = v.running;
    if (!r || !ev.call.id) return;
    const t = r.tools.find((x) => x.id === ev.call.id);
    if (t && !t.done) t.progress = ev.text;
  },
  'approval.requested'(st, v, { approval: a }) {
    if (a && a.id) v.approvals.set(a.id, a);
  },
  'approval.resolved'(st, v, ev) {
    v.approvals.delete(ev.id);
  },
  'tool.allowed'(st, v, ev) {
    const rest = v.allowedTools.filter((t) => t !== ev.tool);
    v.allowedTools = ev.allowed && ev.tool ? [...rest, ev.tool].sort() : rest;
  },
  'recovery.requested'(st, v, { recovery: r }) {
    if (r && r.id) v.recoveries.set(r.id, r);
  },
  'recovery.resolved'(st, v, ev) {
    v.recoveries.delete(ev.id);
  },
  context(st, v, { context: c }) {
    // A reading without its model name keeps the one the chat had.
    v.context = !c.model && v.context?.model ? { ...c, model: v.context.model } : c;
  },
  checkpoint(st, v, ev) {
    v.checkpointThrough = ev.through;
  },
  'message.pinned'(st, v, ev) {
    const e = ev.id ? v.index.get(ev.id) : null;
    if (e) e.m = { ...e.m, pinned: ev.pinned };
  },
  continuity(st, v, { message: m }) {
    if (m && m.id) addHistory(v, { ...m, state: 'continuity' });
  },
  clear(st, v, ev) {
    v.checkpointThrough = 0;
    applyMark(st, v, ev, true);
  },
  'boundary.failed'(st, v, ev) {
    applyMark(st, v, ev, true);
  },
  compact(st, v, ev) {
    applyMark(st, v, ev, true);
  },
  diagnostic(st, v, ev) {
    applyMark(st, v, ev, true);
  },
  boundary(st, v, ev) {
    v.checkpointThrough = 0;
    applyMark(st, v, ev, true);
  },
};

// applyMark draws a stored event that is no message, as events.js read
// it: a /clear divider, a /compact note, a boundary's details, a boundary
// that did not happen, a failed turn's error, a diagnostic. Live events
// and the marks of a snapshot or history page (live false) come through
// here alike.
export function applyMark(st, v, ev, live) {
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
      // A restart's interruption is answered again: a note, not a red
      // error that would stay after the answer came (notes.js).
      if (interrupted(ev)) return addItem(v, { ...interruptedNote(ev), mark: true });
      return addItem(v, { kind: 'error', key: `e:${ev.turn}:${ev.seq}`, seq: ev.seq, mark: true, turn: ev.turn, text: ev.error || 'The reply failed.', cls: ev.class });
    case 'diagnostic':
      return addDiag(v, ev);
    case 'boundary': {
      const meta = { reason: ev.reason, continued: ev.continued, notes: ev.notes, why: ev.why, through: ev.through };
      if (!st.boundaries.has(v.id)) st.boundaries.set(v.id, new Map());
      st.boundaries.get(v.id).set(ev.seq, meta);
      const b = { seq: ev.seq, time: ev.time, ...meta };
      if (live || ev.record) b.record = ev.record; // a mark leaves the record to its message
      addBoundary(st, v, b);
      if (meta.notes.length) v.wantTitles = true;
      return;
    }
  }
}

// addDiag keeps a diagnostic: a turn's go under its answer or its error
// (the details), one of no turn (a failed command) stands on its own.
export function addDiag(v, ev) {
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
export function endTurn(v, turn) {
  v.running = null;
  if (turn) v.finished.add(turn);
  v.stopping = false;
}

// showReply adds a turn's stored reply to the transcript, in the place of
// its streamed text.
export function showReply(st, v, turn, m) {
  m.role = m.role || 'assistant';
  if (turn) st.rekeys.push({ from: `t:${turn}`, to: `m:${m.id}` });
  addHistory(v, m);
}

export function runningFrom(x) {
  const text = String(x.text ?? '');
  return { turn: x.turn, text, len: cpLen(text), seq: x.seq, tools: [], wait: null };
}

export function cpLen(s) {
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

export function cpSlice(s, n) {
  let i = 0;
  for (let k = 0; k < n && i < s.length; k++) {
    const c = s.charCodeAt(i);
    i += c >= 0xd800 && c <= 0xdbff && i + 1 < s.length ? 2 : 1;
  }
  return s.slice(0, i);
}

export function addHistory(v, m) {
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

export function addItem(v, item) {
  if (v.history.some((e) => e.key === item.key)) return;
  v.history.push(item);
}

// addBoundary adds (or completes) the boundary divider of seq: from the
// snapshot's boundary message (the record only) or the boundary event (all).
export function addBoundary(st, v, b) {
  const key = `b:${b.seq}`;
  const known = st.boundaries.get(v.id)?.get(b.seq) || {};
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
export function inferContinued(v) {
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

// listToMap keys a snapshot's APPROVAL or RECOVERY list by id.
export function listToMap(list) {
  const out = new Map();
  for (const x of Array.isArray(list) ? list : []) if (x && typeof x.id === 'string' && x.id) out.set(x.id, x);
  return out;
}

export function num(x, dflt) {
  return typeof x === 'number' && Number.isFinite(x) ? x : dflt;
}

export function markInUse(v, id) {
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
