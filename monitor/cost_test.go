package monitor

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config"
)

func costConfig(daily, chat float64) *config.Config {
	cfg := config.Default()
	cfg.Models = append(cfg.Models[:0:0], cfg.Models...)
	cfg.Models[0].Prices = config.Prices{Input: 2, CachedInput: 0.5, Output: 8}
	cfg.Limits.DailyBudget, cfg.Limits.ChatDailyBudget = daily, chat
	return cfg
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestCostLedgerSurvivesARestart: requests are priced by the model's prices
// (cached input apart), kept per chat and day, and read back by a monitor
// opened afresh; the Monitor's cost per day sums every chat.
func TestCostLedgerSurvivesARestart(t *testing.T) {
	e := newEnv(t, costConfig(0, 0))
	model := e.cfg.Models[0].Name
	for _, r := range []struct {
		chat            string
		in, out, cached int
		want            float64
	}{
		{"c1", 1_000_000, 0, 0, 2},
		{"c1", 1_000_000, 100_000, 600_000, 0.4*2 + 0.6*0.5 + 0.1*8},
		{"c2", 10, 5, 0, (10*2 + 5*8) / 1e6},
		{"c1", 0, 0, 0, 0}, // nothing billed: not a request
	} {
		got, err := e.m.RecordCost(r.chat, model, r.in, r.out, r.cached)
		if err != nil || !near(got, r.want) {
			t.Fatalf("RecordCost(%+v) = %g, %v; want %g", r, got, err, r.want)
		}
	}
	e.clock.Advance(day)
	if _, err := e.m.RecordCost("c1", "unpriced", 7, 3, 1); err != nil {
		t.Fatal(err)
	}
	e.reopen()

	c, err := e.m.ChatCost("c1")
	if err != nil {
		t.Fatal(err)
	}
	wantTotal := Spend{Requests: 3, In: 2_000_007, Cached: 600_001, Out: 100_003, Cost: 2 + 0.8 + 0.3 + 0.8}
	if !near(c.Total.Cost, wantTotal.Cost) || c.Total.Requests != wantTotal.Requests || c.Total.In != wantTotal.In || c.Total.Cached != wantTotal.Cached || c.Total.Out != wantTotal.Out {
		t.Errorf("total = %+v, want %+v", c.Total, wantTotal)
	}
	if c.Today != (Spend{Requests: 1, In: 7, Cached: 1, Out: 3}) {
		t.Errorf("today = %+v", c.Today)
	}
	if len(c.Days) != 2 || c.Days[0].Model != "unpriced" || c.Days[1].Model != model || !c.Days[1].Day.Equal(dayOf(epoch)) {
		t.Errorf("days = %+v", c.Days)
	}
	a, err := e.m.Aggregates(SpanWeek)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, s := range a.Costs {
		if s.Model == model {
			sum = s.Cost[len(a.Days)-2]
		}
	}
	if !near(sum, 2+1.9+60e-6) {
		t.Errorf("cost of %s yesterday = %g (costs %+v)", model, sum, a.Costs)
	}
}

// TestDailyBudget: past the global or the chat's budget CheckBudget
// refuses, saying when it resets; the next UTC day it lets turns through.
func TestDailyBudget(t *testing.T) {
	for _, c := range []struct {
		name        string
		daily, chat float64
		scope       string
		other       bool // does the other chat get refused too
	}{
		{"all chats", 3, 0, ScopeAll, true},
		{"per chat", 0, 3, ScopeChat, false},
		{"both, chat tighter", 10, 3, ScopeChat, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, costConfig(c.daily, c.chat))
			model := e.cfg.Models[0].Name
			if err := e.m.CheckBudget("c1"); err != nil {
				t.Fatal(err)
			}
			e.m.RecordCost("c1", model, 1_000_000, 0, 0) // 2
			if err := e.m.CheckBudget("c1"); err != nil {
				t.Fatalf("below the budget: %v", err)
			}
			e.m.RecordCost("c1", model, 500_000, 0, 0) // 3: reached
			e.reopen()
			err := e.m.CheckBudget("c1")
			var se *SpendingLimitError
			if !errors.As(err, &se) || !errors.Is(err, ErrSpendingLimit) || se.Scope != c.scope || se.Limit != 3 {
				t.Fatalf("at the budget: %v", err)
			}
			if !strings.Contains(err.Error(), "today's spending limit") || !strings.Contains(err.Error(), "$3.00 is reached") || !strings.Contains(err.Error(), "resets at 00:00 UTC") {
				t.Errorf("message %q", err)
			}
			if err := e.m.CheckBudget("c2"); (err != nil) != c.other {
				t.Errorf("other chat: %v", err)
			}
			e.clock.Set(dayOf(epoch).Add(day - time.Nanosecond))
			if e.m.CheckBudget("c1") == nil {
				t.Error("refused until midnight")
			}
			e.clock.Set(dayOf(epoch).Add(day))
			if err := e.m.CheckBudget("c1"); err != nil {
				t.Errorf("the next day: %v", err)
			}
		})
	}
}
