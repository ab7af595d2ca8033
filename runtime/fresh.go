package runtime

import "github.com/mirror-gateway/mirror/runtime/view"

// freshReading stores the reading of the conversation a boundary inside a
// turn left behind (its opening and the messages carried into it), so
// that /status, the browser and the next turn's signals read the
// conversation as it now is, not the one just archived. The reading the
// turn started with was of that one; the next turn takes its own.
func (e *Engine) freshReading(in *TurnInput, sz sizer, fresh []view.Row, model string) error {
	ci := info(sz.readRows(fresh, nil), model)
	ci.Ceiling, ci.NextCheckpoint = sz.budget.Ceiling, sz.budget.Mark
	return in.Host.Context(ci, nil, 0)
}
