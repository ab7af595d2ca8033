package chats

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/boundary"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tokens"
	"github.com/mirror-gateway/mirror/runtime/view"
	bolt "go.etcd.io/bbolt"
)

// bucketArchive holds what boundaries archived: chat id → bucket: boundary
// seq (8 bytes) → archiveEntry. It is written in the same transaction as the
// boundary row, so a conversation is never cleared without its copy.
var bucketArchive = []byte("archive")

// archiveEntry is one archived conversation: its transcript, the search
// index over it, and the record the boundary wrote.
type archiveEntry struct {
	Boundary uint64         `json:"boundary"` // seq of the boundary row
	From     uint64         `json:"from"`     // first seq of the conversation
	Through  uint64         `json:"through"`  // last seq it archived
	Reason   string         `json:"reason"`
	Time     time.Time      `json:"time"`
	Record   string         `json:"record"` // the handoff record, rendered
	Docs     []boundary.Doc `json:"docs"`   // the transcript, as recall_history searches it
	Index    []byte         `json:"index,omitempty"`
}

// isTranscript reports whether a message belongs to the transcript people
// read (user and assistant messages), as opposed to tool traffic and the
// runtime's own marker rows.
func isTranscript(m Message) bool {
	return m.Role == provider.RoleUser || m.Role == provider.RoleAssistant
}

// Pin marks a message to stay whole in the assistant's view, or unmarks it.
// Only messages of the transcript can be pinned; pending ones are not in the
// view yet.
func (s *Service) Pin(ctx context.Context, chat, msg string, pinned bool, o Origin) (Message, error) {
	var m Message
	err := s.do(ctx, chat, func(a *actor) (err error) { m, err = a.pin(msg, pinned, o); return })
	return m, err
}

func (a *actor) pin(id string, pinned bool, o Origin) (Message, error) {
	if err := a.usable(); err != nil {
		return Message{}, err
	}
	var p *Message
	for i := len(a.msgs) - 1; i >= 0; i-- {
		if a.msgs[i].ID == id {
			p = &a.msgs[i]
			break
		}
	}
	if p == nil {
		if a.findPending(id) >= 0 {
			return Message{}, fmt.Errorf("%w: message %s is still pending; pin it once the assistant has picked it up", ErrBadInput, id)
		}
		return Message{}, fmt.Errorf("message %s: %w", id, ErrNotFound)
	}
	if !isTranscript(*p) {
		return Message{}, fmt.Errorf("%w: message %s is not a user or assistant message", ErrBadInput, id)
	}
	p.Pinned = pinned
	m := Message{ID: p.ID, Role: p.Role, Seq: p.Seq, Pinned: pinned}
	a.append(&Event{Type: EvMessagePinned, Message: &m}, o)
	return m, a.flush()
}

// Commands lists the chat commands Command knows, for its error message.
const Commands = "/status, /compact [text], /clear, /new [title], /pin ID, /unpin ID, /prune-sessions [days], /changes, /rewind N, /stop"

// command runs the commands of long conversations; ok is false for a
// command it does not know.
func (s *Service) command(ctx context.Context, chat string, fields []string, text string, o Origin) (out string, ok bool, err error) {
	switch fields[0] {
	case "/status":
		err = s.do(ctx, chat, func(a *actor) error { out = a.status(); return nil })
	case "/compact":
		instr := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(text), "/compact"))
		err = s.do(ctx, chat, func(a *actor) error {
			if err := a.usable(); err != nil {
				return err
			}
			a.compact = &instr
			a.append(&Event{Type: EvCompact, Text: instr}, o)
			return a.flush()
		})
		out = "A checkpoint will be taken on the next turn; a conversation already below the checkpoint target is left whole."
	case "/clear":
		err = s.do(ctx, chat, func(a *actor) error {
			if err := a.usable(); err != nil {
				return err
			}
			a.replay(a.append(&Event{Type: EvClear}, o))
			return a.flush()
		})
		out = "Cleared: the assistant's next request starts after this point. The transcript above stays, and stays searchable."
	case "/new":
		var from Chat
		if err = s.do(ctx, chat, func(a *actor) error { from = a.info(); return nil }); err != nil {
			return "", true, err
		}
		var c Chat
		if c, err = s.Create(ctx, strings.Join(fields[1:], " "), from.Chain, Origin{}); err == nil {
			out = "New chat " + c.ID + ": " + c.Title
		}
	case "/pin", "/unpin":
		if len(fields) != 2 {
			return "", true, fmt.Errorf("%w: usage: %s MESSAGE_ID", ErrBadInput, fields[0])
		}
		if _, err = s.Pin(ctx, chat, fields[1], fields[0] == "/pin", o); err == nil {
			out = "Pinned " + fields[1] + ": it stays whole in the assistant's view."
			if fields[0] == "/unpin" {
				out = "Unpinned " + fields[1] + "."
			}
		}
	case "/prune-sessions":
		days, perr := PruneDays(fields[1:])
		if perr != nil {
			return "", true, perr
		}
		var r PruneReport
		if r, err = s.Prune(ctx, days, chat); err == nil {
			out = r.String()
		}
	default:
		return "", false, nil
	}
	return out, true, err
}

// Marker roles in a chat's messages: rows of the runtime's own that the view
// needs in place but a transcript does not show as messages.
const (
	RoleClear    = "clear"    // a /clear topic boundary
	RoleBoundary = "boundary" // a boundary: the conversation before it was archived and cleared
	RoleContext  = "context"  // the runtime-context sections a turn's request carried
)

// status is /status: the Context line as the last turn read it.
func (a *actor) status() string {
	c := a.context
	if c == nil {
		return "Context: no turn has run in this conversation yet."
	}
	return c.Line
}

// PruneDays reads the argument of /prune-sessions: none means 30 days, one
// positive whole number sets the days. Any other form is refused, and
// nothing is deleted.
func PruneDays(args []string) (int, error) {
	switch len(args) {
	case 0:
		return 30, nil
	case 1:
		n, err := strconv.Atoi(args[0])
		if err == nil && n > 0 && n <= 36500 && strconv.Itoa(n) == args[0] {
			return n, nil
		}
	}
	return 0, fmt.Errorf("%w: usage: /prune-sessions [days], days a positive whole number (default 30); nothing was deleted", ErrBadInput)
}

// PruneReport says what Prune did, in counts only.
type PruneReport struct {
	Days          int
	Deleted       int
	SkippedActive int // chats older than the cutoff that were running, waiting, loaded or the one asking
	Failed        int
}

func (r PruneReport) String() string {
	s := fmt.Sprintf("Pruned chats inactive for more than %d days: %d deleted", r.Days, r.Deleted)
	if r.SkippedActive > 0 {
		s += fmt.Sprintf(", %d skipped as active", r.SkippedActive)
	}
	if r.Failed > 0 {
		s += fmt.Sprintf(", %d failed", r.Failed)
	}
	return s + "."
}

// Prune deletes the chats whose last activity is strictly older than days
// ago, with everything stored for them (record, pending, archive, tool
// outputs, file-change ledger). It never deletes active: the chat that asked,
// a chat in memory, a chat with a running or interrupted turn, or one with
// pending messages.
func (s *Service) Prune(ctx context.Context, days int, active string) (PruneReport, error) {
	r := PruneReport{Days: days}
	if days <= 0 {
		return r, fmt.Errorf("%w: days must be positive; nothing was deleted", ErrBadInput)
	}
	cutoff := time.Now().Add(-time.Duration(days) * 24 * time.Hour)
	var old []Chat
	err := s.store.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketChats).ForEach(func(k, v []byte) error {
			var c Chat
			if json.Unmarshal(v, &c) == nil && c.UpdatedAt.Before(cutoff) {
				old = append(old, c)
			}
			return nil
		})
	})
	if err != nil {
		return r, err
	}
	for _, c := range old {
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
		if c.ID == active || c.Turn != "" || c.Resume || c.Pending > 0 {
			r.SkippedActive++
			continue
		}
		deleted, err := s.drop(ctx, c.ID, cutoff)
		switch {
		case err != nil:
			r.Failed++
			s.log.Warn("prune chat", "chat", c.ID, "err", err)
		case deleted:
			r.Deleted++
			if s.opt.Ledger != nil {
				if err := s.opt.Ledger.Drop(c.ID); err != nil {
					s.log.Warn("prune chat ledger", "chat", c.ID, "err", err)
				}
			}
		default:
			r.SkippedActive++
		}
	}
	return r, nil
}

// drop deletes one chat unless it came back to life: it holds the chat's
// shard lock, so the chat cannot be loaded while its rows go, and checks
// the stored metadata again inside the transaction.
func (s *Service) drop(ctx context.Context, id string, cutoff time.Time) (bool, error) {
	sh := s.shardOf(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.m[id] != nil {
		return false, nil
	}
	deleted := false
	err := s.store.Write(ctx, func(tx *bolt.Tx) error {
		deleted = false
		c, ok, err := loadChat(tx, id)
		if err != nil || !ok || !c.UpdatedAt.Before(cutoff) || c.Turn != "" || c.Resume || c.Pending > 0 {
			return err
		}
		if err := tx.Bucket(bucketChats).Delete([]byte(id)); err != nil {
			return err
		}
		for _, parent := range [][]byte{bucketRecords, bucketPending, bucketClientIDs, bucketOutputs, bucketArchive} {
			p := tx.Bucket(parent)
			if p == nil || p.Bucket([]byte(id)) == nil {
				continue
			}
			if err := p.DeleteBucket([]byte(id)); err != nil {
				return err
			}
		}
		for _, h := range heldAnswers(tx, id) {
			if err := tx.Bucket(bucketHeld).Delete([]byte(h[0])); err != nil {
				return err
			}
		}
		deleted = true
		return nil
	})
	return deleted, err
}

// conversation is what a chat knows of its conversation since the latest
// boundary, beyond its messages: what the next turn's view is built from.
type conversation struct {
	start      int              // index in actor.msgs where it begins
	from       uint64           // seq of the boundary it follows (0: the chat's start)
	checkpoint json.RawMessage  // the checkpoint in force
	handoff    boundary.Handoff // the record as kept: the assistant's half as last written, the runtime's as seen
	asked      bool             // the runtime asked for the record once already
	measured   view.Measurement // what the provider billed for the last request
	pruned     bool             // the last turn's safety net cleared tool results
	// checkpointed says a checkpoint was stored since the last turn
	// started: the next turn runs the SessionStart hooks.
	checkpointed bool
	written      string // the handoff.md text last written, so an unchanged record is not written again
	evicted      uint64 // the last seq the checkpoint in force evicted
}

// replay applies a stored row of long-conversation state, at load and as
// it is written, so both paths agree.
func (a *actor) replay(ev *Event) {
	switch ev.Type {
	case EvMessagePinned:
		for i := len(a.msgs) - 1; i >= 0; i-- {
			if a.msgs[i].ID == ev.Message.ID {
				a.msgs[i].Pinned = ev.Message.Pinned
				break
			}
		}
	case EvClear:
		a.msgs = append(a.msgs, Message{ID: "m" + strconv.FormatUint(ev.Seq, 10), Role: RoleClear, Seq: ev.Seq, Time: ev.Time, State: MsgDone})
	case EvContext:
		// The view of this reading answered the signals asked before it: a
		// /compact, a prune, the SessionStart hooks of a checkpoint.
		a.context = ev.ContextInfo
		a.compact, a.conv.checkpointed, a.conv.pruned = nil, false, false
	case EvCompact:
		text := ev.Text
		a.compact = &text
	case EvCheckpoint:
		a.conv.checkpoint, a.conv.evicted, a.conv.checkpointed = ev.Checkpoint, ev.Through, true
	case EvHandoff:
		if len(ev.Handoff) > 0 {
			a.conv.setHandoff(ev.Handoff, ev.Seq)
		}
		if ev.Reason == "asked" {
			a.conv.asked = true
		}
	case EvRuntimeContext:
		m := Message{ID: "m" + strconv.FormatUint(ev.Seq, 10), Role: RoleContext, Seq: ev.Seq, Time: ev.Time,
			Turn: ev.Turn, State: MsgDone, Sections: ev.Sections, Tokens: ev.Tokens}
		_ = json.Unmarshal(ev.Sections, &m.sections)
		a.msgs = append(a.msgs, m)
	case EvBoundary:
		a.msgs = append(a.msgs, Message{ID: "m" + strconv.FormatUint(ev.Seq, 10), Role: RoleBoundary, Seq: ev.Seq, Time: ev.Time,
			Text: ev.Record, State: MsgDone})
		// The assistant's half carries into the fresh conversation as where
		// the work stands; the runtime's half starts again, and the
		// assistant is asked anew should it reach hard without a word.
		keep := a.conv.handoff
		keep.Seen, keep.JudgedSeq = boundary.Seen{}, 0
		a.conv = conversation{start: len(a.msgs), from: ev.Seq, handoff: keep}
		a.compact = nil
	}
}

// Context stores the reading a turn starts with and its runtime context,
// when the turn built its view itself (otherwise they went with the
// pickup), before the request is sent.
func (h *host) Context(ci runtime.ContextInfo, sections []view.Section, toks int) error {
	return h.a.exec(func() error {
		if err := h.a.usable(); err != nil {
			return err
		}
		h.a.appendContext(h.t.id, ci, sections, toks)
		return h.a.flush()
	})
}

// appendContext adds a turn's reading and runtime context to the batch.
func (a *actor) appendContext(turn string, ci runtime.ContextInfo, sections []view.Section, toks int) {
	c := ci
	// Event.Model is the shallower field: it carries the reading's model.
	a.replay(a.append(&Event{Type: EvContext, Turn: turn, ContextInfo: &c, Model: c.Model}, Origin{}))
	if sections == nil {
		return // nothing changed: nothing sent, nothing stored
	}
	raw, _ := json.Marshal(sections)
	ev := a.append(&Event{Type: EvRuntimeContext, Turn: turn, Sections: raw, Tokens: toks}, Origin{})
	a.replay(ev)
}

// Checkpoint stores a checkpoint the view planned, before it is sent.
func (h *host) Checkpoint(cp *view.Checkpoint) error {
	return h.a.exec(func() error {
		if err := h.a.usable(); err != nil {
			return err
		}
		h.a.appendCheckpoint(h.t.id, cp)
		return h.a.flush()
	})
}

func (a *actor) appendCheckpoint(turn string, cp *view.Checkpoint) {
	raw, _ := json.Marshal(cp)
	a.replay(a.append(&Event{Type: EvCheckpoint, Turn: turn, Checkpoint: raw, Through: cp.Evicted}, Origin{}))
}

// replayTurn takes what a finished turn measured.
func (a *actor) replayTurn(ev *Event) {
	if ev.Measured != nil {
		a.conv.measured = *ev.Measured
	}
	a.conv.pruned = ev.Pruned
}

// Handoff is the record as kept now.
func (h *host) Handoff() (boundary.Handoff, bool) {
	var out boundary.Handoff
	var asked bool
	_ = h.a.exec(func() error {
		out, asked = h.a.conv.handoff, h.a.conv.asked
		out.Seen.Running = h.a.running()
		return nil
	})
	return out, asked
}

// running names what is still under way, for the record's runtime half.
func (a *actor) running() []string {
	var out []string
	for _, w := range a.approvals {
		out = append(out, "waiting for approval: "+w.Tool)
	}
	for _, r := range a.recoveries {
		out = append(out, "interrupted call waiting for repeat or skip: "+r.Call.Name)
	}
	if n := len(a.pending); n > 0 {
		out = append(out, fmt.Sprintf("%d queued message(s) from the person", n))
	}
	return out
}

// Last is the record's last seq.
func (h *host) Last() uint64 {
	var seq uint64
	_ = h.a.exec(func() error { seq = h.a.seq; return nil })
	return seq
}

// HandoffUpdated stores the assistant's half of the record.
func (h *host) HandoffUpdated(hf boundary.Handoff, asked, answered bool) (uint64, error) {
	var seq uint64
	err := h.a.exec(func() error {
		if err := h.a.usable(); err != nil {
			return err
		}
		mine := hf
		mine.Seen, mine.JudgedSeq = boundary.Seen{}, 0 // the runtime's half is rebuilt from the record
		ev := &Event{Type: EvHandoff, Turn: h.t.id}
		if answered {
			ev.Handoff, _ = json.Marshal(mine)
		}
		if asked {
			ev.Reason = "asked"
		}
		h.a.append(ev, Origin{})
		h.a.replay(ev)
		seq = ev.Seq
		return h.a.flush()
	})
	return seq, err
}

// setHandoff takes the assistant's half from a handoff.updated row.
func (c *conversation) setHandoff(raw json.RawMessage, seq uint64) {
	var mine boundary.Handoff
	if json.Unmarshal(raw, &mine) != nil {
		return
	}
	mine.Seen, mine.JudgedSeq = c.handoff.Seen, seq
	c.handoff = mine
}

// Boundary archives the conversation and clears it in one transaction.
// If the write fails nothing changes: the rows are not kept, a
// boundary.failed row says so, and the next turn tries again.
func (h *host) Boundary(b runtime.Boundary) ([]view.Row, error) {
	var rows []view.Row
	err := h.a.exec(func() error {
		if err := h.a.boundary(h.t, b); err != nil {
			return err
		}
		rows = h.a.rows()
		return nil
	})
	return rows, err
}

func (a *actor) boundary(t *turn, b runtime.Boundary) error {
	if err := a.flush(); err != nil {
		return err
	}
	// The person's messages that crossed hard go into the fresh
	// conversation as typed; everything else of it is archived.
	var archived, carried []Message
	for _, m := range a.msgs[a.conv.start:] {
		if b.CarryFrom > 0 && m.Role == provider.RoleUser && m.rowSeq >= b.CarryFrom {
			carried = append(carried, m)
		} else {
			archived = append(archived, m)
		}
	}
	docs := make([]boundary.Doc, 0, len(archived))
	for _, m := range archived {
		if m.Role == provider.RoleUser || m.Role == provider.RoleAssistant || m.Role == provider.RoleTool {
			docs = append(docs, boundary.Doc{Seq: m.Seq, Role: m.Role, Text: m.Text})
		}
	}
	cont := b.Continued
	bev := a.append(&Event{Type: EvBoundary, Turn: t.id, Reason: b.Reason, Continued: &cont, Record: b.Record,
		Through: b.Through, Notes: b.Notes, Why: b.Why}, Origin{})
	index, err := boundary.BuildIndex(bev.Seq, docs).MarshalBinary()
	if err != nil {
		return err
	}
	entry := archiveEntry{Boundary: bev.Seq, From: a.conv.from + 1, Through: b.Through, Reason: b.Reason, Time: bev.Time,
		Record: b.Record, Docs: docs, Index: index}
	seq := bev.Seq + 1
	opening := &Message{ID: "m" + strconv.FormatUint(seq, 10), Seq: seq, Role: provider.RoleUser, Text: b.Opening,
		State: MsgContinuity, Turn: t.id, Tokens: a.count(b.Opening)}
	oev := a.append(&Event{Type: EvContinuity, Turn: t.id, Message: opening}, Origin{})
	opening.Time = oev.Time
	pickedAt := make([]uint64, len(carried))
	for i, m := range carried {
		c := m
		pickedAt[i] = a.append(&Event{Type: EvMessagePicked, Turn: t.id, Message: &c}, Origin{}).Seq
	}
	a.b.archive = &entry
	if err := a.flush(); err != nil {
		return err
	}
	if a.b.archiveFailed != nil { // set by flush when only the archive's transaction failed
		failed := a.b.archiveFailed
		a.b.archiveFailed = nil
		a.append(&Event{Type: EvBoundaryFailed, Turn: t.id, Reason: b.Reason,
			Error: "The boundary could not be written, so the conversation is left exactly as it was; the next turn tries again: " + failed.Error()}, Origin{})
		if err := a.flush(); err != nil {
			return err
		}
		return failed
	}
	a.replay(bev)
	a.msgs = append(a.msgs, *opening)
	for i, m := range carried {
		m.rowSeq = pickedAt[i]
		a.msgs = append(a.msgs, m)
	}
	if a.s.opt.DataDir != "" {
		// The record as the boundary wrote it, until the next turn updates it.
		if err := boundary.WriteHandoff(a.s.opt.DataDir, a.id, b.Record); err != nil {
			a.s.log.Warn("write handoff", "chat", a.id, "err", err)
		} else {
			a.conv.written = b.Record
		}
	}
	return nil
}

// MsgContinuity is the state of the message a continued (or ended)
// conversation opens with: the runtime wrote it, not the person.
const MsgContinuity = "continuity"

// putArchive writes a boundary's archive entry. The store's archiveHook
// (tests) may fail it, to prove that a failed archive changes nothing.
func putArchive(tx *bolt.Tx, s *Store, chat string, e *archiveEntry) error {
	if s.archiveHook != nil {
		if err := s.archiveHook(); err != nil {
			return err
		}
	}
	b, err := subBucket(tx, bucketArchive, chat, true)
	if err != nil {
		return err
	}
	v, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return b.Put(seqKey(e.Boundary), v)
}

// Lookup answers recall_history and handoff_history from the chat's
// archive. It only reads, so it runs on the turn's goroutine.
func (h *host) Lookup(ctx context.Context, call provider.ToolCall) (runtime.ToolResult, error) {
	switch call.Name {
	case boundary.ToolToolOutput:
		id, err := boundary.ParseToolOutput(json.RawMessage(call.Arguments))
		if err != nil {
			return runtime.ToolResult{}, err
		}
		out, err := h.a.s.toolOutput(h.a.id, id)
		return runtime.ToolResult{Content: out, Full: out}, err
	case boundary.ToolGlobalSearch:
		id, err := boundary.ParseGlobalSearch(json.RawMessage(call.Arguments))
		if err != nil {
			return runtime.ToolResult{}, err
		}
		out, err := h.a.s.around(h.a.id, id)
		return runtime.ToolResult{Content: out, Full: out}, err
	}
	entries, err := h.a.s.archives(h.a.id)
	if err != nil {
		return runtime.ToolResult{}, err
	}
	var out string
	switch call.Name {
	case boundary.ToolRecallHistory:
		r, err := boundary.ParseRecall(json.RawMessage(call.Arguments))
		if err != nil {
			return runtime.ToolResult{}, err
		}
		out = recall(entries, r)
	case boundary.ToolHandoffHistory:
		n, err := boundary.ParseHandoffHistory(json.RawMessage(call.Arguments))
		if err != nil {
			return runtime.ToolResult{}, err
		}
		if out, err = handoffHistory(entries, n); err != nil {
			return runtime.ToolResult{}, err
		}
	default:
		return runtime.ToolResult{}, fmt.Errorf("no tool %s", call.Name)
	}
	return runtime.ToolResult{Content: out, Full: out}, nil
}

// archives reads a chat's archive entries, oldest first.
func (s *Service) archives(chat string) ([]archiveEntry, error) {
	var out []archiveEntry
	err := s.store.db.View(func(tx *bolt.Tx) error {
		b, _ := subBucket(tx, bucketArchive, chat, false)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var e archiveEntry
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("chat %s: corrupt archive entry: %w", chat, err)
			}
			out = append(out, e)
			return nil
		})
	})
	return out, err
}

func recall(entries []archiveEntry, r boundary.Recall) string {
	indexes := make([]*boundary.Index, 0, len(entries))
	for _, e := range entries {
		ix := &boundary.Index{}
		if ix.UnmarshalBinary(e.Index) == nil {
			indexes = append(indexes, ix)
		}
	}
	if len(indexes) == 0 {
		return "Nothing is archived in this chat yet: no conversation of it has been consolidated."
	}
	return boundary.FormatHits(r.Query, boundary.Search(r.Query, indexes, r.Limit))
}

func handoffHistory(entries []archiveEntry, n uint64) (string, error) {
	if n == 0 {
		if len(entries) == 0 {
			return "No boundary has been written in this chat yet.", nil
		}
		var b strings.Builder
		b.WriteString("Handoffs written at this chat's boundaries, oldest first (read one with {\"boundary\": n}):\n")
		for i, e := range entries {
			fmt.Fprintf(&b, "%d. %s, %s, events %d to %d: %s\n", i+1, e.Time.Format("2006-01-02 15:04 UTC"), e.Reason, e.From, e.Through, objectiveOf(e.Record))
		}
		return strings.TrimRight(b.String(), "\n"), nil
	}
	if n > uint64(len(entries)) {
		return "", fmt.Errorf("%w: there are %d boundaries; ask for 1 to %d", ErrBadInput, len(entries), len(entries))
	}
	return entries[n-1].Record, nil
}

// objectiveOf is the first line under "## Objective" of a rendered record.
func objectiveOf(record string) string {
	_, rest, ok := strings.Cut(record, "## Objective\n")
	if !ok {
		return "(no objective)"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(rest), "\n")
	if line == "" || strings.HasPrefix(line, "#") {
		return "(no objective)"
	}
	return line
}

// writeHandoff keeps data_dir/workstreams/<chat>/handoff.md current after a
// turn, laid out by the handoff.md template in force. An empty record (a
// chat that never used a tool or wrote a handoff) writes nothing, and an
// unchanged one is not written again.
func (a *actor) writeHandoff() {
	dir := a.s.opt.DataDir
	if dir == "" {
		return
	}
	blank := a.conv.handoff
	blank.JudgedSeq = 0
	if a.conv.written == "" && reflect.DeepEqual(blank, boundary.Handoff{}) {
		return
	}
	h := a.conv.handoff
	h.Seen.Running = a.running()
	tmpl, err := boundary.LoadTemplate(a.s.opt.ConfigDir)
	if err != nil {
		a.s.log.Warn("handoff template", "err", err)
		return
	}
	text, err := tmpl.Render(&h)
	if err != nil || text == a.conv.written {
		return
	}
	if err := boundary.WriteHandoff(dir, a.id, text); err != nil {
		a.s.log.Warn("write handoff", "chat", a.id, "err", err)
		return
	}
	a.conv.written = text
}

// HandoffEntry is one boundary's record, as the browser lists them.
type HandoffEntry struct {
	Number   int       `json:"number"`   // 1 for the chat's first boundary
	Boundary uint64    `json:"boundary"` // seq of the boundary row
	From     uint64    `json:"from"`
	Through  uint64    `json:"through"`
	Reason   string    `json:"reason"`
	Time     time.Time `json:"time"`
	Record   string    `json:"record"`
}

// Handoffs lists the records a chat's boundaries wrote, oldest first.
func (s *Service) Handoffs(ctx context.Context, chat string) ([]HandoffEntry, error) {
	if _, err := s.Get(ctx, chat); err != nil {
		return nil, err
	}
	entries, err := s.archives(chat)
	out := make([]HandoffEntry, 0, len(entries))
	for i, e := range entries {
		out = append(out, HandoffEntry{Number: i + 1, Boundary: e.Boundary, From: e.From, Through: e.Through, Reason: e.Reason, Time: e.Time, Record: e.Record})
	}
	return out, err
}

// toolOutput is the whole stored result of a call of the chat, clipped at
// boundary.MaxToolOutput characters.
func (s *Service) toolOutput(chat, callID string) (string, error) {
	var out string
	found := false
	err := s.store.db.View(func(tx *bolt.Tx) error {
		err := eventsSince(tx, chat, 0, func(ev *Event) error {
			if ev.Type == EvToolResult && ev.Result.CallID == callID {
				found, out = true, ev.Result.Content
				if ev.Result.Handle != "" {
					if ob, _ := subBucket(tx, bucketOutputs, chat, false); ob != nil {
						if v := ob.Get([]byte(ev.Result.Handle)); v != nil {
							out = string(v)
						}
					}
				}
			}
			return nil
		})
		return err
	})
	if err != nil {
		return "", err
	}
	if !found {
		return "", fmt.Errorf("%w: no tool call %q in this chat", ErrNotFound, callID)
	}
	if r := []rune(out); len(r) > boundary.MaxToolOutput {
		out = string(r[:boundary.MaxToolOutput]) + fmt.Sprintf("\n[… clipped at %d of %d characters]", boundary.MaxToolOutput, len(r))
	}
	return out, nil
}

// aroundWindow is how many transcript rows global_search shows on each
// side of the one asked for, and how long each may be.
const (
	aroundWindow = 4
	aroundChars  = 4000
)

// around shows the chat's transcript around one message, whole or nearly:
// what a checkpoint folded or evicted from the view.
func (s *Service) around(chat, id string) (string, error) {
	seq, err := strconv.ParseUint(strings.TrimPrefix(id, "m"), 10, 64)
	if err != nil {
		return "", fmt.Errorf("%w: %q is not a message id", ErrBadInput, id)
	}
	type line struct {
		seq        uint64
		role, text string
	}
	var lines []line
	err = s.store.db.View(func(tx *bolt.Tx) error {
		return eventsSince(tx, chat, 0, func(ev *Event) error {
			switch {
			case ev.Message != nil && (ev.Type == EvMessagePicked || ev.Type == EvAssistantStep || ev.Type == EvTurnFinished || ev.Type == EvContinuity):
				lines = append(lines, line{ev.Message.Seq, ev.Message.Role, ev.Message.Text})
			case ev.Type == EvToolResult:
				lines = append(lines, line{ev.Seq, "tool " + ev.Result.Name, ev.Result.Content})
			}
			return nil
		})
	})
	if err != nil {
		return "", err
	}
	at := -1
	for i, l := range lines {
		if l.seq == seq {
			at = i
		}
	}
	if at < 0 {
		return "", fmt.Errorf("%w: no message %s in this chat", ErrNotFound, id)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Messages around %s, oldest first:\n", id)
	for _, l := range lines[max(0, at-aroundWindow):min(len(lines), at+aroundWindow+1)] {
		text := l.text
		if r := []rune(text); len(r) > aroundChars && l.seq != seq {
			text = string(r[:aroundChars]) + " […]"
		}
		mark := ""
		if l.seq == seq {
			mark = " ◀"
		}
		fmt.Fprintf(&b, "\n[m%d, %s%s]\n%s\n", l.seq, l.role, mark, text)
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

// Inspection is what a chat's next turn would start from, read from the
// database without running anything: for `mirror replay`.
type Inspection struct {
	Chat       Chat
	Input      runtime.TurnInput // rows, checkpoint, measurement, signals
	From       uint64            // the boundary the conversation follows (0: the chat's start)
	Boundaries int               // boundaries the chat has had
	Handoff    boundary.Handoff
	Asked      bool
	Context    *runtime.ContextInfo // the last reading
}

// Inspect reads a chat as a turn would see it, from db alone: it starts no
// actor, writes nothing, and works on a database opened read-only.
func Inspect(db *bolt.DB, chat string) (Inspection, error) {
	s := &Service{store: &Store{db: db}, opt: Options{Metrics: nil}}
	a, err := loadActor(s, chat)
	if err != nil {
		return Inspection{}, err
	}
	in := runtime.TurnInput{Chat: a.id, Chain: a.meta.Chain, Rows: a.rows(), Measured: a.conv.measured,
		Signals: view.Signals{Pruned: a.conv.pruned}, SessionStart: a.conv.checkpointed, Last: a.seq}
	in.Picked = len(in.Rows)
	if a.compact != nil {
		in.Signals.Compact, in.Signals.Instructions = true, *a.compact
	}
	if len(a.conv.checkpoint) > 0 {
		cp := &view.Checkpoint{}
		if json.Unmarshal(a.conv.checkpoint, cp) == nil {
			in.Checkpoint = cp
		}
	}
	entries, err := s.archives(chat)
	return Inspection{Chat: a.meta, Input: in, From: a.conv.from, Boundaries: len(entries), Handoff: a.conv.handoff,
		Asked: a.conv.asked, Context: a.context}, err
}

// count counts text with the encoding of the chat's model family: rows are
// counted once, when they are stored.
func (a *actor) count(text string) int {
	if a.s.opt.Turner == nil {
		return tokens.Count(text)
	}
	return a.s.opt.Turner.Counter(a.meta.Chain).Count(text)
}

// recount is toks (an o200k_base count made off the chat's goroutine), or
// text counted again when the chat's model uses another encoding.
func (a *actor) recount(text string, toks int) int {
	if a.s.opt.Turner == nil || a.s.opt.Turner.Counter(a.meta.Chain).Encoding() == tokens.O200kBase {
		return toks
	}
	return a.count(text)
}
