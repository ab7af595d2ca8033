package chats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/boundary"
	"github.com/mirror-gateway/mirror/runtime/ids"
	"github.com/mirror-gateway/mirror/runtime/provider"
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
	Boundary uint64    `json:"boundary"` // seq of the boundary row
	From     uint64    `json:"from"`     // first seq of the conversation
	Through  uint64    `json:"through"`  // last seq it archived
	Reason   string    `json:"reason"`
	Time     time.Time `json:"time"`
	Record   string    `json:"record"` // the handoff record, rendered
	// Refs name the archived rows of the record whose texts recall_history
	// searches; the index is built from them when it is asked. Entries
	// written before Refs existed carry the texts (Docs) and their index.
	Refs  []docRef       `json:"refs,omitempty"`
	Docs  []boundary.Doc `json:"docs,omitempty"`
	Index []byte         `json:"index,omitempty"`
}

// docRef is one archived row: the message's seq and role, and the row of
// the record that holds its text. The record is append-only, so the text is
// there for as long as the archive is: storing it here again (and once more
// inside a stored index, which carries the texts) held every archived text
// three times.
type docRef struct {
	Seq  uint64 `json:"seq"`
	Role string `json:"role"`
	At   uint64 `json:"at"`
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
	refs := make([]docRef, 0, len(archived))
	for _, m := range archived {
		if m.Role == provider.RoleUser || m.Role == provider.RoleAssistant || m.Role == provider.RoleTool {
			at := m.textAt
			if at == 0 {
				at = m.Seq // a tool result or an assistant step: its own row
			}
			refs = append(refs, docRef{Seq: m.Seq, Role: m.Role, At: at})
		}
	}
	cont := b.Continued
	bev := a.append(&BoundaryCrossed{Turn: t.id, Reason: b.Reason, Continued: cont, Record: b.Record,
		Through: b.Through, Notes: b.Notes, Why: b.Why}, Origin{})
	entry := archiveEntry{Boundary: bev.Seq, From: a.conv.from + 1, Through: b.Through, Reason: b.Reason, Time: bev.Time,
		Record: b.Record, Refs: refs}
	seq := bev.Seq + 1
	opening := &Message{ID: ids.Message(seq), Seq: seq, Role: provider.RoleUser, Text: b.Opening,
		State: MsgContinuity, Turn: t.id, Tokens: a.count(b.Opening), textAt: seq}
	oev := a.append(&Continuity{Turn: t.id, Message: opening}, Origin{})
	opening.Time = oev.Time
	pickedAt := make([]uint64, len(carried))
	for i, m := range carried {
		c := m
		pickedAt[i] = a.append(&MessagePicked{Turn: t.id, Message: &c}, Origin{}).Seq
	}
	a.b.archive = &entry
	if err := a.flush(); err != nil {
		var failed *archiveError
		if !errors.As(err, &failed) {
			return err
		}
		a.append(&BoundaryFailed{Turn: t.id, Reason: b.Reason,
			Error: "The boundary could not be written, so the conversation is left exactly as it was; the next turn tries again: " + failed.err.Error()}, Origin{})
		if err := a.flush(); err != nil {
			return err
		}
		return failed.err
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
	b.FillPercent = 1.0 // appended in seq order
	return b.Put(seqKey(e.Boundary), Marshal(e))
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
		if _, ok := ids.ParseImage(id); ok {
			return h.a.s.imageBack(h.a.id, id)
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
	case boundary.ToolRecallMemory:
		r, err := boundary.ParseRecallMemory([]byte(call.Arguments))
		if err != nil {
			return runtime.ToolResult{}, err
		}
		out, err := h.a.s.recallMemory(h.a.id, r)
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
		if err := h.a.s.archivedDocs(h.a.id, entries); err != nil {
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

// archivedDocs reads, for the entries that name their rows (Refs), the
// archived texts from the record into Docs.
func (s *Service) archivedDocs(chat string, entries []archiveEntry) error {
	return s.store.db.View(func(tx *bolt.Tx) error {
		rb, _ := subBucket(tx, bucketRecords, chat, false)
		for i := range entries {
			e := &entries[i]
			if len(e.Refs) == 0 || rb == nil {
				continue
			}
			e.Docs = make([]boundary.Doc, 0, len(e.Refs))
			for _, r := range e.Refs {
				v := rb.Get(seqKey(r.At))
				if v == nil {
					continue
				}
				ev, err := decodeRow(rb, chat, seqKey(r.At), v)
				if err != nil {
					return err
				}
				e.Docs = append(e.Docs, boundary.Doc{Seq: r.Seq, Role: r.Role, Text: rowText(ev)})
			}
		}
		return nil
	})
}

func recall(entries []archiveEntry, r boundary.Recall) string {
	indexes := make([]*boundary.Index, 0, len(entries))
	for _, e := range entries {
		if len(e.Refs) > 0 {
			indexes = append(indexes, boundary.BuildIndex(e.Boundary, e.Docs))
			continue
		}
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
	if s.routed(ctx, chat) {
		return routeOp[[]HandoffEntry](ctx, s, chat, opFrame{Op: opHandoffs}, Origin{})
	}
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
			if p, ok := ev.Payload.(*ToolResult); ok && p.Result.CallID == callID {
				found, out = true, p.Result.Content
				if p.Result.Handle != "" {
					if ob, _ := subBucket(tx, bucketOutputs, chat, false); ob != nil {
						if v := ob.Get([]byte(p.Result.Handle)); v != nil {
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
	seq, ok := ids.CitedMessage(id)
	if !ok {
		return "", fmt.Errorf("%w: %q is not a message id", ErrBadInput, id)
	}
	type line struct {
		seq        uint64
		role, text string
	}
	var lines []line
	err := s.store.db.View(func(tx *bolt.Tx) error {
		return eventsSince(tx, chat, 0, func(ev *Event) error {
			switch p := ev.Payload.(type) {
			case *MessagePicked, *AssistantStep, *TurnFinished, *Continuity:
				if m := ev.Message(); m != nil {
					lines = append(lines, line{m.Seq, m.Role, m.Text})
				}
			case *ToolResult:
				lines = append(lines, line{ev.Seq, "tool " + p.Result.Name, p.Result.Content})
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
