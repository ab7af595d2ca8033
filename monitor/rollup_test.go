package monitor

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config"
	bolt "go.etcd.io/bbolt"
)

// TestAggregatesSurviveARestart: requests through a breaker, tokens and
// quota samples are stored by Close's flush and read back, on the right
// steps, by a monitor opened afresh on the same file.
func TestAggregatesSurviveARestart(t *testing.T) {
	type step struct {
		advance time.Duration
		act     func(e *env)
	}
	req := func(ok bool, took time.Duration) func(e *env) {
		return func(e *env) {
			done, err := e.m.Provider("openai", "gpt").Allow()
			if err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(took)
			if ok {
				done(nil, "")
			} else {
				done(errUpstream, ClassServer)
			}
		}
	}
	e := newEnv(t, nil)
	e.m.SampleQuotas(func() []QuotaSample {
		return []QuotaSample{{Key: "openai/gpt", Used: 300, Limit: 1000}, {Key: "idle/none"}}
	})
	for _, s := range []step{
		{0, req(true, 100*time.Millisecond)},
		{0, req(false, 300*time.Millisecond)},
		{0, func(e *env) { e.m.RecordTokens("main", 100, 20, 50) }},
		{10 * time.Minute, req(true, 200*time.Millisecond)},
		{0, func(e *env) {
			done, _ := e.m.Provider("openai", "gpt").Allow()
			done(errStopped, ClassCanceled) // a stopped turn: a request, not an error
		}},
		{0, func(e *env) { e.m.RecordTokens("main", 1, 2, 0) }},
	} {
		e.clock.Advance(s.advance)
		s.act(e)
	}
	if err := e.m.Flush(); err != nil {
		t.Fatal(err)
	}
	e.m.RecordTokens("main", 1000, 0, 0) // only Close's flush stores this one
	e.reopen()

	a, err := e.m.Aggregates(SpanDay)
	if err != nil {
		t.Fatal(err)
	}
	if a.Step != 300 || len(a.Times) != 288 {
		t.Fatalf("day: step %d, %d steps", a.Step, len(a.Times))
	}
	if len(a.Providers) != 1 || a.Providers[0].ID != "provider:openai/gpt" || a.Providers[0].Kind != KindProvider {
		t.Fatalf("providers %+v", a.Providers)
	}
	p := a.Providers[0]
	at := func(ts time.Time) int { return int((ts.Unix() - a.Times[0]) / a.Step) }
	first, second := at(epoch), at(epoch.Add(10*time.Minute+400*time.Millisecond))
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"requests first step", p.Requests[first], 2},
		{"errors first step", p.Errors[first], 1},
		{"requests second step", p.Requests[second], 2},
		{"errors second step", p.Errors[second], 0},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.name, c.got, c.want)
		}
	}
	if l := p.LatencyMs[first]; l == nil || *l != 200 {
		t.Errorf("mean latency %v, want 200", l)
	}
	if p.LatencyMs[first+1] != nil {
		t.Error("a step without requests has a latency")
	}
	if len(a.Quotas) != 1 || a.Quotas[0].Key != "openai/gpt" || a.Quotas[0].Used[second] != 300 || a.Quotas[0].Limit[second] != 1000 {
		t.Errorf("quotas %+v", a.Quotas)
	}
	if len(a.Tokens) != 1 || len(a.Days) != 1 || a.Tokens[0].In[0] != 1101 || a.Tokens[0].Out[0] != 22 || a.Tokens[0].Cached[0] != 50 {
		t.Errorf("tokens %+v days %v", a.Tokens, a.Days)
	}

	w, err := e.m.Aggregates(SpanWeek)
	if err != nil {
		t.Fatal(err)
	}
	if w.Step != 3600 || len(w.Times) != 168 || len(w.Days) != 7 || w.Tokens[0].In[6] != 1101 {
		t.Fatalf("week: step %d, %d steps, days %v, tokens %+v", w.Step, len(w.Times), w.Days, w.Tokens)
	}
	var sum int64
	for _, n := range w.Providers[0].Requests {
		sum += n
	}
	if sum != 4 {
		t.Errorf("week requests %d, want 4", sum)
	}
	if _, err := e.m.Aggregates("year"); !errors.Is(err, ErrSpan) {
		t.Errorf("unknown span: %v", err)
	}
}

// errStopped stands for a stopped turn's error.
var errStopped = errors.New("stopped")

// rollups counts the stored five-minute and hourly buckets.
func (e *env) rollups() (fine, hour int) {
	e.t.Helper()
	err := e.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRollups).ForEach(func(k, _ []byte) error {
			switch k[0] {
			case resFine:
				fine++
			case resCoarse:
				hour++
			}
			return nil
		})
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return fine, hour
}

// TestBreakerSpans: the timeline is made of the canonical records, the state
// in force before the span included, and a breaker closed throughout is left
// out.
func TestBreakerSpans(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(e *env)
		want []State
	}{
		{"never tripped", func(e *env) { succeed(t, e.m.Provider("p", "m")) }, nil},
		{"open now", func(e *env) { fail(t, e.m.Provider("p", "m"), 5, ClassServer) },
			[]State{StateClosed, StateOpen}},
		{"open, probe, closed", func(e *env) {
			b := e.m.Provider("p", "m")
			fail(t, b, 5, ClassServer)
			e.clock.Advance(time.Minute)
			done, err := b.Allow() // the probe: half open while it runs
			if err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(time.Second)
			done(nil, "")
		}, []State{StateClosed, StateOpen, StateHalfOpen, StateClosed}},
		{"opened before the span, still open", func(e *env) {
			fail(t, e.m.Provider("p", "m"), 5, ClassServer)
			e.clock.Advance(3 * 24 * time.Hour)
		}, []State{StateOpen}},
		{"incident before the span", func(e *env) {
			b := e.m.Provider("p", "m")
			fail(t, b, 5, ClassServer)
			e.clock.Advance(time.Minute)
			succeed(t, b)
			e.clock.Advance(3 * 24 * time.Hour)
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.clock.Advance(time.Hour)
			tc.run(e)
			e.clock.Advance(time.Minute)
			e.reopen()
			a, err := e.m.Aggregates(SpanDay)
			if err != nil {
				t.Fatal(err)
			}
			var got []State
			if len(a.Breakers) > 0 {
				spans := a.Breakers[0].Spans
				for i, s := range spans {
					got = append(got, s.State)
					if i > 0 && !s.From.Equal(spans[i-1].To) {
						t.Errorf("gap between spans %d and %d", i-1, i)
					}
				}
				if !spans[0].From.Equal(a.From) || !spans[len(spans)-1].To.Equal(a.To) {
					t.Errorf("spans cover %s..%s, want %s..%s", spans[0].From, spans[len(spans)-1].To, a.From, a.To)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("states %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("states %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// TestRollupsPruned: five-minute buckets go after two days, hourly ones after
// ninety, at the next flush.
func TestRollupsPruned(t *testing.T) {
	e := newEnv(t, nil)
	e.m.RecordTokens("main", 5, 0, 0)
	if err := e.m.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		advance    time.Duration
		fine, hour int
	}{
		{0, 1, 1},
		{49 * time.Hour, 0, 1},
		{91 * 24 * time.Hour, 0, 0},
	} {
		e.clock.Advance(c.advance)
		if err := e.m.Flush(); err != nil {
			t.Fatal(err)
		}
		fine, hour := e.rollups()
		if fine != c.fine || hour != c.hour {
			t.Errorf("after %s: %d five-minute and %d hourly buckets, want %d and %d", c.advance, fine, hour, c.fine, c.hour)
		}
	}
}

// BenchmarkAllowDone is the cost a request pays at its breaker: Allow, then
// done, which now also counts it for the charts (in memory; Flush writes).
func BenchmarkAllowDone(b *testing.B) {
	m, _ := benchMonitor(b)
	br := m.Provider("openai", "gpt")
	b.ReportAllocs()
	for b.Loop() {
		done, err := br.Allow()
		if err != nil {
			b.Fatal(err)
		}
		done(nil, "")
	}
}

// BenchmarkAggregatesWeek reads a week of a busy gateway: 5 breakers with
// requests every minute, 3 models' tokens, 2 quotas.
func BenchmarkAggregatesWeek(b *testing.B) {
	m, c := benchMonitor(b)
	e := struct {
		m     *Monitor
		clock *clock
	}{m, c}
	e.m.SampleQuotas(func() []QuotaSample {
		return []QuotaSample{{Key: "a/x", Used: 10, Limit: 100}, {Key: "b/y", Used: 5, Limit: 50}}
	})
	for range 7 * 24 * 60 {
		for i := range 5 {
			done, _ := e.m.Provider("p", string(rune('a'+i))).Allow()
			done(nil, "")
		}
		for _, m := range []string{"main", "fast", "deep"} {
			e.m.RecordTokens(m, 100, 10, 0)
		}
		if err := e.m.Flush(); err != nil {
			b.Fatal(err)
		}
		e.clock.Advance(time.Minute)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.m.Aggregates(SpanWeek); err != nil {
			b.Fatal(err)
		}
	}
}

// benchMonitor is a Monitor on a bbolt file of b's, with a fake clock.
func benchMonitor(b *testing.B) (*Monitor, *clock) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "m.db"), 0o600, &bolt.Options{Timeout: time.Second, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	c := newClock()
	m, err := Open(db, config.Default(), Options{Clock: c.Now})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		m.Close()
		db.Close()
	})
	return m, c
}
