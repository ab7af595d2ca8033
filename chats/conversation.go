package chats

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/boundary"
	"github.com/mirror-gateway/mirror/runtime/ids"
	"github.com/mirror-gateway/mirror/runtime/tokens"
	"github.com/mirror-gateway/mirror/runtime/view"
	bolt "go.etcd.io/bbolt"
)

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
	switch p := ev.Payload.(type) {
	case *MessagePinned:
		m := p.Message
		a.pins[m.ID] = m.Pinned
		for i := len(a.msgs) - 1; i >= 0; i-- {
			if a.msgs[i].ID == m.ID {
				a.msgs[i].Pinned = m.Pinned
				a.touch()
				break
			}
		}
	case *Cleared:
		a.msgs = append(a.msgs, Message{ID: ids.Message(ev.Seq), Role: RoleClear, Seq: ev.Seq, Time: ev.Time, State: MsgDone})
		// The view drops a checkpoint older than the clear (view.clearCut),
		// so its divider goes too, as it does live: only a checkpoint
		// planned after the clear draws one again.
		a.conv.evicted = 0
	case *ContextReading:
		// The view of this reading answered the signals asked before it: a
		// /compact, a prune, the SessionStart hooks of a checkpoint.
		a.context = p.Info()
		a.compact, a.conv.checkpointed, a.conv.pruned = nil, false, false
	case *CompactRequested:
		text := p.Text
		a.compact = &text
	case *CheckpointTaken:
		a.conv.checkpoint, a.conv.evicted, a.conv.checkpointed = p.Checkpoint, p.Through, true
	case *HandoffUpdated:
		if len(p.Handoff) > 0 {
			a.conv.setHandoff(p.Handoff, ev.Seq)
		}
		if p.Reason == "asked" {
			a.conv.asked = true
		}
	case *RuntimeContext:
		var sections []view.Section
		_ = json.Unmarshal(p.Sections, &sections)
		a.addContextRow(ev, p, sections)
	case *BoundaryCrossed:
		// The conversation before it is archived: memory keeps only the
		// fresh one (a snapshot reads the transcript from the store).
		clear(a.msgs)
		a.msgs = a.msgs[:0]
		a.touch()
		// The assistant's half carries into the fresh conversation as where
		// the work stands; the runtime's half starts again, and the
		// assistant is asked anew should it reach hard without a word.
		keep := a.conv.handoff
		keep.Seen, keep.JudgedSeq = boundary.Seen{}, 0
		a.conv = conversation{start: 0, from: ev.Seq, handoff: keep}
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
	a.replay(a.append(&ContextReading{Turn: turn, ContextInfo: &c, Model: c.Model}, Origin{}))
	if sections == nil {
		return // nothing changed: nothing sent, nothing stored
	}
	raw, _ := json.Marshal(sections)
	p := &RuntimeContext{Turn: turn, Sections: raw, Tokens: toks}
	a.addContextRow(a.append(p, Origin{}), p, sections)
}

// addContextRow adds a runtime.context row to the conversation, its
// sections parsed once (when written, or when loaded).
func (a *actor) addContextRow(ev *Event, p *RuntimeContext, sections []view.Section) {
	a.msgs = append(a.msgs, Message{ID: ids.Message(ev.Seq), Role: RoleContext, Seq: ev.Seq, Time: ev.Time,
		Turn: p.Turn, State: MsgDone, Sections: p.Sections, Tokens: p.Tokens, sections: sections})
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
	a.replay(a.append(&CheckpointTaken{Turn: turn, Checkpoint: raw, Through: cp.Evicted}, Origin{}))
}

// replayTurn takes what a finished turn measured.
func (a *actor) replayTurn(p *TurnFinished) {
	if p.Measured != nil {
		a.conv.measured = *p.Measured
	}
	a.conv.pruned = p.Pruned
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
		p := &HandoffUpdated{Turn: h.t.id}
		if answered {
			p.Handoff, _ = json.Marshal(mine)
		}
		if asked {
			p.Reason = "asked"
		}
		ev := h.a.append(p, Origin{})
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
	in := runtime.TurnInput{Chat: a.id, Chain: a.meta.Chain, Rows: a.rows(), Measured: a.conv.measured, Servers: a.servers(),
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
