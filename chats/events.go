package chats

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/view"
)

// Event is one row of a chat's record, and the frame subscribers receive:
// the header every event has, and the payload of its type. On the wire
// (and in the record) both are one flat JSON object, the header's fields
// first, as docs/protocol.md lists them. Once published an event is
// shared by every subscriber and must not be changed.
type Event struct {
	Header
	// Payload holds the fields of the event's type: one of the payload
	// types below (ChatCreated, MessageAccepted, ...), whose eventType is
	// Header.Type.
	Payload Payload

	once sync.Once
	raw  []byte
}

// Header is what every event carries: its type, chat, seq and time.
type Header struct {
	Type string    `json:"type"`
	Chat string    `json:"chat"`
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// By is the id of the person whose request caused the event (see
	// Origin.By): who sent, edited, allowed, denied, stopped.
	By string `json:"by,omitempty"`
}

// Payload is what an event of one type carries besides its header. Only
// this package's types implement it: each is listed in payloads.
type Payload interface {
	// eventType is the Type of the events that carry this payload.
	eventType() string
	// frame returns h and the payload as one value whose JSON is the flat
	// frame (a struct embedding both, the header first): one encoding
	// pass, and one decoding pass, for the whole event.
	frame(h *Header) any
}

// NewEvent returns an event of p's type. append gives the events a chat
// records their chat, seq and time; this is for events that are only sent
// (reply.delta, quota.wait) and for transports that merge them.
func NewEvent(chat string, seq uint64, at time.Time, p Payload) *Event {
	return &Event{Header: Header{Type: p.eventType(), Chat: chat, Seq: seq, Time: at}, Payload: p}
}

// payloads makes the empty payload of each event type, for decoding.
var payloads = map[string]func() Payload{
	EvChatCreated:       func() Payload { return new(ChatCreated) },
	EvMessageAccepted:   func() Payload { return new(MessageAccepted) },
	EvMessageUpdated:    func() Payload { return new(MessageUpdated) },
	EvMessageDeleted:    func() Payload { return new(MessageDeleted) },
	EvMessagePicked:     func() Payload { return new(MessagePicked) },
	EvTurnStarted:       func() Payload { return new(TurnStarted) },
	EvReplyDelta:        func() Payload { return new(ReplyDelta) },
	EvToolProgress:      func() Payload { return new(ToolProgress) },
	EvQuotaWait:         func() Payload { return new(QuotaWait) },
	EvTurnFinished:      func() Payload { return new(TurnFinished) },
	EvTurnFailed:        func() Payload { return new(TurnFailed) },
	EvAssistantStep:     func() Payload { return new(AssistantStep) },
	EvToolCall:          func() Payload { return new(ToolCallStarted) },
	EvToolResult:        func() Payload { return new(ToolResult) },
	EvApprovalRequested: func() Payload { return new(ApprovalRequested) },
	EvApprovalResolved:  func() Payload { return new(ApprovalResolved) },
	EvRecoveryRequested: func() Payload { return new(RecoveryRequested) },
	EvRecoveryResolved:  func() Payload { return new(RecoveryResolved) },
	EvRewind:            func() Payload { return new(Rewound) },
	EvContext:           func() Payload { return new(ContextReading) },
	EvRuntimeContext:    func() Payload { return new(RuntimeContext) },
	EvCheckpoint:        func() Payload { return new(CheckpointTaken) },
	EvHandoff:           func() Payload { return new(HandoffUpdated) },
	EvBoundary:          func() Payload { return new(BoundaryCrossed) },
	EvBoundaryFailed:    func() Payload { return new(BoundaryFailed) },
	EvContinuity:        func() Payload { return new(Continuity) },
	EvMessagePinned:     func() Payload { return new(MessagePinned) },
	EvClear:             func() Payload { return new(Cleared) },
	EvCompact:           func() Payload { return new(CompactRequested) },

	EvMessageTranscribed: func() Payload { return new(MessageTranscribed) },
	EvFileSent:           func() Payload { return new(FileSent) },
	EvDiagnostic:         func() Payload { return new(Diagnosed) },
	EvToolAllowed:        func() Payload { return new(ToolAllowed) },
}

// JSON returns the event's wire bytes, encoded once however many
// subscribers receive it.
func (e *Event) JSON() []byte {
	e.once.Do(func() {
		if u, ok := e.Payload.(*unknownPayload); ok {
			e.raw = u.raw // a row of a type this version does not know, as stored
			return
		}
		if e.Payload == nil {
			e.raw = Marshal(&e.Header)
			return
		}
		e.raw = marshalFrame(&e.Header, e.Payload)
	})
	return e.raw
}

// marshalFrame is Marshal(p.frame(h)), by a hand-written encoder where
// one covers p (eventjson.go), the same bytes either way.
func marshalFrame(h *Header, p Payload) []byte {
	if size, ok := fastFrameSize(p); ok {
		if raw, ok := appendFastFrame(make([]byte, 0, size), h, p); ok {
			return raw
		}
	}
	return Marshal(p.frame(h))
}

// MarshalJSON is JSON, so an Event inside another value encodes flat too.
func (e *Event) MarshalJSON() ([]byte, error) { return e.JSON(), nil }

// UnmarshalJSON reads a frame or a stored row: the header, then the
// payload its type names, in one pass. A type this version does not know
// keeps its bytes, so nothing of it is lost.
func (e *Event) UnmarshalJSON(v []byte) error {
	// Every frame this package writes starts with its type: read it there
	// (a map index of string(bytes) does not allocate), else the slow way.
	mk := payloads[string(rowTypeBytes(v))]
	typ := ""
	if mk == nil {
		var h Header
		if err := json.Unmarshal(v, &h); err != nil {
			return err
		}
		typ, mk = h.Type, payloads[h.Type]
	}
	if mk == nil {
		if err := json.Unmarshal(v, &e.Header); err != nil {
			return err
		}
		e.Payload = &unknownPayload{typ: typ, raw: bytes.Clone(v)}
		return nil
	}
	p := mk()
	if err := json.Unmarshal(v, p.frame(&e.Header)); err != nil {
		return fmt.Errorf("%s event: %w", p.eventType(), err)
	}
	e.Payload = p
	return nil
}

// Message is the message the event carries: the message of a
// message.*, continuity and assistant.message event, a finished turn's
// reply, a failed turn's partial reply; nil for the other types (and for
// turns that ended without one).
func (e *Event) Message() *Message {
	if c, ok := e.Payload.(carrier); ok {
		return c.carried()
	}
	return nil
}

// Turn is the turn the event belongs to; empty for events of no turn
// (chat.created, message.accepted, /clear, ...).
func (e *Event) Turn() string {
	if t, ok := e.Payload.(interface{ turnID() string }); ok {
		return t.turnID()
	}
	return ""
}

// carrier is a payload that carries a message: the rows whose message text
// the record stores once (Message.TextAt, see rowBytes).
type carrier interface {
	Payload
	carried() *Message
	// carrying returns a copy of the payload with m as its message.
	carrying(m *Message) Payload
}

// unknownPayload is a stored row of a type this version does not know.
type unknownPayload struct {
	typ string
	raw []byte
}

func (u *unknownPayload) eventType() string   { return u.typ }
func (u *unknownPayload) frame(h *Header) any { return h }

// ChatCreated is chat.created: the first row of every chat.
type ChatCreated struct {
	Title string `json:"title,omitempty"`
}

// MessageAccepted is message.accepted: a person's message was stored,
// pending (or, answering a repeated client_id, as it is now).
type MessageAccepted struct {
	Message *Message `json:"message,omitempty"`
}

// MessageUpdated is message.updated: a pending message was edited.
type MessageUpdated struct {
	Message *Message `json:"message,omitempty"`
}

// MessageDeleted is message.deleted: a pending message was deleted.
type MessageDeleted struct {
	Message *Message `json:"message,omitempty"`
}

// MessagePicked is message.picked: a turn took the message (also a message
// a boundary carried into the fresh conversation).
type MessagePicked struct {
	Message *Message `json:"message,omitempty"`
	Turn    string   `json:"turn,omitempty"`
}

// TurnStarted is turn.started.
type TurnStarted struct {
	Turn string `json:"turn,omitempty"`
}

// ReplyDelta is reply.delta, never stored: the reply from Offset (in
// Unicode code points) on is Text.
type ReplyDelta struct {
	Turn   string `json:"turn,omitempty"`
	Offset int    `json:"offset"`
	Text   string `json:"text,omitempty"`
}

// ToolProgress is tool.progress, never stored: what a running call (an MCP
// tool) reported of its progress. Call carries the call's id and name.
type ToolProgress struct {
	Turn string             `json:"turn,omitempty"`
	Text string             `json:"text,omitempty"`
	Call *provider.ToolCall `json:"call,omitempty"`
}

func (*ToolProgress) eventType() string { return EvToolProgress }
func (p *ToolProgress) frame(h *Header) any {
	return &struct {
		*Header
		*ToolProgress
	}{h, p}
}
func (p *ToolProgress) turnID() string { return p.Turn }

// QuotaWait is quota.wait, never stored: the model request waits for its
// key's per-minute input-token window.
type QuotaWait struct {
	Turn   string `json:"turn,omitempty"`
	Quota  int64  `json:"quota,omitempty"`   // the learned quota; 0 when only a retry delay blocks
	WaitMS int64  `json:"wait_ms,omitempty"` // the expected wait
	Usage  int    `json:"usage"`             // the window's tokens
}

// TurnFinished is turn.finished: the turn ended with an answer, was
// stopped, or ended at a boundary (then Message is nil).
type TurnFinished struct {
	Message *Message       `json:"message,omitempty"` // the stored reply
	Turn    string         `json:"turn,omitempty"`
	Reply   string         `json:"reply"`
	Usage   provider.Usage `json:"usage"`
	Model   string         `json:"model,omitempty"`
	// Fallback says Model is not the chain's first.
	Fallback bool `json:"fallback,omitempty"`
	Stopped  bool `json:"stopped,omitempty"`
	// Measured is what the provider billed for the turn's last request
	// (the next turn's view starts from it); Pruned says the in-run safety
	// net had to clear tool results (the next turn then checkpoints).
	Measured *view.Measurement `json:"measured,omitempty"`
	Pruned   bool              `json:"pruned,omitempty"`
	// Held is how many queued messages a Stop held: they wait for the
	// person to send another message or /continue (Chat.Paused).
	Held int `json:"held,omitempty"`
}

// TurnFailed is turn.failed: the turn ended with an error of Class;
// Message is its partial reply, if any.
type TurnFailed struct {
	Message *Message `json:"message,omitempty"`
	Turn    string   `json:"turn,omitempty"`
	Error   string   `json:"error,omitempty"`
	Class   string   `json:"class,omitempty"`
}

// AssistantStep is assistant.message: an answer that asks for tool calls
// (Message.ToolCalls).
type AssistantStep struct {
	Message *Message `json:"message,omitempty"`
	Turn    string   `json:"turn,omitempty"`
}

// ToolCallStarted is tool.call: a call, journaled before it runs.
type ToolCallStarted struct {
	Turn string             `json:"turn,omitempty"`
	Call *provider.ToolCall `json:"call,omitempty"`
}

// ToolResult is tool.result: a call's result, journaled after it ran;
// Error is the first line of a failed call's output.
type ToolResult struct {
	Turn   string       `json:"turn,omitempty"`
	Error  string       `json:"error,omitempty"`
	Result *ToolOutcome `json:"result,omitempty"`
}

// ApprovalRequested is approval.requested: a call waits for permission.
type ApprovalRequested struct {
	Turn     string    `json:"turn,omitempty"`
	Approval *Approval `json:"approval,omitempty"`
}

// ApprovalResolved is approval.resolved: answered, or ended without an
// answer (Approval.Reason).
type ApprovalResolved struct {
	Turn     string    `json:"turn,omitempty"`
	Approval *Approval `json:"approval,omitempty"`
}

// RecoveryRequested is recovery.requested: a call was running when the
// gateway died. Call repeats Recovery.Call, for clients that read it there.
type RecoveryRequested struct {
	Turn     string             `json:"turn,omitempty"`
	Call     *provider.ToolCall `json:"call,omitempty"`
	Recovery *Recovery          `json:"recovery,omitempty"`
}

// RecoveryResolved is recovery.resolved: answered with Recovery.Action.
type RecoveryResolved struct {
	Turn     string    `json:"turn,omitempty"`
	Recovery *Recovery `json:"recovery,omitempty"`
}

// Rewound is rewind: /rewind N restored the workspace to before turn N
// (Turn); Text says what changed.
type Rewound struct {
	Turn string `json:"turn,omitempty"`
	Text string `json:"text,omitempty"`
}

// ContextReading is context: how full the conversation is as a turn
// starts, CONTEXT's fields at the top level of the frame.
type ContextReading struct {
	Turn string `json:"turn,omitempty"`
	// Model is the reading's model. It is written here, before the
	// reading's other fields, as the frame has always had it; it shadows
	// ContextInfo.Model on the wire (Info puts it back).
	Model string `json:"model,omitempty"`
	*runtime.ContextInfo
}

// Info is the reading, its model included.
func (c *ContextReading) Info() *runtime.ContextInfo {
	if c.ContextInfo == nil {
		return &runtime.ContextInfo{Model: c.Model}
	}
	ci := *c.ContextInfo
	ci.Model = c.Model
	return &ci
}

// RuntimeContext is runtime.context: the runtime-context sections a turn's
// request carried, and the tokens of what it sent.
type RuntimeContext struct {
	Turn     string          `json:"turn,omitempty"`
	Sections json.RawMessage `json:"sections,omitempty"`
	Tokens   int             `json:"tokens,omitempty"`
}

// CheckpointTaken is checkpoint: a model-free re-plan of the view, in
// force from now on; the messages through seq Through left it.
type CheckpointTaken struct {
	Turn       string          `json:"turn,omitempty"`
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
	Through    uint64          `json:"through,omitempty"`
}

// HandoffUpdated is handoff.updated: the assistant's half of the handoff
// record (absent when the runtime only asked for it: Reason "asked").
type HandoffUpdated struct {
	Turn    string          `json:"turn,omitempty"`
	Handoff json.RawMessage `json:"handoff,omitempty"`
	Reason  string          `json:"reason,omitempty"`
}

// BoundaryCrossed is boundary: the conversation through seq Through was
// written down (Record), archived and cleared.
type BoundaryCrossed struct {
	Turn      string   `json:"turn,omitempty"`
	Reason    string   `json:"reason,omitempty"` // hard or assistant
	Continued bool     `json:"continued"`        // the work carries on
	Record    string   `json:"record,omitempty"`
	Through   uint64   `json:"through,omitempty"`
	Notes     []string `json:"notes,omitempty"` // the memory notes reflect wrote
	Why       string   `json:"why,omitempty"`   // why a continue was refused
}

// BoundaryFailed is boundary.failed: a boundary could not happen; nothing
// changed.
type BoundaryFailed struct {
	Turn   string `json:"turn,omitempty"`
	Error  string `json:"error,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Continuity is continuity: the message a fresh conversation opens with.
type Continuity struct {
	Message *Message `json:"message,omitempty"`
	Turn    string   `json:"turn,omitempty"`
}

// MessagePinned is message.pinned: Message carries the id and the pinned
// state (and role and seq).
type MessagePinned struct {
	Message *Message `json:"message,omitempty"`
}

// Cleared is clear: /clear; requests start after this point.
type Cleared struct{}

// CompactRequested is compact: /compact [Text]; a checkpoint is taken on
// the next turn.
type CompactRequested struct {
	Text string `json:"text,omitempty"`
}

// MessageTranscribed is message.transcribed: a picked message's audio
// attachments, now carrying their transcripts; Error says why audio could
// not be heard.
type MessageTranscribed struct {
	Message *Message `json:"message,omitempty"`
	Turn    string   `json:"turn,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// FileSent is file.sent: a file the assistant delivers, as a new assistant
// message (caption and attachment); Call is the send_file call, nil for an
// image of the model's answer.
type FileSent struct {
	Message *Message           `json:"message,omitempty"`
	Turn    string             `json:"turn,omitempty"`
	Call    *provider.ToolCall `json:"call,omitempty"`
}

// Diagnosed is diagnostic: what one provider attempt, hook block or failed
// command left (local-only, never part of a request); Turn is empty for a
// failed command.
type Diagnosed struct {
	Turn       string              `json:"turn,omitempty"`
	Diagnostic *runtime.Diagnostic `json:"diagnostic,omitempty"`
}

// ToolAllowed is tool.allowed: Tool is allowed for every call of the chat
// (Allowed, from the approval named), or that allowance was revoked.
type ToolAllowed struct {
	Tool     string `json:"tool"`
	Allowed  bool   `json:"allowed"`
	Approval string `json:"approval,omitempty"`
}

func (*ToolAllowed) eventType() string { return EvToolAllowed }
func (p *ToolAllowed) frame(h *Header) any {
	return &struct {
		*Header
		*ToolAllowed
	}{h, p}
}

func (*Diagnosed) eventType() string { return EvDiagnostic }
func (p *Diagnosed) frame(h *Header) any {
	return &struct {
		*Header
		*Diagnosed
	}{h, p}
}
func (p *Diagnosed) turnID() string { return p.Turn }

// The methods each payload has. frame embeds the header and the payload in
// one struct (the header first), so encoding/json writes them flat.

func (*ChatCreated) eventType() string        { return EvChatCreated }
func (*MessageAccepted) eventType() string    { return EvMessageAccepted }
func (*MessageUpdated) eventType() string     { return EvMessageUpdated }
func (*MessageDeleted) eventType() string     { return EvMessageDeleted }
func (*MessagePicked) eventType() string      { return EvMessagePicked }
func (*TurnStarted) eventType() string        { return EvTurnStarted }
func (*ReplyDelta) eventType() string         { return EvReplyDelta }
func (*QuotaWait) eventType() string          { return EvQuotaWait }
func (*TurnFinished) eventType() string       { return EvTurnFinished }
func (*TurnFailed) eventType() string         { return EvTurnFailed }
func (*AssistantStep) eventType() string      { return EvAssistantStep }
func (*ToolCallStarted) eventType() string    { return EvToolCall }
func (*ToolResult) eventType() string         { return EvToolResult }
func (*ApprovalRequested) eventType() string  { return EvApprovalRequested }
func (*ApprovalResolved) eventType() string   { return EvApprovalResolved }
func (*RecoveryRequested) eventType() string  { return EvRecoveryRequested }
func (*RecoveryResolved) eventType() string   { return EvRecoveryResolved }
func (*Rewound) eventType() string            { return EvRewind }
func (*ContextReading) eventType() string     { return EvContext }
func (*RuntimeContext) eventType() string     { return EvRuntimeContext }
func (*CheckpointTaken) eventType() string    { return EvCheckpoint }
func (*HandoffUpdated) eventType() string     { return EvHandoff }
func (*BoundaryCrossed) eventType() string    { return EvBoundary }
func (*BoundaryFailed) eventType() string     { return EvBoundaryFailed }
func (*Continuity) eventType() string         { return EvContinuity }
func (*MessagePinned) eventType() string      { return EvMessagePinned }
func (*Cleared) eventType() string            { return EvClear }
func (*CompactRequested) eventType() string   { return EvCompact }
func (*MessageTranscribed) eventType() string { return EvMessageTranscribed }
func (*FileSent) eventType() string           { return EvFileSent }

func (p *ChatCreated) frame(h *Header) any {
	return &struct {
		*Header
		*ChatCreated
	}{h, p}
}
func (p *MessageAccepted) frame(h *Header) any {
	return &struct {
		*Header
		*MessageAccepted
	}{h, p}
}
func (p *MessageUpdated) frame(h *Header) any {
	return &struct {
		*Header
		*MessageUpdated
	}{h, p}
}
func (p *MessageDeleted) frame(h *Header) any {
	return &struct {
		*Header
		*MessageDeleted
	}{h, p}
}
func (p *MessagePicked) frame(h *Header) any {
	return &struct {
		*Header
		*MessagePicked
	}{h, p}
}
func (p *TurnStarted) frame(h *Header) any {
	return &struct {
		*Header
		*TurnStarted
	}{h, p}
}
func (p *ReplyDelta) frame(h *Header) any {
	return &struct {
		*Header
		*ReplyDelta
	}{h, p}
}
func (p *QuotaWait) frame(h *Header) any {
	return &struct {
		*Header
		*QuotaWait
	}{h, p}
}
func (p *TurnFinished) frame(h *Header) any {
	return &struct {
		*Header
		*TurnFinished
	}{h, p}
}
func (p *TurnFailed) frame(h *Header) any {
	return &struct {
		*Header
		*TurnFailed
	}{h, p}
}
func (p *AssistantStep) frame(h *Header) any {
	return &struct {
		*Header
		*AssistantStep
	}{h, p}
}
func (p *ToolCallStarted) frame(h *Header) any {
	return &struct {
		*Header
		*ToolCallStarted
	}{h, p}
}
func (p *ToolResult) frame(h *Header) any {
	return &struct {
		*Header
		*ToolResult
	}{h, p}
}
func (p *ApprovalRequested) frame(h *Header) any {
	return &struct {
		*Header
		*ApprovalRequested
	}{h, p}
}
func (p *ApprovalResolved) frame(h *Header) any {
	return &struct {
		*Header
		*ApprovalResolved
	}{h, p}
}
func (p *RecoveryRequested) frame(h *Header) any {
	return &struct {
		*Header
		*RecoveryRequested
	}{h, p}
}
func (p *RecoveryResolved) frame(h *Header) any {
	return &struct {
		*Header
		*RecoveryResolved
	}{h, p}
}
func (p *Rewound) frame(h *Header) any {
	return &struct {
		*Header
		*Rewound
	}{h, p}
}
func (p *ContextReading) frame(h *Header) any {
	return &struct {
		*Header
		*ContextReading
	}{h, p}
}
func (p *RuntimeContext) frame(h *Header) any {
	return &struct {
		*Header
		*RuntimeContext
	}{h, p}
}
func (p *CheckpointTaken) frame(h *Header) any {
	return &struct {
		*Header
		*CheckpointTaken
	}{h, p}
}
func (p *HandoffUpdated) frame(h *Header) any {
	return &struct {
		*Header
		*HandoffUpdated
	}{h, p}
}
func (p *BoundaryCrossed) frame(h *Header) any {
	return &struct {
		*Header
		*BoundaryCrossed
	}{h, p}
}
func (p *BoundaryFailed) frame(h *Header) any {
	return &struct {
		*Header
		*BoundaryFailed
	}{h, p}
}
func (p *Continuity) frame(h *Header) any {
	return &struct {
		*Header
		*Continuity
	}{h, p}
}
func (p *MessagePinned) frame(h *Header) any {
	return &struct {
		*Header
		*MessagePinned
	}{h, p}
}
func (p *Cleared) frame(h *Header) any {
	return &struct {
		*Header
		*Cleared
	}{h, p}
}
func (p *CompactRequested) frame(h *Header) any {
	return &struct {
		*Header
		*CompactRequested
	}{h, p}
}

func (p *MessageTranscribed) frame(h *Header) any {
	return &struct {
		*Header
		*MessageTranscribed
	}{h, p}
}
func (p *FileSent) frame(h *Header) any {
	return &struct {
		*Header
		*FileSent
	}{h, p}
}

// The payloads that carry a message (see carrier).

func (p *MessageAccepted) carried() *Message    { return p.Message }
func (p *MessageUpdated) carried() *Message     { return p.Message }
func (p *MessageDeleted) carried() *Message     { return p.Message }
func (p *MessagePicked) carried() *Message      { return p.Message }
func (p *TurnFinished) carried() *Message       { return p.Message }
func (p *TurnFailed) carried() *Message         { return p.Message }
func (p *AssistantStep) carried() *Message      { return p.Message }
func (p *Continuity) carried() *Message         { return p.Message }
func (p *MessagePinned) carried() *Message      { return p.Message }
func (p *MessageTranscribed) carried() *Message { return p.Message }
func (p *FileSent) carried() *Message           { return p.Message }

func (p *MessageAccepted) carrying(m *Message) Payload    { c := *p; c.Message = m; return &c }
func (p *MessageUpdated) carrying(m *Message) Payload     { c := *p; c.Message = m; return &c }
func (p *MessageDeleted) carrying(m *Message) Payload     { c := *p; c.Message = m; return &c }
func (p *MessagePicked) carrying(m *Message) Payload      { c := *p; c.Message = m; return &c }
func (p *TurnFinished) carrying(m *Message) Payload       { c := *p; c.Message = m; return &c }
func (p *TurnFailed) carrying(m *Message) Payload         { c := *p; c.Message = m; return &c }
func (p *AssistantStep) carrying(m *Message) Payload      { c := *p; c.Message = m; return &c }
func (p *Continuity) carrying(m *Message) Payload         { c := *p; c.Message = m; return &c }
func (p *MessagePinned) carrying(m *Message) Payload      { c := *p; c.Message = m; return &c }
func (p *MessageTranscribed) carrying(m *Message) Payload { c := *p; c.Message = m; return &c }
func (p *FileSent) carrying(m *Message) Payload           { c := *p; c.Message = m; return &c }

// The payloads of events that belong to a turn (see Event.Turn).

func (p *MessagePicked) turnID() string      { return p.Turn }
func (p *TurnStarted) turnID() string        { return p.Turn }
func (p *ReplyDelta) turnID() string         { return p.Turn }
func (p *QuotaWait) turnID() string          { return p.Turn }
func (p *TurnFinished) turnID() string       { return p.Turn }
func (p *TurnFailed) turnID() string         { return p.Turn }
func (p *AssistantStep) turnID() string      { return p.Turn }
func (p *ToolCallStarted) turnID() string    { return p.Turn }
func (p *ToolResult) turnID() string         { return p.Turn }
func (p *ApprovalRequested) turnID() string  { return p.Turn }
func (p *ApprovalResolved) turnID() string   { return p.Turn }
func (p *RecoveryRequested) turnID() string  { return p.Turn }
func (p *RecoveryResolved) turnID() string   { return p.Turn }
func (p *Rewound) turnID() string            { return p.Turn }
func (p *ContextReading) turnID() string     { return p.Turn }
func (p *RuntimeContext) turnID() string     { return p.Turn }
func (p *CheckpointTaken) turnID() string    { return p.Turn }
func (p *HandoffUpdated) turnID() string     { return p.Turn }
func (p *BoundaryCrossed) turnID() string    { return p.Turn }
func (p *BoundaryFailed) turnID() string     { return p.Turn }
func (p *Continuity) turnID() string         { return p.Turn }
func (p *MessageTranscribed) turnID() string { return p.Turn }
func (p *FileSent) turnID() string           { return p.Turn }
