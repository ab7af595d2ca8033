// Package budget computes one model request's token budget from the model's
// catalog window, the chosen context limit and the delegation depth: the
// response reserve, the policy window, the request ceiling, the checkpoint
// marks, the checkpoint target and the protected tail. It is arithmetic only;
// nothing here counts tokens.
package budget

import (
	"fmt"
	"strconv"

	"github.com/mirror-gateway/mirror/config"
)

// The fixed numbers of the request budget.
const (
	// AutoMax caps the Auto limit: long contexts cost more on every
	// request and recall worse, so Auto stops here even on a 1M window.
	AutoMax = 272000
	// UnknownWindow is the window assumed for a model the catalog does not
	// size.
	UnknownWindow = 128000
	// ReserveMax caps the 20 % share of the response reserve.
	ReserveMax = 16384
	// ChildCap and DescendantCap cap the policy window of a delegated run
	// (depth 1) and of anything below it (depth 2 and more).
	ChildCap      = 128000
	DescendantCap = 64000
	// TailMessages and TailMin..TailMax bound the protected tail: up to
	// TailMessages recent messages within clamp(15 % of the ceiling).
	TailMessages = 8
	TailMin      = 16384
	TailMax      = 65536
)

// Steps are the token steps a context limit may name, below Full.
var Steps = []int{128000, 200000, 400000, 600000, 1000000, 2000000, 5000000, 10000000}

// Reserve is the response reserve of a window:
// max(min(16384, 20 % of window), 10 % of window).
func Reserve(window int) int {
	return max(min(ReserveMax, window/5), window/10)
}

// ceilingOf is the request ceiling a policy window gives. It never
// decreases as the window grows, which windowFor relies on.
func ceilingOf(window int) int { return window - Reserve(window) }

// windowFor is the smallest window whose ceiling reaches limit.
func windowFor(limit int) int {
	var w int
	switch {
	case limit <= 4*ReserveMax: // reserve is 20 %
		w = (limit*5 + 3) / 4
	case limit <= 9*ReserveMax: // reserve is 16384
		w = limit + ReserveMax
	default: // reserve is 10 %
		w = (limit*10 + 8) / 9
	}
	// The closed forms above are exact up to integer rounding; settle it.
	for w > 1 && ceilingOf(w-1) >= limit {
		w--
	}
	for ceilingOf(w) < limit {
		w++
	}
	return w
}

// DepthCap is the policy window cap of a run at depth (0 the conversation
// itself, 1 its delegated child, 2 and more below): 0 means no cap.
func DepthCap(depth int) int {
	switch {
	case depth <= 0:
		return 0
	case depth == 1:
		return ChildCap
	}
	return DescendantCap
}

// Budget is one run's request budget. Every field is in tokens except Limit
// and Depth. Fixed overhead (system prompt and tool definitions) counts
// against Ceiling, Mark and Warn, which size the whole request.
type Budget struct {
	Window       int    `json:"window"`        // catalog window (UnknownWindow when the catalog has none)
	Limit        string `json:"limit"`         // the limit in force: "auto", "full" or a step such as "200k"
	Depth        int    `json:"depth"`         // delegation depth
	PolicyWindow int    `json:"policy_window"` // smallest window whose ceiling is the limit, within Window, capped by depth
	Reserve      int    `json:"reserve"`       // response reserve of PolicyWindow
	Ceiling      int    `json:"ceiling"`       // PolicyWindow − Reserve: every request must fit it
	Mark         int    `json:"mark"`          // 85 % of Ceiling: a measured request at or past it checkpoints the next turn
	Warn         int    `json:"warn"`          // 72 % of Ceiling: the agent is told once that a checkpoint is near
	TailTokens   int    `json:"tail_tokens"`   // token bound of the protected tail
}

// New computes the budget of a model with the given catalog window (0 when
// unknown), context_limit ("auto", "full" or a token count such as "200k",
// as config.ParseContextLimit reads it) and delegation depth. A limit at or
// above the model's Full, remembered from a larger model, reads as Full.
func New(window int, contextLimit string, depth int) (Budget, error) {
	if window <= 0 {
		window = UnknownWindow
	}
	if contextLimit == "" {
		contextLimit = config.ContextAuto
	}
	step, err := config.ParseContextLimit(contextLimit)
	if err != nil {
		return Budget{}, fmt.Errorf("context limit %q: %w", contextLimit, err)
	}
	full := ceilingOf(window)
	b := Budget{Window: window, Depth: depth, Limit: contextLimit}
	limit := full
	switch {
	case contextLimit == config.ContextFull:
	case contextLimit == config.ContextAuto:
		limit = min(AutoMax, full)
	case step >= full:
		b.Limit = config.ContextFull
	default:
		limit = step
	}
	// Full is the catalog window itself: integer rounding can give a
	// window one token smaller the same ceiling, which is not the point.
	b.PolicyWindow = window
	if limit < full {
		b.PolicyWindow = windowFor(limit)
	}
	if c := DepthCap(depth); c > 0 {
		b.PolicyWindow = min(b.PolicyWindow, c)
	}
	b.Reserve = Reserve(b.PolicyWindow)
	b.Ceiling = b.PolicyWindow - b.Reserve
	b.Mark = b.Ceiling * 85 / 100
	b.Warn = b.Ceiling * 72 / 100
	b.TailTokens = min(max(b.Ceiling*15/100, TailMin), TailMax)
	return b, nil
}

// Target is the history size a checkpoint cuts the view to: 30 % of the
// ceiling minus the fixed overhead, but at least a quarter of the history
// budget (ceiling minus overhead), so a small window keeps some history.
func (b Budget) Target(overhead int) int {
	return max(0, b.Ceiling*30/100-overhead, (b.Ceiling-overhead)/4)
}

// CardBudget is the size all epoch cards may take before they degrade,
// oldest first: 12 % of the target.
func (b Budget) CardBudget(overhead int) int { return b.Target(overhead) * 12 / 100 }

// Choice is one context limit a model offers.
type Choice struct {
	Limit   string `json:"limit"`   // "auto", "full" or a step such as "200k"
	Ceiling int    `json:"ceiling"` // the request ceiling it gives at depth 0
}

// LimitChoices returns the context limits a model with this window offers:
// Auto, the steps below Full, and Full. It returns nil when Auto already is
// the whole window (window ≤ 272k plus its reserve): there is nothing to set.
func LimitChoices(window int) []Choice {
	if window <= 0 {
		window = UnknownWindow
	}
	full := ceilingOf(window)
	if full <= AutoMax {
		return nil
	}
	out := []Choice{{Limit: config.ContextAuto, Ceiling: AutoMax}}
	for _, s := range Steps {
		if s < full {
			out = append(out, Choice{Limit: StepName(s), Ceiling: s})
		}
	}
	return append(out, Choice{Limit: config.ContextFull, Ceiling: full})
}

// StepName spells a step as config reads it back: 200k, 1M.
func StepName(tokens int) string {
	switch {
	case tokens%1000000 == 0:
		return strconv.Itoa(tokens/1000000) + "M"
	case tokens%1000 == 0:
		return strconv.Itoa(tokens/1000) + "k"
	}
	return strconv.Itoa(tokens)
}
