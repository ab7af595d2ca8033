package chats

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mirror-gateway/mirror/chats/people"
	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/ids"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tools"
	"github.com/mirror-gateway/mirror/runtime/view"
	bolt "go.etcd.io/bbolt"
)

// Causes a turn's context is cancelled with.
var (
	errStopped  = runtime.ErrStopped
	errShutdown = runtime.ErrInterrupted
)

// actor owns one live chat. Every field is touched only on its goroutine.
type actor struct {
	s     *Service
	id    string
	inbox chan func() // unbuffered: a send succeeds only while the actor runs
	done  chan struct{}

	meta   Chat   // as last committed
	listed Chat   // as list watchers last heard of it
	seq    uint64 // last seq handed out (>= meta.Seq)
	// msgs is the conversation since the latest boundary (what the next
	// view is built from). What came before stays in the store only: a
	// snapshot reads the transcript from there, page by page, so a chat's
	// memory does not grow with its length.
	msgs    []Message
	pins    map[string]bool // message id → pinned, as message.pinned rows left it
	pending []*Message
	subs    map[Subscriber]struct{}

	b    batch // written but not yet committed
	turn *turn

	// owed are client_id → message id pairs whose message.accepted rows
	// are committed but which the client_ids index does not hold yet:
	// they are written clientIDBatch at a time (see indexClientIDs), and
	// a resend finds them here meanwhile. A crash loses nothing: the rows
	// hold them, and loading the chat takes them back from every row
	// after the index's watermark.
	owed [][2]string

	approvals  map[string]*waiting  // by approval id, while a call waits for the person
	recoveries map[string]*Recovery // by recovery id, until answered
	settled    map[string]string    // call id → repeat|skip, for the next turn
	flushT     *time.Timer
	flushC     <-chan time.Time

	// recoveryAskers are, per waiting recovery, the people whose messages
	// its interrupted turn had picked up: they (and owners) answer it.
	recoveryAskers map[string][]string

	// viewMemo is what building this chat's views rendered, for the next.
	viewMemo view.Memo
	// viewRows are the rows of the conversation as rows() last built
	// them, kept between turns: the next turn builds only the messages
	// added since. touch drops them when a message in memory changes.
	viewRows rowCache

	quitting bool
	broken   error
	dropHeld []string // held recovery answers applied, to delete at the next commit
	// dropProcs are journaled tool processes of a previous process, looked
	// at when the chat loaded, to delete at the next commit.
	dropProcs []string
	// reask holds approvals a crash left unanswered, by call id: their
	// calls never started, so the resumed turn asks them again, under the
	// same id.
	reask map[string]Approval

	conv conversation // the state of the conversation since the latest boundary
	// context is the last context reading, for /status.
	context *runtime.ContextInfo
	// compact is the text of a /compact not yet acted on (nil: none).
	compact *string

	// active is when the actor last did something (Shed's measure of
	// idleness); shed says a Shed asked it to leave memory now.
	active time.Time
	shed   bool

	// own is this node's ownership of the chat in cluster mode (nil: not
	// owned, or single-node mode); logAt is the log position the next
	// flush appends after (replica.go).
	own   *owned
	logAt uint64
	// heldC fires when a turn that could not start because the fence
	// did not hold just then is tried again.
	heldC <-chan time.Time
}

// batch is what the actor has decided but not yet committed. Its events are
// published only after the commit.
type batch struct {
	events  []*Event
	origins []Origin // parallel to events
	putPend []*Message
	delPend []string
	clients [][2]string // client_id, message id
	outputs [][2]string // handle, whole tool output
	dirty   bool        // metadata changed without an event
	// archive is a boundary's copy of the conversation, written in the
	// same transaction as its rows (flush returns an *archiveError when
	// that transaction fails).
	archive *archiveEntry
	// ledger are the file-change ledger's writes (cluster mode only).
	ledger tools.LedgerWrites
	// charges are tokens turns used, added to their people's day.
	charges []charge
	// acks are answers that wait for this batch's commit (see
	// errAnswerAtCommit), called with its outcome after its events were
	// published.
	acks []func(error)
}

// errAnswerAtCommit is what an actor task returns when its answer waits for
// the batch it wrote to be committed (doValue then hands the answer over
// from flush, with the commit's outcome): a message that starts a turn at
// once is acknowledged with that turn's end when the end comes within
// PickupDelay, in one commit instead of two.
var errAnswerAtCommit = errors.New("answered when the batch commits")

// unput drops m from the pending messages this batch would store, and says
// whether it was there.
func (b *batch) unput(m *Message) bool {
	for i, p := range b.putPend {
		if p == m {
			b.putPend = append(b.putPend[:i], b.putPend[i+1:]...)
			return true
		}
	}
	return false
}

// charge is tokens a turn used, to add to a person's day (people usage),
// in the commit that records the turn's end.
type charge struct {
	person string
	tokens int64
}

// chargesOn are the batch's charges as its flush carries them, on day.
func (b *batch) chargesOn(day string) []Charge {
	var out []Charge
	for _, c := range b.charges {
		if c.person != "" && c.tokens > 0 {
			out = append(out, Charge{Person: c.person, Day: day, Tokens: c.tokens})
		}
	}
	return out
}

func (b *batch) empty() bool {
	return len(b.events) == 0 && len(b.putPend) == 0 && len(b.delPend) == 0 && len(b.outputs) == 0 && !b.dirty && b.archive == nil &&
		b.ledger.Empty()
}

type turn struct {
	id       string
	cancel   context.CancelCauseFunc
	text     strings.Builder
	shown    int // code points of text already published as deltas
	durable  bool
	seq      uint64 // turn.started
	stoppers []Origin
	waiters  []chan struct{}
	// askers are the people whose messages the turn picked up: they (and
	// owners) answer its approvals.
	askers  []string
	aborted bool // cut short by shutdown: open calls stay open, to recover
	start   time.Time
	// wait is the quota wait its model request is in, until the turn
	// shows it went on (text, a step, a call), so a snapshot shows it
	// as the live view does.
	wait *runningWait
}

// runningWait is a turn's quota wait and when it ends.
type runningWait struct {
	Wait
	until time.Time
}

// waiting is an approval a turn is blocked on.
type waiting struct {
	Approval
	answer chan bool
}

func loadActor(s *Service, id string) (*actor, error) {
	a := &actor{s: s, id: id, inbox: make(chan func()), done: make(chan struct{}), subs: map[Subscriber]struct{}{},
		approvals: map[string]*waiting{}, recoveries: map[string]*Recovery{}, settled: map[string]string{}, pins: map[string]bool{}}
	started := map[string]*Event{} // tool.call rows by call id, until their result
	calls := map[string]*provider.ToolCall{}
	openApprovals := map[string]*Approval{}
	pickedBy := map[string][]string{} // turn id: who its picked messages were by
	var held [][2]string
	var procs map[string]procEntry
	if s.opt.RecordLog != nil {
		// Cluster mode: the chat's bbolt is first brought up to the log
		// when this node owns it and has not read its tail yet.
		var err error
		if a.own, a.logAt, err = s.ownedFresh(id); err != nil {
			return nil, err
		}
	}
	err := s.store.db.View(func(tx *bolt.Tx) error {
		meta, ok, err := loadChat(tx, id)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("chat %s: %w", id, ErrNotFound)
		}
		a.meta, a.seq = meta, meta.Seq
		indexed := clientIDsIndexed(tx, id)
		err = eventsSince(tx, id, 0, func(ev *Event) error {
			switch p := ev.Payload.(type) {
			case *MessageAccepted:
				if m := p.Message; m != nil && m.ClientID != "" && ev.Seq > indexed {
					a.owed = append(a.owed, [2]string{m.ClientID, m.ID})
				}
			case *MessagePicked, *AssistantStep, *Continuity:
				m := *ev.Message()
				m.rowSeq = ev.Seq
				a.msgs = append(a.msgs, m)
				if p, ok := p.(*MessagePicked); ok && m.By != "" && !slices.Contains(pickedBy[p.Turn], m.By) {
					pickedBy[p.Turn] = append(pickedBy[p.Turn], m.By)
				}
			case *TurnFinished:
				if p.Message != nil {
					a.msgs = append(a.msgs, *p.Message)
				}
				a.replayTurn(p)
			case *TurnFailed:
				if p.Message != nil {
					a.msgs = append(a.msgs, *p.Message)
				}
			case *ToolCallStarted:
				started[p.Call.ID] = ev
				calls[p.Call.ID] = p.Call
			case *ToolResult:
				r := p.Result
				if c := calls[r.CallID]; c != nil {
					a.conv.handoff.Seen.ObserveCall(c.Name, c.Arguments, r.IsError, ev.Seq)
					delete(calls, r.CallID)
				}
				delete(started, r.CallID)
				delete(a.settled, r.CallID)
				a.msgs = append(a.msgs, Message{ID: ids.Message(ev.Seq), Role: provider.RoleTool, Seq: ev.Seq,
					Time: ev.Time, Turn: p.Turn, Text: r.Content, ToolCallID: r.CallID, State: MsgDone,
					Tool: r.Name, IsError: r.IsError, Tokens: a.count(r.Content), textAt: ev.Seq,
					Attachments: r.Attachments})
			case *MessageTranscribed:
				a.replayTranscribed(p)
			case *ApprovalRequested:
				openApprovals[p.Approval.ID] = p.Approval
			case *ApprovalResolved:
				delete(openApprovals, p.Approval.ID)
			case *MessagePinned, *Cleared, *ContextReading, *CompactRequested, *BoundaryCrossed, *CheckpointTaken, *HandoffUpdated, *RuntimeContext:
				a.replay(ev)
			case *RecoveryRequested:
				r := *p.Recovery
				a.recoveries[r.ID] = &r
			case *RecoveryResolved:
				if r := a.recoveries[p.Recovery.ID]; r != nil {
					a.settled[r.Call.ID] = p.Recovery.Action
				}
				delete(a.recoveries, p.Recovery.ID)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if pb, _ := subBucket(tx, bucketPending, id, false); pb != nil {
			err = pb.ForEach(func(k, v []byte) error {
				m := &Message{}
				if err := json.Unmarshal(v, m); err != nil {
					return fmt.Errorf("chat %s: corrupt pending message %s: %w", id, k, err)
				}
				a.pending = append(a.pending, m)
				return nil
			})
		}
		if err != nil {
			return err
		}
		held = heldAnswers(tx, id)
		procs, err = journaledProcs(tx, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	a.recoverAfterCrash(started, openApprovals, held, a.reapProcs(procs))
	for id, r := range a.recoveries {
		if by := pickedBy[r.Turn]; len(by) > 0 {
			if a.recoveryAskers == nil {
				a.recoveryAskers = map[string][]string{}
			}
			a.recoveryAskers[id] = by
		}
	}
	sortPending(a.pending)
	a.meta.Pending = len(a.pending)
	a.meta.State = StateIdle
	a.listed = a.meta
	s.queued.Add(int64(a.meta.Pending))
	return a, nil
}

func sortPending(p []*Message) {
	for i := 1; i < len(p); i++ { // insertion sort: tiny, mostly sorted
		for j := i; j > 0 && p[j].Seq < p[j-1].Seq; j-- {
			p[j], p[j-1] = p[j-1], p[j]
		}
	}
}

func (a *actor) run() {
	defer a.s.actors.Done()
	idle := time.NewTimer(a.s.opt.Idle)
	defer idle.Stop()
	quit, abort := a.s.quit, a.s.abort
	// Work left by the previous process (or a failed commit) starts now.
	if err := a.flush(); err == nil {
		a.maybeStart()
	}
	a.active = time.Now()
	for {
		select {
		case f := <-a.inbox:
			f()
			if a.shed {
				a.exitIdle() // Shed saw it idle, just now, on this goroutine
				return
			}
		case <-a.flushC:
			a.flushC = nil
			_ = a.flush()
		case <-a.heldC:
			a.heldC = nil
			a.maybeStart()
		case <-idle.C:
			if a.idle() {
				a.exitIdle()
				return
			}
		case <-quit:
			quit = nil
			a.quitting = true
		case <-abort:
			abort = nil
			if a.turn != nil {
				a.turn.aborted = true // its open calls stay open, to recover
				a.turn.cancel(errShutdown)
			}
		}
		if a.quitting && a.turn == nil {
			_ = a.flush()
			a.exit()
			return
		}
		if a.broken != nil && a.turn == nil {
			a.exit()
			return
		}
		idle.Reset(a.s.opt.Idle)
		a.active = time.Now()
	}
}

// idle says the chat may leave memory: nothing runs, waits or is
// uncommitted, and nobody watches it. The cluster's publisher, a
// subscriber of every chat loaded on its owner, is nobody: the chat's
// watchers are on the nodes' fan-out, which outlives the actor (counting
// it kept every owned chat in memory for good).
func (a *actor) idle() bool {
	if a.turn != nil || len(a.pending) > 0 || !a.b.empty() {
		return false
	}
	n := len(a.subs)
	if a.s.opt.Owners != nil {
		if _, ok := a.subs[publisher{a.s.opt.Owners}]; ok {
			n--
		}
	}
	return n == 0
}

// exitIdle leaves memory as an idle chat (see idle). In cluster mode
// it also says whether the chat's ownership may go (releasable), under
// the chat's shard lock together with the eviction, so that a load of
// the chat that follows always reads as busy (see Service.LetGo); when
// it may, the cluster is told (Owners.Idle).
func (a *actor) exitIdle() {
	if a.own == nil {
		a.exit()
		return
	}
	rel := a.releasable()
	sh := a.s.shardOf(a.id)
	sh.mu.Lock()
	if sh.m[a.id] == a {
		delete(sh.m, a.id)
		a.s.replica.mu.Lock()
		if a.s.replica.m[a.id] == a.own {
			a.own.idle = rel
		} else {
			rel = false
		}
		a.s.replica.mu.Unlock()
	} else {
		rel = false
	}
	sh.mu.Unlock()
	a.exit()
	if rel {
		a.s.opt.Owners.Idle(a.id)
	}
}

// releasable says an idle chat (see idle) leaves nothing behind that
// would need this node to keep its ownership: no question waits for an
// answer (an approval, a Repeat/Skip recovery), its state has no work
// left (pending messages, a turn to resume), nothing is kept for its next
// commit, and it did not break.
func (a *actor) releasable() bool {
	return a.s.opt.Owners != nil && a.broken == nil && !a.quitting && len(a.approvals) == 0 && len(a.recoveries) == 0 &&
		len(a.reask) == 0 && len(a.settled) == 0 && len(a.dropHeld) == 0 && len(a.dropProcs) == 0 &&
		!hasWork(&a.meta) && a.flushC == nil && a.heldC == nil
}

func (a *actor) exit() {
	if len(a.b.acks) > 0 {
		// Never the case on the paths that exit (each flushes first or
		// broke in a flush): an answer waiting still gets one.
		err := a.broken
		if err == nil {
			err = ErrClosed
		}
		for _, ack := range a.b.acks {
			ack(err)
		}
		a.b.acks = nil
	}
	a.s.evict(a)
	close(a.done)
}

// post hands f to the actor from another goroutine (the turn's).
func (a *actor) post(f func()) {
	select {
	case a.inbox <- f:
	case <-a.done:
	}
}

func (a *actor) next() uint64 { a.seq++; return a.seq }

// append adds an event of p's type to the batch, giving it the next seq.
func (a *actor) append(p Payload, o Origin) *Event {
	ev := NewEvent(a.id, a.next(), time.Now().UTC(), p)
	if ev.By == "" {
		ev.By = o.By // who allowed, denied, edited, stopped: on the row
	}
	a.b.events = append(a.b.events, ev)
	a.b.origins = append(a.b.origins, o)
	return ev
}

func (a *actor) info() Chat {
	c := a.meta
	c.State = StateIdle
	if a.turn != nil {
		c.State = StateRunning
	}
	c.Pending = len(a.pending)
	c.Waiting = ""
	switch {
	case len(a.approvals) > 0:
		c.Waiting = WaitApproval
	case len(a.recoveries) > 0:
		c.Waiting = WaitRecovery
	}
	return c
}

// flush commits the batch, then publishes its events in order. A
// boundary's batch that fails to commit returns an *archiveError and leaves
// the chat as it was before the boundary; any other failed commit breaks
// the actor down (see breakDown).
func (a *actor) flush() (err error) {
	if acks := a.b.acks; len(acks) > 0 {
		// Answered once the batch is committed and published (or not).
		a.b.acks = nil
		defer func() {
			for _, ack := range acks {
				ack(err)
			}
		}()
	}
	if a.broken != nil {
		return a.broken
	}
	if a.flushT != nil {
		a.flushT.Stop()
		a.flushC = nil
	}
	if a.b.empty() {
		return nil
	}
	b := a.b
	a.b = batch{}
	meta := a.metaToCommit()
	f := b.flush(a.id, meta)
	owed := a.indexClientIDs(&b, f)
	f.Charges = b.chargesOn(people.Day(a.s.now()))
	if a.s.opt.RecordLog != nil {
		// Cluster mode: the log first, fenced at the chat's position;
		// only a confirmed flush reaches bbolt and anyone's eyes.
		pos, err := a.appendLog(f)
		if err != nil {
			return err
		}
		meta.LogPos, f.Meta.LogPos = pos, pos
	}
	enc := encodeFlush(f) // here, not in the commit: the committer serves every chat
	err = a.s.store.Write(context.Background(), func(tx *bolt.Tx) error { return a.write(tx, &b, f, enc) })
	if err != nil && b.archive != nil && a.s.opt.RecordLog == nil {
		// Only a boundary's rows were in this batch (it flushed first):
		// drop them, and memory is as it was before the boundary.
		a.s.log.Error("boundary write failed", "chat", a.id, "err", err)
		a.seq -= uint64(len(b.events))
		return &archiveError{err: err}
	}
	if err != nil {
		if a.own != nil {
			// The log has the flush, bbolt not: the next load applies
			// it from the log before anything else.
			a.s.markStale(a.id, a.own)
		}
		a.breakDown(err)
		return a.broken
	}
	a.owed = owed
	a.committed(&b, meta)
	if a.b.origins == nil {
		// The next batch's origins go in this one's array, emptied (an
		// Origin is seven words, grown again at each flush otherwise).
		// Its events are not reused: the flush handed them on.
		clear(b.origins)
		a.b.origins = b.origins[:0]
	}
	return nil
}

// clientIDBatch is how many client ids the client_ids index takes in one
// write: one page write per batch instead of one per message.
const clientIDBatch = 64

// indexClientIDs puts into f, once they are clientIDBatch or more, the
// client ids owed to the index together with the batch's own, and returns
// what is owed once f is committed (nil when f indexes them all).
func (a *actor) indexClientIDs(b *batch, f *Flush) [][2]string {
	if len(a.owed)+len(b.clients) < clientIDBatch {
		// Kept, not handed to the commit: they go on in a.owed's own
		// array (not a copy of it each flush), whose first len(a.owed)
		// stay as they are should the commit fail.
		return append(a.owed, b.clients...)
	}
	f.ClientIDs = append(a.owed[:len(a.owed):len(a.owed)], b.clients...)
	return nil
}

// owedClientID is the message client_id created whose pair the index does
// not hold yet ("" when none).
func (a *actor) owedClientID(clientID string) string {
	for _, p := range a.owed {
		if p[0] == clientID {
			return p[1]
		}
	}
	return ""
}

// archiveError is a boundary's commit that failed: nothing of its batch was
// kept, and the chat goes on as it was before the boundary.
type archiveError struct{ err error }

func (e *archiveError) Error() string { return "the boundary could not be written: " + e.err.Error() }
func (e *archiveError) Unwrap() error { return e.err }

// metaToCommit is the chat's metadata as the batch leaves it.
func (a *actor) metaToCommit() Chat {
	meta := a.info()
	meta.Seq = a.seq
	meta.Turn = ""
	if a.turn != nil {
		meta.Turn = a.turn.id
	}
	meta.UpdatedAt = time.Now().UTC()
	return meta
}

// flush is the batch as one Flush of chat, meta as it leaves the chat.
func (b *batch) flush(chat string, meta Chat) *Flush {
	// Its client ids go to the index in batches (actor.indexClientIDs).
	f := &Flush{Chat: chat, Events: b.events, Meta: meta, PutPending: b.putPend, DelPending: b.delPend,
		Outputs: b.outputs, Archive: b.archive}
	if !b.ledger.Empty() {
		f.Ledger = &b.ledger
	}
	return f
}

// write stores the batch (f, and what stays on this node) in tx. It only
// touches tx, as Store.Write may run it twice.
func (a *actor) write(tx *bolt.Tx, b *batch, f *Flush, enc *flushBytes) error {
	return writeFlush(tx, a.s.store, a.meta.UpdatedAt, f, &localWrites{
		dropHeld: a.dropHeld, dropProcs: a.dropProcs, enc: enc})
}

// localWrites are what a node's own flush writes besides its Flush: they
// belong to the node that ran the turn and are not in the cluster's log.
type localWrites struct {
	dropHeld  []string
	dropProcs []string
	// enc is f's bytes, encoded before the commit (nil: encoded in it).
	enc *flushBytes
}

// writeFlush stores f in tx, each kind of write by its own helper: the
// actor's commit (with local) and a replica's catch-up (local nil) write
// a flush the same way. prev is the UpdatedAt stored before (zero for a
// new chat).
func writeFlush(tx *bolt.Tx, st *Store, prev time.Time, f *Flush, local *localWrites) error {
	if local == nil {
		local = &localWrites{}
	}
	enc := local.enc
	if enc == nil {
		enc = encodeFlush(f)
	}
	meta := f.Meta
	if err := putMeta(tx, prev, &meta, enc.meta); err != nil {
		return err
	}
	if f.Creator != "" {
		if err := people.SetCreatorTx(tx, f.Chat, f.Creator); err != nil {
			return err
		}
	}
	for _, c := range f.Charges {
		if err := people.AddUsageTx(tx, c.Person, c.Day, c.Tokens); err != nil {
			return err
		}
	}
	if err := writeRowBytes(tx, f.Chat, f.Events, enc.rows); err != nil {
		return err
	}
	if err := writePending(tx, f.Chat, f.PutPending, f.DelPending); err != nil {
		return err
	}
	if err := deleteProcs(tx, f.Chat, f.Events, local.dropProcs); err != nil {
		return err
	}
	if err := deleteHeld(tx, local.dropHeld); err != nil {
		return err
	}
	if err := writePairs(tx, bucketOutputs, f.Chat, f.Outputs); err != nil {
		return err
	}
	if err := writeClientIDs(tx, f); err != nil {
		return err
	}
	if err := tools.ApplyLedgerTx(tx, f.Chat, f.Ledger); err != nil {
		return err
	}
	if f.Archive != nil {
		return putArchive(tx, st, f.Chat, f.Archive)
	}
	return nil
}

// writeRows appends events to the chat's record.
func writeRows(tx *bolt.Tx, chat string, events []*Event) error {
	return writeRowBytes(tx, chat, events, nil)
}

// writeRowBytes is writeRows with the rows' bytes (rowBytes of each
// event) encoded already; nil: encoded here.
func writeRowBytes(tx *bolt.Tx, chat string, events []*Event, rows [][]byte) error {
	if len(events) == 0 {
		return nil
	}
	rb, err := subBucket(tx, bucketRecords, chat, true)
	if err != nil {
		return err
	}
	// Rows are only ever appended, in seq order: full pages, not the
	// half-empty ones a split leaves by default.
	rb.FillPercent = 1.0
	for i, ev := range events {
		var row []byte
		if rows != nil {
			row = rows[i]
		} else {
			row = rowBytes(ev)
		}
		if err := rb.Put(seqKey(ev.Seq), row); err != nil {
			return err
		}
	}
	return nil
}

// writePending stores and deletes the chat's pending messages.
func writePending(tx *bolt.Tx, chat string, put []*Message, del []string) error {
	if len(put)+len(del) == 0 {
		return nil
	}
	pb, err := subBucket(tx, bucketPending, chat, true)
	if err != nil {
		return err
	}
	for _, m := range put {
		v, _ := json.Marshal(m)
		if err := pb.Put([]byte(m.ID), v); err != nil {
			return err
		}
	}
	for _, id := range del {
		if err := pb.Delete([]byte(id)); err != nil {
			return err
		}
	}
	return nil
}

// deleteHeld removes recovery answers that were held for the chat and
// have been applied.
func deleteHeld(tx *bolt.Tx, ids []string) error {
	hb := tx.Bucket(bucketHeld)
	if hb == nil {
		return nil
	}
	for _, id := range ids {
		if err := hb.Delete([]byte(id)); err != nil {
			return err
		}
	}
	return nil
}

// writeClientIDs puts f's client ids into the chat's client_ids index, and
// moves the index's watermark (its bucket sequence) to f's last seq: a
// flush that writes client ids writes every one the record holds up to
// there that the index lacked (the owner's owed ones with its own; an
// older flush, those of its own rows, the earlier ones being written
// by then). Loading the chat takes back the client ids of the rows after
// the watermark (see actor.owed).
func writeClientIDs(tx *bolt.Tx, f *Flush) error {
	if len(f.ClientIDs) == 0 {
		return nil
	}
	if err := writePairs(tx, bucketClientIDs, f.Chat, f.ClientIDs); err != nil {
		return err
	}
	b := tx.Bucket(bucketClientIDs).Bucket([]byte(f.Chat))
	if f.Meta.Seq > b.Sequence() {
		return b.SetSequence(f.Meta.Seq)
	}
	return nil
}

// clientIDsIndexed is the seq through which chat's client_ids index holds
// every client id of its record (0: none).
func clientIDsIndexed(tx *bolt.Tx, chat string) uint64 {
	if cb, _ := subBucket(tx, bucketClientIDs, chat, false); cb != nil {
		return cb.Sequence()
	}
	return 0
}

// writePairs puts key/value pairs into the chat's bucket of parent (whole
// tool outputs by handle, message ids by client_id).
func writePairs(tx *bolt.Tx, parent []byte, chat string, pairs [][2]string) error {
	if len(pairs) == 0 {
		return nil
	}
	b, err := subBucket(tx, parent, chat, true)
	if err != nil {
		return err
	}
	for _, p := range pairs {
		if err := b.Put([]byte(p[0]), []byte(p[1])); err != nil {
			return err
		}
	}
	return nil
}

// committed makes a committed batch the actor's state and tells everyone:
// its events to subscribers in order, a turn's held text once its start
// is durable, the list entry to list watchers when it changed.
func (a *actor) committed(b *batch, meta Chat) {
	a.meta = meta
	a.s.indexLater(a.id)
	a.dropHeld, a.dropProcs = nil, nil
	for i, ev := range b.events {
		a.publish(ev, b.origins[i])
	}
	if t := a.turn; t != nil && !t.durable && t.seq <= meta.Seq {
		t.durable = true
		a.showText(t, t.text.String())
	}
	if l := a.listed; l.State != meta.State || l.Pending != meta.Pending || l.Title != meta.Title ||
		l.Waiting != meta.Waiting || l.Paused != meta.Paused || l.Outcome != meta.Outcome {
		if d := meta.Pending - l.Pending; d != 0 {
			a.s.opt.Metrics.QueueDepth(int(a.s.queued.Add(int64(d))))
		}
		a.listed = meta
		a.s.notifyList(meta, false, nil)
	}
}

// breakDown handles a failed commit: memory is now ahead of the disk, so the
// actor leaves the registry (the next request loads the chat as stored) and
// stops its turn. Nothing it had not committed was acknowledged.
func (a *actor) breakDown(err error) {
	a.broken = fmt.Errorf("chat %s: write failed, nothing was changed: %w", a.id, err)
	a.s.log.Error("commit failed", "chat", a.id, "err", err)
	a.s.evict(a)
	if a.turn != nil {
		a.turn.cancel(a.broken)
	}
	for sub := range a.subs {
		sub.Deliver(Delivery{Closed: a.id})
	}
	a.subs = map[Subscriber]struct{}{}
}

func (a *actor) publish(ev *Event, o Origin) {
	for sub := range a.subs {
		if sub != o.Sub {
			sub.Deliver(Delivery{Event: ev})
		}
	}
	if o.Sub != nil { // the asker gets its copy in order, opened or not
		o.Sub.Deliver(Delivery{Event: ev, Req: o.Req})
	}
}

// showText publishes the turn's text not yet shown, once its start is durable:
// before that, text waits so that no client sees a reply to a pickup a crash
// could undo.
func (a *actor) showText(t *turn, text string) {
	if !t.durable || text == "" {
		return
	}
	off := t.shown
	t.shown += utf8.RuneCountInString(text)
	ev := NewEvent(a.id, a.meta.Seq, time.Now().UTC(), &ReplyDelta{Turn: t.id, Offset: off, Text: text})
	for sub := range a.subs {
		sub.Deliver(Delivery{Event: ev})
	}
}

func (a *actor) open(ctx context.Context, since *uint64, sub Subscriber, req string) error {
	if err := a.flush(); err != nil {
		return err
	}
	var sn *Snapshot
	var err error
	if since != nil && *since <= a.meta.Seq {
		// One event at a time: nothing of the missed part is held here.
		err = a.s.store.db.View(func(tx *bolt.Tx) error {
			return eventsSince(tx, a.id, *since, func(ev *Event) error { sub.Deliver(Delivery{Event: ev}); return nil })
		})
		if err == nil {
			sn, err = a.snapshot("chat.resumed", false, req)
		}
	} else {
		sn, err = a.snapshot("chat.snapshot", true, req)
	}
	if err != nil {
		return err
	}
	sub.Deliver(Delivery{Snapshot: sn})
	a.subs[sub] = struct{}{}
	return nil
}

// catchUp ends a paced replay (see Service.CatchUp): when every event up to
// after has been sent, it sends chat.resumed and subscribes sub, on this
// goroutine, so the next event sub gets is after+1.
func (a *actor) catchUp(after uint64, sub Subscriber, req string) (bool, error) {
	if err := a.flush(); err != nil {
		return false, err
	}
	if after < a.meta.Seq {
		return false, nil
	}
	typ := "chat.resumed"
	if after > a.meta.Seq {
		typ = "chat.snapshot" // a seq this chat never had: start afresh
	}
	sn, err := a.snapshot(typ, typ == "chat.snapshot", req)
	if err != nil {
		return false, err
	}
	sub.Deliver(Delivery{Snapshot: sn})
	a.subs[sub] = struct{}{}
	return true, nil
}

// snapshot is the chat's state now. With messages, it carries the newest
// page of the transcript, read from the store.
func (a *actor) snapshot(typ string, withMessages bool, req string) (*Snapshot, error) {
	sn := &Snapshot{Type: typ, Chat: a.info(), Pending: make([]Message, 0, len(a.pending)), Seq: a.meta.Seq, Req: req,
		Approvals: []Approval{}, Recoveries: []Recovery{}, Context: a.context, CheckpointThrough: a.conv.evicted}
	if withMessages {
		err := a.s.store.db.View(func(tx *bolt.Tx) (err error) {
			sn.Messages, sn.Marks, sn.More, sn.Before, err = transcriptPage(tx, a.id, 0, a.pins)
			return err
		})
		if err != nil {
			return nil, err
		}
		if sn.Messages == nil {
			sn.Messages = []Message{}
		}
		if !sn.More {
			sn.Before = 0
		}
	}
	for _, w := range a.approvals {
		sn.Approvals = append(sn.Approvals, w.Approval)
	}
	for _, r := range a.recoveries {
		sn.Recoveries = append(sn.Recoveries, *r)
	}
	sort.Slice(sn.Approvals, func(i, j int) bool { return sn.Approvals[i].Time.Before(sn.Approvals[j].Time) })
	sort.Slice(sn.Recoveries, func(i, j int) bool { return sn.Recoveries[i].Time.Before(sn.Recoveries[j].Time) })
	for _, m := range a.pending {
		sn.Pending = append(sn.Pending, *m)
	}
	if t := a.turn; t != nil {
		sn.Running = &Running{Turn: t.id, Text: t.text.String(), Seq: t.seq}
		if w := t.wait; w != nil {
			sn.Running.Wait = &Wait{Quota: w.Quota, Usage: w.Usage, WaitMS: max(0, time.Until(w.until).Milliseconds())}
		}
	}
	return sn, nil
}

// history is the page of the transcript before seq before.
func (a *actor) history(before uint64, req string) (*History, error) {
	if err := a.flush(); err != nil {
		return nil, err
	}
	h := &History{Type: "chat.history", Chat: a.id, Req: req}
	err := a.s.store.db.View(func(tx *bolt.Tx) (err error) {
		h.Messages, h.Marks, h.More, h.Before, err = transcriptPage(tx, a.id, before, a.pins)
		return err
	})
	if h.Messages == nil {
		h.Messages = []Message{}
	}
	if !h.More {
		h.Before = 0
	}
	return h, err
}

func (a *actor) findPending(id string) int {
	for i, m := range a.pending {
		if m.ID == id {
			return i
		}
	}
	return -1
}

func (a *actor) findPicked(id string) *Message {
	for i := len(a.msgs) - 1; i >= 0; i-- {
		if a.msgs[i].ID == id {
			return &a.msgs[i]
		}
	}
	return nil
}

// notPending explains why message id cannot be changed any more.
func (a *actor) notPending(id string) error {
	// The answer speaks of what is durable: a message picked up at once
	// whose acknowledgement waits for its commit (send) is committed, and
	// acknowledged, first. Nothing waiting: no commit is owed here.
	if len(a.b.acks) > 0 {
		if err := a.flush(); err != nil {
			return err
		}
	}
	if a.findPicked(id) != nil {
		return fmt.Errorf("message %s: %w", id, ErrInUse)
	}
	m, err := a.storedMessage(id)
	switch {
	case err != nil:
		return err
	case m != nil && m.State == MsgDeleted:
		return fmt.Errorf("message %s was deleted: %w", id, ErrNotFound)
	case m != nil:
		return fmt.Errorf("message %s: %w", id, ErrInUse)
	}
	return fmt.Errorf("message %s: %w", id, ErrNotFound)
}

// storedMessage reads, from the store, the message id names as the record
// last left it: for a person's message, its message.picked or
// message.deleted row when there is one, else its message.accepted row; nil
// when the record has no message of that id. It serves messages older than
// the conversation in memory.
func (a *actor) storedMessage(id string) (*Message, error) {
	seq, ok := ids.ParseMessage(id)
	if !ok {
		return nil, nil
	}
	var m *Message
	err := a.s.store.db.View(func(tx *bolt.Tx) error {
		rb, _ := subBucket(tx, bucketRecords, a.id, false)
		if rb == nil {
			return nil
		}
		c := rb.Cursor()
		k, v := c.Seek(seqKey(seq))
		if k == nil || binary.BigEndian.Uint64(k) != seq {
			return nil
		}
		ev, err := decodeRow(rb, a.id, k, v)
		if err != nil || ev.Message() == nil || ev.Message().ID != id {
			return err
		}
		m = ev.Message()
		if ev.Type != EvMessageAccepted {
			return nil
		}
		// What became of it is further on: find its pickup or deletion
		// without decoding the rows in between.
		key := []byte(`"id":"` + id + `"`)
		for k, v = c.Next(); k != nil; k, v = c.Next() {
			if typ := rowType(v); (typ == EvMessagePicked || typ == EvMessageDeleted) && bytes.Contains(v, key) {
				ev, err := decodeRow(rb, a.id, k, v)
				if err != nil {
					return err
				}
				if em := ev.Message(); em != nil && em.ID == id {
					m = em
					return nil
				}
			}
		}
		return nil
	})
	return m, err
}

func (a *actor) send(ctx context.Context, text, clientID, mode string, atts []Attachment, o Origin, toks int, regenerates string) (Message, error) {
	if a.broken != nil {
		return Message{}, a.broken
	}
	if a.meta.DeleteAt != nil {
		return Message{}, fmt.Errorf("chat %s was deleted (undo it to write to it): %w", a.id, ErrNotFound)
	}
	known := a.owedClientID(clientID)
	if known == "" {
		err := a.s.store.db.View(func(tx *bolt.Tx) error {
			if cb, _ := subBucket(tx, bucketClientIDs, a.id, false); cb != nil {
				known = string(cb.Get([]byte(clientID)))
			}
			return nil
		})
		if err != nil {
			return Message{}, err
		}
	}
	if known != "" {
		return a.resend(known, o)
	}
	if slices.ContainsFunc(a.b.clients, func(c [2]string) bool { return c[0] == clientID }) {
		// Its first send waits for its commit (errAnswerAtCommit): the
		// repeat is answered, as that one is, once it is durable.
		if err := a.flush(); err != nil {
			return Message{}, err
		}
		return a.send(ctx, text, clientID, mode, atts, o, toks, regenerates)
	}
	if err := a.s.queueRoom(len(a.pending)); err != nil {
		return Message{}, err
	}
	seq := a.seq + 1
	m := &Message{ID: ids.Message(seq), Role: provider.RoleUser, Text: text, Seq: seq,
		Time: time.Now().UTC(), State: MsgPending, Mode: mode, ClientID: clientID, Tokens: toks, textAt: seq, Attachments: atts, By: o.By,
		Regenerates: regenerates}
	ev := a.append(&MessageAccepted{Message: m}, o)
	m.Time = ev.Time
	if a.meta.Title == DefaultTitle && len(a.msgs) == 0 && len(a.pending) == 0 {
		a.meta.Title = titleFrom(text) // a chat is named by what it was first asked
		a.b.dirty = true
	}
	a.pending = append(a.pending, m)
	a.b.putPend = append(a.b.putPend, m)
	a.release() // a new message is the person going on: the held queue goes with it
	a.b.clients = append(a.b.clients, [2]string{clientID, m.ID})
	// An idle chat picks the message up in the same commit that stores it:
	// one fsync fewer before the answer.
	snapshot := *m
	idle := a.turn == nil
	a.maybeStart()
	if t := a.turn; o.Sub != nil && idle && t != nil && t.seq > m.Seq && a.meta.Seq < m.Seq && a.findPending(m.ID) < 0 {
		// Its turn started from it, and nothing committed it yet: the
		// acceptance, the pickup and, when the turn ends within
		// PickupDelay, its end go in one commit, after which the message
		// is acknowledged (still durable before acknowledged). A slower
		// turn commits its start when PickupDelay is up (flushC), and
		// the message is acknowledged then. Only for an asker that
		// hears the chat's events (o.Sub), message.accepted first: one
		// without (Telegram, /prompt) learns the message from this
		// answer and records it before its turn's end reaches it.
		return snapshot, errAnswerAtCommit
	}
	if err := a.flush(); err != nil {
		return Message{}, err
	}
	return snapshot, nil
}

// resend answers a repeated client_id with the message it created, as it is now.
func (a *actor) resend(id string, o Origin) (Message, error) {
	var m Message
	if i := a.findPending(id); i >= 0 {
		m = *a.pending[i]
	} else if p := a.findPicked(id); p != nil {
		m = *p
	} else if sm, err := a.storedMessage(id); err != nil || sm == nil {
		return Message{}, fmt.Errorf("message %s: %w", id, ErrNotFound)
	} else {
		m = *sm
		if m.State == MsgPending {
			m.State = MsgDeleted // accepted, neither pending nor picked
		}
	}
	if o.Sub != nil {
		ev := NewEvent(a.id, m.Seq, m.Time, &MessageAccepted{Message: &m})
		o.Sub.Deliver(Delivery{Event: ev, Req: o.Req})
	}
	return m, nil
}

// edit changes a pending message's text (nil: kept, toks unused) and the
// attachments it keeps (nil: all).
func (a *actor) edit(ctx context.Context, id string, text *string, keep []string, o Origin, toks int) (Message, error) {
	if a.broken != nil {
		return Message{}, a.broken
	}
	i := a.findPending(id)
	if i < 0 {
		return Message{}, a.notPending(id)
	}
	m := *a.pending[i]
	if text != nil {
		m.Text, m.Tokens = *text, a.recount(*text, toks)
	}
	if keep != nil {
		atts, err := keepAttachments(m.Attachments, keep)
		if err != nil {
			return Message{}, err
		}
		m.Attachments = atts
	}
	if strings.TrimSpace(m.Text) == "" && len(m.Attachments) == 0 {
		return Message{}, fmt.Errorf("%w: the message would have neither text nor attachments; delete it instead", ErrBadInput)
	}
	a.pending[i] = &m
	m.textAt = a.append(&MessageUpdated{Message: &m}, o).Seq
	a.b.putPend = append(a.b.putPend, &m)
	if err := a.flush(); err != nil {
		return Message{}, err
	}
	return m, nil
}

func (a *actor) delete(ctx context.Context, id string, o Origin) error {
	if a.broken != nil {
		return a.broken
	}
	i := a.findPending(id)
	if i < 0 {
		return a.notPending(id)
	}
	m := *a.pending[i]
	m.State = MsgDeleted
	a.pending = append(a.pending[:i], a.pending[i+1:]...)
	a.append(&MessageDeleted{Message: &m}, o)
	a.b.delPend = append(a.b.delPend, m.ID)
	return a.flush()
}

func (a *actor) stop(o Origin) (chan struct{}, error) {
	t := a.turn
	if t == nil {
		return nil, fmt.Errorf("chat %s: %w", a.id, ErrNoTurn)
	}
	t.stoppers = append(t.stoppers, o)
	w := make(chan struct{})
	t.waiters = append(t.waiters, w)
	t.cancel(errStopped)
	return w, nil
}

// hold pauses the queue when a person stopped turn t and messages wait
// behind it: Stop means "stop", so the next message does not start on its
// own. It returns how many are held (turn.finished says so).
func (a *actor) hold(t *turn) int {
	if len(t.stoppers) == 0 || len(a.pending) == 0 {
		return 0
	}
	a.meta.Paused = true
	a.b.dirty = true
	return len(a.pending)
}

// release lets a held queue run again (a new message, /continue).
func (a *actor) release() {
	if a.meta.Paused {
		a.meta.Paused = false
		a.b.dirty = true
	}
}

// pick adds m to the conversation with a message.picked row. The message
// keeps its id and seq (where it was accepted); its row's place in the
// record is the pickup's seq.
func (a *actor) pick(m *Message, turn string) {
	ev := a.append(&MessagePicked{Message: m, Turn: turn}, Origin{})
	c := *m
	c.rowSeq = ev.Seq
	if c.textAt == 0 { // its text is stored here, in full (see rowBytes)
		c.textAt = ev.Seq
	}
	a.msgs = append(a.msgs, c)
}

// maybeStart picks up every pending message, in order, into a new turn (a
// turn resuming an interrupted one picks up nothing).
func (a *actor) maybeStart() {
	if a.turn != nil || a.quitting || a.broken != nil || len(a.recoveries) > 0 || (len(a.pending) == 0 && !a.meta.Resume) {
		return // an interrupted call waits for its answer before anything else runs
	}
	if a.held() != nil {
		// Cluster mode: only the chat's owner, while its lease holds,
		// starts a turn. A renewal that came late holds again soon: try
		// again then (Disown unloads the chat if the lease is gone).
		if a.own != nil && a.heldC == nil {
			a.heldC = time.After(heldRetry)
		}
		return
	}
	if a.meta.Paused && !a.meta.Resume {
		return // Stop held the queue: it waits for the person (release)
	}
	// A resumed turn answers what the interrupted one had picked up, alone:
	// messages queued behind it wait for their own turn, as they would have
	// without the crash, so each message gets its own answer once. (A call
	// waiting for its approval, asked again, is such a turn too: it must
	// stay the conversation's last row.)
	take := a.pending
	if a.meta.Resume || len(a.reask) > 0 {
		take = nil
	}
	id := ids.Turn(a.seq + uint64(len(take)) + 1)
	last, picked := a.seq, len(take)
	for _, p := range take {
		m := *p
		m.State, m.Turn = MsgPicked, id
		a.pick(&m, id)
		if !a.b.unput(p) { // stored and picked in one commit: never pending on disk
			a.b.delPend = append(a.b.delPend, m.ID)
		}
	}
	a.pending = a.pending[len(take):]
	ev := a.append(&TurnStarted{Turn: id}, Origin{})
	a.meta.Resume = false
	a.b.dirty = true

	ctx, cancel := context.WithCancelCause(context.Background())
	t := &turn{id: id, cancel: cancel, seq: ev.Seq, start: time.Now()}
	for _, p := range take {
		if p.By != "" && !slices.Contains(t.askers, p.By) {
			t.askers = append(t.askers, p.By)
		}
	}
	a.turn = t
	rows := a.rows()
	in := runtime.TurnInput{Chat: a.id, Turn: ev.Seq, Chain: a.meta.Chain, Rows: rows, Host: &host{a: a, t: t}, Settle: a.settled, Servers: a.servers(),
		Picked: len(rows) - picked, Last: last, Measured: a.conv.measured, SessionStart: a.conv.checkpointed,
		Signals: view.Signals{Pruned: a.conv.pruned}, ViewMemo: &a.viewMemo}
	in.Policies = a.s.turnPolicies(a.id, t.askers)
	in.Owner, in.Withhold = a.s.ownerPolicies(a.id)
	in.Payer = a.s.payer(a.id, t.askers)
	if a.compact != nil {
		in.Signals.Compact, in.Signals.Instructions = true, *a.compact
	}
	if len(a.conv.checkpoint) > 0 {
		in.Checkpoint = &view.Checkpoint{}
		if err := json.Unmarshal(a.conv.checkpoint, in.Checkpoint); err != nil {
			in.Checkpoint = nil
		}
	}
	// The view is built now, so what must be stored before the request is
	// sent goes with the pickup: no commit of its own.
	a.s.opt.Turner.Prepare(&in)
	if p := in.Prepared; p != nil && p.Err == nil {
		a.appendContext(id, p.Info, p.View.Context, p.View.ContextTokens)
		if p.View.Checkpoint != nil {
			a.appendCheckpoint(id, p.View.Checkpoint)
			// A checkpoint re-plans the view: it is committed before the
			// request that carries it is sent (a failed commit stops the
			// turn). Other turns commit their pickup with their first text.
			_ = a.flush()
		}
	}
	if a.s.opt.RecordLog != nil && slices.Contains(slices.Collect(maps.Values(a.settled)), runtime.Repeat) {
		// A call to repeat runs first thing, before any text would
		// commit the pickup: in cluster mode the pickup goes through the
		// fenced log before it, so a node that lost the chat repeats
		// nothing.
		if err := a.flush(); err != nil {
			a.turn = nil
			cancel(err)
			return
		}
	}
	a.settled = map[string]string{}
	go func() {
		tctx, stop := context.WithTimeout(ctx, a.s.opt.TurnTimeout)
		defer stop()
		res, err := a.s.opt.Turner.Run(tctx, in, func(text string) error {
			a.post(func() { a.onDelta(t, text) })
			return nil
		})
		if err != nil && tctx.Err() != nil {
			if cause := context.Cause(ctx); cause != nil {
				err = cause
			} else if errors.Is(tctx.Err(), context.DeadlineExceeded) {
				err = fmt.Errorf("the turn took longer than %s", a.s.opt.TurnTimeout)
			}
		}
		a.post(func() { a.onTurnDone(t, res, err) })
	}()
	// Commit the pickup together with the first text, or soon.
	if a.flushT == nil {
		a.flushT = time.NewTimer(a.s.opt.PickupDelay)
	} else {
		a.flushT.Reset(a.s.opt.PickupDelay)
	}
	a.flushC = a.flushT.C
}

// rows is the conversation the view is built from: the stored rows since
// the latest boundary, oldest first. A call left without a result before a
// later message gets one saying so, as providers require; calls open at the
// very end are the next turn's to settle. The rows are built once per
// message (a.viewRows) and handed out shared, not copied (a long chat's
// rows are most of a turn's garbage otherwise): the runtime never changes
// a row it is given, and the full slice expression makes its appends copy,
// while this cache only appends past what it handed out.
func (a *actor) rows() []view.Row {
	c := &a.viewRows
	if !c.holds(a.msgs, a.conv.start) {
		*c = rowCache{start: a.conv.start, msgs: a.conv.start}
	}
	for _, m := range a.msgs[c.msgs:] {
		c.add(a.s, m)
	}
	c.msgs = len(a.msgs)
	if c.msgs > c.start {
		c.last = a.msgs[c.msgs-1].ID
	}
	return c.rows[:len(c.rows):len(c.rows)]
}

// touch says a message of the conversation in memory changed in place (a
// pin, a transcript) or the conversation was replaced (a boundary): the
// next turn builds its rows afresh.
func (a *actor) touch() { a.viewRows = rowCache{} }

// rowCache is the rows built from a.msgs[start:msgs], and the calls of
// the last step still open at their end.
type rowCache struct {
	start, msgs int
	last        string // the id of a.msgs[msgs-1], to notice a conversation replaced
	built       bool
	rows        []view.Row
	open        []provider.ToolCall
	openSeq     uint64
}

// holds says the cache holds the rows of msgs[start:] as far as it got,
// the messages since being only appended.
func (c *rowCache) holds(msgs []Message, start int) bool {
	switch {
	case !c.built || c.start != start || c.msgs > len(msgs) || c.msgs < start:
		return false
	case c.msgs > start:
		return msgs[c.msgs-1].ID == c.last
	}
	return true
}

// add builds the rows of message m, the next of the conversation.
func (c *rowCache) add(s *Service, m Message) {
	c.built = true
	r := view.Row{Seq: m.Seq, ID: m.ID, Turn: m.Turn, Text: m.Text, Tokens: m.Tokens, Pinned: m.Pinned}
	if m.rowSeq > 0 {
		r.Seq = m.rowSeq // where it entered the conversation, so rows stay in record order
	}
	switch m.Role {
	case provider.RoleTool:
		for i, oc := range c.open {
			if oc.ID == m.ToolCallID {
				c.open = append(c.open[:i:i], c.open[i+1:]...)
				break
			}
		}
		r.Kind, r.ToolCallID, r.ToolName, r.IsError = view.KindTool, m.ToolCallID, m.Tool, m.IsError
		r.Parts = s.parts(m.Attachments, "") // what the result brought back
		c.rows = append(c.rows, r)
		return
	case RoleContext:
		// The runtime context a past request carried, in its place:
		// the same rows give the same request bytes.
		r.Kind, r.Text, r.Sections = view.KindContext, "", m.sections
		c.rows = append(c.rows, r)
		return
	case RoleClear:
		r.Kind = view.KindClear
	case provider.RoleUser:
		// Attachments go as parts over their blobs, read only when a
		// request is encoded.
		r.Kind, r.Parts = view.KindUser, s.parts(m.Attachments, m.TranscribeError)
		switch {
		case m.Mode == ModeRedirect:
			r.Origin = view.OriginAmendment
		case m.State == MsgContinuity:
			r.Origin = view.OriginWake
		}
	case provider.RoleAssistant:
		if m.State != MsgDone && m.State != MsgStep {
			return // a failed turn's partial text is shown, not sent
		}
		r.Kind, r.ToolCalls = view.KindAssistant, m.ToolCalls
	default:
		return
	}
	// Calls left open before a later message: closed, each with a result
	// saying so.
	for _, oc := range c.open {
		c.rows = append(c.rows, view.Row{Seq: c.openSeq, Kind: view.KindTool, ToolCallID: oc.ID, ToolName: oc.Name, IsError: true,
			Text: "Not run: the turn ended before this call."})
	}
	c.open = nil
	c.rows = append(c.rows, r)
	if m.State == MsgStep {
		c.open, c.openSeq = append([]provider.ToolCall(nil), m.ToolCalls...), m.Seq
	}
}

func (a *actor) onDelta(t *turn, text string) {
	if a.turn != t || text == "" {
		return
	}
	t.wait = nil // the request went through
	t.text.WriteString(text)
	if t.durable {
		a.showText(t, text)
		return
	}
	if len(a.b.acks) > 0 {
		// A message waits to be acknowledged with this turn's start
		// (send): the text waits with it, for the turn's end or
		// PickupDelay, so that a fast turn is one commit.
		return
	}
	_ = a.flush() // first text: commit the pickup now, then show it
}

func (a *actor) onTurnDone(t *turn, res runtime.TurnResult, err error) {
	if a.turn != t {
		return
	}
	reply := res.Reply
	if reply == "" && res.Boundary == nil {
		// A stopped or failed turn keeps what it streamed; across a
		// boundary the streamed text belongs to the conversation before it.
		reply = t.text.String()
	}
	stopped := res.End == runtime.Stopped || res.End == runtime.StoppedAtBoundary && err != nil
	var o Origin
	if len(t.stoppers) > 0 {
		o = t.stoppers[0]
	}
	var fin *TurnFinished
	var finEv *Event
	switch {
	case a.broken != nil:
	case res.End == runtime.StoppedAtBoundary:
		// The work ended at a boundary: the record at the top of the
		// cleared conversation says so; no empty answer is added.
		fin = &TurnFinished{Turn: t.id, Reply: reply, Usage: res.Usage, Model: res.Model, Fallback: res.Fallback, Held: a.hold(t)}
		finEv = a.append(fin, o)
		a.charge(t, int64(res.Usage.InputTokens+res.Usage.OutputTokens))
	case res.End == runtime.Answered || res.End == runtime.Stopped:
		m := &Message{Role: provider.RoleAssistant, Text: reply, State: MsgDone, Turn: t.id, Stopped: stopped, Tokens: a.count(reply)}
		seq := a.seq + 1
		m.ID, m.Seq, m.textAt = ids.Message(seq), seq, seq
		m.Model, m.Fallback = res.Model, res.Fallback
		fin = &TurnFinished{Turn: t.id, Reply: reply, Usage: res.Usage, Model: res.Model, Fallback: res.Fallback, Stopped: stopped, Message: m, Held: a.hold(t)}
		finEv = a.append(fin, o)
		a.charge(t, int64(res.Usage.InputTokens+res.Usage.OutputTokens))
		m.Time = finEv.Time
		a.msgs = append(a.msgs, *m)
	case res.End == runtime.Interrupted:
		t.aborted = true
		a.append(&TurnFailed{Turn: t.id, Class: string(runtime.ClassInterrupted),
			Error: "the gateway stopped while this turn ran; it is answered again at the next start"}, o)
		a.meta.Resume = true
	default:
		if err == nil {
			// A Turner that named no ending: a failure, said plainly.
			err, res.Class = fmt.Errorf("the turn ended without saying how (%q)", res.End), runtime.ClassInternal
		}
		p := &TurnFailed{Turn: t.id, Class: string(res.Class), Error: err.Error()}
		if reply != "" {
			seq := a.seq + 1
			p.Message = &Message{ID: ids.Message(seq), Seq: seq, Role: provider.RoleAssistant, Text: reply, State: MsgFailed, Turn: t.id, textAt: seq}
		}
		ev := a.append(p, o)
		if p.Message != nil {
			p.Message.Time = ev.Time
			a.msgs = append(a.msgs, *p.Message)
		}
	}
	outcome := OutcomeOK
	switch {
	case stopped:
		outcome = OutcomeStopped
	case err != nil:
		outcome = OutcomeFailed
	}
	if res.End != runtime.Interrupted { // answered again at the next start: not an ending yet
		a.meta.Outcome = outcome
		a.b.dirty = true
	}
	a.s.opt.Metrics.TurnFinished(res.Model, time.Since(t.start), res.Usage.InputTokens, res.Usage.OutputTokens, res.Usage.CachedTokens, outcome)
	if fin != nil {
		fin.Pruned = res.Pruned
		if res.Measured.Tokens > 0 {
			m := res.Measured
			fin.Measured = &m
		}
		a.replayTurn(fin)
	}
	a.writeHandoff()
	if !t.aborted {
		a.dropReask() // an aborted turn leaves them open: asked again at the next start
	}
	a.turn = nil
	if err := a.flush(); err == nil && fin != nil && len(t.stoppers) > 1 {
		// Everyone who pressed Stop gets the answer; the first got the event.
		for _, so := range t.stoppers[1:] {
			if so.Sub != nil {
				so.Sub.Deliver(Delivery{Event: finEv, Req: so.Req})
			}
		}
	}
	for _, w := range t.waiters {
		close(w)
	}
	a.maybeStart()
}

// titleFrom makes a chat title of a first message: its first line, cut at a
// word near 48 characters.
func titleFrom(text string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	line = strings.Join(strings.Fields(line), " ")
	r := []rune(line)
	if len(r) <= 48 {
		return line
	}
	cut := 48
	for i := 48; i > 24; i-- {
		if r[i] == ' ' {
			cut = i
			break
		}
	}
	return strings.TrimRight(string(r[:cut]), " ,.;:") + "…"
}
