package monitor

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape serves h once and parses the text format it answers.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("content type %q", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, rec.Body)
	}
	return fams
}

// value returns the value of the series of family name whose labels
// include want, and whether there is one.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

func expectValue(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string, want float64) {
	t.Helper()
	got, ok := value(fams, name, labels)
	if !ok {
		t.Errorf("%s%v: no series", name, labels)
		return
	}
	if got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

func TestMetrics(t *testing.T) {
	e := newEnv(t, nil)
	met := NewMetrics()
	met.TurnFinished("default", 1500*time.Millisecond, 1000, 50, 400, "ok")
	met.TurnFinished("default", 2*time.Second, 10, 5, 0, "ok")
	met.TurnFinished("", time.Second, 1, 1, 0, "failed")
	met.QueueDepth(3)
	met.QuotaWait(4 * time.Second)
	met.TelegramSend(true)
	met.TelegramSend(true)
	met.TelegramSend(false)
	met.Telegram429()

	b := e.m.Provider("openai", "gpt-4o")
	fail(t, b, DefaultThresholds.Failures, ClassServer)
	if _, err := b.Allow(); err == nil {
		t.Fatal("open breaker allowed a request")
	}
	e.m.Provider("gemini", "pro") // closed, never tripped
	if _, err := e.m.Reset(b.ID()); err != nil {
		t.Fatal(err)
	}
	fail(t, b, DefaultThresholds.Failures, ClassServer) // open again

	fams := scrape(t, met.Handler(e.m))
	expectValue(t, fams, "mirror_turns_total", map[string]string{"model": "default", "outcome": "ok"}, 2)
	expectValue(t, fams, "mirror_turns_total", map[string]string{"model": "unknown", "outcome": "failed"}, 1)
	expectValue(t, fams, "mirror_turn_seconds", map[string]string{"model": "default"}, 2)
	expectValue(t, fams, "mirror_tokens_total", map[string]string{"model": "default", "kind": "in"}, 1010)
	expectValue(t, fams, "mirror_tokens_total", map[string]string{"model": "default", "kind": "out"}, 55)
	expectValue(t, fams, "mirror_tokens_total", map[string]string{"model": "default", "kind": "cached"}, 400)
	expectValue(t, fams, "mirror_queue_depth", nil, 3)
	expectValue(t, fams, "mirror_quota_waits_total", nil, 1)
	expectValue(t, fams, "mirror_quota_wait_seconds", nil, 1)
	expectValue(t, fams, "mirror_telegram_sends_total", map[string]string{"result": "ok"}, 2)
	expectValue(t, fams, "mirror_telegram_sends_total", map[string]string{"result": "error"}, 1)
	expectValue(t, fams, "mirror_telegram_429_total", nil, 1)

	expectValue(t, fams, "mirror_breakers", map[string]string{"kind": "provider", "state": "open"}, 1)
	expectValue(t, fams, "mirror_breakers", map[string]string{"kind": "provider", "state": "closed"}, 1)
	expectValue(t, fams, "mirror_breakers", map[string]string{"kind": "telegram", "state": "open"}, 0)
	expectValue(t, fams, "mirror_breaker_transitions_total", map[string]string{"kind": "provider", "from": "closed", "to": "open"}, 2)
	expectValue(t, fams, "mirror_breaker_transitions_total", map[string]string{"kind": "provider", "from": "open", "to": "closed"}, 1)
	expectValue(t, fams, "mirror_breaker_manual_resets_total", nil, 1)
	expectValue(t, fams, "mirror_breaker_rejected_total", nil, 1)
	if f := fams["mirror_breakers"]; f.GetType() != dto.MetricType_GAUGE {
		t.Errorf("mirror_breakers is %v", f.GetType())
	}
	if f := fams["mirror_breaker_transitions_total"]; f.GetType() != dto.MetricType_COUNTER {
		t.Errorf("mirror_breaker_transitions_total is %v", f.GetType())
	}
	if fams["go_goroutines"] == nil {
		t.Error("no Go runtime metrics")
	}

	// Read at scrape time: a later change shows on the next scrape, and a
	// second handler (another registry) does not collide with the first.
	if _, err := e.m.Reset(b.ID()); err != nil {
		t.Fatal(err)
	}
	fams = scrape(t, met.Handler(e.m))
	expectValue(t, fams, "mirror_breakers", map[string]string{"kind": "provider", "state": "open"}, 0)
	expectValue(t, fams, "mirror_breaker_manual_resets_total", nil, 2)

	// Without a monitor the breaker series are left out.
	fams = scrape(t, met.Handler(nil))
	if fams["mirror_breakers"] != nil {
		t.Error("breaker gauges without a monitor")
	}
	expectValue(t, fams, "mirror_queue_depth", nil, 3)
}

func TestMetricsAreNotGlobal(t *testing.T) {
	a, b := NewMetrics(), NewMetrics() // would panic on a shared registry
	a.QueueDepth(7)
	fams := scrape(t, b.Handler(nil))
	expectValue(t, fams, "mirror_queue_depth", nil, 0)
}

func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.TurnFinished("x", time.Second, 1, 2, 3, "ok")
	m.QueueDepth(1)
	m.QuotaWait(time.Second)
	m.TelegramSend(true)
	m.Telegram429()
	if m.Registry() != nil {
		t.Error("nil Metrics has a registry")
	}
	rec := httptest.NewRecorder()
	m.Handler(nil).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("nil Metrics handler: %d", rec.Code)
	}
}
