package runtime

import (
	"fmt"
	"io"

	"github.com/mirror-gateway/mirror/runtime/boundary"
	"github.com/mirror-gateway/mirror/runtime/view"
)

// ReplayState is what a chat holds beyond its next turn's input: the
// record's state of the conversation, for Replay.
type ReplayState struct {
	From       uint64 // the boundary the conversation follows (0: the chat's start)
	Boundaries int
	Handoff    boundary.Handoff
	Asked      bool
}

// Replay writes every number a context decision of the chat turns on, as
// its next turn would see them: the request budget, the limits, the last
// measurement, the checkpoint in force, the view's stages, and what a
// checkpoint and a boundary would do now. It changes nothing.
func (e *Engine) Replay(w io.Writer, in TurnInput, st ReplayState) error {
	chain := e.chains[in.Chain]
	if len(chain) == 0 {
		return fmt.Errorf("the chat's chain %q is not in runtime.yaml", in.Chain)
	}
	m := chain[0]
	in.Host = nil // read only: nothing is stored
	defs := e.offered(true)
	sz := e.sizer(m, defs)
	rows := in.rows()
	b := sz.budget
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }

	p("model %s (%s), window %d, context limit %s", m.Name, m.Remote, m.Window, b.Limit)
	p("request budget: policy window %d, response reserve %d, ceiling %d", b.PolicyWindow, b.Reserve, b.Ceiling)
	p("  checkpoint mark %d (85%%), warning %d (72%%), target %d (history), protected tail %d tokens", b.Mark, b.Warn, b.Target(sz.fixed), b.TailTokens)
	p("  fixed overhead %d tokens (system prompt and %d tool definitions)", sz.fixed, len(defs))
	from := "the chat's start"
	if st.From > 0 {
		from = fmt.Sprintf("the boundary at event %d", st.From)
	}
	p("conversation: since %s; %d rows; %d boundaries before it", from, len(rows), st.Boundaries)
	r := sz.readRows(rows, in.Checkpoint)
	ratio, margin, n := e.cal.Factors(m.Name)
	p("limits: used %d (corrected by ratio %.2f, margin %.2f from %d bills); soft %d: %s; hard %d: %s; overflow: %t",
		r.Used, ratio, margin, n, r.Soft, reached(r.SoftReached), r.Hard, reached(r.HardReached), r.Overflow)
	if in.Measured.Tokens > 0 {
		p("last measurement: %d input tokens billed, view epoch %d, through event %d", in.Measured.Tokens, in.Measured.Epoch, in.Measured.Seq)
	} else {
		p("last measurement: none")
	}
	if cp := in.Checkpoint; cp != nil {
		p("checkpoint in force: epoch %d (%s), evicted through event %d, %d cards, %d masked, %d folded, %d pinned; %d → %d tokens",
			cp.Epoch, cp.Trigger, cp.Evicted, len(cp.Cards), len(cp.Masked), len(cp.Folded), len(cp.Pinned), cp.Before, cp.After)
	} else {
		p("checkpoint in force: none")
	}
	if in.Signals.Compact || in.Signals.Pruned {
		p("signals: compact %t, pruned %t", in.Signals.Compact, in.Signals.Pruned)
	}

	ci := info(r, m.Name)
	v, err := view.Materialize(e.viewInput(&in, sz, rows, ci, ""))
	p("view now:")
	for _, s := range v.Stages {
		line := fmt.Sprintf("  %-13s %5d rows", s.Stage, s.Rows)
		if s.Tokens >= 0 {
			line += fmt.Sprintf(" %8d tokens", s.Tokens)
		}
		if s.Note != "" {
			line += "  " + s.Note
		}
		p("%s", line)
	}
	if err != nil {
		p("  refused before sending: %v", err)
	} else {
		how := "estimated"
		if v.Measured {
			how = "measured"
		}
		p("  request %d tokens (%s) of ceiling %d; next checkpoint at %d", v.Size, how, b.Ceiling, b.Mark)
		if v.Checkpoint != nil {
			p("  the next turn takes a checkpoint (%s): %s", v.Checkpoint.Trigger, v.Checkpoint.Reason)
		}
	}

	manual := in
	manual.Signals.Compact = true
	if cv, err := view.Materialize(e.viewInput(&manual, sz, rows, ci, "")); err != nil {
		p("a checkpoint now: cannot fit: %v", err)
	} else if cp := cv.Checkpoint; cp == nil {
		p("a checkpoint now: the conversation is below its target and is left whole")
	} else {
		p("a checkpoint now: %d → %d tokens (target %d); evicts through event %d into %d cards; masks %d results, folds %d answers, keeps %d pins",
			cp.Before, cp.After, cp.Target, cp.Evicted, len(cp.Cards), len(cp.Masked), len(cp.Folded), len(cp.Pinned))
	}

	switch {
	case !r.HardReached:
		p("a boundary now: not due (hard %d not reached); the assistant may still consolidate", r.Hard)
	default:
		ask := "the assistant has written its record"
		if st.Handoff.JudgedSeq == 0 && !st.Asked {
			ask = "the assistant would be asked once for its record"
		} else if st.Handoff.JudgedSeq == 0 {
			ask = "the assistant was asked already; the runtime's record would stand"
		}
		next := "the work would stop and wait (the record names nothing left to do)"
		if boundary.Owed(&st.Handoff) {
			next = "the work would continue from the record"
		}
		p("a boundary now: due at the next turn; %s; %s", ask, next)
	}
	return nil
}

func reached(b bool) string {
	if b {
		return "reached"
	}
	return "not reached"
}
