package runtime

import (
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// bucketSettings keeps what a person chose for a model in the browser
// (model name → modelSettings JSON), over what runtime.yaml gives.
var bucketSettings = []byte("model_settings")

// ErrNoSuchModel is a model name runtime.yaml does not have.
var ErrNoSuchModel = errors.New("no such model")

// modelSettings are a model's choices made in the browser; a zero field
// keeps runtime.yaml's value.
type modelSettings struct {
	ContextLimit string  `json:"context_limit,omitempty"`
	SoftRatio    float64 `json:"soft_ratio,omitempty"`
	HardRatio    float64 `json:"hard_ratio,omitempty"`
}

// useSettings keeps the choices made in the browser (context limit, soft
// and hard) in db, and applies the ones made before; it only reads until
// a choice is made, so a read-only db serves `mirror replay`.
func (e *Engine) useSettings(db *bolt.DB) error {
	chosen := map[string]modelSettings{}
	err := db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSettings)
		if b == nil {
			return nil // none chosen yet; the bucket is made at the first choice
		}
		return b.ForEach(func(k, v []byte) error {
			var st modelSettings
			if json.Unmarshal(v, &st) == nil {
				chosen[string(k)] = st
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("model settings: %w", err)
	}
	e.limitsMu.Lock()
	defer e.limitsMu.Unlock()
	e.limitsDB = db
	for name, st := range chosen {
		if _, ok := e.models[name]; ok {
			e.settings[name] = st // a model gone from runtime.yaml is forgotten
		}
	}
	return nil
}

// contextLimit is the limit in force for m.
func (e *Engine) contextLimit(m *Model) string {
	e.limitsMu.RLock()
	defer e.limitsMu.RUnlock()
	if l := e.settings[m.Name].ContextLimit; l != "" {
		return l
	}
	return m.ContextLimit
}

// ratios are the soft and hard shares in force for m.
func (e *Engine) ratios(m *Model) (soft, hard float64) {
	e.limitsMu.RLock()
	defer e.limitsMu.RUnlock()
	if st := e.settings[m.Name]; st.HardRatio > 0 {
		return st.SoftRatio, st.HardRatio
	}
	return m.SoftRatio, m.HardRatio
}

// choose applies change to m's settings and keeps them.
func (e *Engine) choose(m *Model, change func(*modelSettings)) error {
	e.limitsMu.Lock()
	st := e.settings[m.Name]
	change(&st)
	if e.limitsDB != nil {
		v, _ := json.Marshal(st)
		err := e.limitsDB.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists(bucketSettings)
			if err != nil {
				return err
			}
			return b.Put([]byte(m.Name), v)
		})
		if err != nil {
			e.limitsMu.Unlock()
			return fmt.Errorf("keep the model setting: %w", err)
		}
	}
	e.settings[m.Name] = st
	e.limitsMu.Unlock()
	return nil
}
