package monitor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Failure classes a caller passes to the done function of Allow. A class
// says whose fault a failure is; only the upstream's faults count toward
// tripping (see Counts).
const (
	ClassOverloaded  = "overloaded"   // 529, "overloaded" answers
	ClassServer      = "server"       // 5xx
	ClassNetwork     = "network"      // dial, TLS, reset, broken stream
	ClassRateLimited = "rate_limited" // 429 from the provider
	ClassTimeout     = "timeout"      // no answer within the provider timeout

	ClassBadRequest = "bad_request" // 400, 404, 413, 422: our request was wrong
	ClassAuth       = "auth"        // 401, 403: a key problem, not an outage
	ClassCanceled   = "canceled"    // the person stopped the turn
)

// Counts reports whether a failure of this class counts toward tripping a
// breaker: overloaded, server, network, rate_limited, timeout, and "" (the
// caller could not classify it; counted so that a new kind of outage still
// trips). Every other class is the caller's problem (bad_request, auth,
// canceled, ...) and is ignored: it counts as neither failure nor success,
// because a bad request says nothing about the upstream's health.
func Counts(class string) bool {
	switch class {
	case ClassOverloaded, ClassServer, ClassNetwork, ClassRateLimited, ClassTimeout, "":
		return true
	}
	return false
}

// OpenError is returned by Allow while a breaker refuses requests. A chain
// skips to its next model on it.
type OpenError struct {
	ID    string
	State State // StateOpen, or StateHalfOpen while its one probe is in flight
	// RetryAt is when the breaker will let a probe through; for a half-open
	// breaker it is the time of the refusal, the probe's outcome being unknown.
	RetryAt time.Time
}

func (e *OpenError) Error() string {
	if e.State == StateHalfOpen {
		return fmt.Sprintf("breaker %s half open: a probe is in flight", e.ID)
	}
	return fmt.Sprintf("breaker %s open until %s", e.ID, e.RetryAt.Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrOpen) true for every OpenError.
func (e *OpenError) Is(target error) bool { return target == ErrOpen }

// BreakerView is the BREAKER object of the contract, plus two additions:
// retry_at (an open breaker's end of cooldown) and closed_by ("manual" or
// "automatic", on closed incidents). Times are RFC 3339 UTC; opened_at is
// null for a breaker that never opened and closed_at is null while open.
type BreakerView struct {
	ID       string     `json:"id"`
	Kind     Kind       `json:"kind"`
	Scope    string     `json:"scope"`
	State    State      `json:"state"`
	Reason   string     `json:"reason"` // why it (last) tripped
	OpenedAt *time.Time `json:"opened_at"`
	ClosedAt *time.Time `json:"closed_at"`
	// Trips counts how often it opened in this incident: 1 when it tripped,
	// plus one per failed probe (or per repeated tool loop).
	Trips    int        `json:"trips"`
	RetryAt  *time.Time `json:"retry_at,omitempty"`
	ClosedBy string     `json:"closed_by,omitempty"`
}

// Breaker is the circuit of one provider model or of the Bot API (tool-loop
// breakers use the same type, driven through Monitor.ToolFailure).
type Breaker struct {
	m     *Monitor
	id    string
	kind  Kind
	scope string

	mu       sync.Mutex
	state    State
	reason   string
	openedAt time.Time
	closedAt time.Time
	retryAt  time.Time
	trips    int
	closedBy string
	// level counts failed probes since the breaker last closed; the cooldown
	// doubles with each.
	level int
	// gen changes with every transition: a done from a request admitted
	// under an earlier state is stale and ignored.
	gen         uint64
	consecutive int
	win         window
	probe       uint64 // id of the probe in flight, 0 for none
	probeSeq    uint64
	probeAt     time.Time
}

// ID returns the breaker's stable id.
func (b *Breaker) ID() string { return b.id }

// View returns the breaker as the contract shows it.
func (b *Breaker) View() BreakerView {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.viewLocked()
}

func (b *Breaker) viewLocked() BreakerView {
	v := BreakerView{ID: b.id, Kind: b.kind, Scope: b.scope, State: b.state, Reason: b.reason, Trips: b.trips}
	if !b.openedAt.IsZero() {
		t := b.openedAt
		v.OpenedAt = &t
	}
	switch b.state {
	case StateOpen:
		if !b.retryAt.IsZero() {
			t := b.retryAt
			v.RetryAt = &t
		}
	case StateClosed:
		if !b.closedAt.IsZero() {
			t := b.closedAt
			v.ClosedAt = &t
			v.ClosedBy = b.closedBy
		}
	}
	return v
}

// Allow asks to send one request. While the breaker is open it returns an
// *OpenError (errors.Is ErrOpen) and no done. Otherwise the caller makes the
// request and then calls done exactly once with its error (nil on success)
// and the error's class (see Counts); later calls of done are ignored.
//
// After the cooldown the first Allow moves the breaker to half open and lets
// that one request through as a probe: its success closes the breaker, its
// counted failure opens it again with a doubled cooldown, and an ignored
// class leaves it half open for the next caller to probe.
func (b *Breaker) Allow() (done func(err error, class string), err error) {
	now := b.m.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case StateOpen:
		if now.Before(b.retryAt) {
			b.m.stats.reject()
			return nil, &OpenError{ID: b.id, State: StateOpen, RetryAt: b.retryAt}
		}
		// Lazily, on the first request after the cooldown, rather than on a
		// timer: a breaker nobody asks has nothing to probe with.
		b.transition(now, StateHalfOpen, "cooldown over; one probe allowed", false)
		fallthrough
	case StateHalfOpen:
		if b.probe != 0 && now.Sub(b.probeAt) < b.m.th.ProbeTimeout {
			b.m.stats.reject()
			return nil, &OpenError{ID: b.id, State: StateHalfOpen, RetryAt: now}
		}
		b.probeSeq++
		b.probe, b.probeAt = b.probeSeq, now
		return b.doneFunc(b.gen, b.probe, now), nil
	default:
		return b.doneFunc(b.gen, 0, now), nil
	}
}

// doneFunc also counts the request for the Monitor's charts: its latency
// runs from Allow to done, which for a provider is the whole request.
func (b *Breaker) doneFunc(gen, probe uint64, start time.Time) func(error, string) {
	var once sync.Once
	return func(err error, class string) {
		once.Do(func() {
			failed := err != nil && class != ClassCanceled && !errors.Is(err, context.Canceled)
			b.m.recordRequest(b.id, start, b.m.now(), failed)
			b.report(gen, probe, err, class)
		})
	}
}

func (b *Breaker) report(gen, probe uint64, err error, class string) {
	// A stopped turn cancels its request; that is never the upstream's fault,
	// whatever class the caller guessed.
	ignored := err != nil && (!Counts(class) || errors.Is(err, context.Canceled))
	failed := err != nil && !ignored
	now := b.m.now()
	th := b.m.th
	b.mu.Lock()
	defer b.mu.Unlock()
	if gen != b.gen {
		return
	}
	switch b.state {
	case StateClosed:
		if ignored {
			return
		}
		b.win.add(now, th.Window, failed)
		if !failed {
			b.consecutive = 0
			return
		}
		b.consecutive++
		if b.consecutive >= th.Failures {
			b.trip(now, fmt.Sprintf("%d consecutive failures (last: %s)", b.consecutive, classLabel(class)))
			return
		}
		if req, fail := b.win.counts(now, th.Window); req >= th.WindowMinRequests && float64(fail) >= th.WindowRatio*float64(req) {
			b.trip(now, fmt.Sprintf("%d of %d requests failed within %s (last: %s)", fail, req, th.Window, classLabel(class)))
		}
	case StateHalfOpen:
		if probe == 0 || probe != b.probe {
			return
		}
		b.probe = 0
		switch {
		case ignored:
			// Inconclusive: the next Allow probes again.
		case failed:
			b.level++
			b.trip(now, fmt.Sprintf("probe failed (%s)", classLabel(class)))
		default:
			b.transition(now, StateClosed, "probe succeeded", false)
		}
	}
}

// trip opens the breaker for its current cooldown. Reasons carry counts and
// classes but never the error text, which may hold a key or the bot token.
func (b *Breaker) trip(now time.Time, reason string) {
	b.retryAt = now.Add(b.cooldown())
	b.transition(now, StateOpen, reason, false)
}

// cooldown is Cooldown doubled per failed probe, bounded by MaxCooldown.
func (b *Breaker) cooldown() time.Duration {
	d, limit := b.m.th.Cooldown, b.m.th.MaxCooldown
	for i := 0; i < b.level && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// transition moves the breaker to state to, stores the new state with its
// canonical record (and, on closing, its history entry), and queues the view
// for subscribers. It runs under b.mu, so one breaker's transitions are
// stored and published in the order they happen; the write waits for the
// disk, but transitions are rare and only this breaker's callers wait. A
// failed write is logged and the breaker keeps working from memory: losing
// history is better than refusing requests because the disk is full.
func (b *Breaker) transition(now time.Time, to State, reason string, manual bool) {
	from := b.state
	b.state = to
	b.gen++
	b.probe = 0
	switch to {
	case StateOpen:
		if from == StateClosed {
			b.openedAt, b.closedAt, b.closedBy, b.trips = now, time.Time{}, "", 0
		}
		b.trips++
		b.reason = reason
	case StateClosed:
		b.closedAt = now
		b.closedBy = "automatic"
		if manual {
			b.closedBy = "manual"
		}
		b.level, b.consecutive, b.win = 0, 0, window{}
		b.retryAt = time.Time{}
	}
	rec := Record{ID: b.id, Kind: b.kind, Scope: b.scope, From: from, To: to, At: now, Reason: reason, Trips: b.trips, Manual: manual}
	if to == StateOpen && !b.retryAt.IsZero() {
		t := b.retryAt
		rec.RetryAt = &t
	}
	view := b.viewLocked()
	if err := b.m.store(b.storedLocked(), &rec, to == StateClosed); err != nil {
		b.m.log.Error("breaker state not stored", "breaker", b.id, "from", from, "to", to, "err", err)
	}
	b.m.stats.transition(b.kind, from, to, manual)
	b.m.log.Info("breaker "+string(to), "breaker", b.id, "from", from, "reason", reason, "trips", b.trips, "manual", manual)
	b.m.hub.publish(view)
}

func classLabel(class string) string {
	if class == "" {
		return "unclassified"
	}
	return class
}

// window counts requests and failures over a sliding window in a fixed ring
// of slots, so memory stays bounded however busy the breaker is.
type window struct {
	slots [windowSlots]slot
}

const windowSlots = 10

type slot struct {
	epoch     int64 // which slot-long interval since the Unix epoch
	req, fail int
}

func slotOf(now time.Time, w time.Duration) int64 {
	d := int64(w / windowSlots)
	if d <= 0 {
		d = 1
	}
	return now.UnixNano() / d
}

func (w *window) add(now time.Time, width time.Duration, failed bool) {
	e := slotOf(now, width)
	s := &w.slots[((e%windowSlots)+windowSlots)%windowSlots]
	if s.epoch != e {
		*s = slot{epoch: e}
	}
	s.req++
	if failed {
		s.fail++
	}
}

func (w *window) counts(now time.Time, width time.Duration) (req, fail int) {
	e := slotOf(now, width)
	for _, s := range w.slots {
		if s.epoch > e-windowSlots && s.epoch <= e {
			req += s.req
			fail += s.fail
		}
	}
	return req, fail
}
