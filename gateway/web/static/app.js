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
//   #send                         send button (an empty box sends nothing, unless
//                                 a Stop held the queue: then it sends /continue)
//   #stop                         stop button, shown (not [hidden]) while a turn runs
//   #mode                         "Steer" toggle, shown while a turn runs: aria-pressed
//                                 = true sends with mode "redirect"
//   #toasts .toast                transient errors that belong to no bubble, in
//                                 the page's flow under the header (never over a
//                                 button); what a chat command answered is a
//                                 .note.command in the conversation (notes.js)
//   #command-hints                shown while the composer holds a slash word: one
//                                 li > button.command-hint[data-command=NAME] per
//                                 matching chat command (welcome.commands, the
//                                 server's table: name, args, help); a click puts
//                                 the command in the composer
//
// Long conversations:
//   #context                      the usage ring (role=meter), against the limit the
//                                 chat is nearer to (limits.js): data-basis=hard, the
//                                 conversation against hard, .ring-marks "Soft S ·
//                                 Hard H"; or data-basis=ceiling, the request (or
//                                 used) against the ceiling (or the window),
//                                 .ring-marks "Ceiling · checkpoint N"; .ring-value
//                                 "V / D"; saved limits move it at once
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
//
// This module only starts the client; the rest is cut by concern into the
// modules it imports (README.md, "Browser client layout"): state.js,
// socket.js, frames.js, reducer.js (no DOM; tested under node), actions.js,
// render.js, transcript.js, queue.js, panels.js, bindings.js, keys.js,
// nav.js, page.js.

import { bind } from './bindings.js';
import { hashChat } from './nav.js';
import { render, setStatus } from './render.js';
import { connect } from './socket.js';
import { LAST_KEY, S, viewFor } from './state.js';

// start binds the page, picks the chat to show and connects.
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
