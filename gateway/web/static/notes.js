// Notes in the conversation that are no message: what a chat command
// answered (/status, /changes...), shown where it was asked instead of a
// toast over the buttons; the queue a Stop held; a turn the gateway's
// restart interrupted, which is answered again (a note, not a red error:
// nothing failed for good). None is stored or sent to the model; the
// first is the page's own, the other two are read from stored events.
//
// DOM contract (browser tests rely on it):
//   .note.command      a command's answer: .note-head (the command as
//                      typed) and .note-body (its text, as written)
//   .note.held         "N queued message(s) held — Send to continue."
//   .note.interrupted  a turn.failed of class interrupted

let n = 0;

// commandNote is the history item of a command's answer (text) to what
// was typed (asked, may be empty), after the chat's latest event seq.
export function commandNote(text, asked, seq) {
  return { kind: 'note', key: `cmd:${++n}`, seq, cls: 'command', head: asked || 'Command', text: String(text || 'Done.') };
}

// heldText says what a Stop held.
export function heldText(count) {
  return `${count} queued message${count === 1 ? '' : 's'} held — Send to continue.`;
}

// heldNote is the history item of turn.finished's held (event ev).
export function heldNote(ev) {
  return { kind: 'note', key: `held:${ev.seq}`, seq: ev.seq, cls: 'held', text: heldText(ev.held) };
}

// interrupted says a turn.failed is the restart's, to be answered again.
export function interrupted(ev) {
  return ev && ev.class === 'interrupted';
}

// interruptedNote is the history item of such a turn.failed.
export function interruptedNote(ev) {
  return { kind: 'note', key: `e:${ev.turn}:${ev.seq}`, seq: ev.seq, turn: ev.turn, cls: 'interrupted',
    text: 'The gateway restarted while this reply was written; it is answered again.' };
}

// renderNote fills el for note item e; h is the page's element helper.
export function renderNote(h, el, e) {
  el.className = 'note' + (e.cls ? ' ' + e.cls : '');
  el.setAttribute('role', 'status');
  if (e.cls === 'command') {
    el.replaceChildren(h('span', { class: 'note-head' }, e.head || 'Command'), h('span', { class: 'note-body' }, e.text));
  } else {
    el.replaceChildren(h('span', null, e.text));
  }
}
