package monitor

import (
	"log/slog"
	"sort"
	"sync"
)

// hub delivers views to subscribers from its own goroutine. publish only
// appends to a queue, so a breaker never waits for a subscriber and a
// subscriber may call back into the breaker that changed (deps.md: never call
// back into a breaker under its own lock).
type hub struct {
	log *slog.Logger

	mu     sync.Mutex
	subs   map[uint64]func(BreakerView)
	next   uint64
	queue  []BreakerView
	closed bool

	wake chan struct{} // capacity 1: "the queue is not empty"
	stop chan struct{}
	done chan struct{}
}

func newHub(log *slog.Logger) *hub {
	h := &hub{
		log:  log,
		subs: map[uint64]func(BreakerView){},
		wake: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	go h.run()
	return h
}

func (h *hub) subscribe(fn func(BreakerView)) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	id := h.next
	h.subs[id] = fn
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.subs, id)
	}
}

// publish queues v. The queue is unbounded, but it grows only by state
// changes, which breakers make rarely.
func (h *hub) publish(v BreakerView) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.queue = append(h.queue, v)
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

func (h *hub) run() {
	defer close(h.done)
	for {
		select {
		case <-h.wake:
			h.deliver()
		case <-h.stop:
			h.deliver() // what was published before close still goes out
			return
		}
	}
}

func (h *hub) deliver() {
	for {
		h.mu.Lock()
		queue := h.queue
		h.queue = nil
		ids := make([]uint64, 0, len(h.subs))
		for id := range h.subs {
			ids = append(ids, id)
		}
		h.mu.Unlock()
		if len(queue) == 0 {
			return
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		for _, v := range queue {
			for _, id := range ids {
				h.mu.Lock()
				fn := h.subs[id] // nil once cancelled
				h.mu.Unlock()
				if fn != nil {
					h.call(fn, v)
				}
			}
		}
	}
}

// call keeps one subscriber's panic from killing delivery to the others.
func (h *hub) call(fn func(BreakerView), v BreakerView) {
	defer func() {
		if r := recover(); r != nil {
			h.log.Error("breaker subscriber panicked", "breaker", v.ID, "panic", r)
		}
	}()
	fn(v)
}

func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	close(h.stop)
	<-h.done
}

// Stats is a snapshot of the breakers for metrics.
type Stats struct {
	// Breakers counts the breakers known to this process by kind and state.
	Breakers map[KindState]int
	// Transitions counts state changes since Open by kind, from and to.
	Transitions map[Transition]uint64
	// ManualResets counts resets by hand since Open.
	ManualResets uint64
	// Rejected counts requests refused by open or half-open breakers since Open.
	Rejected uint64
}

// KindState labels a count of breakers.
type KindState struct {
	Kind  Kind
	State State
}

// Transition labels a count of state changes.
type Transition struct {
	Kind     Kind
	From, To State
}

type stats struct {
	mu          sync.Mutex
	transitions map[Transition]uint64
	manual      uint64
	rejected    uint64
}

func (s *stats) transition(kind Kind, from, to State, manual bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.transitions == nil {
		s.transitions = map[Transition]uint64{}
	}
	s.transitions[Transition{kind, from, to}]++
	if manual {
		s.manual++
	}
}

func (s *stats) reject() {
	s.mu.Lock()
	s.rejected++
	s.mu.Unlock()
}

// Stats returns counts for metrics: breakers per kind and state now, and
// transitions, manual resets and refusals so far (counters: they start at
// zero with the process, as Prometheus expects).
func (m *Monitor) Stats() Stats {
	st := Stats{Breakers: map[KindState]int{}, Transitions: map[Transition]uint64{}}
	for _, b := range m.all() {
		b.mu.Lock()
		st.Breakers[KindState{b.kind, b.state}]++
		b.mu.Unlock()
	}
	m.stats.mu.Lock()
	defer m.stats.mu.Unlock()
	for k, v := range m.stats.transitions {
		st.Transitions[k] = v
	}
	st.ManualResets, st.Rejected = m.stats.manual, m.stats.rejected
	return st
}
