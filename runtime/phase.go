package runtime

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mirror-gateway/mirror/monitor"
	"github.com/mirror-gateway/mirror/runtime/boundary"
	"github.com/mirror-gateway/mirror/runtime/ids"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tokens"
	"github.com/mirror-gateway/mirror/runtime/view"
)

// phase is where a running turn is. Each phase is a method of turn that
// does its steps and names the phase that follows; the decisions between
// phases are the pure functions below them, so the whole graph reads here.
type phase int

const (
	// phaseSettle runs or skips the calls a crash left open at the end of
	// the record, so their results follow them before anything is asked.
	// It leads to phaseView, or phaseDone when journaling fails.
	phaseSettle phase = iota

	// phaseView takes the turn's reading and builds its first view (or
	// takes the one Prepare built). When the picked messages carry the
	// conversation past hard, a boundary runs first and they go into the
	// fresh conversation. It leads to phaseAsk, or phaseDone on error.
	phaseView

	// phaseAsk sends the next request and reads its answer. When the
	// conversation crossed hard since the last step, nothing is sent: it
	// leads to phaseBoundary. Otherwise it leads to phaseRerun (the first
	// request overflowed or got nothing), phaseTools (the model called
	// tools), or phaseDone (an answer, an error, or too many steps).
	phaseAsk

	// phaseRerun takes a checkpoint and builds the view again after the
	// turn's first request overflowed or got an empty answer; it happens at
	// most once. It leads to phaseAsk, or phaseDone on error.
	phaseRerun

	// phaseTools journals the step and runs its calls in order. It leads
	// to phaseBoundary (the assistant called consolidate), phaseSteer, or
	// phaseDone (stopped, a failure, or a tool loop).
	phaseTools

	// phaseBoundary writes the record, reflects, and clears the
	// conversation. It leads to phaseAsk when the work continues, messages
	// were carried into the fresh conversation, or hard was crossed mid-turn
	// (the person is still owed an answer); else phaseDone.
	phaseBoundary

	// phaseSteer reads the messages sent to steer the turn at its tool
	// boundary. It leads to phaseAsk, or phaseDone when reading fails.
	phaseSteer

	// phaseDone ends the turn; it leads nowhere.
	phaseDone
)

var phaseNames = [...]string{"settle", "view", "ask", "rerun", "tools", "boundary", "steer", "done"}

func (p phase) String() string {
	if p >= 0 && int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("phase(%d)", int(p))
}

// turn is one running turn: what Engine.run kept in locals, each with its
// rule.
type turn struct {
	e   *Engine
	ctx context.Context
	// in is the turn's own copy of its input: the checkpoint, measurement
	// and signals change as the turn stores a checkpoint or a boundary.
	in      TurnInput
	onDelta func(text string) error

	chain []*Model        // the models asked, in order; never empty
	defs  []provider.Tool // the tools offered; none without a Host
	sz    sizer           // sized for chain[0], whose window the limits are shares of

	// rows is the conversation as stored: it grows with settled results
	// and the stored runtime context, and a boundary replaces it.
	rows []view.Row
	// rows[picked:end] are the messages the turn picked up; picked is 0
	// without a Host (nothing can cross first).
	picked, end int

	// v is the view the requests are built from; zero after a boundary
	// (the fresh conversation has no view epoch to measure).
	v view.View
	// conv is what the next request carries after the system prompt.
	conv []provider.Message
	// sent counts the messages of the request that earlier requests of the
	// turn sent: the safety net clears only results older than these.
	sent int

	// crossed says a boundary ran or was tried: one crossing, one boundary.
	crossed bool
	// overflowed says the turn ran again after an overflow or an empty
	// answer; it never does twice.
	overflowed bool
	// steered is the first seq of the redirects read at the last tool
	// boundary (0: none): at hard they go into the fresh conversation.
	steered uint64

	// answer is the last request's answer, read by phaseTools.
	answer provider.Result
	// next is the boundary phaseBoundary runs.
	next pendingBoundary

	out TurnResult
}

// pendingBoundary is the boundary a phase decided on.
type pendingBoundary struct {
	reason string
	want   *bool  // the assistant's consolidate decision; nil when it gave none
	carry  uint64 // CarryFrom: the first seq carried as typed (0: none)
}

// newTurn opens a turn: its chain, tools, sizer and rows. Prepare and Run
// both open turns with it, so they see the same conversation the same way.
//
// It fills t in place: a turn is over a kilobyte, and returned by value it
// was copied through the frames of newTurn and its callers, whose size
// made every turn's goroutine grow its stack once more.
func (e *Engine) newTurn(t *turn, ctx context.Context, in *TurnInput, onDelta func(string) error) error {
	chain := e.chains[in.Chain]
	if len(chain) == 0 {
		return fmt.Errorf("no chain %q", in.Chain)
	}
	*t = turn{}
	t.e, t.ctx, t.in, t.onDelta, t.chain = e, ctx, *in, onDelta, chain
	t.defs = e.offeredIn(&t.in)
	t.sz = e.sizer(chain[0], t.defs)
	t.rows = t.in.rows()
	t.picked, t.end = min(max(in.Picked, 0), len(t.rows)), len(t.rows)
	if in.Host == nil {
		t.picked = 0
	}
	return nil
}

// first is the phase the turn starts in.
func (t *turn) first() phase {
	return firstPhase(t.in.Host != nil, t.in.Prepared != nil, openAtEnd(t.rows))
}

// do runs phase p and returns the next; an error ends the turn.
func (t *turn) do(p phase) (phase, error) {
	switch p {
	case phaseSettle:
		return t.settle()
	case phaseView:
		return t.view()
	case phaseAsk:
		return t.ask()
	case phaseRerun:
		return t.rerun()
	case phaseTools:
		return t.tools()
	case phaseBoundary:
		return t.boundary()
	case phaseSteer:
		return t.steer()
	}
	return phaseDone, nil
}

// settle: each open call is run, repeated or skipped, and its result
// joins the rows.
func (t *turn) settle() (phase, error) {
	for _, call := range openCalls(t.sz.messagesOf(t.rows)) {
		res, seq, err := t.e.settle(t.ctx, &t.in, call)
		if err != nil {
			return phaseDone, err
		}
		t.rows = append(t.rows, view.Row{Seq: seq, Kind: view.KindTool, ToolCallID: call.ID, ToolName: call.Name,
			Text: res.Content, IsError: res.IsError, Tokens: tokens.Count(res.Content)})
	}
	return phaseView, nil
}

// view: the prepared view, or the reading (with the person's message
// already counted), a boundary first if that message crossed hard, and
// the view built and stored.
func (t *turn) view() (phase, error) {
	if p := t.in.Prepared; p != nil {
		return t.usePrepared(p)
	}
	reading, first := t.opening()
	if first {
		// A message that cannot fit even a fresh conversation is refused
		// before the boundary asks anything for it.
		if err := t.e.fitsAlone(&t.in, t.sz, t.rows[t.picked:]); err != nil {
			return phaseDone, err
		}
		var err error
		if reading, err = t.boundaryFirst(reading); err != nil {
			return phaseDone, err
		}
	}
	t.out.Context = info(reading, t.chain[0].Name)
	v, err := t.e.materialize(t.ctx, t.in.Host, &t.in, t.chain[0], t.sz, t.rows, t.out.Context, true)
	if err != nil {
		return phaseDone, err
	}
	t.v, t.conv = v, v.Messages
	return phaseAsk, nil
}

// opening is the reading the turn opens with, the person's messages
// already counted, and whether they carry the conversation past hard, so
// that a boundary comes first. Prepare reads it the same way.
func (t *turn) opening() (boundary.Reading, bool) {
	r := t.sz.readRows(t.rows, t.in.Checkpoint)
	return r, t.in.Host != nil && crossesFirst(r, t.picked, t.end)
}

// usePrepared takes the view Prepare built and stored with the pickup.
func (t *turn) usePrepared(p *Prepared) (phase, error) {
	if p.Err != nil {
		return phaseDone, p.Err
	}
	t.v, t.out.Context = p.View, p.Info
	if t.v.Checkpoint != nil {
		// Stored with the pickup: it is the one in force now.
		t.in.Checkpoint, t.in.Signals = t.v.Checkpoint, view.Signals{}
	}
	t.conv = t.v.Messages
	return phaseAsk, nil
}

// boundaryFirst writes down and clears the conversation before the
// picked messages, which go into the fresh one exactly as typed. A
// boundary that failed left everything as it was: the turn goes on if it
// fits, and the next turn tries again.
func (t *turn) boundaryFirst(reading boundary.Reading) (boundary.Reading, error) {
	t.crossed = true
	closing := t.e.closing(&t.in, t.sz, t.rows[:t.picked])
	b, fresh, err := t.e.consolidate(t.ctx, &t.in, closing, ReasonHard, nil, t.rows[t.picked].Seq, t.in.Last)
	switch {
	case err == nil:
		t.out.Boundary, t.rows = &b, fresh
		t.in.Checkpoint, t.in.Measured = nil, view.Measurement{}
		return t.sz.readRows(t.rows, nil), nil
	case t.ctx.Err() != nil:
		return reading, err
	}
	return reading, nil
}

// ask: the step bound, the hard limit, the request (the safety net
// applied), the answer accounted, and what follows it.
func (t *turn) ask() (phase, error) {
	if t.out.Steps == MaxSteps {
		return phaseDone, fmt.Errorf("the turn asked the model %d times without an answer; stopped", MaxSteps)
	}
	if crossesMidTurn(t.sz.read(t.conv), t.in.Host != nil, t.crossed, t.out.Steps) {
		// A turn is never cut in half: the next request is not sent, the
		// boundary runs after the last tool result, and messages that
		// steered the turn since its last step go into the fresh
		// conversation as typed, and are answered there.
		t.next = pendingBoundary{reason: ReasonHard, carry: t.steered}
		return phaseBoundary, nil
	}
	t.out.Steps++
	req := t.request()
	var last uint64
	if t.in.Host != nil {
		last = t.in.Host.Last()
	}
	streamed, onDelta := false, t.onDelta
	res, model, est, err := t.e.answer(t.ctx, t.chain, req, t.in.askerFor(PurposeTurn, true), func(text string) error { streamed = true; return onDelta(text) })
	t.account(res, model, est, last)
	t.answer = res
	if err == nil {
		t.deliverImages(res)
	}
	next := afterAsk(askOutcome{
		host: t.in.Host != nil, step: t.out.Steps, overflowed: t.overflowed, streamed: streamed,
		stopped: t.ctx.Err() != nil, failed: err != nil, overflow: err != nil && provider.ClassOf(err) == provider.ClassContextLength,
		text: res.Text != "", calls: len(res.ToolCalls),
	})
	if next == phaseDone {
		return phaseDone, err
	}
	return next, nil
}

// request is the next request: the system prompt and conv, with the
// results of this turn's older tool calls cleared first when one
// oversized turn nears the ceiling (a later turn checkpoints).
func (t *turn) request() provider.Request {
	msgs := t.withLead()
	if pruned, net := view.SafetyNet(msgs, t.sent, t.sz.room(), t.sz.count); net.Fired() {
		msgs, t.out.Pruned = pruned, true
		t.e.logNet(t.in.Chat, net)
	}
	t.sent = len(t.conv) + 1 // in the unpruned request: the system prompt and conv
	return provider.Request{Messages: msgs, Tools: t.defs, Conversation: t.in.Chat}
}

// withLead is the system prompt and conv as one slice: the view's Request
// while conv still runs on in that array (what the turn appended since
// went right after the view's messages), else a copy. Its capacity ends
// at its length, so an adapter appending to it copies it rather than
// write where conv goes on.
func (t *turn) withLead() []provider.Message {
	r, n := t.v.Request, len(t.conv)
	if len(r) == len(systemLead)+len(t.v.Messages) && len(t.v.Messages) > 0 && n > 0 &&
		&t.conv[0] == &t.v.Messages[0] && &r[len(systemLead)] == &t.conv[0] && len(systemLead)+n <= cap(r) {
		return r[: len(systemLead)+n : len(systemLead)+n]
	}
	return append(append(make([]provider.Message, 0, len(systemLead)+n), systemLead...), t.conv...)
}

// account adds an answer's usage to the result, and keeps what the
// provider billed: as the next view's measurement when the model the view
// was sized for answered, and for calibration.
func (t *turn) account(res provider.Result, model string, est int, last uint64) {
	t.out.Usage.InputTokens += res.Usage.InputTokens
	t.out.Usage.OutputTokens += res.Usage.OutputTokens
	t.out.Usage.CachedTokens += res.Usage.CachedTokens
	t.out.Reply, t.out.Model = res.Text, model
	t.out.Fallback = len(t.chain) > 0 && model != t.chain[0].Name
	if res.Usage.InputTokens == 0 {
		return
	}
	if model == t.chain[0].Name {
		t.out.Measured = view.Measurement{Tokens: res.Usage.InputTokens, Epoch: t.v.Epoch, Seq: last, Basis: t.sz.basis}
	}
	if t.e.cal != nil && model != "" {
		t.e.cal.Observe(model, est, res.Usage.InputTokens)
	}
}

// rerun: the overflow signalled, the stored context counted in the rows,
// the view built again (it takes a checkpoint), and the turn's steps
// started over.
func (t *turn) rerun() (phase, error) {
	t.overflowed = true
	t.in.Signals.Overflow = true
	t.rows = withStored(t.rows, t.v, t.in.Host.Last())
	v, err := t.e.materialize(t.ctx, t.in.Host, &t.in, t.chain[0], t.sz, t.rows, t.out.Context, false)
	if err != nil {
		return phaseDone, err
	}
	t.v, t.conv, t.out.Steps, t.sent = v, v.Messages, 0, 0
	return phaseAsk, nil
}

// tools: the step journaled, each call run and its result added, the
// tool-loop breaker consulted, and what follows.
func (t *turn) tools() (phase, error) {
	res := t.answer
	step, err := t.in.Host.Step(res.Text, res.ToolCalls)
	if err != nil {
		return phaseDone, err
	}
	t.conv = append(t.conv, provider.Message{Role: provider.RoleAssistant, Content: res.Text, ToolCalls: res.ToolCalls, Seq: step})
	var consolidate *boundary.Consolidate
	results := make([]ToolResult, 0, len(res.ToolCalls))
	for _, call := range res.ToolCalls {
		r, seq, c, err := t.call(call)
		if err != nil {
			return phaseDone, err
		}
		results = append(results, r)
		if c != nil {
			consolidate = c
		}
		t.conv = append(t.conv, toolMessage(call, r))
		t.conv[len(t.conv)-1].Seq = seq // its result's row, as the journal named it
		if t.loops(call, r) {
			// The same call keeps failing: pause the turn and say so,
			// rather than let the model loop.
			return phaseDone, &ToolLoopError{Tool: call.Name}
		}
	}
	t.conv = withRecovered(t.conv, t.sz.m.ProvKind, results)
	next := afterTools(t.ctx.Err() != nil, consolidate != nil)
	switch next {
	case phaseDone:
		t.out.Reply = ""
		return phaseDone, t.ctx.Err()
	case phaseBoundary:
		// The assistant judged a phase done: the boundary runs after the
		// step's results, recorded as its decision.
		want := consolidate.Continue
		t.next = pendingBoundary{reason: ReasonAssistant, want: &want}
	}
	return next, nil
}

// call journals and runs one call, and returns its result with the seq of
// the result's row; consolidate is answered here (it runs after the step),
// and returned when its arguments are valid.
func (t *turn) call(call provider.ToolCall) (ToolResult, uint64, *boundary.Consolidate, error) {
	if err := t.in.Host.CallStarted(call); err != nil {
		return ToolResult{}, 0, nil, err
	}
	if call.Name != boundary.ToolConsolidate {
		r, seq, err := t.e.runCall(t.ctx, &t.in, call)
		return r, seq, nil, err
	}
	var r ToolResult
	var consolidate *boundary.Consolidate
	c, perr := boundary.ParseConsolidate(json.RawMessage(call.Arguments))
	if perr != nil {
		r = ToolResult{Content: perr.Error(), Full: perr.Error(), IsError: true}
	} else {
		consolidate = &c
		r = ToolResult{Content: "Consolidating after this step.", Full: "Consolidating after this step."}
	}
	seq, err := t.in.Host.CallFinished(call, r)
	return r, seq, consolidate, err
}

// loops reports whether a failed call tripped the tool-loop breaker.
func (t *turn) loops(call provider.ToolCall, r ToolResult) bool {
	return r.IsError && t.e.mon != nil && t.ctx.Err() == nil &&
		t.e.mon.ToolFailure(t.in.Chat, ids.Turn(t.in.Turn), monitor.CallSignature(call.Name, []byte(call.Arguments)))
}

// boundary: the record, reflect, archive and clear; then the fresh
// conversation, built through the view like any other (its reading and
// runtime context stored before the request), or the end of the turn when
// the work stops there.
func (t *turn) boundary() (phase, error) {
	t.crossed = true
	b, fresh, err := t.e.consolidate(t.ctx, &t.in, t.conv, t.next.reason, t.next.want, t.next.carry, t.in.Host.Last())
	if err != nil {
		return phaseDone, err
	}
	t.out.Boundary, t.out.Measured, t.v = &b, view.Measurement{}, view.View{}
	// What the conversation just archived had in force speaks no more.
	t.in.Checkpoint, t.in.Measured, t.in.Signals, t.in.SessionStart = nil, view.Measurement{}, view.Signals{}, false
	t.rows = fresh
	if afterBoundary(b.Continued, t.next.carry != 0, t.next.reason == ReasonHard) == phaseDone {
		t.out.Reply = ""
		return phaseDone, t.e.freshReading(&t.in, t.sz, fresh, t.chain[0].Name)
	}
	ci := info(t.sz.readRows(fresh, nil), t.chain[0].Name)
	v, err := t.e.materialize(t.ctx, t.in.Host, &t.in, t.chain[0], t.sz, fresh, ci, true)
	if err != nil {
		return phaseDone, err
	}
	t.v, t.conv, t.sent = v, v.Messages, 0
	return phaseAsk, nil
}

// steer: the messages sent to steer the turn are read at its tool
// boundary and join the conversation.
func (t *turn) steer() (phase, error) {
	from := t.in.Host.Last() + 1
	red, err := t.in.Host.Redirects()
	if err != nil {
		return phaseDone, err
	}
	t.steered = 0
	if len(red) > 0 {
		t.steered = from
	}
	for i := range red { // their attachments, by the rule the view sizes them by
		red[i].Tokens += provider.PartsTokens(t.sz.m.ProvKind, red[i].Parts)
	}
	t.conv = append(t.conv, red...)
	return phaseAsk, nil
}

// firstPhase: a resumed turn with a Host first settles the calls its
// record left open (their results must follow them), unless Prepare
// built its view already; every other turn starts with its view.
func firstPhase(host, prepared, openAtEnd bool) phase {
	if host && !prepared && openAtEnd {
		return phaseSettle
	}
	return phaseView
}

// crossesFirst says the messages a turn picked up (rows[picked:end])
// carry a conversation that was there before them (rows[:picked]) past
// hard: the boundary comes first, and they go into the fresh conversation.
func crossesFirst(r boundary.Reading, picked, end int) bool {
	return r.HardReached && picked > 0 && picked < end
}

// crossesMidTurn says the conversation crossed hard during the turn's tool
// loop: the next request is not sent and a boundary runs. A turn without
// a Host has no record to write; one that crossed once never crosses
// again; the first request of a turn is sent (its opening decided).
func crossesMidTurn(r boundary.Reading, host, crossed bool, steps int) bool {
	return r.HardReached && host && !crossed && steps > 0
}

// askOutcome is what phaseAsk knows when its answer is in.
type askOutcome struct {
	host       bool // the turn has a Host (tools, a record)
	step       int  // the step just asked, from 1
	overflowed bool // the turn ran again once already
	streamed   bool // text reached the person
	stopped    bool // the turn's context is done
	failed     bool // the request failed
	overflow   bool // it failed because the request exceeded the window
	text       bool // the answer has text
	calls      int  // the tool calls the answer asked for
}

// afterAsk: a first request that overflowed, or that got nothing at all,
// runs again once with a checkpoint, if nothing was streamed and the turn
// is not stopped; tool calls go to phaseTools; anything else (an answer,
// an error, a turn without a Host) ends the turn.
func afterAsk(o askOutcome) phase {
	empty := !o.failed && !o.text && o.calls == 0
	if o.host && o.step == 1 && !o.overflowed && !o.streamed && !o.stopped && (o.overflow || empty) {
		return phaseRerun
	}
	if o.failed || o.calls == 0 || !o.host {
		return phaseDone
	}
	return phaseTools
}

// afterTools: a stopped turn ends once its results are journaled; a
// consolidate call runs the boundary; else the redirects are read.
func afterTools(stopped, consolidate bool) phase {
	switch {
	case stopped:
		return phaseDone
	case consolidate:
		return phaseBoundary
	}
	return phaseSteer
}

// afterBoundary: the turn goes on in the fresh conversation when the work
// continues, when it carried messages (they are answered there), or when
// hard was crossed inside the tool loop: that boundary cut a turn that had
// not answered the person yet, so it goes on whatever the record says is
// owed, and the person gets an answer. Only the assistant's own decision
// to stop ends the turn at its boundary.
func afterBoundary(continued, carried, midTurnHard bool) phase {
	if continued || carried || midTurnHard {
		return phaseAsk
	}
	return phaseDone
}
