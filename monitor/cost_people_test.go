package monitor

import (
	"testing"
	"time"
)

// TestPeopleCostPerDay: a request billed to a person adds to their ledger
// of that UTC day besides the chat's and all chats'; PeopleCost reads one
// day, every model summed; a request billed to nobody has no person key.
func TestPeopleCostPerDay(t *testing.T) {
	e := newEnv(t, costConfig(0, 0))
	model := e.cfg.Models[0].Name
	for _, r := range []struct {
		chat, person string
		in, out      int
	}{
		{"c1", "p_alice", 1_000_000, 0},
		{"c1", "p_alice", 0, 1_000_000},
		{"c2", "p_bob", 500_000, 0},
		{"c3", "", 1_000_000, 0},
	} {
		if _, err := e.m.RecordCostBy(r.chat, r.person, model, r.in, r.out, 0); err != nil {
			t.Fatal(err)
		}
	}
	today := e.clock.Now()
	e.clock.Advance(day)
	if _, err := e.m.RecordCostBy("c1", "p_alice", model, 1_000_000, 0, 0); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	for _, c := range []struct {
		when   int // days after the first
		person string
		reqs   int64
		cost   float64
	}{
		{0, "p_alice", 2, 2 + 8},
		{0, "p_bob", 1, 1},
		{1, "p_alice", 1, 2},
		{1, "p_bob", 0, 0},
	} {
		got, err := e.m.PeopleCost(today.Add(time.Duration(c.when) * day))
		if err != nil {
			t.Fatal(err)
		}
		if s := got[c.person]; s.Requests != c.reqs || !near(s.Cost, c.cost) {
			t.Fatalf("day %d, %s: %+v, want %d requests costing %g", c.when, c.person, s, c.reqs, c.cost)
		}
		if _, ok := got[""]; ok || len(got) > 2 {
			t.Fatalf("day %d: unexpected keys %v", c.when, got)
		}
	}
	// The chat's and all chats' ledgers are as without people.
	if c, err := e.m.ChatCost("c1"); err != nil || c.Total.Requests != 3 {
		t.Fatalf("c1: %+v %v", c, err)
	}
}
