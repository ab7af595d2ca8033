package monitor

import (
	"fmt"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config"
)

// incident opens and closes (by hand) one provider breaker at the clock's
// time and returns its id.
func incident(e *env, name string) string {
	b := e.m.Provider("p", name)
	fail(e.t, b, 5, ClassServer)
	if ok, err := e.m.Reset(b.ID()); !ok || err != nil {
		e.t.Fatalf("Reset %s = %v, %v", b.ID(), ok, err)
	}
	return b.ID()
}

func TestPrune(t *testing.T) {
	day := 24 * time.Hour
	// Incidents closed 0.5, 1.5, ... 9.5 days before "now"; an unresolved
	// breaker opened 100 days before.
	tests := []struct {
		name        string
		days, max   int
		wantRemoved int
		wantKept    int
	}{
		{"days limit", 3, 500, 7, 3},
		{"max limit", 30, 4, 6, 4},
		{"both, days tighter", 2, 5, 8, 2},
		{"both, max tighter", 8, 5, 5, 5},
		{"nothing to prune", 30, 500, 0, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.BreakerHistoryDays, cfg.BreakerHistoryMax = tt.days, tt.max
			e := newEnv(t, cfg)
			now := epoch.Add(200 * day)

			e.clock.Set(now.Add(-100 * day))
			old := e.m.Provider("p", "still-open")
			fail(t, old, 5, ClassServer)

			var ids []string
			for i := 9; i >= 0; i-- {
				e.clock.Set(now.Add(-time.Duration(i)*day - day/2))
				ids = append(ids, incident(e, fmt.Sprint("m", i)))
			}
			e.clock.Set(now)
			countRecords := func() int {
				n := 0
				for _, id := range append(ids, old.ID()) {
					r, err := e.m.Records(id)
					if err != nil {
						t.Fatal(err)
					}
					n += len(r)
				}
				return n
			}
			records := countRecords()
			before, _ := e.m.History()

			removed, err := e.m.Prune(now)
			if err != nil {
				t.Fatal(err)
			}
			if removed != tt.wantRemoved {
				t.Errorf("removed %d, want %d", removed, tt.wantRemoved)
			}
			after, _ := e.m.History()
			if n := entries(after); n != tt.wantKept {
				t.Errorf("history keeps %d entries, want %d", n, tt.wantKept)
			}
			// History applied the limits before the prune too.
			if !jsonEqual(before, after) {
				t.Errorf("history changed by pruning:\nbefore %+v\nafter  %+v", before, after)
			}
			// The newest are the ones kept.
			if len(after) > 0 && after[0].Entries[0].ID != ids[len(ids)-1] {
				t.Errorf("newest entry = %s, want %s", after[0].Entries[0].ID, ids[len(ids)-1])
			}
			if got := countRecords(); got != records {
				t.Errorf("canonical records %d after prune, want %d", got, records)
			}
			if u := e.m.Unresolved(); len(u) != 1 || u[0].ID != old.ID() {
				t.Errorf("unresolved = %+v, want the 100-day-old breaker", u)
			}
			// The display bucket holds exactly what is kept.
			if again, _ := e.m.Prune(now); again != 0 {
				t.Errorf("second prune removed %d", again)
			}
		})
	}
}

func entries(gs []DayGroup) int {
	n := 0
	for _, g := range gs {
		n += len(g.Entries)
	}
	return n
}

func TestHistoryGroupsByDate(t *testing.T) {
	e := newEnv(t, nil)
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	for i, ts := range []string{"2025-03-08T23:59:00Z", "2025-03-09T00:01:00Z", "2025-03-09T10:00:00Z", "2025-03-10T08:00:00Z"} {
		e.clock.Set(at(ts))
		incident(e, fmt.Sprint("m", i))
	}
	e.clock.Set(at("2025-03-10T09:00:00Z"))
	h, err := e.m.History()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range h {
		s := g.Date + ":"
		for _, v := range g.Entries {
			s += " " + v.Scope
			if v.State != StateClosed || v.ClosedAt == nil || v.OpenedAt == nil || v.Trips != 1 {
				t.Errorf("entry = %+v", v)
			}
		}
		got = append(got, s)
	}
	want := []string{"2025-03-10: p/m3", "2025-03-09: p/m2 p/m1", "2025-03-08: p/m0"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("groups = %q, want %q", got, want)
	}
}

func TestStartClose(t *testing.T) {
	cfg := config.Default()
	cfg.BreakerHistoryMax = 1
	cfg.BreakerPruneSchedule = "@every 1s"
	e := newEnv(t, cfg)
	e.m.pruned = make(chan int, 1)
	incident(e, "a")
	incident(e, "b")
	if err := e.m.Start(); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Start(); err != nil {
		t.Fatalf("second Start: %v", err)
	}
	select {
	case n := <-e.m.pruned:
		if n != 1 {
			t.Errorf("scheduled prune removed %d, want 1", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the prune job did not run")
	}
	e.m.Close()
	e.m.Close() // idempotent
	if err := e.m.Start(); err != ErrClosed {
		t.Errorf("Start after Close = %v, want ErrClosed", err)
	}
	// goleak (TestMain) checks that the cron and hub goroutines are gone.
}

func TestStartRejectsBadSchedule(t *testing.T) {
	cfg := config.Default()
	cfg.BreakerPruneSchedule = "every hour"
	e := newEnv(t, cfg)
	if err := e.m.Start(); err == nil {
		t.Fatal("Start accepted a bad schedule")
	}
}
