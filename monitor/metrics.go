package monitor

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are Mirror's Prometheus metrics, served at GET /metrics. They live
// in a registry of their own (never prometheus.DefaultRegisterer), so two
// Metrics in one process (tests) do not collide and no library can slip its
// metrics in.
//
// Every method is safe for concurrent use and a no-op on a nil *Metrics, so a
// caller may hold a nil one when metrics are off.
//
// The series:
//
//	mirror_turns_total{model,outcome}              counter
//	mirror_turn_seconds{model}                     histogram
//	mirror_tokens_total{model,kind="in|out|cached"} counter
//	mirror_queue_depth                             gauge (messages waiting, all chats)
//	mirror_quota_waits_total                       counter
//	mirror_quota_wait_seconds                      histogram
//	mirror_telegram_sends_total{result="ok|error"} counter
//	mirror_telegram_429_total                      counter
//	mirror_breakers{kind,state}                    gauge, read from Monitor.Stats at scrape
//	mirror_breaker_transitions_total{kind,from,to} counter, idem
//	mirror_breaker_manual_resets_total             counter, idem
//	mirror_breaker_rejected_total                  counter, idem
//
// plus the Go runtime (go_*) and process (process_*) collectors.
type Metrics struct {
	reg *prometheus.Registry

	turns       *prometheus.CounterVec
	turnSeconds *prometheus.HistogramVec
	tokens      *prometheus.CounterVec
	queueDepth  prometheus.Gauge
	quotaWaits  prometheus.Counter
	quotaWait   prometheus.Histogram
	tgSends     *prometheus.CounterVec
	tg429       prometheus.Counter

	// agg, when set, also keeps each turn's tokens for the Monitor's charts.
	agg *Monitor
}

// KeepAggregates makes TurnFinished also count tokens into mon's stored
// aggregates (Monitor.RecordTokens), which survive a restart. Call it
// before the Metrics are in use.
func (m *Metrics) KeepAggregates(mon *Monitor) {
	if m != nil {
		m.agg = mon
	}
}

// NewMetrics builds the metrics and their registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mirror_turns_total",
			Help: "Turns finished, by model and outcome (such as ok, failed, stopped).",
		}, []string{"model", "outcome"}),
		turnSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mirror_turn_seconds",
			Help:    "How long turns took, from pickup to their end, by model.",
			Buckets: []float64{0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1800},
		}, []string{"model"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mirror_tokens_total",
			Help: "Tokens of finished turns by model and kind: in (input), out (output), cached (cached input), as the provider reported them.",
		}, []string{"model", "kind"}),
		queueDepth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mirror_queue_depth",
			Help: "Messages waiting in the queues of all chats.",
		}),
		quotaWaits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mirror_quota_waits_total",
			Help: "Times a request waited for a provider quota window.",
		}),
		quotaWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mirror_quota_wait_seconds",
			Help:    "How long requests waited for a provider quota window.",
			Buckets: []float64{0.1, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120},
		}),
		tgSends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mirror_telegram_sends_total",
			Help: "Telegram Bot API sends by result (ok or error).",
		}, []string{"result"}),
		tg429: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mirror_telegram_429_total",
			Help: "Telegram answers 429 Too Many Requests (flood control).",
		}),
	}
	m.reg.MustRegister(m.turns, m.turnSeconds, m.tokens, m.queueDepth, m.quotaWaits, m.quotaWait, m.tgSends, m.tg429,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Both results exist from the start, so a rate of errors is defined
	// before the first one.
	m.tgSends.WithLabelValues("ok")
	m.tgSends.WithLabelValues("error")
	return m
}

// Registry returns the registry, for registering more collectors.
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.reg
}

func modelLabel(model string) string {
	if model == "" {
		return "unknown"
	}
	return model
}

// TurnFinished records one finished turn: its duration, its tokens as the
// provider reported them (input, output, cached input) and its outcome. Pass a small fixed set of outcomes (such
// as "ok", "failed", "stopped") and configured model names: each distinct
// value is a series.
func (m *Metrics) TurnFinished(model string, d time.Duration, in, out, cached int, outcome string) {
	if m == nil {
		return
	}
	model = modelLabel(model)
	if outcome == "" {
		outcome = "unknown"
	}
	m.agg.RecordTokens(model, in, out, cached)
	m.turns.WithLabelValues(model, outcome).Inc()
	m.turnSeconds.WithLabelValues(model).Observe(d.Seconds())
	for _, t := range []struct {
		kind string
		n    int
	}{{"in", in}, {"out", out}, {"cached", cached}} {
		c := m.tokens.WithLabelValues(model, t.kind)
		if t.n > 0 {
			c.Add(float64(t.n))
		}
	}
}

// QueueDepth sets the number of messages waiting in all chats' queues.
func (m *Metrics) QueueDepth(n int) {
	if m == nil {
		return
	}
	m.queueDepth.Set(float64(n))
}

// QuotaWait records one wait for a quota window.
func (m *Metrics) QuotaWait(d time.Duration) {
	if m == nil {
		return
	}
	m.quotaWaits.Inc()
	m.quotaWait.Observe(d.Seconds())
}

// TelegramSend records one Bot API send.
func (m *Metrics) TelegramSend(ok bool) {
	if m == nil {
		return
	}
	r := "error"
	if ok {
		r = "ok"
	}
	m.tgSends.WithLabelValues(r).Inc()
}

// Telegram429 records one 429 answer of the Bot API.
func (m *Metrics) Telegram429() {
	if m == nil {
		return
	}
	m.tg429.Inc()
}

// Handler serves the metrics in the Prometheus text format (or another
// format a scraper asks for), with the breaker metrics of mon read from
// mon.Stats at each scrape. mon may be nil: the breaker series are left out.
// It does no authentication; the gateway wraps it.
func (m *Metrics) Handler(mon *Monitor) http.Handler {
	if m == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "metrics are off", http.StatusServiceUnavailable)
		})
	}
	var g prometheus.Gatherer = m.reg
	if mon != nil {
		// A registry per handler rather than registering on m.reg, so
		// Handler may be called more than once (or for another monitor).
		br := prometheus.NewPedanticRegistry()
		br.MustRegister(breakerCollector{mon})
		g = prometheus.Gatherers{m.reg, br}
	}
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

var (
	descBreakers = prometheus.NewDesc("mirror_breakers",
		"Breakers known to this process by kind and state.", []string{"kind", "state"}, nil)
	descTransitions = prometheus.NewDesc("mirror_breaker_transitions_total",
		"Breaker state changes since start by kind, from and to.", []string{"kind", "from", "to"}, nil)
	descManual = prometheus.NewDesc("mirror_breaker_manual_resets_total",
		"Breakers closed by hand since start.", nil, nil)
	descRejected = prometheus.NewDesc("mirror_breaker_rejected_total",
		"Requests refused by open or half-open breakers since start.", nil, nil)
)

var (
	allKinds  = []Kind{KindProvider, KindToolLoop, KindTelegram, KindMCP}
	allStates = []State{StateClosed, StateOpen, StateHalfOpen}
)

// breakerCollector reads Monitor.Stats at scrape time.
type breakerCollector struct{ m *Monitor }

func (c breakerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descBreakers
	ch <- descTransitions
	ch <- descManual
	ch <- descRejected
}

func (c breakerCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.m.Stats()
	// Every kind and state, zeros included, so "any open breaker" alerts
	// have a series to compare before the first one trips.
	seen := map[KindState]bool{}
	for _, k := range allKinds {
		for _, s := range allStates {
			ks := KindState{k, s}
			seen[ks] = true
			ch <- prometheus.MustNewConstMetric(descBreakers, prometheus.GaugeValue, float64(st.Breakers[ks]), string(k), string(s))
		}
	}
	for ks, n := range st.Breakers {
		if !seen[ks] {
			ch <- prometheus.MustNewConstMetric(descBreakers, prometheus.GaugeValue, float64(n), string(ks.Kind), string(ks.State))
		}
	}
	for t, n := range st.Transitions {
		ch <- prometheus.MustNewConstMetric(descTransitions, prometheus.CounterValue, float64(n), string(t.Kind), string(t.From), string(t.To))
	}
	ch <- prometheus.MustNewConstMetric(descManual, prometheus.CounterValue, float64(st.ManualResets))
	ch <- prometheus.MustNewConstMetric(descRejected, prometheus.CounterValue, float64(st.Rejected))
}
