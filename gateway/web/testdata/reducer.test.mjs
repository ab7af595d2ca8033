// The events reducer (static/reducer.js) under node's test runner, no
// browser: TestReducerInNode (reducer_node_test.go) copies the static
// modules next to this file and runs `node --test` on it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readEvent } from './events.js';
import { IN_USE_TEXT, applyHistory, applyResumed, applySnapshot, newView, reduceEvent } from './reducer.js';

const CHAT = 'c1';
const T0 = '2026-01-02T03:04:05Z';

// open is the client's state with CHAT shown and subscribed, as after
// selectChat and chat.open.
function open() {
  const v = newView(CHAT);
  v.subscribed = true;
  return { current: CHAT, views: new Map([[CHAT, v]]), boundaries: new Map(), rekeys: [] };
}

// feed applies a server frame as frames.js does: the chat frames through
// their appliers, the events through readEvent and reduceEvent. It returns
// what reduceEvent said (true for the other frames).
function feed(st, f) {
  const v = st.views.get(CHAT);
  switch (f.type) {
    case 'chat.snapshot': applySnapshot(st, v, f); return true;
    case 'chat.resumed': applyResumed(st, v, f); return true;
    case 'chat.history': applyHistory(st, v, f); return true;
  }
  const ev = readEvent({ chat: CHAT, time: T0, ...f });
  assert.ok(ev, `no reader for ${f.type}`);
  return reduceEvent(st, ev);
}

const msg = (id, state, extra = {}) => ({ id, role: 'user', text: `text of ${id}`, state, ...extra });
const snapshot = (seq, messages, more = {}) => ({ type: 'chat.snapshot', chat: { id: CHAT, seq }, seq, messages, ...more });
const ids = (v) => v.history.filter((e) => e.kind === 'msg').map((e) => e.m.id);

const cases = [
  {
    name: 'message appended',
    frames: [
      snapshot(1, [msg('m1', 'done')]),
      { type: 'message.accepted', seq: 2, message: msg('m2', 'pending') },
      { type: 'message.picked', seq: 3, turn: 't1', message: msg('m2', 'picked') },
      { type: 'message.accepted', seq: 4, message: msg('m3', 'pending') },
    ],
    check(v) {
      assert.deepEqual(ids(v), ['m1', 'm2']);
      assert.equal(v.index.get('m2').m.state, 'picked');
      assert.deepEqual([...v.pending.keys()], ['m3']);
      assert.equal(v.lastSeq, 4);
    },
  },
  {
    name: 'queued message edited',
    before(v) { v.editing.set('m2', { draft: 'new', saving: true }); },
    frames: [
      snapshot(1, [], { pending: [msg('m2', 'pending')] }),
      { type: 'message.updated', seq: 2, message: { id: 'm2', text: 'new', state: 'pending' } },
    ],
    check(v) {
      assert.equal(v.pending.get('m2').text, 'new');
      assert.equal(v.pending.get('m2').role, 'user', 'the update keeps what it does not carry');
      assert.ok(!v.editing.has('m2'), 'a saved edit ends');
    },
  },
  {
    name: 'queued message deleted',
    frames: [
      { type: 'message.accepted', seq: 1, message: msg('m2', 'pending') },
      { type: 'message.deleted', seq: 2, message: msg('m2', 'deleted') },
    ],
    check(v) {
      assert.equal(v.pending.size, 0);
      assert.deepEqual(ids(v), []);
    },
  },
  {
    name: 'queued message picked while edited',
    before(v) { v.editing.set('m2', { draft: 'half', saving: false }); },
    frames: [
      { type: 'message.accepted', seq: 1, message: msg('m2', 'pending') },
      { type: 'message.picked', seq: 2, turn: 't1', message: msg('m2', 'picked') },
    ],
    check(v) {
      assert.ok(v.editing.get('m2').picked);
      assert.ok(v.deferred.has('m2'));
      assert.equal(v.notices.get('m2'), IN_USE_TEXT);
    },
  },
  {
    name: 'turn started and finished',
    frames: [
      { type: 'turn.started', seq: 1, turn: 't1' },
      { type: 'reply.delta', seq: 1, turn: 't1', offset: 0, text: 'Hi' },
      { type: 'turn.finished', seq: 2, turn: 't1', reply: 'Hi', message: { id: 'm9', role: 'assistant', text: 'Hi', turn: 't1' } },
      { type: 'reply.delta', seq: 2, turn: 't1', offset: 2, text: ' late' },
    ],
    check(v, st) {
      assert.equal(v.running, null, 'a delta after the end starts no reply');
      assert.ok(v.finished.has('t1'));
      assert.deepEqual(ids(v), ['m9']);
      assert.deepEqual(st.rekeys, [{ from: 't:t1', to: 'm:m9' }], 'the streamed reply becomes the stored one');
    },
  },
  {
    name: 'turn failed',
    frames: [
      { type: 'turn.started', seq: 1, turn: 't1' },
      { type: 'turn.failed', seq: 2, turn: 't1', error: 'it broke', class: 'internal' },
    ],
    check(v) {
      assert.equal(v.running, null);
      const e = v.history.find((x) => x.kind === 'error');
      assert.equal(e?.text, 'it broke');
      assert.equal(e?.turn, 't1');
    },
  },
  {
    name: 'reply text streaming',
    frames: [
      { type: 'turn.started', seq: 1, turn: 't1' },
      { type: 'reply.delta', seq: 1, turn: 't1', offset: 0, text: 'Hel' },
      { type: 'reply.delta', seq: 1, turn: 't1', offset: 3, text: 'lo 😀' },
      { type: 'reply.delta', seq: 1, turn: 't1', offset: 5, text: '😀!' }, // resent from offset 5 (code points)
      { type: 'tool.call', seq: 2, turn: 't1', call: { id: 'call_1', name: 'shell', arguments: '{}' } },
      { type: 'tool.progress', seq: 2, turn: 't1', call: { id: 'call_1', name: 'shell' }, text: '1/2' },
    ],
    check(v) {
      assert.equal(v.running.text, 'Hello😀!');
      assert.equal(v.running.len, 7);
      assert.deepEqual(v.running.tools, [{ id: 'call_1', name: 'shell', done: false, progress: '1/2' }]);
    },
  },
  {
    name: 'approval asked and answered',
    frames: [
      { type: 'approval.requested', seq: 1, turn: 't1', approval: { id: 'a1', tool: 'shell' } },
      { type: 'approval.requested', seq: 2, turn: 't1', approval: { id: 'a2', tool: 'shell' } },
      { type: 'approval.resolved', seq: 3, approval: { id: 'a1' } },
    ],
    check(v) {
      assert.deepEqual([...v.approvals.keys()], ['a2']);
    },
  },
  {
    name: 'resume with since applies nothing twice',
    frames: [
      snapshot(3, [msg('m1', 'done')], { pending: [msg('m2', 'pending')] }),
      // chat.open with since 3: the missed events, replayed from an
      // earlier seq, then chat.resumed.
      // m0 was queued at seq 2 and deleted by seq 3: the snapshot has it no more.
      { type: 'message.accepted', seq: 2, message: msg('m0', 'pending') },
      { type: 'message.accepted', seq: 3, message: msg('m2', 'pending') },
      { type: 'message.picked', seq: 4, turn: 't1', message: msg('m2', 'picked') },
      { type: 'turn.started', seq: 5, turn: 't1' },
      { type: 'tool.call', seq: 6, turn: 't1', call: { id: 'call_1', name: 'shell', arguments: '{}' } },
      { type: 'tool.call', seq: 6, turn: 't1', call: { id: 'call_1', name: 'shell', arguments: '{}' } },
      { type: 'message.accepted', seq: 7, message: msg('m3', 'pending') },
      { type: 'chat.resumed', chat: { id: CHAT, seq: 7 }, seq: 7, pending: [msg('m3', 'pending')], running: { turn: 't1', text: '' } },
      { type: 'tool.call', seq: 6, turn: 't1', call: { id: 'call_1', name: 'shell', arguments: '{}' } },
      { type: 'message.accepted', seq: 2, message: msg('m0', 'pending') },
    ],
    check(v) {
      assert.deepEqual(ids(v), ['m1', 'm2']);
      assert.deepEqual([...v.pending.keys()], ['m3']);
      assert.equal(v.running.tools.length, 1, 'a replayed tool call is shown once');
      assert.equal(v.lastSeq, 7);
    },
  },
  {
    name: 'older page goes above',
    frames: [
      snapshot(9, [msg('m8', 'done')], { more: true, before: 8 }),
      { type: 'chat.history', chat: CHAT, messages: [msg('m1', 'done'), msg('m8', 'done')], more: false },
    ],
    check(v) {
      assert.deepEqual(ids(v), ['m1', 'm8']);
      assert.equal(v.before, 0);
    },
  },
  {
    name: 'a boundary with notes wants their titles',
    frames: [
      { type: 'boundary', seq: 1, reason: 'hard', continued: true, record: '# R', through: 0, notes: ['n1.md'] },
    ],
    check(v, st) {
      assert.ok(v.wantTitles);
      assert.equal(v.history[0].kind, 'boundary');
      assert.deepEqual(st.boundaries.get(CHAT).get(1).notes, ['n1.md']);
    },
  },
  {
    name: 'a stop that held the queue says so',
    frames: [
      snapshot(1, []),
      { type: 'turn.started', seq: 2, turn: 't1' },
      { type: 'turn.finished', seq: 3, turn: 't1', reply: 'part', stopped: true, held: 2, message: { id: 'm3', role: 'assistant', text: 'part', state: 'done', stopped: true } },
    ],
    check(v) {
      const n = v.history.find((e) => e.kind === 'note' && e.cls === 'held');
      assert.equal(n?.text, '2 queued messages held — Send to continue.');
    },
  },
  {
    name: "a restart's interrupted turn is a note, not an error",
    frames: [
      snapshot(1, []),
      { type: 'turn.started', seq: 2, turn: 't1' },
      { type: 'turn.failed', seq: 3, turn: 't1', class: 'interrupted', error: 'the gateway stopped while this turn ran' },
      { type: 'turn.failed', seq: 4, turn: 't2', class: 'internal', error: 'it broke' },
    ],
    check(v) {
      assert.deepEqual(v.history.filter((e) => e.kind === 'note').map((e) => e.cls), ['interrupted']);
      assert.deepEqual(v.history.filter((e) => e.kind === 'error').map((e) => e.text), ['it broke']);
    },
  },
  {
    name: 'tools allowed for the chat, from the snapshot and tool.allowed',
    frames: [
      snapshot(1, [], { chat: { id: CHAT, seq: 1, allowed_tools: ['write_file'] } }),
      { type: 'tool.allowed', seq: 2, tool: 'shell', allowed: true, approval: 'a1' },
      { type: 'tool.allowed', seq: 3, tool: 'shell', allowed: true },
      { type: 'tool.allowed', seq: 4, tool: 'write_file', allowed: false },
    ],
    check(v) {
      assert.deepEqual(v.allowedTools, ['shell']);
    },
  },
  {
    name: 'an answer keeps its model and fallback',
    frames: [
      snapshot(1, [msg('m1', 'picked', { turn: 't1' })]),
      { type: 'turn.finished', seq: 2, turn: 't1', reply: 'hi', model: 'b', fallback: true,
        message: { id: 'm2', role: 'assistant', text: 'hi', state: 'done', turn: 't1', model: 'b', fallback: true } },
    ],
    check(v) {
      const m = v.index.get('m2').m;
      assert.equal(m.model, 'b');
      assert.equal(m.fallback, true);
    },
  },
];

for (const c of cases) {
  test(c.name, () => {
    const st = open();
    const v = st.views.get(CHAT);
    c.before?.(v);
    for (const f of c.frames) feed(st, f);
    c.check(v, st);
  });
}

test('events wait for the snapshot, and other chats are not applied', () => {
  const st = open();
  const v = st.views.get(CHAT);
  v.opening = true;
  assert.equal(feed(st, { type: 'message.accepted', seq: 1, message: msg('m1', 'pending') }), false);
  assert.equal(v.pending.size, 0);
  v.opening = false;
  assert.equal(reduceEvent(st, readEvent({ type: 'message.accepted', chat: 'c2', seq: 1, message: msg('m1', 'pending') })), false);
  assert.equal(v.pending.size, 0);
  assert.equal(feed(st, { type: 'message.accepted', seq: 1, message: msg('m1', 'pending') }), true);
  assert.equal(v.pending.size, 1);
});
