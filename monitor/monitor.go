// Package monitor owns Mirror's breakers: the circuits that open when a
// provider model, a tool loop or the Telegram Bot API keeps failing.
//
// It owns four bbolt buckets in the one database file that cmd opens:
//
//   - "breakers": the current state of every breaker that has ever changed
//     state, by breaker id, so an open breaker stays open across a restart;
//   - "breaker_records": the canonical records, append-only and never pruned:
//     every transition with its time, reason, trips and whether it was made
//     by hand;
//   - "breaker_display": the display history, one entry per closed incident,
//     which Prune trims to breaker_history_days and breaker_history_max;
//   - "monitor_rollups": the Monitor's chart aggregates (requests, errors and
//     latency per breaker, tokens per model, quota use), see rollup.go.
//
// Unresolved breakers (open or half open) are always shown, whatever their age
// or the limits; the limits bound only the history of closed incidents.
//
// A state change is stored before it is published, in its own bbolt
// transaction, so never call a breaker (Allow's done, ToolFailure, Reset...)
// from inside another bbolt write transaction on the same file: bbolt has one
// writer at a time and the two would wait for each other.
//
// The package imports nothing of Mirror's but config; it knows no transport.
// The gateway turns Snapshot into GET /api/breakers and calls Reset for
// POST /api/breakers/{id}/reset.
package monitor

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/mirror-gateway/mirror/config"
	"github.com/robfig/cron/v3"
	bolt "go.etcd.io/bbolt"
)

// State is where a breaker is in its cycle.
type State string

// The states of a breaker, spelled as the contract's BREAKER object spells them.
const (
	StateClosed   State = "closed"    // requests flow
	StateOpen     State = "open"      // requests are refused until the cooldown is over
	StateHalfOpen State = "half_open" // one probe is let through to see if it works again
)

// Kind says what a breaker guards.
type Kind string

// The kinds of breaker.
const (
	KindProvider Kind = "provider"  // one model of one provider
	KindToolLoop Kind = "tool_loop" // the same tool call failing again and again in one turn
	KindTelegram Kind = "telegram"  // the Bot API
	KindMCP      Kind = "mcp"       // one MCP tool server (it will not start, keeps crashing or is unreachable)
)

// Errors.
var (
	// ErrOpen is matched (errors.Is) by every *OpenError.
	ErrOpen = errors.New("breaker open")
	// ErrNotFound is returned by Reset for an id no breaker has.
	ErrNotFound = errors.New("no such breaker")
	// ErrClosed is returned by Start after Close.
	ErrClosed = errors.New("monitor closed")
)

// Thresholds tune when breakers trip and how long they stay open. A zero
// field takes its default (see DefaultThresholds).
type Thresholds struct {
	// Failures trips a breaker after this many consecutive failures.
	Failures int
	// Window, WindowMinRequests and WindowRatio trip a breaker when at least
	// WindowRatio of at least WindowMinRequests requests in the last Window
	// failed: a flaky upstream that fails every other request never reaches
	// Failures in a row but is still unusable.
	Window            time.Duration
	WindowMinRequests int
	WindowRatio       float64
	// Cooldown is how long a breaker stays open after it first trips; each
	// failed probe doubles it, up to MaxCooldown.
	Cooldown    time.Duration
	MaxCooldown time.Duration
	// ProbeTimeout lets another probe through when the one in flight has not
	// reported for this long, so a lost done call cannot wedge a breaker in
	// half open forever.
	ProbeTimeout time.Duration
	// ToolLoopFailures trips a tool-loop breaker when the same call fails
	// this many times in one turn.
	ToolLoopFailures int
}

// DefaultThresholds are the thresholds used for zero fields.
var DefaultThresholds = Thresholds{
	Failures:          5,
	Window:            time.Minute,
	WindowMinRequests: 10,
	WindowRatio:       0.5,
	Cooldown:          30 * time.Second,
	MaxCooldown:       10 * time.Minute,
	ProbeTimeout:      2 * time.Minute,
	ToolLoopFailures:  3,
}

func (t Thresholds) withDefaults() Thresholds {
	d := DefaultThresholds
	if t.Failures > 0 {
		d.Failures = t.Failures
	}
	if t.Window > 0 {
		d.Window = t.Window
	}
	if t.WindowMinRequests > 0 {
		d.WindowMinRequests = t.WindowMinRequests
	}
	if t.WindowRatio > 0 {
		d.WindowRatio = t.WindowRatio
	}
	if t.Cooldown > 0 {
		d.Cooldown = t.Cooldown
	}
	if t.MaxCooldown > 0 {
		d.MaxCooldown = t.MaxCooldown
	}
	if d.MaxCooldown < d.Cooldown {
		d.MaxCooldown = d.Cooldown
	}
	if t.ProbeTimeout > 0 {
		d.ProbeTimeout = t.ProbeTimeout
	}
	if t.ToolLoopFailures > 0 {
		d.ToolLoopFailures = t.ToolLoopFailures
	}
	return d
}

// Options configure a Monitor. The zero value is usable.
type Options struct {
	// Clock tells the time; tests pass a fake one. Default time.Now.
	Clock func() time.Time
	// Log receives transitions and storage failures. Default: discarded.
	Log        *slog.Logger
	Thresholds Thresholds
}

// Monitor holds every breaker of the process. Its methods are safe for
// concurrent use.
type Monitor struct {
	db    *bolt.DB
	clock func() time.Time
	log   *slog.Logger
	th    Thresholds

	historyDays int
	historyMax  int
	schedule    string

	hub   *hub
	stats stats

	mu       sync.Mutex
	breakers map[string]*Breaker
	tools    map[string]*toolTurn // chat → failures of its running turn

	cronMu sync.Mutex
	cron   *cron.Cron
	closed bool

	closeOnce sync.Once

	// pruned, when set (tests), receives the result of every scheduled
	// prune (-1 when pruneGate skipped it).
	pruned chan int
	// pruneGate, when set, says whether this process may prune now (the
	// cluster's leader); guarded by cronMu.
	pruneGate func() bool

	// The charts' aggregates (rollup.go): counts not yet flushed, and
	// where Flush samples the quotas.
	rollMu  sync.Mutex
	pending map[pendKey]rollup
	sampler func() []QuotaSample

	// The cost ledger (cost.go): prices by model name and the daily
	// budgets, from runtime.yaml at Open.
	prices          map[string]config.Prices
	dailyBudget     float64
	chatDailyBudget float64
	costs           costQueue // recorded, not yet committed
	// costDelay, when set (tests), replaces costFlushDelay; costsFlushed,
	// when set, receives the result of each commit the delay triggered.
	costDelay    time.Duration
	costsFlushed chan error
}

// Open creates the monitor's buckets in db if needed and loads the breakers
// stored there, so a breaker that was open when the process stopped is open
// again. The history limits and the prune schedule come from cfg. The
// database stays the caller's: Close does not close it.
func Open(db *bolt.DB, cfg *config.Config, opts Options) (*Monitor, error) {
	if db == nil || cfg == nil {
		return nil, errors.New("monitor: Open needs a database and a config")
	}
	m := &Monitor{
		db:          db,
		clock:       opts.Clock,
		log:         opts.Log,
		th:          opts.Thresholds.withDefaults(),
		historyDays: cfg.BreakerHistoryDays,
		historyMax:  cfg.BreakerHistoryMax,
		schedule:    cfg.BreakerPruneSchedule,
		breakers:    map[string]*Breaker{},
		tools:       map[string]*toolTurn{},

		prices:          pricesOf(cfg),
		dailyBudget:     cfg.Limits.DailyBudget,
		chatDailyBudget: cfg.Limits.ChatDailyBudget,
	}
	m.costs.settled.L = &m.costs.mu
	if m.clock == nil {
		m.clock = time.Now
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	// config.Validate refuses these; a Config built in code may still carry
	// zeros, which would otherwise hide the whole history.
	def := config.Default()
	if m.historyDays <= 0 {
		m.historyDays = def.BreakerHistoryDays
	}
	if m.historyMax <= 0 {
		m.historyMax = def.BreakerHistoryMax
	}
	if m.schedule == "" {
		m.schedule = def.BreakerPruneSchedule
	}
	if err := m.load(); err != nil {
		return nil, err
	}
	m.hub = newHub(m.log)
	return m, nil
}

// Start starts the cron job that prunes the display history on
// breaker_prune_schedule (robfig/cron standard syntax, so "@every 1h" and
// "0 3 * * *" both work). Breakers work without it; only pruning waits.
// History applies the limits when it reads, so the display is right between
// runs too. Calling Start twice is harmless.
func (m *Monitor) Start() error {
	sched, err := cron.ParseStandard(m.schedule)
	if err != nil {
		return fmt.Errorf("monitor: breaker_prune_schedule %q: %w", m.schedule, err)
	}
	m.cronMu.Lock()
	defer m.cronMu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if m.cron != nil {
		return nil
	}
	logger := cronLogger{m.log}
	// SkipIfStillRunning: a prune that outlasts its interval (a huge history
	// on a slow disk) must not pile up a second one behind it.
	c := cron.New(cron.WithLogger(logger), cron.WithChain(cron.Recover(logger), cron.SkipIfStillRunning(logger)))
	c.Schedule(sched, cron.FuncJob(m.pruneJob))
	c.Schedule(cron.Every(time.Minute), cron.FuncJob(m.flushJob))
	c.Start()
	m.cron = c
	return nil
}

// PruneOnlyWhen makes the scheduled prune run only while leads() says
// so: in cluster mode the prune is one of the leader's singletons. It
// holds from the next scheduled run; without it every scheduled prune runs.
func (m *Monitor) PruneOnlyWhen(leads func() bool) {
	m.cronMu.Lock()
	m.pruneGate = leads
	m.cronMu.Unlock()
}

func (m *Monitor) pruneJob() {
	m.cronMu.Lock()
	gate := m.pruneGate
	m.cronMu.Unlock()
	if gate != nil && !gate() {
		if m.pruned != nil {
			select {
			case m.pruned <- -1: // tests: skipped, not led
			default:
			}
		}
		return
	}
	removed, err := m.Prune(m.now())
	if err != nil {
		m.log.Error("breaker history prune failed", "err", err)
	} else if removed > 0 {
		m.log.Info("breaker history pruned", "removed", removed)
	}
	if m.pruned != nil {
		select {
		case m.pruned <- removed:
		default:
		}
	}
}

func (m *Monitor) flushJob() {
	if err := m.Flush(); err != nil {
		m.log.Error("monitor aggregates not stored", "err", err)
	}
}

// Close stops the prune job, waiting for a run in progress, stores the
// chart counts not yet flushed, and delivers the
// notifications already queued to subscribers. Breakers keep working in
// memory afterwards (callers shutting down may still report), but nothing
// more is published. It does not close the database.
func (m *Monitor) Close() {
	m.closeOnce.Do(func() {
		m.cronMu.Lock()
		m.closed = true
		c := m.cron
		m.cronMu.Unlock()
		if c != nil {
			<-c.Stop().Done()
		}
		// The last minute's counts, so a restart loses none.
		m.flushJob()
		m.closeCosts()
		m.hub.close()
	})
}

// Subscribe calls fn with the view of a breaker after each of its state
// changes is stored. Calls come from one goroutine of the monitor, in the
// order the changes happened, never under a breaker's lock, so fn may call
// back into the monitor; fn should return quickly, since later notifications
// wait for it. cancel stops further calls (one already running finishes).
func (m *Monitor) Subscribe(fn func(BreakerView)) (cancel func()) {
	return m.hub.subscribe(fn)
}

// Provider returns the breaker of one model of one provider, creating it
// closed on first use. Pass the provider's name (providers[].name) and the
// provider's own model name (models[].model): the breaker guards the upstream,
// so two configured models that call the same upstream model share it. Its id
// is "provider:PROVIDER/MODEL".
func (m *Monitor) Provider(provider, model string) *Breaker {
	scope := provider + "/" + model
	return m.breaker(string(KindProvider)+":"+scope, KindProvider, scope)
}

// Telegram returns the breaker of the Bot API, id "telegram:bot", scope
// "bot". Report unreachable (ClassNetwork, ClassTimeout) and 5xx
// (ClassServer) answers; a 429 from Telegram is per-chat flood control that
// the sender paces, not an outage, so report it with a class that does not
// count (such as ClassBadRequest) or not at all.
func (m *Monitor) Telegram() *Breaker {
	return m.breaker(string(KindTelegram)+":bot", KindTelegram, "bot")
}

// TelegramPolling is the breaker of receiving updates (getUpdates): a
// lasting 409 conflict (another poller, a webhook set elsewhere) opens it and
// shows on the Monitor, without holding up the replies the bot sends.
func (m *Monitor) TelegramPolling() *Breaker {
	return m.breaker(string(KindTelegram)+":polling", KindTelegram, "polling")
}

// MCP returns the breaker of one MCP tool server, id "mcp:SERVER", scope
// the server's name (mcp.servers[].name): it opens when the server will
// not start, keeps crashing or cannot be reached, and while it is open the
// server's tools answer that they are unavailable.
func (m *Monitor) MCP(server string) *Breaker {
	return m.breaker(string(KindMCP)+":"+server, KindMCP, server)
}

func (m *Monitor) breaker(id string, kind Kind, scope string) *Breaker {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.breakers[id]
	if b == nil {
		b = &Breaker{m: m, id: id, kind: kind, scope: scope, state: StateClosed}
		m.breakers[id] = b
	}
	return b
}

func (m *Monitor) lookup(id string) *Breaker {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.breakers[id]
}

func (m *Monitor) all() []*Breaker {
	m.mu.Lock()
	defer m.mu.Unlock()
	bs := make([]*Breaker, 0, len(m.breakers))
	for _, b := range m.breakers {
		bs = append(bs, b)
	}
	return bs
}

// Reset closes an open or half-open breaker by hand; the canonical record
// and the history entry say it was manual. It reports false, with no error,
// when the breaker was already closed (nothing is recorded then), and
// ErrNotFound for an id no breaker has.
func (m *Monitor) Reset(id string) (reset bool, err error) {
	b := m.lookup(id)
	if b == nil {
		return false, fmt.Errorf("reset %q: %w", id, ErrNotFound)
	}
	now := m.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == StateClosed {
		return false, nil
	}
	b.transition(now, StateClosed, "reset by hand", true)
	return true, nil
}

// Unresolved returns every open and half-open breaker, newest first,
// whatever its age: the history limits never hide one.
func (m *Monitor) Unresolved() []BreakerView {
	views := []BreakerView{}
	for _, b := range m.all() {
		if v := b.View(); v.State != StateClosed {
			views = append(views, v)
		}
	}
	sort.Slice(views, func(i, j int) bool {
		a, b := views[i], views[j]
		if !a.OpenedAt.Equal(*b.OpenedAt) {
			return a.OpenedAt.After(*b.OpenedAt)
		}
		return a.ID < b.ID
	})
	return views
}

// Snapshot is the body of GET /api/breakers.
type Snapshot struct {
	Unresolved []BreakerView `json:"unresolved"`
	History    []DayGroup    `json:"history"`
}

// Snapshot returns the unresolved breakers and the display history together.
func (m *Monitor) Snapshot() (Snapshot, error) {
	h, err := m.History()
	if err != nil {
		return Snapshot{}, err
	}
	return Snapshot{Unresolved: m.Unresolved(), History: h}, nil
}

// now is the clock in UTC without a monotonic reading, so stored and shown
// times are RFC 3339 UTC and compare the same after a restart.
func (m *Monitor) now() time.Time { return m.clock().UTC() }

// cronLogger sends cron's logs to slog; its Info lines fire on every wake, so
// they go to Debug.
type cronLogger struct{ l *slog.Logger }

func (c cronLogger) Info(msg string, kv ...any) { c.l.Debug("cron: "+msg, kv...) }
func (c cronLogger) Error(err error, msg string, kv ...any) {
	c.l.Error("cron: "+msg, append(kv, "err", err)...)
}
