package monitor

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config"
)

// TestPruneOnlyWhenLeading: with a gate, the scheduled prune is skipped
// while the gate says this node does not lead, and runs once it does.
func TestPruneOnlyWhenLeading(t *testing.T) {
	cfg := config.Default()
	cfg.BreakerHistoryMax = 1
	cfg.BreakerPruneSchedule = "@every 1s"
	e := newEnv(t, cfg)
	e.m.pruned = make(chan int, 1)
	incident(e, "a")
	incident(e, "b")
	var leads atomic.Bool
	e.m.PruneOnlyWhen(leads.Load)
	if err := e.m.Start(); err != nil {
		t.Fatal(err)
	}
	next := func() int {
		select {
		case n := <-e.m.pruned:
			return n
		case <-time.After(10 * time.Second):
			t.Fatal("the prune job did not run")
			return 0
		}
	}
	tests := []struct {
		leads bool
		want  int
	}{
		{false, -1}, // skipped: another node leads
		{true, 1},   // pruned to the one entry kept
	}
	for _, tt := range tests {
		leads.Store(tt.leads)
		// A job already started before the Store may report the old state.
		got := next()
		if got != tt.want {
			got = next()
		}
		if got != tt.want {
			t.Fatalf("leads=%v: prune reported %d, want %d", tt.leads, got, tt.want)
		}
	}
}
