package runtime

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/provider/builtin"
	bolt "go.etcd.io/bbolt"
)

func TestContextLimitChoicesAreKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	engine := func() (*Engine, *bolt.DB) {
		db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		e, err := NewEngine([]*Model{
			{Name: "big", Provider: builtin.New(0), Remote: "gemini-2.5-pro", Window: 1_000_000, ContextLimit: "auto", SoftRatio: 0.2, HardRatio: 0.25},
			{Name: "small", Provider: builtin.New(0), Remote: "gpt-4o", Window: 128_000, ContextLimit: "auto"},
		}, map[string][]string{"default": {"big"}}, config.Roles{Chat: "default"}, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Provision(Options{Settings: db}); err != nil {
			t.Fatal(err)
		}
		return e, db
	}
	e, db := engine()
	ms := e.Models()
	if len(ms) != 2 || ms[0].Name != "big" || len(ms[0].Choices) == 0 || len(ms[1].Choices) != 0 {
		t.Fatalf("models %+v", ms)
	}
	if ms[0].Budget.Ceiling != 272000 {
		t.Fatalf("auto ceiling %d, want 272000", ms[0].Budget.Ceiling)
	}
	for _, c := range []struct{ model, limit string }{{"big", "300k"}, {"big", "banana"}, {"small", "full"}, {"nope", "auto"}} {
		if _, err := e.SetContextLimit(c.model, c.limit); err == nil {
			t.Errorf("%s %s accepted", c.model, c.limit)
		}
	}
	if _, err := e.SetContextLimit("nope", "auto"); !errors.Is(err, ErrNoSuchModel) {
		t.Errorf("unknown model: %v", err)
	}
	m, err := e.SetContextLimit("big", "600k")
	if err != nil || m.Budget.Ceiling != 600000 || m.ContextLimit != "600k" || m.Configured != "auto" {
		t.Fatalf("600k: %+v %v", m, err)
	}
	if sz := e.sizer(e.models["big"], nil); sz.budget.Ceiling != 600000 {
		t.Fatalf("the next turn's ceiling is %d", sz.budget.Ceiling)
	}
	// Soft and hard move too, within (0, 1] and soft below hard.
	for _, c := range [][2]float64{{0.3, 0.2}, {0, 0.5}, {0.5, 1.2}, {0.4, 0.4}} {
		if _, err := e.SetCompaction("big", c[0], c[1]); err == nil {
			t.Errorf("compaction %v accepted", c)
		}
	}
	m, err = e.SetCompaction("big", 0.10, 0.15)
	if err != nil || m.SoftRatio != 0.10 || m.HardRatio != 0.15 || m.Hard != 150000 || m.Compaction != (Compaction{0.2, 0.25}) {
		t.Fatalf("compaction: %+v %v", m, err)
	}
	db.Close()
	// Kept across a restart.
	e, db = engine()
	defer db.Close()
	if m := e.Models()[0]; m.ContextLimit != "600k" || m.HardRatio != 0.15 {
		t.Fatalf("after a restart the limit is %q, hard %.2f", m.ContextLimit, m.HardRatio)
	}
}
