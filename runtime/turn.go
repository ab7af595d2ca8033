package runtime

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/mirror-gateway/mirror/runtime/boundary"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/quota"
	"github.com/mirror-gateway/mirror/runtime/tokens"
	"github.com/mirror-gateway/mirror/runtime/tools"
	"github.com/mirror-gateway/mirror/runtime/tools/pgroup"
	"github.com/mirror-gateway/mirror/runtime/view"
)

// MaxSteps bounds the model requests of one turn: a model that keeps calling
// tools is stopped rather than left to loop.
const MaxSteps = 50

// Recovery actions for a call a crash interrupted.
const (
	Repeat = "repeat"
	Skip   = "skip"
)

// ToolResult is what one tool call gave.
type ToolResult = tools.Result

// Host is what a turn needs from the chat it runs in: a journal that is
// durable when each method returns, the person's approvals, and the redirect
// messages waiting at a tool boundary.
type Host interface {
	// Step stores an assistant message that asks for tool calls.
	Step(text string, calls []provider.ToolCall) error
	// CallStarted journals a call before it runs.
	CallStarted(call provider.ToolCall) error
	// Approve asks the person about a call; it blocks until they answer or
	// ctx is done.
	Approve(ctx context.Context, call provider.ToolCall) (bool, error)
	// CallFinished journals a call's result.
	CallFinished(call provider.ToolCall, res ToolResult) error
	// Redirects returns the messages sent to steer the running turn, now
	// picked up.
	Redirects() ([]provider.Message, error)
	// QuotaWait shows that a model request waits for its key's quota
	// window; it must not block the turn.
	QuotaWait(w quota.Wait)

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
	// recall_history, handoff_history, tool_output and global_search.
	Lookup(ctx context.Context, call provider.ToolCall) (ToolResult, error)
}

// ProcessJournal is a Host that journals the process group a call's command
// runs in: durably, before the command starts, so that after a crash the
// next start can stop a command still running and say so in the recovery.
type ProcessJournal interface {
	CallProcess(call provider.ToolCall, g pgroup.Group) error
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
	// Rows are the conversation's stored rows (since its latest boundary),
	// oldest first, ending with the ones the turn picked up. When nil, the
	// rows are made from History (callers without a record).
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
	// SessionStart says the previous turn took a checkpoint: SessionStart
	// hooks run (source compact) and their text joins the runtime context.
	SessionStart bool
	// Prepared is the view Prepare built on the chat's goroutine, stored
	// with the pickup; nil when the turn must build it (a boundary first,
	// hooks to run, calls to settle).
	Prepared *Prepared
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
	Steps int
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

// SkippedResult is what the model reads for an interrupted call that was not
// repeated.
const SkippedResult = "This call was interrupted (the gateway stopped while it ran) and was not repeated."

// Run answers one turn, calling tools as the model asks. onDelta receives
// streamed text in order; if it returns an error the turn stops with it. On
// cancellation Run returns the partial reply with ctx's error. The result
// says how the turn ended: a context cancelled with ErrStopped or
// ErrInterrupted as its cause ends Stopped or Interrupted.
func (e *Engine) Run(ctx context.Context, in TurnInput, onDelta func(text string) error) (TurnResult, error) {
	out, err := e.run(ctx, in, onDelta)
	out.End, out.Class = ending(ctx, out, err)
	if e.mon != nil && in.Host != nil {
		e.mon.ToolTurnEnded(in.Chat, turnID(in.Turn))
		if err == nil {
			e.mon.ToolResolved(in.Chat) // a turn that ends well closes its tool-loop breakers
		}
	}
	return out, err
}

func (e *Engine) run(ctx context.Context, in TurnInput, onDelta func(text string) error) (TurnResult, error) {
	t, err := e.newTurn(ctx, in, onDelta)
	if err != nil {
		return TurnResult{}, err
	}
	for p := t.first(); p != phaseDone; {
		if p, err = t.do(p); err != nil {
			return t.out, err
		}
	}
	return t.out, nil
}

// ToolLoopError ends a turn whose model kept making the same failing call;
// the tool-loop breaker it tripped shows on the Monitor.
type ToolLoopError struct{ Tool string }

func (e *ToolLoopError) Error() string {
	return fmt.Sprintf("paused: the same %s call kept failing in this turn; look at the tool's error, then tell the assistant how to go on", e.Tool)
}

func turnID(n uint64) string { return "t" + strconv.FormatUint(n, 10) }

// settle runs (Repeat) or skips a call a crash interrupted, or runs a call
// that had not started.
func (e *Engine) settle(ctx context.Context, in *TurnInput, call provider.ToolCall) (ToolResult, error) {
	switch in.Settle[call.ID] {
	case Skip:
		res := ToolResult{Content: SkippedResult, Full: SkippedResult, IsError: true}
		return res, in.Host.CallFinished(call, res)
	case Repeat:
		return e.runCall(ctx, in, call) // journaled already: no second tool.call
	default:
		if err := in.Host.CallStarted(call); err != nil {
			return ToolResult{}, err
		}
		return e.runCall(ctx, in, call)
	}
}

// runCall checks a journaled call against its schema and policy, asks the
// person when the policy says so, runs it, and journals the result.
func (e *Engine) runCall(ctx context.Context, in *TurnInput, call provider.ToolCall) (ToolResult, error) {
	var res ToolResult
	switch call.Name {
	case boundary.ToolHandoffUpdate:
		res = e.handoffUpdate(in, call)
		return res, in.Host.CallFinished(call, res)
	case boundary.ToolTaskList:
		res = e.taskList(call)
		return res, in.Host.CallFinished(call, res)
	case boundary.ToolRecallHistory, boundary.ToolHandoffHistory, boundary.ToolToolOutput, boundary.ToolGlobalSearch:
		res, err := in.Host.Lookup(ctx, call)
		if err != nil {
			res = ToolResult{Content: err.Error(), Full: err.Error(), IsError: true}
		}
		return res, in.Host.CallFinished(call, res)
	}
	if e.tools == nil {
		res = ToolResult{Content: "Not run: no tool " + call.Name + " is offered here.", IsError: true}
		return res, in.Host.CallFinished(call, res)
	}
	meta := tools.CallMeta{Chat: in.Chat, Turn: in.Turn, CallID: call.ID}
	if j, ok := in.Host.(ProcessJournal); ok {
		meta.Process = func(g pgroup.Group) error { return j.CallProcess(call, g) }
	}
	fail := func(msg string) ToolResult { return ToolResult{Content: msg, Full: msg, IsError: true} }
	if err := e.tools.Check(call); err != nil {
		res = fail(err.Error())
	} else {
		switch e.tools.Policy(call.Name) {
		case tools.Allow:
			res = e.tools.Run(ctx, call, meta)
		case tools.Ask:
			ok, err := in.Host.Approve(ctx, call)
			switch {
			case err != nil && ctx.Err() != nil:
				res = fail("Not run: the turn was stopped while waiting for permission.")
			case err != nil:
				return res, err
			case !ok:
				res = fail("Not run: the person denied this call.")
			default:
				res = e.tools.Run(ctx, call, meta)
			}
		default:
			res = fail(fmt.Sprintf("Not run: the tool %s is not allowed here (policy deny).", call.Name))
		}
	}
	return res, in.Host.CallFinished(call, res)
}

// openCalls returns the calls of the last assistant message that the history
// gives no result for.
func openCalls(h []provider.Message) []provider.ToolCall {
	for i := len(h) - 1; i >= 0; i-- {
		m := h[i]
		if m.Role == provider.RoleUser {
			return nil
		}
		if m.Role != provider.RoleAssistant || len(m.ToolCalls) == 0 {
			continue
		}
		done := map[string]bool{}
		for _, r := range h[i+1:] {
			if r.Role == provider.RoleTool {
				done[r.ToolCallID] = true
			}
		}
		var open []provider.ToolCall
		for _, c := range m.ToolCalls {
			if !done[c.ID] {
				open = append(open, c)
			}
		}
		return open
	}
	return nil
}

func toolMessage(call provider.ToolCall, r ToolResult) provider.Message {
	return provider.Message{Role: provider.RoleTool, ToolCallID: call.ID, Content: r.Content}
}

// answer asks the chain: models in order, falling over only when nothing was
// streamed yet and the failure is one another model may not share. With a
// quota Book, each attempt first reserves its estimated input tokens in the
// model's key window (waiting its turn, shown through host), and a
// rate-limit refusal that says when it passes is tried again on the same
// model, the next Reserve doing the waiting. It returns the answer, the
// model that gave it, and the local estimate of the request's input (what
// the quota reserved, and what calibration compares the bill with).
func (e *Engine) answer(ctx context.Context, chain []*Model, req provider.Request, host Host, onDelta func(string) error) (provider.Result, string, int, error) {
	var lastErr error
	est := e.estimate(req)
	var onWait func(quota.Wait)
	if e.quota != nil && host != nil {
		onWait = host.QuotaWait
	}
models:
	for _, m := range chain {
		key := quota.Key{Provider: m.ProvName, Model: m.Remote, Fingerprint: m.Fingerprint}
		for attempt := 1; ; attempt++ {
			release := func(quota.Usage) {}
			if e.quota != nil {
				rel, err := e.quota.Reserve(ctx, key, est, onWait)
				if err != nil {
					if ctx.Err() != nil {
						return provider.Result{}, m.Name, est, err
					}
					lastErr = err // too large or too long a wait here: the next model may fit
					continue models
				}
				release = rel
			}
			done := func(error, string) {}
			if e.mon != nil {
				d, err := e.mon.Provider(m.ProvName, m.Remote).Allow()
				if err != nil {
					release(quota.Usage{}) // nothing was sent
					lastErr = err          // open: the next model answers
					continue models
				}
				done = d
			}
			streamed := false
			r := req
			r.Model, r.MaxTokens = m.Remote, e.outputCap(m)
			res, err := e.ask(ctx, m, r, func(d provider.Delta) error {
				streamed = true
				return onDelta(d.Text)
			})
			if err != nil && ctx.Err() != nil {
				done(ctx.Err(), "canceled") // a stopped turn is not the provider's failure
			} else {
				done(err, string(provider.ClassOf(err)))
			}
			if e.quota != nil {
				if err != nil {
					e.quota.ObserveError(key, err)
				} else {
					e.quota.ObserveLimits(key, res.Limits)
				}
				release(quota.Billed(res, err))
			}
			if err == nil || streamed || ctx.Err() != nil {
				return res, m.Name, est, err
			}
			lastErr = err
			if e.quota != nil {
				if again, _ := e.quota.Retry(ctx, key, attempt, err); again {
					continue // the same model: Reserve waits out the window or delay
				}
			}
			if !provider.ClassOf(err).Retryable() {
				return res, m.Name, est, err
			}
			continue models
		}
	}
	if lastErr == nil {
		lastErr = errors.New("empty chain")
	}
	return provider.Result{}, "", est, lastErr
}

// estimate is req's input tokens as counted locally: each message's stored
// count (or a count of its content), the formatting overhead, and the tool
// definitions, counted once per Engine.
func (e *Engine) estimate(req provider.Request) int {
	n := tokens.Overhead(len(req.Messages))
	for _, m := range req.Messages {
		if m.Tokens > 0 {
			n += m.Tokens
		} else {
			n += tokens.Count(m.Content)
		}
	}
	return n + e.defsCount(req.Tools)
}

// defsCount is the tokens of the tool definitions' JSON. A turn offers the
// same definitions every time, so they are counted once per Engine.
func (e *Engine) defsCount(defs []provider.Tool) int {
	if len(defs) == 0 {
		return 0
	}
	e.defsOnce.Do(func() {
		// As the wire carries them: the schema as JSON, not as the base64
		// that marshalling its []byte would give.
		n := 0
		for _, d := range defs {
			n += tokens.Count(d.Name) + tokens.Count(d.Description) + tokens.Count(string(d.Parameters)) + tokens.MessageOverhead
		}
		e.defsTokens = n
	})
	return e.defsTokens
}
