package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// outcome is one request's result in a scripted sequence.
type outcome struct {
	err   error
	class string
}

var (
	ok         = outcome{}
	server     = outcome{errUpstream, ClassServer}
	network    = outcome{errUpstream, ClassNetwork}
	overloaded = outcome{errUpstream, ClassOverloaded}
	limited    = outcome{errUpstream, ClassRateLimited}
	badRequest = outcome{errUpstream, ClassBadRequest}
	auth       = outcome{errUpstream, ClassAuth}
	canceled   = outcome{fmt.Errorf("stream: %w", context.Canceled), ClassNetwork}
)

func repeat(o outcome, n int) []outcome {
	s := make([]outcome, n)
	for i := range s {
		s[i] = o
	}
	return s
}

func seq(parts ...[]outcome) []outcome {
	var s []outcome
	for _, p := range parts {
		s = append(s, p...)
	}
	return s
}

func TestProviderTrips(t *testing.T) {
	var alternating []outcome // never two failures in a row
	for range 5 {
		alternating = append(alternating, ok, server)
	}
	tests := []struct {
		name       string
		outcomes   []outcome
		wantState  State
		wantReason string
	}{
		{"five consecutive server errors", repeat(server, 5), StateOpen, "5 consecutive failures (last: server)"},
		{"mixed provider faults count together", []outcome{server, network, overloaded, limited, {errUpstream, ""}}, StateOpen, "(last: unclassified)"},
		{"four are not enough", repeat(server, 4), StateClosed, ""},
		{"a success resets the run", seq(repeat(server, 4), []outcome{ok}, repeat(server, 4)), StateClosed, ""},
		{"half of ten in the window", alternating, StateOpen, "5 of 10 requests failed within 1m0s"},
		{"ratio needs ten requests", alternating[:9], StateClosed, ""},
		{"caller errors do not count", seq(repeat(badRequest, 20), repeat(auth, 20)), StateClosed, ""},
		{"a cancelled request does not count", repeat(canceled, 20), StateClosed, ""},
		{"caller errors neither break nor extend a run", seq(repeat(server, 4), []outcome{badRequest, auth}, []outcome{server}), StateOpen, "5 consecutive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			b := e.m.Provider("openai", "gpt-4o")
			for i, o := range tt.outcomes {
				done, err := b.Allow()
				if err != nil {
					t.Fatalf("request %d: Allow: %v", i, err)
				}
				done(o.err, o.class)
				e.clock.Advance(time.Second)
			}
			v := b.View()
			if v.State != tt.wantState {
				t.Fatalf("state = %s, want %s (reason %q)", v.State, tt.wantState, v.Reason)
			}
			if !strings.Contains(v.Reason, tt.wantReason) {
				t.Errorf("reason = %q, want it to contain %q", v.Reason, tt.wantReason)
			}
			if tt.wantState == StateOpen {
				if v.ID != "provider:openai/gpt-4o" || v.Kind != KindProvider || v.Scope != "openai/gpt-4o" || v.Trips != 1 {
					t.Errorf("view = %+v", v)
				}
				_, err := b.Allow()
				var oe *OpenError
				if !errors.Is(err, ErrOpen) || !errors.As(err, &oe) {
					t.Fatalf("Allow while open = %v, want an OpenError", err)
				}
				if want := v.OpenedAt.Add(30 * time.Second); oe.ID != v.ID || !oe.RetryAt.Equal(want) {
					t.Errorf("OpenError = %+v, want retry at %s", oe, want)
				}
			}
		})
	}
}

func TestWindowForgetsOldRequests(t *testing.T) {
	e := newEnv(t, nil)
	b := e.m.Provider("p", "m")
	// Nine requests, four failed, then a pause longer than the window: the
	// next failure finds one request in the window, not ten.
	for i := range 9 {
		o := ok
		if i%2 == 0 {
			o = server
		}
		done, _ := b.Allow()
		done(o.err, o.class)
	}
	e.clock.Advance(2 * time.Minute)
	fail(t, b, 1, ClassServer)
	if got := state(b); got != StateClosed {
		t.Fatalf("state = %s, want closed: old requests must leave the window", got)
	}
}

func TestHalfOpenProbe(t *testing.T) {
	tests := []struct {
		name      string
		probe     outcome
		wantState State
		wantRetry time.Duration // after the probe, when open
	}{
		{"a successful probe closes", ok, StateClosed, 0},
		{"a failed probe reopens for twice as long", server, StateOpen, 60 * time.Second},
		{"a caller error leaves it half open", badRequest, StateHalfOpen, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			b := e.m.Provider("p", "m")
			fail(t, b, 5, ClassServer)
			e.clock.Advance(29 * time.Second)
			if _, err := b.Allow(); !errors.Is(err, ErrOpen) {
				t.Fatalf("Allow before the cooldown = %v, want ErrOpen", err)
			}
			e.clock.Advance(time.Second)
			probe, err := b.Allow()
			if err != nil {
				t.Fatalf("Allow after the cooldown: %v", err)
			}
			if got := state(b); got != StateHalfOpen {
				t.Fatalf("state = %s, want half_open", got)
			}
			_, err = b.Allow()
			var oe *OpenError
			if !errors.As(err, &oe) || oe.State != StateHalfOpen {
				t.Fatalf("second Allow while probing = %v, want a half-open refusal", err)
			}
			probe(tt.probe.err, tt.probe.class)
			probe(errUpstream, ClassServer) // a second call of done is ignored
			v := b.View()
			if v.State != tt.wantState {
				t.Fatalf("after probe: state = %s, want %s", v.State, tt.wantState)
			}
			switch tt.wantState {
			case StateOpen:
				if v.Trips != 2 || !v.RetryAt.Equal(e.clock.Now().Add(tt.wantRetry)) || !v.OpenedAt.Equal(epoch) {
					t.Errorf("reopened view = %+v, want trips 2, retry in %s, opened at the first trip", v, tt.wantRetry)
				}
			case StateClosed:
				if v.ClosedAt == nil || v.ClosedBy != "automatic" {
					t.Errorf("closed view = %+v", v)
				}
				succeed(t, b) // requests flow again
			case StateHalfOpen:
				if _, err := b.Allow(); err != nil {
					t.Errorf("the next caller should probe: %v", err)
				}
			}
		})
	}
}

func TestCooldownIsBoundedExponential(t *testing.T) {
	e := newEnv(t, nil)
	e.m.th.MaxCooldown = 3 * time.Minute
	b := e.m.Provider("p", "m")
	fail(t, b, 5, ClassServer)
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 3 * time.Minute, 3 * time.Minute}
	for i, w := range want {
		v := b.View()
		if got := v.RetryAt.Sub(e.clock.Now()); got != w {
			t.Fatalf("trip %d: cooldown %s, want %s", i+1, got, w)
		}
		e.clock.Advance(w)
		fail(t, b, 1, ClassNetwork) // the probe fails
	}
	// After a success the next trip starts from the base cooldown again.
	e.clock.Advance(3 * time.Minute)
	succeed(t, b)
	fail(t, b, 5, ClassServer)
	if got := b.View().RetryAt.Sub(e.clock.Now()); got != 30*time.Second {
		t.Fatalf("cooldown after closing = %s, want 30s", got)
	}
}

func TestStaleDoneIsIgnored(t *testing.T) {
	e := newEnv(t, nil)
	b := e.m.Provider("p", "m")
	late, _ := b.Allow() // admitted while closed, answers after the trip
	fail(t, b, 5, ClassServer)
	if ok, err := e.m.Reset(b.ID()); !ok || err != nil {
		t.Fatalf("Reset = %v, %v", ok, err)
	}
	late(errUpstream, ClassServer)
	fail(t, b, 4, ClassServer)
	if got := state(b); got != StateClosed {
		t.Fatalf("state = %s: a request admitted before the reset must not count", got)
	}
}

func TestReset(t *testing.T) {
	tests := []struct {
		name      string
		setup     func(e *env) string // returns the id to reset
		wantReset bool
		wantErr   error
	}{
		{"open provider", func(e *env) string {
			b := e.m.Provider("p", "m")
			fail(e.t, b, 5, ClassServer)
			return b.ID()
		}, true, nil},
		{"half-open telegram", func(e *env) string {
			b := e.m.Telegram()
			fail(e.t, b, 5, ClassNetwork)
			e.clock.Advance(time.Minute)
			b.Allow() // the probe, never answered
			return b.ID()
		}, true, nil},
		{"open tool loop", func(e *env) string {
			for range 3 {
				e.m.ToolFailure("c1", "t1", "read#ab")
			}
			return "tool:c1/read#ab"
		}, true, nil},
		{"closed is a no-op", func(e *env) string { return e.m.Provider("p", "m").ID() }, false, nil},
		{"unknown id", func(e *env) string { return "provider:nope/nope" }, false, ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			id := tt.setup(e)
			before, _ := e.m.Records(id)
			e.clock.Advance(time.Second)
			reset, err := e.m.Reset(id)
			if reset != tt.wantReset || !errors.Is(err, tt.wantErr) {
				t.Fatalf("Reset = %v, %v; want %v, %v", reset, err, tt.wantReset, tt.wantErr)
			}
			recs, err := e.m.Records(id)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.wantReset {
				if len(recs) != len(before) {
					t.Errorf("a no-op reset wrote records: %+v", recs)
				}
				return
			}
			last := recs[len(recs)-1]
			if last.To != StateClosed || !last.Manual || last.Reason != "reset by hand" {
				t.Errorf("last record = %+v, want a manual close", last)
			}
			if len(e.m.Unresolved()) != 0 {
				t.Errorf("still unresolved: %+v", e.m.Unresolved())
			}
			h, _ := e.m.History()
			if len(h) != 1 || len(h[0].Entries) != 1 || h[0].Entries[0].ClosedBy != "manual" || h[0].Entries[0].ID != id {
				t.Errorf("history = %+v, want one manual entry", h)
			}
		})
	}
}

func TestToolLoop(t *testing.T) {
	type call struct {
		turn, sig string
		end       bool // ToolTurnEnded(turn) instead of a failure
		want      bool
	}
	tests := []struct {
		name  string
		calls []call
		open  int
	}{
		{"three identical failures in a turn trip", []call{{turn: "t1", sig: "a"}, {turn: "t1", sig: "a"}, {turn: "t1", sig: "a", want: true}}, 1},
		{"different calls do not add up", []call{{turn: "t1", sig: "a"}, {turn: "t1", sig: "b"}, {turn: "t1", sig: "a"}, {turn: "t1", sig: "b"}}, 0},
		{"not across turns (turn ended)", []call{{turn: "t1", sig: "a"}, {turn: "t1", sig: "a"}, {turn: "t1", end: true}, {turn: "t2", sig: "a"}, {turn: "t2", sig: "a"}}, 0},
		{"not across turns (a new turn id)", []call{{turn: "t1", sig: "a"}, {turn: "t1", sig: "a"}, {turn: "t2", sig: "a"}, {turn: "t2", sig: "a"}}, 0},
		{"ending another turn keeps the counts", []call{{turn: "t2", sig: "a"}, {turn: "t2", sig: "a"}, {turn: "t1", end: true}, {turn: "t2", sig: "a", want: true}}, 1},
		{"a second loop while open counts a trip", []call{
			{turn: "t1", sig: "a"}, {turn: "t1", sig: "a"}, {turn: "t1", sig: "a", want: true},
			{turn: "t2", sig: "a"}, {turn: "t2", sig: "a"}, {turn: "t2", sig: "a", want: true},
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			for i, c := range tt.calls {
				if c.end {
					e.m.ToolTurnEnded("chat1", c.turn)
					continue
				}
				if got := e.m.ToolFailure("chat1", c.turn, c.sig); got != c.want {
					t.Fatalf("call %d (%+v): tripped = %v, want %v", i, c, got, c.want)
				}
			}
			u := e.m.Unresolved()
			if len(u) != tt.open {
				t.Fatalf("unresolved = %+v, want %d", u, tt.open)
			}
			if tt.open == 0 {
				return
			}
			if v := u[0]; v.ID != "tool:chat1/a" || v.Kind != KindToolLoop || v.Scope != "chat1" || v.State != StateOpen {
				t.Errorf("view = %+v", v)
			}
			if n := e.m.ToolResolved("other"); n != 0 {
				t.Errorf("ToolResolved(other chat) closed %d", n)
			}
			if n := e.m.ToolResolved("chat1"); n != 1 {
				t.Errorf("ToolResolved closed %d, want 1", n)
			}
			if len(e.m.Unresolved()) != 0 {
				t.Errorf("still unresolved after ToolResolved")
			}
			recs, _ := e.m.Records("tool:chat1/a")
			if last := recs[len(recs)-1]; last.Manual || last.To != StateClosed {
				t.Errorf("last record = %+v, want an automatic close", last)
			}
		})
	}
}

func TestCallSignature(t *testing.T) {
	a := CallSignature("read_file", []byte(`{"path":"a"}`))
	if a != CallSignature("read_file", []byte(`{"path":"a"}`)) || a == CallSignature("read_file", []byte(`{"path":"b"}`)) {
		t.Fatalf("signatures must be equal exactly for equal calls: %s", a)
	}
	if !strings.HasPrefix(a, "read_file#") || len(a) != len("read_file#")+12 {
		t.Errorf("signature = %q", a)
	}
}

func TestViewJSON(t *testing.T) {
	e := newEnv(t, nil)
	e.clock.Set(time.Date(2025, 3, 10, 13, 0, 0, 0, time.FixedZone("CET", 3600)))
	b := e.m.Provider("openai", "gpt-4o")
	fail(t, b, 5, ClassServer)
	data, err := json.Marshal(b.View())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"provider:openai/gpt-4o","kind":"provider","scope":"openai/gpt-4o","state":"open",` +
		`"reason":"5 consecutive failures (last: server)","opened_at":"2025-03-10T12:00:00Z","closed_at":null,` +
		`"trips":1,"retry_at":"2025-03-10T12:00:30Z"}`
	if string(data) != want {
		t.Errorf("JSON\n got %s\nwant %s", data, want)
	}
	snap, err := e.m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	data, _ = json.Marshal(snap)
	if !strings.HasPrefix(string(data), `{"unresolved":[{"id":"provider:openai/gpt-4o"`) || !strings.HasSuffix(string(data), `"history":[]}`) {
		t.Errorf("snapshot JSON = %s", data)
	}
}

func TestSubscribersSeeTransitions(t *testing.T) {
	e := newEnv(t, nil)
	got := make(chan BreakerView, 16)
	b := e.m.Provider("p", "m")
	cancel := e.m.Subscribe(func(v BreakerView) {
		b.View() // calling back into the breaker must not deadlock
		got <- v
	})
	fail(t, b, 5, ClassServer)
	e.clock.Advance(30 * time.Second)
	succeed(t, b)
	for _, want := range []State{StateOpen, StateHalfOpen, StateClosed} {
		select {
		case v := <-got:
			if v.State != want || v.ID != b.ID() {
				t.Fatalf("got %s %s, want %s", v.ID, v.State, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no notification for %s", want)
		}
	}
	cancel()
	fail(t, b, 5, ClassServer)
	e.m.Close() // delivers what was queued, then stops
	select {
	case v := <-got:
		t.Fatalf("notified after cancel: %+v", v)
	default:
	}
}

func TestPersistence(t *testing.T) {
	e := newEnv(t, nil)
	p := e.m.Provider("openai", "gpt-4o")
	fail(t, p, 5, ClassServer)
	e.clock.Advance(30 * time.Second)
	fail(t, p, 1, ClassServer) // failed probe: open for 60s, trips 2
	for range 3 {
		e.m.ToolFailure("c", "t", "x")
	}
	tg := e.m.Telegram()
	fail(t, tg, 5, ClassNetwork)
	e.m.Reset(tg.ID())
	wantU := e.m.Unresolved()
	wantH, _ := e.m.History()
	wantR, _ := e.m.Records(p.ID())

	e.reopen()

	if got := e.m.Unresolved(); !jsonEqual(got, wantU) {
		t.Errorf("unresolved after reopen:\n got %+v\nwant %+v", got, wantU)
	}
	if got, _ := e.m.History(); !jsonEqual(got, wantH) {
		t.Errorf("history after reopen:\n got %+v\nwant %+v", got, wantH)
	}
	if got, _ := e.m.Records(p.ID()); !jsonEqual(got, wantR) || len(got) != 3 {
		t.Errorf("records after reopen: got %d, want 3 equal to before", len(got))
	}
	p = e.m.Provider("openai", "gpt-4o")
	e.clock.Advance(59 * time.Second)
	if _, err := p.Allow(); !errors.Is(err, ErrOpen) {
		t.Fatalf("Allow during the restored cooldown = %v", err)
	}
	e.clock.Advance(time.Second)
	fail(t, p, 1, ClassServer) // the longer cooldown survived too
	if got := p.View().RetryAt.Sub(e.clock.Now()); got != 2*time.Minute {
		t.Errorf("cooldown after restart = %s, want 2m", got)
	}
	if ok, err := e.m.Reset("tool:c/x"); !ok || err != nil {
		t.Errorf("Reset restored tool loop = %v, %v", ok, err)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestStats(t *testing.T) {
	e := newEnv(t, nil)
	b := e.m.Provider("p", "m")
	fail(t, b, 5, ClassServer)
	b.Allow()
	b.Allow()
	e.m.Provider("p", "other")
	e.m.Reset(b.ID())
	st := e.m.Stats()
	if st.Breakers[KindState{KindProvider, StateClosed}] != 2 {
		t.Errorf("breakers = %v", st.Breakers)
	}
	if st.Transitions[Transition{KindProvider, StateClosed, StateOpen}] != 1 ||
		st.Transitions[Transition{KindProvider, StateOpen, StateClosed}] != 1 {
		t.Errorf("transitions = %v", st.Transitions)
	}
	if st.ManualResets != 1 || st.Rejected != 2 {
		t.Errorf("manual %d rejected %d, want 1 and 2", st.ManualResets, st.Rejected)
	}
}

// TestConcurrentUse runs under -race: many callers, a subscriber calling
// back, views and resets, all at once.
func TestConcurrentUse(t *testing.T) {
	e := newEnv(t, nil)
	e.m.Subscribe(func(v BreakerView) { e.m.Unresolved(); e.m.Stats() })
	b := e.m.Provider("p", "m")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				done, err := b.Allow()
				if err != nil {
					e.clock.Advance(time.Second)
					continue
				}
				if (i+g)%3 == 0 {
					done(nil, "")
				} else {
					done(errUpstream, ClassServer)
				}
				if i%50 == 0 {
					e.m.Reset(b.ID())
				}
				e.m.ToolFailure("c", fmt.Sprint(g), "s")
			}
		})
	}
	wg.Wait()
	if _, err := e.m.Records(b.ID()); err != nil {
		t.Fatal(err)
	}
}
