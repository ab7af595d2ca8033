package runtime

import (
	"fmt"
	"strings"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/budget"
	"github.com/mirror-gateway/mirror/runtime/provider"
)

// ModelInfo is a model's request budget and conversation limits, as the
// browser's model details show them.
type ModelInfo struct {
	Name       string `json:"name"`
	Provider   string `json:"provider"`
	Model      string `json:"model"`
	Window     int    `json:"window"`
	Configured string `json:"configured"` // context_limit in runtime.yaml
	// ContextLimit is the limit in force: the one chosen in the browser, or
	// the configured one.
	ContextLimit string        `json:"context_limit"`
	Budget       budget.Budget `json:"budget"`
	// Choices are the limits the model offers; empty when Auto already is
	// its whole window, so there is nothing to set.
	Choices []budget.Choice `json:"choices"`
	// The conversation's limits in force, as shares of the window and in
	// tokens (hard is capped at the checkpoint mark),
	// and the shares runtime.yaml gives.
	SoftRatio float64 `json:"soft_ratio"`
	HardRatio float64 `json:"hard_ratio"`
	Soft      int     `json:"soft"`
	Hard      int     `json:"hard"`
	// HardCap is what caps hard (the checkpoint mark of the limit in
	// force): a share of the window past it gives hard = HardCap and soft
	// lowered in proportion (boundary.NewLimits), so a client previewing
	// other shares shows what the runtime would use, not the bare share.
	HardCap    int        `json:"hard_cap"`
	Compaction Compaction `json:"configured_compaction"`
	// Tools is how much of the window the tool definitions take (every
	// MCP server offered).
	Tools ToolsInfo `json:"tools"`
}

// Compaction is a pair of soft and hard shares.
type Compaction struct {
	SoftRatio float64 `json:"soft_ratio"`
	HardRatio float64 `json:"hard_ratio"`
}

// Models lists every model's request budget, in runtime.yaml's order.
func (e *Engine) Models() []ModelInfo {
	out := make([]ModelInfo, 0, len(e.order))
	for _, m := range e.order {
		out = append(out, e.modelInfo(m))
	}
	return out
}

func (e *Engine) modelInfo(m *Model) ModelInfo {
	defs := e.offered(true)
	sz := e.sizer(m, defs)
	choices := budget.LimitChoices(m.Window)
	if choices == nil {
		choices = []budget.Choice{}
	}
	soft, hard := e.ratios(m)
	return ModelInfo{Name: m.Name, Provider: m.ProvName, Model: m.Remote, Window: m.Window, Configured: m.ContextLimit,
		ContextLimit: sz.budget.Limit, Budget: sz.budget, Choices: choices, SoftRatio: soft, HardRatio: hard,
		Soft: sz.limits.Soft, Hard: sz.limits.Hard, HardCap: sz.budget.Mark, Compaction: Compaction{m.SoftRatio, m.HardRatio},
		Tools: ToolsInfo{Tools: len(defs), Tokens: sz.defs, Window: m.Window, MCP: mcpCount(defs)}}
}

// SetContextLimit chooses a model's context limit: one of its choices
// (auto, a step below full, or full). It is kept, and the next turn of
// every chat on that model uses it.
func (e *Engine) SetContextLimit(model, limit string) (ModelInfo, error) {
	m, ok := e.models[model]
	if !ok {
		return ModelInfo{}, fmt.Errorf("%w: %q", ErrNoSuchModel, model)
	}
	choices := budget.LimitChoices(m.Window)
	if choices == nil {
		return ModelInfo{}, fmt.Errorf("model %s: its window of %d tokens has no context limit to set: Auto is the whole window", model, m.Window)
	}
	valid := false
	names := make([]string, 0, len(choices))
	for _, c := range choices {
		valid = valid || c.Limit == limit
		names = append(names, c.Limit)
	}
	if !valid {
		return ModelInfo{}, fmt.Errorf("model %s: context limit %q is not one it offers (%v)", model, limit, names)
	}
	if err := e.choose(m, func(st *modelSettings) { st.ContextLimit = limit }); err != nil {
		return ModelInfo{}, err
	}
	return e.modelInfo(m), nil
}

// SetCompaction moves a model's soft and hard limits (shares of its
// window, soft below hard, both in (0, 1]). They are kept, and checked
// before every request from the next one on.
func (e *Engine) SetCompaction(model string, soft, hard float64) (ModelInfo, error) {
	m, ok := e.models[model]
	if !ok {
		return ModelInfo{}, fmt.Errorf("%w: %q", ErrNoSuchModel, model)
	}
	if !(soft > 0 && soft < hard && hard <= 1) {
		return ModelInfo{}, fmt.Errorf("model %s: soft %.2f and hard %.2f: want 0 < soft < hard ≤ 1", model, soft, hard)
	}
	if err := e.choose(m, func(st *modelSettings) { st.SoftRatio, st.HardRatio = soft, hard }); err != nil {
		return ModelInfo{}, err
	}
	return e.modelInfo(m), nil
}

func mcpCount(defs []provider.Tool) int {
	n := 0
	for _, d := range defs {
		if strings.Contains(d.Name, config.MCPSeparator) {
			n++
		}
	}
	return n
}
