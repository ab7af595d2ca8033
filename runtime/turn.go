package runtime

import (
	"context"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/boundary"
	"github.com/mirror-gateway/mirror/runtime/ids"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/quota"
	"github.com/mirror-gateway/mirror/runtime/tools"
	"github.com/mirror-gateway/mirror/runtime/view"
)

// MaxSteps bounds the model requests of one turn: a model that keeps calling
// tools is stopped rather than left to loop.
const MaxSteps = 50

// Host is what a turn needs from the chat it runs in, in three roles: the
// journal of its steps, the person it answers, and the chat's record.
type Host interface {
	Journal
	Person
	Record
}

// Journal stores a turn's steps and calls; each is durable when its
// method returns. The rows it stores are named by the seq it returns, not
// by the record's last seq read after: other rows (a message the person
// queues meanwhile) may land in between.
type Journal interface {
	// Step stores an assistant message that asks for tool calls and
	// returns its row's seq.
	Step(text string, calls []provider.ToolCall) (uint64, error)
	// CallStarted journals a call before it runs.
	CallStarted(call provider.ToolCall) error
	// CallFinished journals a call's result and returns its row's seq.
	CallFinished(call provider.ToolCall, res ToolResult) (uint64, error)
}

// Person is the one the turn answers: their approvals, the messages they
// send to steer the turn, and what they are shown while it waits.
type Person interface {
	// Approve asks the person about a call; it blocks until they answer or
	// ctx is done. change is what a file tool's call would change if it
	// ran now (nil for other tools), for the person to judge.
	Approve(ctx context.Context, call provider.ToolCall, change *tools.Proposal) (bool, error)
	// Redirects returns the messages sent to steer the running turn, now
	// picked up.
	Redirects() ([]provider.Message, error)
	// QuotaWait shows that a model request waits for its key's quota
	// window; it must not block the turn.
	QuotaWait(w quota.Wait)
}

// Record is the chat's record of the conversation, as the turn reads and
// writes it: the reading, checkpoints, the handoff, boundaries, lookups.
type Record interface {
	// Context stores the reading the turn starts with and the runtime
	// context sections its view carries (whole; nil when none changed),
	// before the first request is sent. A turn that was Prepared had them
	// stored with its pickup.
	Context(info ContextInfo, sections []view.Section, tokens int) error
	// Checkpoint stores a checkpoint the view planned, before the request
	// that carries it is sent.
	Checkpoint(cp *view.Checkpoint) error
	// Handoff is the record as kept now: the assistant's half as it last
	// wrote it, the runtime's half as the record saw it, and whether the
	// runtime asked for it already in this conversation.
	Handoff() (h boundary.Handoff, asked bool)
	// Last is the record's last seq now.
	Last() uint64
	// HandoffUpdated stores the assistant's half of the record and returns
	// the row's seq. asked marks the runtime's one forced ask (answered or
	// not), so it is never asked twice in a conversation.
	HandoffUpdated(h boundary.Handoff, asked, answered bool) (uint64, error)
	// Boundary archives the conversation and clears it, in one
	// transaction, and returns the fresh conversation's rows (its opening
	// and the messages carried into it); on error nothing changed, and the
	// chat says so.
	Boundary(b Boundary) ([]view.Row, error)
	// Lookup answers the tools that read the chat's own record:
	// recall_history, handoff_history, tool_output and global_search; and
	// recall_memory, which reads the notes of the chat's owner only.
	Lookup(ctx context.Context, call provider.ToolCall) (ToolResult, error)
}

// TurnInput is what a turn reads: the chain to ask and the conversation so far,
// oldest first, ending with the messages the turn picked up.
type TurnInput struct {
	Chat    string
	Turn    uint64
	Chain   string
	History []provider.Message
	// Host journals tool calls; nil offers the model no tools.
	Host Host
	// Settle says, by call id, what to do with calls the history left
	// without a result because a crash interrupted them: Repeat or Skip.
	// Open calls not named here had not started, and run as usual.
	Settle map[string]string
	// Servers are the MCP servers the chat offers the model; nil offers
	// every configured one, an empty list none.
	Servers []string
	// Rows are the conversation's stored rows (since its latest boundary),
	// oldest first, ending with the ones the turn picked up. When nil, the
	// rows are made from History (callers without a record). The runtime
	// never changes them in place (a transcript goes into its own copy), so
	// a caller may hand the same rows to turn after turn.
	Rows []view.Row
	// Picked is the index in Rows (or History) where the messages this
	// turn picked up begin; len(Rows) when it picked none.
	Picked int
	// Last is the record's last seq before the turn picked anything up.
	Last uint64
	// Checkpoint is the checkpoint in force; Measured what the provider
	// billed for the conversation's last request; Signals the flags that
	// ask for a checkpoint (a /compact, a prune, an overflow).
	Checkpoint *view.Checkpoint
	Measured   view.Measurement
	Signals    view.Signals
	// Policies overlay tools.policies for this turn, by tool name (or a
	// pattern such as github__*): the policies of the role of the person
	// whose message the turn answers (people.policies in runtime.yaml). A
	// tool tools.policies denies stays denied.
	Policies map[string]string
	// Withhold are the tool policies of the role of the chat's owner (its
	// creator): the tools they deny are not offered at all, so the model
	// is not shown what it may not call. They are the owner's, not the
	// asker's, so the offered list (and the request's bytes) stays the
	// same whoever speaks; Policies still decides each call.
	Withhold map[string]string
	// Owner is the id of the person the chat belongs to (its creator; ""
	// without people): the memory notes reflect writes are theirs.
	Owner string
	// Payer is the id of the person the turn's requests are billed to
	// (who asked; "" without people), for the cost ledger.
	Payer string
	// SessionStart says the previous turn took a checkpoint: SessionStart
	// hooks run (source compact) and their text joins the runtime context.
	SessionStart bool
	// Prepared is the view Prepare built on the chat's goroutine, stored
	// with the pickup; nil when the turn must build it (a boundary first,
	// hooks to run, calls to settle).
	Prepared *Prepared
	// ViewMemo is the chat's view memo (view.Input.Memo), kept by the
	// caller from turn to turn; nil keeps nothing. A caller that sets it
	// changes no row of Rows in place once handed (view.Input.AppendOnly).
	ViewMemo *view.Memo
}

// Prepared is a turn's starting reading and view.
type Prepared struct {
	Info ContextInfo
	View view.View
	// Err is a local budget error: the request cannot fit, and the turn
	// fails with it before anything is sent.
	Err error
}

// TurnResult is a turn's answer.
type TurnResult struct {
	Reply string // the final answer (on failure or stop: the partial one)
	Usage provider.Usage
	Model string
	// Fallback says Model is not the chain's first: the first failed (or
	// did not fit) and a later model of the chain answered.
	Fallback bool
	Steps    int
	// Boundary is the boundary the turn ran, if any.
	Boundary *Boundary
	// Measured is what the provider billed for the turn's last request:
	// the measurement the next turn's view starts from.
	Measured view.Measurement
	// Pruned says the in-run safety net cleared tool results: the next
	// turn takes a checkpoint.
	Pruned bool
	// Context is the reading the turn started with.
	Context ContextInfo
	// End says how the turn ended; Class how it failed (Failed and
	// Interrupted only).
	End   Ending
	Class ErrorClass
}

// Run answers one turn, calling tools as the model asks. onDelta receives
// streamed text in order; if it returns an error the turn stops with it. On
// cancellation Run returns the partial reply with ctx's error. The result
// says how the turn ended: a context cancelled with ErrStopped or
// ErrInterrupted as its cause ends Stopped or Interrupted.
func (e *Engine) Run(ctx context.Context, in TurnInput, onDelta func(text string) error) (TurnResult, error) {
	reserveStack()
	out, err := e.run(ctx, in, onDelta)
	out.End, out.Class = ending(ctx, out, err)
	if e.mon != nil && in.Host != nil {
		e.mon.ToolTurnEnded(in.Chat, ids.Turn(in.Turn))
		if err == nil {
			e.mon.ToolResolved(in.Chat) // a turn that ends well closes its tool-loop breakers
		}
	}
	return out, err
}

func (e *Engine) run(ctx context.Context, in TurnInput, onDelta func(text string) error) (TurnResult, error) {
	if e.mon != nil {
		// Before anything is sent, transcription included: a spent daily
		// budget refuses the turn until it resets.
		if err := e.mon.CheckBudget(in.Chat); err != nil {
			return TurnResult{}, err
		}
	}
	var t turn
	if err := e.newTurn(&t, ctx, &in, onDelta); err != nil {
		return TurnResult{}, err
	}
	if err := t.transcribe(); err != nil { // before any view: the model reads transcripts
		return t.out, err
	}
	for p := t.first(); p != phaseDone; {
		var err error
		if p, err = t.do(p); err != nil {
			return t.out, err
		}
	}
	return t.out, nil
}

// Prepare builds a turn's view on the chat's goroutine, so that what must
// be stored before the request is sent (the context reading, the runtime
// context, a checkpoint) is stored with the pickup rather than in a commit
// of its own. It leaves in.Prepared nil when the turn must build the view
// itself: the picked messages carry the conversation past hard (a boundary
// comes first), calls wait to be settled, or a hook must run.
func (e *Engine) Prepare(in *TurnInput) {
	if in.Host == nil || in.SessionStart && e.hooks.Configured(config.HookSessionStart) {
		return
	}
	var t turn
	err := e.newTurn(&t, context.Background(), in, nil)
	if err != nil || openAtEnd(t.rows) || e.transcribes(in, t.rows, t.picked) { // calls to settle, audio to hear first
		return
	}
	r, first := t.opening()
	if first {
		return // a boundary comes first
	}
	ci := info(r, t.chain[0].Name)
	v, err := view.Materialize(e.viewInput(in, t.sz, t.rows, ci, ""))
	if err != nil {
		in.Prepared = &Prepared{Info: ci, Err: err}
		return
	}
	if v.Checkpoint != nil && (e.hooks.Configured(config.HookPreCompact) || e.hooks.Configured(config.HookPostCompact)) {
		return
	}
	ci.Request, ci.Ceiling, ci.NextCheckpoint = v.Size, t.sz.budget.Ceiling, t.sz.budget.Mark
	in.Prepared = &Prepared{Info: ci, View: v}
}

// turnStack is about the stack a turn's goroutine reaches: the phases,
// the request's encoding, the HTTP client and the stream's reading.
const turnStack = 16 << 10

// reserveStack grows a turn's goroutine, which the caller starts with the
// runtime's small starting stack, to turnStack at once, while the stack
// holds only the caller's frames. Left to grow as the turn goes deeper,
// it was copied two or three times a turn, the last copies deep in the
// request with every frame's pointers adjusted (1–2 % of a gateway's CPU
// at 100 chats through the OpenAI adapter; BenchmarkTurnChatGoroutine).
//
// The frame's room is never written (touching 12 KiB of a new stack each
// turn cost more than the copies it saves): it is declared where it is
// never reached, and the frame is sized, and the stack grown on entry,
// for it all the same.
//
//go:noinline
func reserveStack() {
	if touchRoom {
		var room [turnStack - 4<<10]byte
		keepRoom(room[:])
	}
}

// touchRoom is false: reserveStack's room is not written. It is a
// variable so that the room is not optimised away with its branch.
var touchRoom = false

// keepRoom uses room.
//
//go:noinline
func keepRoom(room []byte) { room[0] = 1 }
