package chats

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/ids"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/quota"
	"github.com/mirror-gateway/mirror/runtime/tools"
	bolt "go.etcd.io/bbolt"
)

// More buckets of this package.
var (
	bucketOutputs = []byte("tool_outputs") // chat id → bucket: handle → whole tool output
	bucketHeld    = []byte("held_answers") // recovery id → action, for a chat that could not take it
)

// exec runs f on the actor's goroutine and returns its error; the turn's
// goroutine uses it to journal.
func (a *actor) exec(f func() error) error {
	res := make(chan error, 1)
	select {
	case a.inbox <- func() { res <- f() }:
	case <-a.done:
		return ErrClosed
	}
	return <-res
}

// host is the chat side of a running turn (runtime.Host).
type host struct {
	a *actor
	t *turn
}

// QuotaWait shows the chat's subscribers that the turn's model request
// waits for its key's quota window: a quota.wait that, like reply.delta,
// carries the latest durable seq and is never stored. It never blocks the
// turn: the actor gets it when it can.
func (h *host) QuotaWait(w quota.Wait) {
	go h.a.post(func() {
		a := h.a
		if a.turn != h.t {
			return
		}
		if !h.t.durable && a.flush() != nil {
			return // a wait is never shown before the turn's start
		}
		qw := &QuotaWait{Turn: h.t.id, Quota: w.Quota, Usage: w.Usage, WaitMS: w.Wait.Milliseconds()}
		ev := NewEvent(a.id, a.meta.Seq, time.Now().UTC(), qw)
		h.t.wait = &runningWait{Wait: Wait{Quota: w.Quota, Usage: w.Usage, WaitMS: qw.WaitMS}, until: ev.Time.Add(w.Wait)}
		for sub := range a.subs {
			sub.Deliver(Delivery{Event: ev})
		}
	})
}

// CallProgress shows the chat's subscribers what a running call reported
// of its progress: a tool.progress that, like quota.wait, carries the
// latest durable seq and is never stored. It never blocks the call.
func (h *host) CallProgress(call provider.ToolCall, message string) {
	go h.a.post(func() {
		a := h.a
		if a.turn != h.t {
			return
		}
		ev := NewEvent(a.id, a.meta.Seq, time.Now().UTC(), &ToolProgress{Turn: h.t.id,
			Call: &provider.ToolCall{ID: call.ID, Name: call.Name}, Text: message})
		for sub := range a.subs {
			sub.Deliver(Delivery{Event: ev})
		}
	})
}

// Diagnostic adds what one attempt or hook block left to the record
// (runtime.DiagnosticJournal). It goes with the turn's next commit rather
// than one of its own: a model request costs no extra sync, and nothing is
// shown before it is durable.
func (h *host) Diagnostic(d runtime.Diagnostic) {
	_ = h.a.exec(func() error {
		if h.a.usable() != nil {
			return nil // a chat that cannot write keeps no diagnostic
		}
		h.a.append(&Diagnosed{Turn: h.t.id, Diagnostic: &d}, Origin{})
		return nil
	})
}

func (h *host) Step(text string, calls []provider.ToolCall) (uint64, error) {
	var seq uint64
	err := h.a.exec(func() error {
		if err := h.a.usable(); err != nil {
			return err
		}
		h.t.wait = nil // the request went through
		seq = h.a.seq + 1
		toks := h.a.count(text)
		for _, c := range calls {
			toks += h.a.count(c.Name) + h.a.count(c.Arguments)
		}
		m := &Message{ID: ids.Message(seq), Seq: seq, Role: provider.RoleAssistant, Text: text,
			State: MsgStep, Turn: h.t.id, ToolCalls: calls, Tokens: toks}
		ev := h.a.append(&AssistantStep{Turn: h.t.id, Message: m}, Origin{})
		m.Time = ev.Time
		h.a.msgs = append(h.a.msgs, *m)
		return h.a.flush()
	})
	return seq, err
}

func (h *host) CallStarted(call provider.ToolCall) error {
	h.a.waitHeld() // a late renewal: the call waits for it rather than the turn ending
	return h.a.exec(func() error {
		if err := h.a.mayRun(); err != nil { // the call runs next
			return err
		}
		h.t.wait = nil
		c := call
		h.a.append(&ToolCallStarted{Turn: h.t.id, Call: &c}, Origin{})
		return h.a.flush()
	})
}

func (h *host) Approve(ctx context.Context, call provider.ToolCall, change *tools.Proposal) (bool, error) {
	var w *waiting
	err := h.a.exec(func() error {
		if err := h.a.usable(); err != nil {
			return err
		}
		id := ids.NewApproval(h.a.id)
		if old, ok := h.a.reask[call.ID]; ok {
			// Asked before a crash and never answered: the same question,
			// so a card or button showing the old one still answers it.
			id = old.ID
			delete(h.a.reask, call.ID)
		}
		w = &waiting{Approval: Approval{ID: id, Call: call, Tool: call.Name, Turn: h.t.id, Time: time.Now().UTC(), Change: change},
			answer: make(chan bool, 1)}
		ap := w.Approval
		h.a.append(&ApprovalRequested{Turn: h.t.id, Approval: &ap}, Origin{})
		h.a.approvals[w.ID] = w
		return h.a.flush()
	})
	if err != nil {
		return false, err
	}
	select {
	case ok := <-w.answer:
		return ok, nil
	case <-ctx.Done():
		// Stop cancels the question; an answer racing it is simply not read.
		_ = h.a.exec(func() error {
			if _, still := h.a.approvals[w.ID]; still && !h.t.aborted {
				h.a.resolveApproval(w, false, ReasonStopped, Origin{})
				return h.a.flush()
			}
			return nil
		})
		return false, ctx.Err()
	}
}

// CallFinished journals a call's result and returns its row's seq (0 when
// shutdown left the call open).
func (h *host) CallFinished(call provider.ToolCall, res runtime.ToolResult) (uint64, error) {
	var seq uint64
	err := h.a.exec(func() error {
		if h.t.aborted {
			return nil // shutdown: the call stays open and becomes a recovery
		}
		if err := h.a.usable(); err != nil {
			return err
		}
		out := &ToolOutcome{CallID: call.ID, Name: call.Name, Content: res.Content, IsError: res.IsError, Handle: res.Handle, Size: len(res.Full),
			Attachments: outcomeAttachments(res.Parts)}
		if res.Full == "" {
			out.Size = len(res.Content)
		}
		p := &ToolResult{Turn: h.t.id, Result: out}
		if res.IsError {
			p.Error = firstLine(res.Content)
		}
		ev := h.a.append(p, Origin{})
		if res.Handle != "" {
			h.a.b.outputs = append(h.a.b.outputs, [2]string{res.Handle, res.Full})
		}
		h.a.conv.handoff.Seen.ObserveCall(call.Name, call.Arguments, res.IsError, ev.Seq)
		h.a.msgs = append(h.a.msgs, Message{ID: ids.Message(ev.Seq), Role: provider.RoleTool, Seq: ev.Seq, Time: ev.Time,
			Turn: h.t.id, Text: res.Content, ToolCallID: call.ID, State: MsgDone, Tokens: h.a.count(res.Content),
			Tool: call.Name, IsError: res.IsError, Attachments: out.Attachments})
		seq = ev.Seq
		return h.a.flush()
	})
	return seq, err
}

// LedgerJournal (runtime.LedgerJournal): in cluster mode a file tool's
// change goes in the chat's record before the file changes, as a flush
// of its ledger row that every node applies to its own ledger (the
// workspace is shared, so any owner can list and rewind it). Only while
// the chat's fence holds, like the call itself. In single-node mode the
// ledger commits its rows itself (nil), as it always did.
func (h *host) LedgerJournal() func(tools.LedgerRow) error {
	if h.a.s.opt.RecordLog == nil {
		return nil
	}
	return func(r tools.LedgerRow) error {
		return h.a.exec(func() error {
			a := h.a
			if h.t.aborted || a.turn != h.t {
				return fmt.Errorf("chat %s: the turn has ended", a.id)
			}
			if err := a.mayRun(); err != nil {
				return err
			}
			// Past every key this node's ledger holds of the chat: it has
			// applied every flush of the chat before this one.
			if err := a.s.store.db.View(func(tx *bolt.Tx) (err error) {
				r.Key, err = tools.NextLedgerKey(tx, a.id)
				return err
			}); err != nil {
				return err
			}
			a.b.ledger.Put = append(a.b.ledger.Put, r)
			return a.flush()
		})
	}
}

func (h *host) Redirects() ([]provider.Message, error) {
	var out []provider.Message
	err := h.a.exec(func() error {
		if err := h.a.usable(); err != nil {
			return err
		}
		kept := h.a.pending[:0]
		for _, p := range h.a.pending {
			if p.Mode != ModeRedirect {
				kept = append(kept, p)
				continue
			}
			m := *p
			m.State, m.Turn = MsgPicked, h.t.id
			h.a.pick(&m, h.t.id)
			h.a.b.delPend = append(h.a.b.delPend, m.ID)
			// Its attachments go with it (the runtime sizes them).
			out = append(out, provider.Message{Role: provider.RoleUser, Content: m.Text, Tokens: m.Tokens,
				Parts: h.a.s.parts(m.Attachments, m.TranscribeError)})
		}
		h.a.pending = kept
		return h.a.flush()
	})
	return out, err
}

func (a *actor) usable() error {
	if a.broken != nil {
		return a.broken
	}
	return nil
}

// mayRun is usable, and in cluster mode that the chat's fence holds: a
// tool runs outside the log's fence, so only an owner whose lease holds
// lets one run. Without it the turn stops here.
func (a *actor) mayRun() error {
	if err := a.usable(); err != nil {
		return err
	}
	if err := a.held(); err != nil {
		a.unheld(err)
		return a.broken
	}
	return nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// resolveApproval records the answer; the caller tells the waiting call
// (w.answer) only once that record is durable.
func (a *actor) resolveApproval(w *waiting, allow bool, reason string, o Origin) {
	delete(a.approvals, w.ID)
	ap := w.Approval
	ap.Allow, ap.Reason = &allow, reason
	a.append(&ApprovalResolved{Turn: w.Turn, Approval: &ap}, o)
}

func (a *actor) answerApproval(id string, allow, forChat bool, o Origin) error {
	if err := a.owner(); err == nil && a.held() != nil {
		// The lease lapsed for a moment (a late renewal): the question
		// stays open, to be answered again.
		return fmt.Errorf("approval %s: this node's hold on the chat is being renewed; answer again: %w", id, ErrUnavailable)
	}
	if err := a.mayRun(); err != nil { // an allowed call runs next
		return err
	}
	w := a.approvals[id]
	if w == nil {
		return fmt.Errorf("approval %s is not waiting (answered already, or its turn ended): %w", id, ErrNotFound)
	}
	if t := a.turn; o.By != "" && !o.Owner && t != nil && len(t.askers) > 0 && !slices.Contains(t.askers, o.By) {
		// Only the person who asked, or an owner, answers: in a shared
		// chat nobody else allows a call on their behalf.
		return fmt.Errorf("approval %s: %w", id, ErrNotFound)
	}
	if forChat {
		if err := a.allowForChat(w, o); err != nil {
			return err
		}
	}
	a.resolveApproval(w, allow, "", o)
	// The call runs only once its approval is durable: a call sent before
	// (an MCP call has nothing else to journal before it goes) would,
	// after a crash, look never approved, and be asked for again as if it
	// had never run.
	err := a.flush()
	w.answer <- allow && err == nil
	return err
}

func (a *actor) answerRecovery(id, action string, o Origin) error {
	if err := a.usable(); err != nil {
		return err
	}
	r := a.recoveries[id]
	if r == nil {
		return fmt.Errorf("recovery %s is not waiting (answered already?): %w", id, ErrNotFound)
	}
	if askers := a.recoveryAskers[id]; o.By != "" && !o.Owner && len(askers) > 0 && !slices.Contains(askers, o.By) {
		// As for approvals: in a shared chat, only who asked, or an owner.
		return fmt.Errorf("recovery %s: %w", id, ErrNotFound)
	}
	delete(a.recoveries, id)
	delete(a.recoveryAskers, id)
	res := *r
	res.Action = action
	a.append(&RecoveryResolved{Turn: r.Turn, Recovery: &res}, o)
	a.settled[r.Call.ID] = action
	a.meta.Resume = true
	if err := a.flush(); err != nil {
		return err
	}
	a.maybeStart()
	return nil
}

// recoverAfterCrash turns what a dead process left open into records: an
// interrupted turn, unanswered approvals, and calls without results. A call
// that waited for its approval never started: the resumed turn asks for it
// again, under the same approval id. Every other call left without a result
// becomes one recovery (never two for the same call), saying what became of
// its process (procs, by call id).
func (a *actor) recoverAfterCrash(started map[string]*Event, approvals map[string]*Approval, held [][2]string, procs map[string]string) {
	if a.meta.Turn != "" {
		a.append(&TurnFailed{Turn: a.meta.Turn, Class: string(runtime.ClassInterrupted),
			Error: "the gateway stopped while this turn ran; it goes on when the chat is back"}, Origin{})
		a.meta.Turn = ""
		a.meta.Resume = true
	}
	recovering := map[string]bool{}
	for _, r := range a.recoveries {
		recovering[r.Call.ID] = true
	}
	for _, ap := range approvals {
		id := ap.Call.ID
		if started[id] != nil && !recovering[id] && a.settled[id] == "" && procs[id] == "" {
			// Asked, never answered, so never run: the resumed turn takes
			// the call up where it was (runtime.Repeat runs a journaled
			// call without journaling it twice) and asks again.
			if a.reask == nil {
				a.reask = map[string]Approval{}
			}
			a.reask[id] = *ap
			a.settled[id] = runtime.Repeat
			a.meta.Resume = true
			delete(started, id)
			continue
		}
		allow, r := false, *ap
		r.Allow, r.Reason = &allow, ReasonInterrupted
		a.append(&ApprovalResolved{Turn: ap.Turn, Approval: &r}, Origin{})
	}
	// In record order, so recoveries are asked in the order calls ran.
	var open []*Event
	for _, ev := range started {
		if id := ev.Payload.(*ToolCallStarted).Call.ID; !recovering[id] && a.settled[id] == "" {
			open = append(open, ev)
		}
	}
	sortEvents(open)
	for _, ev := range open {
		c := ev.Payload.(*ToolCallStarted)
		r := &Recovery{ID: ids.NewRecovery(a.id), Call: *c.Call, Turn: c.Turn, Time: time.Now().UTC(),
			Process: procs[c.Call.ID]}
		rc := *r
		a.append(&RecoveryRequested{Turn: c.Turn, Recovery: &rc, Call: &rc.Call}, Origin{})
		a.recoveries[r.ID] = r
		a.meta.Resume = true
	}
	for _, h := range held {
		if r := a.recoveries[h[0]]; r != nil {
			delete(a.recoveries, h[0])
			res := *r
			res.Action = h[1]
			a.append(&RecoveryResolved{Turn: r.Turn, Recovery: &res}, Origin{})
			a.settled[r.Call.ID] = h[1]
		}
		a.b.dirty = true
		a.dropHeld = append(a.dropHeld, h[0])
	}
}

// dropReask resolves the approvals a crash left that the turn meant to ask
// again but did not (it failed first, or the policy no longer asks), so
// none stays open in the record.
func (a *actor) dropReask() {
	if a.broken != nil || len(a.reask) == 0 {
		return
	}
	for _, ap := range a.reask {
		allow, r := false, ap
		r.Allow, r.Reason = &allow, ReasonInterrupted
		a.append(&ApprovalResolved{Turn: ap.Turn, Approval: &r}, Origin{})
	}
	a.reask = nil
}

func sortEvents(evs []*Event) {
	for i := 1; i < len(evs); i++ {
		for j := i; j > 0 && evs[j].Seq < evs[j-1].Seq; j-- {
			evs[j], evs[j-1] = evs[j-1], evs[j]
		}
	}
}

// heldAnswers reads the recovery answers kept for chat while it was away.
func heldAnswers(tx *bolt.Tx, chat string) [][2]string {
	b := tx.Bucket(bucketHeld)
	if b == nil {
		return nil
	}
	var out [][2]string
	prefix := []byte(ids.RecoveryPrefix(chat))
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		out = append(out, [2]string{string(k), string(v)})
	}
	return out
}

// AnswerApproval allows or denies a call waiting for permission, from any
// transport; the answer reaches the chat that owns it.
func (s *Service) AnswerApproval(ctx context.Context, id string, allow bool, o Origin) error {
	chat, ok := ids.ParseApproval(id)
	if !ok {
		return fmt.Errorf("approval %q: %w", id, ErrNotFound)
	}
	if s.routed(ctx, chat) {
		return routeErr(ctx, s, chat, opFrame{Op: opApprove, ID: id, Allow: allow}, o)
	}
	return s.do(ctx, chat, func(a *actor) error { return a.answerApproval(id, allow, false, o) })
}

// AnswerRecovery answers an interrupted call with runtime.Repeat or
// runtime.Skip. It reaches the chat that owns the call, whichever transport
// it came from. When that chat cannot take it now the answer is held, and
// delivered is false; it is delivered when the chat is loaded again.
func (s *Service) AnswerRecovery(ctx context.Context, id, action string, o Origin) (delivered bool, err error) {
	if action != runtime.Repeat && action != runtime.Skip {
		return false, fmt.Errorf("%w: action must be repeat or skip", ErrBadInput)
	}
	chat, ok := ids.ParseRecovery(id)
	if !ok {
		return false, fmt.Errorf("recovery %q: %w", id, ErrNotFound)
	}
	if s.routed(ctx, chat) {
		return routeOp[bool](ctx, s, chat, opFrame{Op: opRecover, ID: id, Action: action}, o)
	}
	err = s.do(ctx, chat, func(a *actor) error { return a.answerRecovery(id, action, o) })
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrBadInput), ctx.Err() != nil:
		return false, err
	}
	// The chat is unavailable (shutting down, or its last write failed):
	// keep the answer for when it is back.
	if herr := s.store.Write(ctx, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketHeld)
		if err != nil {
			return err
		}
		return b.Put([]byte(id), []byte(action))
	}); herr != nil {
		return false, fmt.Errorf("%w (and holding the answer failed: %v)", err, herr)
	}
	return false, nil
}

// cmdChanges is /changes: what the file tools changed, by turn.
func (s *Service) cmdChanges(ctx context.Context, chat string, _ []string, _ string, _ Origin) (string, error) {
	if s.opt.Ledger == nil {
		return "No file tools are configured, so there are no changes.", nil
	}
	return doValue(ctx, s, chat, func(a *actor) (string, error) {
		list, err := s.opt.Ledger.Changes(a.id)
		return describeChanges(list), err
	})
}

// cmdRewind is /rewind N: the workspace goes back to before turn N.
func (s *Service) cmdRewind(ctx context.Context, chat string, fields []string, _ string, o Origin) (string, error) {
	if len(fields) != 2 {
		return "", fmt.Errorf("%w: usage: /rewind N (a turn number from /changes)", ErrBadInput)
	}
	n, ok := ids.CitedTurn(fields[1])
	if !ok || n == 0 {
		return "", fmt.Errorf("%w: /rewind takes a turn number, such as /rewind 12", ErrBadInput)
	}
	if s.opt.Ledger == nil {
		return "", fmt.Errorf("%w: no file tools are configured", ErrBadInput)
	}
	return doValue(ctx, s, chat, func(a *actor) (string, error) {
		if a.turn != nil {
			return "", fmt.Errorf("%w: stop the running turn before rewinding", ErrInUse)
		}
		var report tools.RewindReport
		var err error
		if s.opt.RecordLog != nil {
			// Cluster mode: only while the chat's fence holds (the files
			// change outside the log); the changes it undid are forgotten
			// by every node with the flush that records the rewind.
			if err := a.mayRun(); err != nil {
				return "", err
			}
			var w tools.LedgerWrites
			report, w, err = s.opt.Ledger.RewindJournaled(a.id, n, s.opt.Workspace)
			a.b.ledger.Forget = append(a.b.ledger.Forget, w.Forget...)
		} else {
			report, err = s.opt.Ledger.Rewind(a.id, n, s.opt.Workspace)
		}
		if err != nil {
			return "", err
		}
		out := describeRewind(report)
		a.append(&Rewound{Turn: ids.Turn(n), Text: out}, o)
		return out, a.flush()
	})
}

// cmdStop is /stop.
func (s *Service) cmdStop(ctx context.Context, chat string, _ []string, _ string, o Origin) (string, error) {
	if err := s.Stop(ctx, chat, o); err != nil {
		return "", err
	}
	c, err := s.Get(ctx, chat)
	if err == nil && c.Paused && c.Pending > 0 {
		return fmt.Sprintf("Stopped. %s held: send a message or /continue to go on.", queuedCount(c.Pending)), nil
	}
	return "Stopped.", nil
}

// cmdContinue is /continue.
func (s *Service) cmdContinue(ctx context.Context, chat string, _ []string, _ string, _ Origin) (string, error) {
	n, err := s.Continue(ctx, chat)
	if err != nil {
		return "", err
	}
	if n == 0 {
		return "Nothing is held: no queued message waits.", nil
	}
	return fmt.Sprintf("%s started.", queuedCount(n)), nil
}

// Continue lets the queue a Stop held run again and returns how many
// messages it released (0: nothing was held).
func (s *Service) Continue(ctx context.Context, chat string) (int, error) {
	if s.routed(ctx, chat) {
		return routeOp[int](ctx, s, chat, opFrame{Op: opContinue}, Origin{})
	}
	return doValue(ctx, s, chat, func(a *actor) (int, error) {
		if !a.meta.Paused {
			return 0, nil
		}
		n := len(a.pending)
		a.release()
		a.maybeStart()
		return n, a.flush()
	})
}

func queuedCount(n int) string {
	if n == 1 {
		return "1 queued message"
	}
	return fmt.Sprintf("%d queued messages", n)
}

// describeChanges lists file changes for /changes: sanitized metadata only.
func describeChanges(list []tools.ChangeInfo) string {
	if len(list) == 0 {
		return "No file changes in this chat."
	}
	var b strings.Builder
	b.WriteString("File changes in this chat (turn, status, path, bytes before → after):\n")
	for _, c := range list {
		path := c.Path
		if c.Hidden {
			path = "(a path that looks secret)"
		}
		fmt.Fprintf(&b, "  turn %d  %-8s  %s  %d → %d\n", c.Turn, c.Status, path, c.BytesBefore, c.BytesAfter)
	}
	b.WriteString("Undo with /rewind N: the workspace goes back to before turn N.")
	return b.String()
}

// describeRewind says what /rewind did, sanitized.
func describeRewind(r tools.RewindReport) string {
	var b strings.Builder
	b.WriteString(r.String())
	for _, f := range r.Files {
		path := f.Path
		if f.Hidden {
			path = "(a path that looks secret)"
		}
		fmt.Fprintf(&b, "\n  %s  %s", f.Outcome, path)
		if f.Reason != "" {
			fmt.Fprintf(&b, " (%s)", f.Reason)
		}
	}
	return b.String()
}

// commandFailed keeps a failed slash command as a diagnostic of its chat
// (seed 002: slash-command errors are diagnostics when a session is
// active): the command's name, never its arguments, and why it failed. A
// chat that does not exist or cannot write keeps none.
func (s *Service) commandFailed(ctx context.Context, chat, text string, cerr error) {
	name, _, _ := strings.Cut(strings.TrimSpace(text), " ")
	name = provider.CleanID(name, "")
	if len(name) > 32 {
		name = name[:32]
	}
	outcome := runtime.OutcomeError
	switch {
	case errors.Is(cerr, ErrBadInput):
		outcome = "bad_input"
	case errors.Is(cerr, ErrInUse):
		outcome = "in_use"
	case errors.Is(cerr, ErrNotFound):
		outcome = "not_found"
	case errors.Is(cerr, context.Canceled), errors.Is(cerr, context.DeadlineExceeded), errors.Is(cerr, ErrClosed):
		return // the asker went away: nothing about the command
	}
	d := runtime.Diagnostic{Kind: runtime.DiagCommand, Name: name, Outcome: outcome, Error: runtime.DiagError(cerr)}
	_ = s.do(ctx, chat, func(a *actor) error {
		if a.usable() != nil {
			return nil
		}
		a.append(&Diagnosed{Diagnostic: &d}, Origin{})
		return a.flush()
	})
}
