// Package view turns a chat's stored rows into the model-facing messages of
// one request, inside the request budget, without a model call.
//
// Materialize runs the stages of Stages in order over the rows of the
// record (oldest first) and the checkpoint in force. Between checkpoints the
// view is append-only: the same rows and the same checkpoint give the same
// message bytes turn after turn, so the provider's prefix cache stays warm.
// When a checkpoint is due, the planner re-plans the view once: it masks old
// tool results, folds long answers to head and tail, and only then evicts
// the oldest whole turns into deterministic epoch cards. The caller stores
// the new Checkpoint and hands it back on later turns.
//
// The package is pure: it reads no storage and keeps no state. Tokens are
// the rows' stored counts, or the caller's counter for text it produces.
package view

import (
	"fmt"

	"github.com/mirror-gateway/mirror/runtime/budget"
	"github.com/mirror-gateway/mirror/runtime/ids"
	"github.com/mirror-gateway/mirror/runtime/provider"
)

// Kind is what a stored row is.
type Kind string

// The kinds of row Materialize reads.
const (
	KindUser      Kind = "user"      // a person's message (or a steer, a wake)
	KindAssistant Kind = "assistant" // an answer, possibly asking for tool calls
	KindTool      Kind = "tool"      // one tool call's result
	KindClear     Kind = "clear"     // a /clear topic boundary: nothing before it is sent
	KindContext   Kind = "context"   // the runtime context stored for a turn, before its reply
)

// Origin says where a user row came from, which decides how a card quotes it.
type Origin string

// The origins of a user row.
const (
	OriginPerson    Origin = ""          // an ordinary message: quoted as a request
	OriginAmendment Origin = "amendment" // a trusted redirect or steer: quoted as "assignment update"
	OriginWake      Origin = "wake"      // a runtime wake: sent, but never quoted as a request
)

// Row is one stored row of the record, as the caller reads it.
type Row struct {
	Seq        uint64              `json:"seq"`
	ID         string              `json:"id,omitempty"` // "m<seq>"; empty means that
	Kind       Kind                `json:"kind"`
	Turn       string              `json:"turn,omitempty"`
	Text       string              `json:"text,omitempty"`
	ToolCalls  []provider.ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string              `json:"tool_call_id,omitempty"`
	ToolName   string              `json:"tool_name,omitempty"`
	IsError    bool                `json:"is_error,omitempty"`
	// Tokens is the stored local count of everything the row sends (text,
	// and tool call names and arguments); 0 has Materialize count it.
	Tokens    int    `json:"tokens,omitempty"`
	Reasoning string `json:"reasoning,omitempty"`
	Pinned    bool   `json:"pinned,omitempty"`
	Origin    Origin `json:"origin,omitempty"`
	// Sections is a context row's runtime context, whole (not the delta).
	Sections []Section `json:"sections,omitempty"`
	// Parts are a user row's attachments. Their tokens are not in Tokens:
	// they depend on the provider the view is sized for (Input.Provider).
	Parts []provider.Part `json:"parts,omitempty"`
}

// MessageID is the row's id as pointers cite it: "m<seq>".
func (r *Row) MessageID() string {
	if r.ID != "" {
		return r.ID
	}
	return ids.Message(r.Seq)
}

// Section is one keyed piece of runtime context. A section whose Text is
// empty is absent.
type Section struct {
	Key  string `json:"key"`
	Text string `json:"text"`
}

// Keys of the sections Materialize adds to a turn's runtime context.
const (
	// WarningKey carries "# Context checkpoint ahead", once per epoch.
	WarningKey = "checkpoint-ahead"
	// PinsKey carries "# Pinned messages": late pins the checkpoint in
	// force shows only in part or not at all.
	PinsKey = "pinned-messages"
)

// Checkpoint is a frozen plan of the view: it says which rows are evicted
// into cards, which tool results are masked and which answers folded. It is
// JSON the caller stores (before the request is sent) and hands back; rows
// after AtSeq are appended verbatim until the next checkpoint.
type Checkpoint struct {
	Epoch   uint64   `json:"epoch"`   // 1 for the first checkpoint of a conversation
	AtSeq   uint64   `json:"at_seq"`  // newest row the plan saw; older rows lose their reasoning
	Evicted uint64   `json:"evicted"` // last evicted seq: rows up to it show only as cards and pins
	Cards   []Card   `json:"cards,omitempty"`
	Masked  []Cut    `json:"masked,omitempty"` // tool results shown as pointers
	Folded  []Cut    `json:"folded,omitempty"` // answers shown as head and tail
	Pinned  []uint64 `json:"pinned,omitempty"` // evicted rows kept verbatim after the cards
	// MaskedImages are user rows whose images show as pointers with a
	// handle (tool_output gives an image back).
	MaskedImages []uint64 `json:"masked_images,omitempty"`
	// Trigger is what asked for it: manual (/compact), auto (measured past
	// the mark), safety-net, overflow or admission. Hooks see manual as
	// manual and everything else as auto.
	Trigger      string `json:"trigger"`
	Instructions string `json:"instructions,omitempty"` // text after /compact, for hooks only
	Before       int    `json:"before"`                 // history tokens before
	After        int    `json:"after"`                  // history tokens after
	Target       int    `json:"target"`
	HeadTokens   int    `json:"head_tokens,omitempty"` // tokens of the cards and pins message
	Reason       string `json:"reason"`
}

// Cut is one row a checkpoint shows shortened, and the tokens of what it
// shows instead.
type Cut struct {
	Seq    uint64 `json:"seq"`
	Tokens int    `json:"tokens"`
}

// Measurement is what the provider billed for the newest request. It
// speaks only for a view of the same epoch and Basis: a bill for another
// model, system prompt or tool list says nothing of this request.
type Measurement struct {
	Tokens int    // input tokens billed, 0 when none
	Epoch  uint64 // the checkpoint epoch of the view it carried (0: none)
	Seq    uint64 // the newest row it carried; later rows are estimated
	Basis         // what else the request carried besides its rows
}

// Basis is what a request carries besides the conversation's rows, which a
// provider's bill depends on: the model that billed it, and fingerprints of
// the system prompt and the tool definitions (Fingerprint).
type Basis struct {
	Model  string `json:",omitempty"`
	Prompt string `json:",omitempty"`
	Tools  string `json:",omitempty"`
}

// Corrector corrects a local token estimate for a model with what its
// provider has been billing, margin included (tokens.Calibration).
type Corrector interface {
	Correct(model string, estimate int) int
}

// Signals are the flags that ask for a checkpoint whatever was measured.
type Signals struct {
	Compact      bool   // a manual /compact
	Instructions string // the text after /compact
	Pruned       bool   // the in-run safety net pruned last time
	Overflow     bool   // the provider overflowed or answered empty: checkpoint and rerun once
}

// Input is everything one materialization reads.
type Input struct {
	// Rows are the conversation's rows, oldest first. Rows at or before the
	// checkpoint's Evicted seq may be left out, except pinned ones.
	Rows       []Row
	Checkpoint *Checkpoint // the checkpoint in force; nil when none
	Budget     budget.Budget
	Overhead   int // fixed tokens: system prompt and tool definitions
	// Measured is the last provider measurement; it counts only when its
	// epoch and Basis are this view's.
	Measured Measurement
	// Basis is what this view's request carries besides its rows.
	Basis Basis
	// Correct scales every local estimate of the request's size (preflight,
	// admission, the rows after a measurement) for Basis.Model: a model
	// whose tokenizer counts more than the local one is sized by what it
	// bills. nil leaves the local count as it is.
	Correct Corrector
	Signals Signals
	Context []Section // this turn's runtime context, whole
	// Roster names the tools offered; pointers cite tool_output and
	// global_search only when they are in it.
	Roster []string
	// Count counts tokens of text the view produces; nil is tokens.Count.
	Count func(string) int
	// Provider is the kind (config providers[].kind) of the provider the
	// view is sized for: it picks the image rule attachments are sized by
	// (provider.PartTokens); "" sizes them at seed 000's flat allowance.
	Provider string
	// Lead are the messages the request opens with before the view's (the
	// system prompt): View.Request is them and the view's in one array,
	// so a request is not copied each time to put them in front. nil
	// leaves View.Request nil.
	Lead []provider.Message
	// Memo is what the views of the same conversation rendered before
	// (nil: nothing kept). It changes no byte of the view, only what
	// building it costs.
	Memo *Memo
	// AppendOnly says the caller never changes a row it handed in place,
	// nor the slices a row holds: it appends rows after them, in the same
	// array or in another. A Memo then takes the rows at the places of
	// the array it read last time for the ones it read, and reads only
	// the rows after them; without it every row is compared with the
	// memo's copy, so a row changed in place is seen.
	AppendOnly bool
}

// View is one request's messages and what the caller must store.
type View struct {
	// Messages are the request's messages, without the system prompt.
	Messages []provider.Message
	// Request is Input.Lead followed by Messages, in one array: Messages
	// is Request[len(Lead):], so what is appended to Messages in its
	// capacity continues Request's array, which a caller reslices to send
	// both at once. nil when the input has no Lead.
	Request []provider.Message
	// Reasoning is the stored reasoning to replay with Messages[i], for
	// providers that take it back; empty where a checkpoint dropped it.
	Reasoning []string
	// Checkpoint is the checkpoint planned this turn (nil: none); the caller
	// stores it before sending and passes it as Input.Checkpoint from then on.
	Checkpoint *Checkpoint
	// Context is this turn's runtime context to store as a KindContext row
	// after the turn's user rows; nil when nothing changed (store nothing).
	Context []Section
	// ContextTokens is the count of the context update sent, for that
	// row's Tokens.
	ContextTokens int
	Epoch         uint64 // the epoch the view belongs to, for the next Measurement
	Size          int    // the request's size, measured-or-estimated, with the overhead
	Measured      bool   // whether Size rests on a provider measurement
	Warned        bool   // the "checkpoint ahead" section was added this turn
	Stages        []StageReport
}

// StageReport is what one stage did, in numbers, for mirror replay.
type StageReport struct {
	Stage  string `json:"stage"`
	Rows   int    `json:"rows"`   // rows (or messages) left after the stage
	Tokens int    `json:"tokens"` // history tokens after the stage, when known
	Note   string `json:"note,omitempty"`
}

// BudgetError is a request that cannot fit, refused locally before it is
// sent.
type BudgetError struct {
	Stage string // "preflight", "admission", or "request" (the built request, before it is sent)
	Size  int    // estimated tokens of the request
	Limit int    // the ceiling it must fit
	Hint  string // what the person can do
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("%s: the request would be about %d tokens, over the %d-token request ceiling; %s",
		e.Stage, e.Size, e.Limit, e.Hint)
}
