package chats

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tools"
	"github.com/mirror-gateway/mirror/runtime/view"
)

// Errors a caller maps to protocol codes. They are returned wrapped with
// context; test with errors.Is.
var (
	ErrNotFound = errors.New("not found")
	ErrInUse    = errors.New("already in use: the assistant picked this message up")
	ErrBadInput = errors.New("bad input")
	ErrNoTurn   = errors.New("no turn is running")
	ErrClosed   = errors.New("chats: service is shut down")
)

// Chat states as a chat list shows them.
const (
	StateIdle    = "idle"
	StateRunning = "running"
)

// What a chat waits for from a person (Chat.Waiting): the list marks such
// a chat apart from one that is generating, and the page title counts them.
const (
	WaitApproval = "approval" // a tool call waits for Allow or Deny
	WaitRecovery = "recovery" // an interrupted call waits for repeat or skip
)

// Message states.
const (
	MsgPending = "pending"
	MsgPicked  = "picked"
	MsgDeleted = "deleted"
	MsgDone    = "done"
)

// Pending modes.
const (
	ModeQueue    = "queue"
	ModeRedirect = "redirect"
)

// Event types this package writes into a chat's record.
const (
	EvChatCreated     = "chat.created"
	EvMessageAccepted = "message.accepted"
	EvMessageUpdated  = "message.updated"
	EvMessageDeleted  = "message.deleted"
	EvMessagePicked   = "message.picked"
	EvTurnStarted     = "turn.started"
	EvReplyDelta      = "reply.delta"   // never stored
	EvQuotaWait       = "quota.wait"    // never stored
	EvToolProgress    = "tool.progress" // a running call's progress (call, text); never stored
	EvTurnFinished    = "turn.finished"
	EvTurnFailed      = "turn.failed"

	EvAssistantStep     = "assistant.message" // an answer that asks for tool calls
	EvToolCall          = "tool.call"         // journaled before the call runs
	EvToolResult        = "tool.result"       // journaled after
	EvApprovalRequested = "approval.requested"
	EvApprovalResolved  = "approval.resolved"
	EvRecoveryRequested = "recovery.requested"
	EvRecoveryResolved  = "recovery.resolved"
	EvRewind            = "rewind"

	// Long conversations (boundaries) and the request budget (checkpoints).
	EvContext        = "context"         // how full the conversation is, as a turn starts
	EvRuntimeContext = "runtime.context" // the runtime-context sections a turn's request carried
	EvCheckpoint     = "checkpoint"      // a model-free re-plan of the view, stored before it is sent
	EvHandoff        = "handoff.updated" // the assistant's half of the handoff record
	EvBoundary       = "boundary"        // archive + clear: the conversation starts again after it
	EvBoundaryFailed = "boundary.failed" // a boundary that could not happen; nothing changed
	EvContinuity     = "continuity"      // the message a continued conversation opens with
	EvMessagePinned  = "message.pinned"
	EvClear          = "clear"   // a /clear topic boundary: requests start after it
	EvCompact        = "compact" // a /compact request: a checkpoint on the next turn

	// Media (issue 16).
	EvMessageTranscribed = "message.transcribed" // a person's audio attachments, with their transcripts
	EvFileSent           = "file.sent"           // a file the assistant delivers (send_file, or a reply's image)

	// EvDiagnostic is one provider attempt, hook block or failed command
	// (Event.Diagnostic): local-only, never part of a request.
	EvDiagnostic = "diagnostic"

	// EvToolAllowed is a tool allowed for every call of the chat, or that
	// allowance revoked (issue 19).
	EvToolAllowed = "tool.allowed"
)

// MsgStep is the state of an assistant message that asked for tool calls.
const MsgStep = "step"

// MsgFailed is the state of a failed turn's partial answer: shown, never
// sent to a model again.
const MsgFailed = "failed"

// Turn outcomes, as the turns metric labels them.
const (
	OutcomeOK      = "ok"
	OutcomeStopped = "stopped"
	OutcomeFailed  = "failed"
)

// Why an approval resolved without the person's answer.
const (
	ReasonStopped     = "stopped"     // the turn was stopped while it waited
	ReasonInterrupted = "interrupted" // the gateway stopped while it waited
)

// Approval is a tool call waiting for the person's permission.
type Approval struct {
	ID     string            `json:"id"`
	Call   provider.ToolCall `json:"call"`
	Tool   string            `json:"tool"`
	Turn   string            `json:"turn"`
	Time   time.Time         `json:"requested_at"`
	Allow  *bool             `json:"allow,omitempty"`  // on approval.resolved
	Reason string            `json:"reason,omitempty"` // why it resolved without an answer
	// Change is what a file tool's call would change (a diff, or a new
	// file's head), computed when the approval was asked; nil for other
	// tools.
	Change *tools.Proposal `json:"change,omitempty"`
	// ForChat, on approval.resolved, says the answer also allowed the
	// tool for every later call of the chat (see tool.allowed).
	ForChat bool `json:"for_chat,omitempty"`
}

// Recovery is a tool call that was running when the process died. It belongs
// to its chat, whose turn waits until it is answered with repeat or skip.
type Recovery struct {
	ID     string            `json:"id"`
	Call   provider.ToolCall `json:"call"`
	Turn   string            `json:"turn"`
	Time   time.Time         `json:"created_at"`
	Action string            `json:"action,omitempty"` // on recovery.resolved
	// Process says what the gateway found of the call's process when it
	// came back: ProcStopped (still running, and stopped then) or
	// ProcEnded; empty when the call ran no process. ProcessNote words it.
	Process string `json:"process,omitempty"`
}

// ToolOutcome is the stored result of a tool call.
type ToolOutcome struct {
	CallID  string `json:"call_id"`
	Name    string `json:"name"`
	Content string `json:"content"` // what the model read
	IsError bool   `json:"is_error,omitempty"`
	Handle  string `json:"handle,omitempty"` // the whole output, when Content is a preview
	Size    int    `json:"size"`             // bytes of the whole output
	// Attachments are what the result brought back into the view (an
	// image got back through its handle).
	Attachments []Attachment `json:"attachments,omitempty"`
}

// Chat is a chat as a list shows it; it is also the stored chat metadata.
type Chat struct {
	ID        string    `json:"id"`
	Title     string    `json:"title"`
	Chain     string    `json:"chain"`
	State     string    `json:"state"`
	Pending   int       `json:"pending"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	Seq       uint64    `json:"seq"`
	// Turn is the running turn's id while one runs. It is stored, so a chat
	// whose turn a crash interrupted is found and resumed at start.
	Turn string `json:"turn,omitempty"`
	// Resume says a turn was interrupted and the conversation waits for an
	// answer, given as soon as the chat is loaded.
	Resume bool `json:"resume,omitempty"`
	// Waiting is what the chat waits for from a person (WaitApproval,
	// WaitRecovery; "" for nothing). It is stored with the metadata, so the
	// list shows it for chats not loaded too; always sent, so a client
	// merging updates into what it knows sees it end.
	Waiting string `json:"waiting"`
	// Paused says Stop held the queue: pending messages wait until the
	// person sends another message or /continue, instead of starting the
	// moment the stopped turn ends.
	Paused bool `json:"paused"`
	// Outcome is how the chat's last turn ended (OutcomeOK, OutcomeStopped,
	// OutcomeFailed; "" before any): with State, what a client that does not
	// follow the chat's events tells "reply finished" from "error" by.
	Outcome string `json:"outcome,omitempty"`
	// Archived hides the chat from the main list (see manage.go).
	Archived bool `json:"archived"`
	// DeleteAt is when a deleted chat goes for good; until then the
	// deletion can be undone and the chat is listed nowhere.
	DeleteAt *time.Time `json:"delete_at"`
	// MCPServers are the MCP servers the chat offers the model (/mcp);
	// absent offers every configured one.
	MCPServers *[]string `json:"mcp_servers,omitempty"`
	// AllowedTools are the tools allowed for every call of this chat
	// ("Allow for this chat" on an approval), sorted; revocable. A deny
	// (tools.policies, or the asker's role) still refuses them.
	AllowedTools []string `json:"allowed_tools,omitempty"`
	// LogPos is, in cluster mode, the position in the chat's record log
	// (RecordLog) of the last flush this node's bbolt applied, written in
	// the same transaction: catch-up resumes after it. 0 in single-node
	// mode.
	LogPos uint64 `json:"log_pos,omitempty"`
}

// Message is a user or assistant message as clients see it.
type Message struct {
	ID       string    `json:"id"`
	Role     string    `json:"role"`
	Text     string    `json:"text"`
	Seq      uint64    `json:"seq"`
	Time     time.Time `json:"time"`
	State    string    `json:"state,omitempty"`
	Mode     string    `json:"mode,omitempty"`
	ClientID string    `json:"client_id,omitempty"`
	// By is the id of the person who sent a user message (see Origin.By).
	By      string `json:"by,omitempty"`
	Turn    string `json:"turn,omitempty"`
	Stopped bool   `json:"stopped,omitempty"`
	// Tokens is the local token count of what the message sends (its text,
	// and an assistant step's tool calls), computed once when the row is
	// written and stored with it.
	Tokens int `json:"tokens,omitempty"`
	// ToolCalls are what an assistant step asked for; ToolCallID names the
	// call a tool message answers.
	ToolCalls  []provider.ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string              `json:"tool_call_id,omitempty"`
	// Attachments are the files the message carries (references to
	// blobs under data_dir/blobs).
	Attachments []Attachment `json:"attachments,omitempty"`
	// Pinned keeps the message whole in the assistant's view.
	Pinned bool `json:"pinned,omitempty"`
	// Sections are a runtime-context row's sections; sections is them
	// parsed once, when the row is loaded or written.
	Sections json.RawMessage `json:"sections,omitempty"`
	sections []view.Section
	// rowSeq is where a picked-up message entered the conversation: the
	// seq of its message.picked row (Seq stays where it was accepted).
	rowSeq uint64
	// Tool and IsError describe a tool message: the tool that answered,
	// and whether it failed.
	Tool    string `json:"tool,omitempty"`
	IsError bool   `json:"is_error,omitempty"`
	// TextAt is only ever stored, never sent: a stored row whose message
	// text is already in another row of the record (a message.picked row
	// repeats its message.accepted or message.updated text; a
	// turn.finished row's message repeats its reply) leaves Text empty and
	// names that row, so the record holds each text once. Reading the row
	// fills Text back in (see decodeRow).
	TextAt uint64 `json:"text_at,omitempty"`
	// textAt is the row that holds this message's text in the record
	// (0: none yet), so later rows can name it instead of repeating it.
	textAt uint64
	// TranscribeError is why audio attachments without a transcript were
	// not heard (a failed transcription's message.transcribed error): the
	// model gets it in their place, and snapshots show it.
	TranscribeError string `json:"transcribe_error,omitempty"`
	// Model is the configured model that wrote an assistant answer;
	// Fallback says it was not its chain's first (that one failed or did
	// not fit).
	Model    string `json:"model,omitempty"`
	Fallback bool   `json:"fallback,omitempty"`
	// Regenerates names the user message a regenerated one repeats
	// (message.regenerate): the same question asked again, so the record
	// keeps both answers.
	Regenerates string `json:"regenerates,omitempty"`
}

// Running is the turn in progress of a chat.
type Running struct {
	Turn string `json:"turn"`
	Text string `json:"text"`
	Seq  uint64 `json:"seq"`
	// Wait is the quota wait the turn's model request is in, as the last
	// quota.wait showed it, with WaitMS what is left of it now; nil when
	// the turn went on since (text, a step, a call) or never waited.
	Wait *Wait `json:"wait,omitempty"`
}

// Wait is a quota wait of a running turn, in quota.wait's fields.
type Wait struct {
	Quota  int64 `json:"quota"`
	Usage  int   `json:"usage"`
	WaitMS int64 `json:"wait_ms"`
}

// Mark is a row of the record the browser draws between messages (a
// /clear divider, a /compact note, a boundary's details, a boundary that
// did not happen, a failed turn's error, a diagnostic), as the stored event
// that drew it live, so a snapshot or history page draws the same. At is
// how many of the page's messages come before it. A failed turn's partial
// answer and a boundary's record are among the messages, so the mark
// leaves them out.
type Mark struct {
	At int `json:"at"`
	*Event
}

// MarshalJSON writes the mark as its event's frame with "at" first: the
// event's own MarshalJSON, promoted, would leave At out.
func (m Mark) MarshalJSON() ([]byte, error) {
	ev := m.Event.JSON()
	out := make([]byte, 0, len(ev)+24)
	out = append(out, `{"at":`...)
	out = strconv.AppendInt(out, int64(m.At), 10)
	if len(ev) > 2 {
		out = append(out, ',')
	}
	return append(out, ev[1:]...), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (m *Mark) UnmarshalJSON(v []byte) error {
	var at struct {
		At int `json:"at"`
	}
	if err := json.Unmarshal(v, &at); err != nil {
		return err
	}
	m.At, m.Event = at.At, &Event{}
	return m.Event.UnmarshalJSON(v)
}

// Marshal is json.Marshal without HTML escaping: frames and rows are JSON
// read by JSON parsers, never pasted into HTML, and escaping every <, > and
// & of a message as \u003c (6 bytes for 1) made code-heavy text much larger
// on disk and on the wire.
func Marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// WithReq returns the event's wire bytes with "req" added, for the one
// socket that asked; the shared bytes stay as they are.
func (e *Event) WithReq(req string) []byte {
	raw := e.JSON()
	if req == "" {
		return raw
	}
	q, _ := json.Marshal(req)
	out := make([]byte, 0, len(raw)+len(q)+8)
	out = append(out, raw[:len(raw)-1]...) // drop the closing brace
	out = append(out, `,"req":`...)
	out = append(out, q...)
	return append(out, '}')
}

// Snapshot is the state of an opened chat (chat.snapshot), or the close of a
// resume with since (chat.resumed, where Messages is nil).
type Snapshot struct {
	Type       string     `json:"type"`
	Chat       Chat       `json:"chat"`
	Messages   []Message  `json:"messages"`
	Pending    []Message  `json:"pending"`
	Running    *Running   `json:"running"`
	Approvals  []Approval `json:"approvals"`
	Recoveries []Recovery `json:"recoveries"`
	Seq        uint64     `json:"seq"`
	Req        string     `json:"req,omitempty"`
	// Context is the last context reading (the usage ring's numbers).
	Context *runtime.ContextInfo `json:"context,omitempty"`
	// CheckpointThrough is the last message the checkpoint in force
	// evicted from the assistant's view (the "Earlier turns checkpointed"
	// divider goes after it); 0 when none.
	CheckpointThrough uint64 `json:"checkpoint_through,omitempty"`
	// More says older messages than Messages holds exist: a snapshot
	// carries only the newest messages within a byte budget, and
	// chat.history with Before pages through the older ones.
	More   bool   `json:"more,omitempty"`
	Before uint64 `json:"before,omitempty"`
	// Marks are the page's marks (see Mark), oldest first.
	Marks []Mark `json:"marks,omitempty"`
}

// History is one page of a chat's older transcript (chat.history): the
// messages just before seq Before of a previous page, oldest first, and
// whether older ones remain (then Before is where the next page ends).
type History struct {
	Type     string    `json:"type"`
	Chat     string    `json:"chat"`
	Messages []Message `json:"messages"`
	More     bool      `json:"more"`
	Before   uint64    `json:"before,omitempty"`
	Req      string    `json:"req,omitempty"`
	// Marks are the page's marks (see Mark), oldest first.
	Marks []Mark `json:"marks,omitempty"`
}

// Delivery is one thing a subscriber receives: an event or a snapshot, or
// Closed.
type Delivery struct {
	Event *Event
	// Req is set on the requester's delivery of the event its request
	// caused; a transport adds it to the event's shared bytes (WithReq).
	Req      string
	Snapshot *Snapshot
	// Closed names a chat that stopped delivering to this subscriber because
	// it failed; the subscriber may open it again.
	Closed string
}

// Subscriber receives a chat's deliveries in order. Deliver is called from the
// chat's own goroutine and must never block: a transport queues what it gets.
type Subscriber interface {
	Deliver(d Delivery)
}

// ListWatcher receives every chat's list entry when it changes (created, title,
// state, pending count). Like Deliver, it must not block.
type ListWatcher interface {
	ChatChanged(c Chat, created bool)
}
