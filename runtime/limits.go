package runtime

import (
	"errors"
	"fmt"

	"github.com/mirror-gateway/mirror/runtime/budget"
	bolt "go.etcd.io/bbolt"
)

// bucketLimits keeps the context limit a person chose for a model in the
// browser (model name → limit), over the one runtime.yaml gives.
var bucketLimits = []byte("context_limits")

// ErrNoSuchModel is a model name runtime.yaml does not have.
var ErrNoSuchModel = errors.New("no such model")

// ModelInfo is a model's request budget, as the browser's model details
// show it.
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
}

// UseLimits keeps the context limits chosen in the browser in db, and
// applies the ones chosen before; it only reads until a limit is chosen, so
// a read-only db serves `mirror replay`. Call it before the first turn.
func (e *Engine) UseLimits(db *bolt.DB) error {
	chosen := map[string]string{}
	err := db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLimits)
		if b == nil {
			return nil // none chosen yet; the bucket is made at the first choice
		}
		return b.ForEach(func(k, v []byte) error {
			chosen[string(k)] = string(v)
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("context limits: %w", err)
	}
	e.limitsMu.Lock()
	defer e.limitsMu.Unlock()
	e.limitsDB = db
	for name, limit := range chosen {
		if _, ok := e.models[name]; ok {
			e.limits[name] = limit // a model gone from runtime.yaml is forgotten
		}
	}
	return nil
}

// contextLimit is the limit in force for m.
func (e *Engine) contextLimit(m *Model) string {
	e.limitsMu.RLock()
	defer e.limitsMu.RUnlock()
	if l, ok := e.limits[m.Name]; ok {
		return l
	}
	return m.ContextLimit
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
	limit := e.contextLimit(m)
	b, _ := budget.New(m.Window, limit, 0)
	choices := budget.LimitChoices(m.Window)
	if choices == nil {
		choices = []budget.Choice{}
	}
	return ModelInfo{Name: m.Name, Provider: m.ProvName, Model: m.Remote, Window: m.Window, Configured: m.ContextLimit,
		ContextLimit: b.Limit, Budget: b, Choices: choices}
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
	e.limitsMu.Lock()
	if e.limitsDB != nil {
		err := e.limitsDB.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists(bucketLimits)
			if err != nil {
				return err
			}
			return b.Put([]byte(model), []byte(limit))
		})
		if err != nil {
			e.limitsMu.Unlock()
			return ModelInfo{}, fmt.Errorf("keep the context limit: %w", err)
		}
	}
	e.limits[model] = limit
	e.limitsMu.Unlock()
	return e.modelInfo(m), nil
}
