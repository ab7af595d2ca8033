package runtime

import "github.com/mirror-gateway/mirror/runtime/budget"

// outputCap is the longest answer a request to m asks for: runtime.yaml's
// max_output when it sets one, else the response reserve of m's request
// budget. The budget keeps the reserve free for the answer (the ceiling is
// the window less it), so asking for exactly that much means an answer
// never runs past the window, and the provider never falls back to its
// own default (Anthropic's is whatever the caller sends; OpenAI's and
// Gemini's may be far smaller or larger than what the budget kept).
func (e *Engine) outputCap(m *Model) int {
	if m.MaxOutput > 0 {
		return m.MaxOutput
	}
	b, err := budget.New(m.Window, e.contextLimit(m), 0)
	if err != nil {
		return 0 // a limit that does not parse was refused at load; the provider's default stands
	}
	return b.Reserve
}
