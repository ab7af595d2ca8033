// Package boundary owns the pure core of a boundary, the act that ends a
// conversation between turns and starts the next one from a written record
// (seed 001, "When a conversation gets long"):
//
//   - the soft and hard limits and the Context line the assistant reads on
//     every turn (Limits, Reading, ContextLine);
//   - the handoff record: the assistant's half set with the handoff_update
//     tool, the runtime's half filled from what the record saw, rendered
//     with the config/handoff.md template and kept current in
//     data_dir/workstreams/<chat>/handoff.md (Handoff, Template, WriteHandoff);
//   - who decides: the consolidate tool, the one forced ask at hard, and the
//     rule that a continue must be owed (Owed);
//   - the continuity message that opens the cleared conversation, bounded
//     by boundary.continuity_budget_tokens (Continuity, Ended, Waiting);
//   - the archive's search index and the recall_history and handoff_history
//     tools (Index, Search);
//   - reflect: the prompt of the separate model turn and the notes it
//     writes into data_dir/memory (ReflectPrompt, ParseNotes, WriteNotes).
//
// It holds no state of its own and talks to no model or database: the turn
// loop decides when, the chat store keeps the rows and the index, and this
// package says what is written and what it says.
package boundary

import (
	"fmt"
	"math"
)

// Limits are a conversation's two limits in tokens, for one model.
// Both are counted on the conversation itself, without the fixed prompt and
// the tool definitions sent with every turn: those do not shrink when the
// conversation is cleared.
type Limits struct {
	Window int // the model's context window
	Soft   int // where the assistant is told to finish its step and update the handoff
	Hard   int // where a boundary is taken between turns
	// MaxAnswer is the longest answer the model may give; a request that
	// with it would not fit the window is past hard whatever the share.
	MaxAnswer int
}

// NewLimits derives the limits from the window and the ratios of
// compaction.soft_ratio and compaction.hard_ratio. The effective hard is
// never above checkpointMark (the request budget's checkpoint mark, read as
// a count of the conversation; 0 means none), so on a window whose hard
// share is past the mark the boundary does not wait for a conversation the
// view would re-plan anyway.
// When the mark caps hard, soft moves down in the same proportion
// (capped hard × softRatio/hardRatio), so the warning to finish the step
// still comes first, as far ahead of hard as the ratios put it.
func NewLimits(window int, softRatio, hardRatio float64, maxAnswer, checkpointMark int) Limits {
	l := Limits{
		Window:    window,
		Soft:      share(window, softRatio),
		Hard:      share(window, hardRatio),
		MaxAnswer: max(maxAnswer, 0),
	}
	if checkpointMark > 0 && l.Hard > checkpointMark {
		l.Hard = checkpointMark
		if s, h := math.Min(softRatio, 1), math.Min(hardRatio, 1); s > 0 && s < h {
			l.Soft = min(l.Soft, int(math.Floor(float64(l.Hard)*s/h)))
		}
	}
	if l.Hard > 0 && l.Soft >= l.Hard {
		// Rounding on a tiny window, or ratios config would refuse: the
		// warning still comes before the boundary.
		l.Soft = l.Hard - 1
	}
	return l
}

// share is ratio of window, rounded down: a limit is never above its share.
func share(window int, ratio float64) int {
	if window <= 0 || !(ratio > 0) {
		return 0
	}
	return int(math.Floor(float64(window) * math.Min(ratio, 1)))
}

// Reading is one assessment of a conversation against its limits.
type Reading struct {
	Limits
	Used int // tokens of the conversation itself (corrected estimate)
	// SoftReached and HardReached say whether Used is at or past each limit.
	// HardReached is also true when Overflow is.
	SoftReached, HardReached bool
	// Overflow says the whole request with the longest answer would not fit
	// the window.
	Overflow bool
}

// Assess reads where a conversation stands. conversation is the corrected
// estimate of the conversation's tokens; fixed is that of the fixed prompt
// and the tool definitions, which count only toward fitting the window.
// Pass corrected estimates (tokens.Calibration.Correct): the limits are
// checked before every request, so they must not be under-counted.
func (l Limits) Assess(conversation, fixed int) Reading {
	r := Reading{Limits: l, Used: conversation}
	r.Overflow = l.Window > 0 && conversation+fixed+l.MaxAnswer > l.Window
	r.HardReached = r.Overflow || (l.Hard > 0 && conversation >= l.Hard)
	r.SoftReached = r.HardReached || (l.Soft > 0 && conversation >= l.Soft)
	return r
}

// SoftAdvice is the second line of the Context line, only once soft is
// reached: it is the only way soft reaches the assistant.
const SoftAdvice = "Finish the step you are on, then bring the handoff up to date with `handoff_update`."

// ContextLine is what the assistant reads on every turn about how full the
// conversation is, taken as the turn starts with the person's message
// already counted:
//
//	Context: 26000 of 128000 tokens. Soft 25600: reached. Hard 32000: not reached.
//	Finish the step you are on, then bring the handoff up to date with `handoff_update`.
//
// The second line appears only once soft is reached.
func ContextLine(r Reading) string {
	s := fmt.Sprintf("Context: %d of %d tokens. Soft %d: %s. Hard %d: %s.",
		r.Used, r.Window, r.Soft, reached(r.SoftReached), r.Hard, reached(r.HardReached))
	if r.SoftReached {
		s += "\n" + SoftAdvice
	}
	return s
}

func reached(b bool) string {
	if b {
		return "reached"
	}
	return "not reached"
}
