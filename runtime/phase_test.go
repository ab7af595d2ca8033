package runtime

import (
	"errors"
	"reflect"
	"testing"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/boundary"
)

func TestFirstPhase(t *testing.T) {
	for _, c := range []struct {
		host, prepared, open bool
		want                 phase
	}{
		{true, false, true, phaseSettle},
		{true, true, true, phaseView},   // Prepare built the view: nothing was open
		{false, false, true, phaseView}, // no Host, no journal to settle in
		{true, false, false, phaseView},
		{false, false, false, phaseView},
	} {
		if got := firstPhase(c.host, c.prepared, c.open); got != c.want {
			t.Errorf("firstPhase(host %t, prepared %t, open %t) = %s, want %s", c.host, c.prepared, c.open, got, c.want)
		}
	}
}

func TestCrossings(t *testing.T) {
	hard, below := boundary.Reading{HardReached: true}, boundary.Reading{}
	for _, c := range []struct {
		name        string
		r           boundary.Reading
		picked, end int
		want        bool
	}{
		{"picked messages cross", hard, 3, 5, true},
		{"below hard", below, 3, 5, false},
		{"nothing before them", hard, 0, 5, false},
		{"nothing picked", hard, 5, 5, false},
	} {
		if got := crossesFirst(c.r, c.picked, c.end); got != c.want {
			t.Errorf("crossesFirst %s = %t, want %t", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		name          string
		r             boundary.Reading
		host, crossed bool
		steps         int
		want          bool
	}{
		{"after a tool step", hard, true, false, 2, true},
		{"below hard", below, true, false, 2, false},
		{"no host", hard, false, false, 2, false},
		{"crossed once already", hard, true, true, 2, false},
		{"first request", hard, true, false, 0, false},
	} {
		if got := crossesMidTurn(c.r, c.host, c.crossed, c.steps); got != c.want {
			t.Errorf("crossesMidTurn %s = %t, want %t", c.name, got, c.want)
		}
	}
}

func TestAfterAsk(t *testing.T) {
	first := askOutcome{host: true, step: 1}
	with := func(f func(*askOutcome)) askOutcome { o := first; f(&o); return o }
	for _, c := range []struct {
		name string
		o    askOutcome
		want phase
	}{
		{"answer", with(func(o *askOutcome) { o.text = true }), phaseDone},
		{"tool calls", with(func(o *askOutcome) { o.calls = 2 }), phaseTools},
		{"tool calls without a host", with(func(o *askOutcome) { o.host, o.calls = false, 1 }), phaseDone},
		{"empty first answer", first, phaseRerun},
		{"overflow", with(func(o *askOutcome) { o.failed, o.overflow = true, true }), phaseRerun},
		{"overflow after streaming", with(func(o *askOutcome) { o.failed, o.overflow, o.streamed = true, true, true }), phaseDone},
		{"overflow at step 2", with(func(o *askOutcome) { o.failed, o.overflow, o.step = true, true, 2 }), phaseDone},
		{"overflow twice", with(func(o *askOutcome) { o.failed, o.overflow, o.overflowed = true, true, true }), phaseDone},
		{"overflow when stopped", with(func(o *askOutcome) { o.failed, o.overflow, o.stopped = true, true, true }), phaseDone},
		{"empty without a host", with(func(o *askOutcome) { o.host = false }), phaseDone},
		{"other failure", with(func(o *askOutcome) { o.failed = true }), phaseDone},
		{"failure with calls", with(func(o *askOutcome) { o.failed, o.calls = true, 1 }), phaseDone},
	} {
		if got := afterAsk(c.o); got != c.want {
			t.Errorf("afterAsk %s = %s, want %s", c.name, got, c.want)
		}
	}
}

func TestAfterToolsAndBoundary(t *testing.T) {
	for _, c := range []struct {
		stopped, consolidate bool
		want                 phase
	}{
		{false, false, phaseSteer},
		{false, true, phaseBoundary},
		{true, true, phaseDone},
		{true, false, phaseDone},
	} {
		if got := afterTools(c.stopped, c.consolidate); got != c.want {
			t.Errorf("afterTools(stopped %t, consolidate %t) = %s, want %s", c.stopped, c.consolidate, got, c.want)
		}
	}
	for _, c := range []struct {
		continued, carried, hard bool
		want                     phase
	}{
		{true, false, false, phaseAsk},
		{false, true, false, phaseAsk},
		{true, true, false, phaseAsk},
		{false, false, false, phaseDone},
		{false, false, true, phaseAsk},
		{true, false, true, phaseAsk},
	} {
		if got := afterBoundary(c.continued, c.carried, c.hard); got != c.want {
			t.Errorf("afterBoundary(continued %t, carried %t, mid-turn hard %t) = %s, want %s", c.continued, c.carried, c.hard, got, c.want)
		}
	}
	if got := phase(42).String(); got != "phase(42)" {
		t.Errorf("unknown phase reads %q", got)
	}
}

func TestProvisionOnce(t *testing.T) {
	e, err := NewEngine([]*Model{{Name: "m", Window: 8000}}, map[string][]string{"c": {"m"}}, config.Roles{Chat: "c"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Provision(Options{DataDir: "data"}); err != nil {
		t.Fatal(err)
	}
	if e.DataDir() != "data" {
		t.Errorf("DataDir = %q after Provision", e.DataDir())
	}
	if err := e.Provision(Options{DataDir: "other"}); !errors.Is(err, ErrProvisioned) {
		t.Errorf("a second Provision: %v, want ErrProvisioned", err)
	}
	if e.DataDir() != "data" {
		t.Errorf("a second Provision changed DataDir to %q", e.DataDir())
	}
}

// The turn's roles stay small, and Host is exactly their union: a method
// added to Host belongs to one of them.
func TestHostRoles(t *testing.T) {
	host := reflect.TypeFor[Host]()
	n := 0
	for _, role := range []reflect.Type{reflect.TypeFor[Journal](), reflect.TypeFor[Person](), reflect.TypeFor[Record]()} {
		if role.NumMethod() > 7 {
			t.Errorf("%s has %d methods; split it", role.Name(), role.NumMethod())
		}
		if !host.Implements(role) {
			t.Errorf("Host does not play %s", role.Name())
		}
		n += role.NumMethod()
	}
	if n != host.NumMethod() {
		t.Errorf("Host has %d methods, its roles %d: each method belongs to one role", host.NumMethod(), n)
	}
	var _ Host = (*journal)(nil)
}
