// Mirror browser client: reading the events of a chat.
//
// One reader per event type of docs/protocol.md ("Events of a chat"). Each
// knows its type's shape, as the gateway writes it (the wire bytes of every
// type are pinned by chats/testdata/events/TYPE.json, which
// gateway/web/events_node_test.go reads these functions against), and
// returns what the client uses of it. Nothing here guesses between shapes:
// a field the protocol marks optional is read as optional, nothing else.

const str = (x) => (typeof x === 'string' ? x : '');
const int = (x) => (typeof x === 'number' && Number.isFinite(x) ? x : 0);
const obj = (x) => (x && typeof x === 'object' && !Array.isArray(x) ? x : null);

// A MESSAGE, or null when the event carries none.
const message = (ev) => obj(ev.message);

// The fields of a CALL the client shows.
const call = (c) => ({ id: str(c?.id), name: str(c?.name), arguments: str(c?.arguments) });

// The CONTEXT fields, which a context event carries at its top level.
function context(ev) {
  const c = {
    used: int(ev.used), window: int(ev.window), soft: int(ev.soft), hard: int(ev.hard),
    soft_reached: ev.soft_reached === true, hard_reached: ev.hard_reached === true,
    model: str(ev.model), line: str(ev.line),
  };
  for (const k of ['request', 'ceiling', 'next_checkpoint']) if (typeof ev[k] === 'number') c[k] = ev[k];
  return c;
}

export const readers = {
  'chat.created': (ev) => ({ title: str(ev.title) }),
  'message.accepted': (ev) => ({ message: message(ev) }),
  'message.updated': (ev) => ({ message: message(ev) }),
  'message.deleted': (ev) => ({ message: message(ev) }),
  'message.picked': (ev) => ({ message: message(ev), turn: str(ev.turn) }),
  'turn.started': (ev) => ({ turn: str(ev.turn) }),
  'reply.delta': (ev) => ({ turn: str(ev.turn), offset: int(ev.offset), text: str(ev.text) }),
  'quota.wait': (ev) => ({ turn: str(ev.turn), quota: int(ev.quota), usage: int(ev.usage), wait_ms: int(ev.wait_ms) }),
  'turn.finished': (ev) => ({ turn: str(ev.turn), reply: str(ev.reply), stopped: ev.stopped === true, held: int(ev.held), message: message(ev),
    model: str(ev.model), fallback: ev.fallback === true }),
  'turn.failed': (ev) => ({ turn: str(ev.turn), error: str(ev.error), class: str(ev.class), message: message(ev) }),
  'assistant.message': (ev) => ({ turn: str(ev.turn), message: message(ev) }),
  'tool.call': (ev) => ({ turn: str(ev.turn), call: call(ev.call) }),
  'tool.result': (ev) => ({ turn: str(ev.turn), callId: str(ev.result?.call_id), failed: ev.result?.is_error === true }),
  'approval.requested': (ev) => ({ turn: str(ev.turn), approval: obj(ev.approval) }),
  'approval.resolved': (ev) => ({ id: str(ev.approval?.id), for_chat: ev.approval?.for_chat === true }),
  'recovery.requested': (ev) => ({ turn: str(ev.turn), recovery: obj(ev.recovery) }),
  'recovery.resolved': (ev) => ({ id: str(ev.recovery?.id) }),
  rewind: (ev) => ({ turn: str(ev.turn), text: str(ev.text) }),
  context: (ev) => ({ context: context(ev) }),
  'runtime.context': (ev) => ({ turn: str(ev.turn) }),
  checkpoint: (ev) => ({ through: int(ev.through) }),
  'handoff.updated': (ev) => ({ turn: str(ev.turn) }),
  boundary: (ev) => ({
    reason: str(ev.reason), continued: ev.continued === true, record: str(ev.record), through: int(ev.through),
    notes: Array.isArray(ev.notes) ? ev.notes.filter((n) => typeof n === 'string') : [], why: str(ev.why),
  }),
  'boundary.failed': (ev) => ({ error: str(ev.error) }),
  continuity: (ev) => ({ message: message(ev), turn: str(ev.turn) }),
  'message.pinned': (ev) => ({ id: str(ev.message?.id), pinned: ev.message?.pinned === true }),
  clear: () => ({}),
  compact: (ev) => ({ text: str(ev.text) }),
  'message.transcribed': (ev) => ({ message: message(ev), turn: str(ev.turn), error: str(ev.error) }),
  diagnostic: (ev) => ({ turn: str(ev.turn), diagnostic: obj(ev.diagnostic) }),
  'tool.progress': (ev) => ({ turn: str(ev.turn), call: call(ev.call), text: str(ev.text) }),
  'file.sent': (ev) => ({ message: message(ev), turn: str(ev.turn), call: obj(ev.call) ? call(ev.call) : null }),
  'tool.allowed': (ev) => ({ tool: str(ev.tool), allowed: ev.allowed === true, approval: str(ev.approval) }),
};

// readEvent returns the header every event has (type, chat, seq, time) and
// what its type's reader reads; null for a type this client does not know.
export function readEvent(ev) {
  const read = readers[ev?.type];
  if (!read) return null;
  return { type: ev.type, chat: str(ev.chat), seq: int(ev.seq), time: str(ev.time), ...read(ev) };
}
