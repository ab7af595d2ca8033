package monitor

// Aggregates for the Monitor's charts, kept in the database so they survive
// a restart (Prometheus counters live in memory and start at zero).
//
// Bucket "monitor_rollups": resolution (1 byte: 'f' five minutes, 'h' one
// hour), bucket start (unix seconds, 8 bytes big endian), series name →
// rollup as JSON. Series names:
//
//	req:BREAKER_ID   requests through a breaker's Allow: count, errors, latency
//	tok:MODEL        tokens of finished turns (Metrics.TurnFinished)
//	quota:KEY        a provider quota's use and limit, sampled each flush
//
// Counts accumulate in memory and are added to the stored buckets by Flush,
// which the monitor's cron runs every minute and Close runs once more, so a
// request costs no disk write and a crash loses at most a minute. Five-minute
// buckets are kept two days, hourly ones ninety.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

var bucketRollups = []byte("monitor_rollups")

const (
	resFine   byte = 'f'
	resCoarse byte = 'h'

	fineStep   = 5 * time.Minute
	coarseStep = time.Hour
	fineKeep   = 48 * time.Hour
	coarseKeep = 90 * 24 * time.Hour
)

// rollup is one series' counts in one bucket.
type rollup struct {
	N      int64 `json:"n,omitempty"`      // requests
	Err    int64 `json:"err,omitempty"`    // failed requests (a stopped turn's cancel is not one)
	LatMs  int64 `json:"lat_ms,omitempty"` // summed latency of the requests
	In     int64 `json:"in,omitempty"`
	Out    int64 `json:"out,omitempty"`
	Cached int64 `json:"cached,omitempty"`
	Used   int64 `json:"used,omitempty"`  // highest quota use sampled
	Limit  int64 `json:"limit,omitempty"` // highest quota limit sampled
}

// add merges o into r: counts add up, quota samples keep their highest.
func (r *rollup) add(o rollup) {
	r.N += o.N
	r.Err += o.Err
	r.LatMs += o.LatMs
	r.In += o.In
	r.Out += o.Out
	r.Cached += o.Cached
	r.Used = max(r.Used, o.Used)
	r.Limit = max(r.Limit, o.Limit)
}

type pendKey struct {
	minute int64 // unix seconds of the minute
	series string
}

// QuotaSample is one provider quota's state as a sampler reports it.
type QuotaSample struct {
	Key   string // such as "openai/gpt-4o"
	Used  int    // tokens counted in the current window
	Limit int    // the quota; 0 when none is known
}

// record adds o to the series' current minute, in memory until Flush.
func (m *Monitor) record(at time.Time, series string, o rollup) {
	k := pendKey{at.Unix() / 60 * 60, series}
	m.rollMu.Lock()
	defer m.rollMu.Unlock()
	if m.pending == nil {
		m.pending = map[pendKey]rollup{}
	}
	r := m.pending[k]
	r.add(o)
	m.pending[k] = r
}

// recordRequest counts one request that passed a breaker's Allow.
func (m *Monitor) recordRequest(id string, start, end time.Time, failed bool) {
	o := rollup{N: 1, LatMs: max(end.Sub(start).Milliseconds(), 0)}
	if failed {
		o.Err = 1
	}
	m.record(end, "req:"+id, o)
}

// RecordTokens counts the tokens of one finished turn of model (a
// configured model name) for the tokens-per-day chart. Metrics.TurnFinished
// calls it when the Metrics keep aggregates (Metrics.KeepAggregates).
func (m *Monitor) RecordTokens(model string, in, out, cached int) {
	if m == nil || in+out+cached <= 0 {
		return
	}
	m.record(m.now(), "tok:"+modelLabel(model), rollup{In: int64(max(in, 0)), Out: int64(max(out, 0)), Cached: int64(max(cached, 0))})
}

// SampleQuotas sets where Flush reads the providers' quotas before it
// writes, so the chart shows use against the quota over time. Nil stops it.
func (m *Monitor) SampleQuotas(fn func() []QuotaSample) {
	m.rollMu.Lock()
	m.sampler = fn
	m.rollMu.Unlock()
}

// Flush samples the quotas and adds the counts gathered since the last
// flush to the stored buckets, then drops buckets older than they are kept.
// The cron of Start runs it every minute and Close once more.
func (m *Monitor) Flush() error {
	now := m.now()
	m.rollMu.Lock()
	sampler := m.sampler
	m.rollMu.Unlock()
	if sampler != nil {
		for _, q := range sampler() {
			if q.Key != "" && (q.Used > 0 || q.Limit > 0) {
				m.record(now, "quota:"+q.Key, rollup{Used: int64(q.Used), Limit: int64(q.Limit)})
			}
		}
	}
	m.rollMu.Lock()
	pend := m.pending
	m.pending = nil
	m.rollMu.Unlock()
	err := m.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRollups)
		for k, r := range pend {
			at := time.Unix(k.minute, 0).UTC()
			for _, res := range []struct {
				code byte
				step time.Duration
			}{{resFine, fineStep}, {resCoarse, coarseStep}} {
				key := rollupKey(res.code, at.Truncate(res.step), k.series)
				var cur rollup
				if v := b.Get(key); v != nil {
					if err := json.Unmarshal(v, &cur); err != nil {
						return fmt.Errorf("rollup %q: %w", key, err)
					}
				}
				cur.add(r)
				data, err := json.Marshal(cur)
				if err != nil {
					return err
				}
				if err := b.Put(key, data); err != nil {
					return err
				}
			}
		}
		return pruneRollups(b, now)
	})
	if err != nil {
		// Put the counts back: the next flush tries again.
		m.rollMu.Lock()
		if m.pending == nil {
			m.pending = map[pendKey]rollup{}
		}
		for k, r := range pend {
			c := m.pending[k]
			c.add(r)
			m.pending[k] = c
		}
		m.rollMu.Unlock()
		return fmt.Errorf("monitor: store aggregates: %w", err)
	}
	return nil
}

func pruneRollups(b *bolt.Bucket, now time.Time) error {
	for _, res := range []struct {
		code byte
		keep time.Duration
	}{{resFine, fineKeep}, {resCoarse, coarseKeep}} {
		cut := rollupKey(res.code, now.Add(-res.keep), "")
		var dead [][]byte
		c := b.Cursor()
		for k, _ := c.Seek([]byte{res.code}); k != nil && k[0] == res.code && bytes.Compare(k, cut) < 0; k, _ = c.Next() {
			dead = append(dead, bytes.Clone(k))
		}
		for _, k := range dead {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
	}
	return nil
}

func rollupKey(res byte, start time.Time, series string) []byte {
	k := make([]byte, 0, 9+len(series))
	k = append(k, res)
	k = binary.BigEndian.AppendUint64(k, uint64(max(start.Unix(), 0)))
	return append(k, series...)
}

// Span is a period the charts show.
type Span string

// The spans of GET /api/monitor/aggregates.
const (
	SpanDay  Span = "day"  // the last 24 hours in five-minute steps
	SpanWeek Span = "week" // the last 7 days in hourly steps
)

// ErrSpan is returned by Aggregates for a span it does not know.
var ErrSpan = errors.New(`span must be "day" or "week"`)

// Aggregates is the body of GET /api/monitor/aggregates: every series over
// one span, on one time axis (Times, unix seconds of each step's start).
// A step without requests has null latency; counts are 0.
type Aggregates struct {
	Span      Span             `json:"span"`
	Step      int64            `json:"step_s"`
	From      time.Time        `json:"from"`
	To        time.Time        `json:"to"`
	Times     []int64          `json:"times"`
	Providers []ProviderSeries `json:"providers"`
	Quotas    []QuotaSeries    `json:"quotas"`
	// Days (unix seconds of each UTC day's start) is the axis of Tokens:
	// tokens are shown per day, the last 1 (day) or 7 (week) days.
	Days   []int64       `json:"days"`
	Tokens []TokenSeries `json:"tokens"`
	// Costs is each model's cost per day on Days, from the cost ledger.
	Costs    []CostSeries   `json:"costs"`
	Breakers []BreakerSpans `json:"breakers"`
}

// ProviderSeries is one breaker's requests, errors and mean latency per step.
type ProviderSeries struct {
	ID        string     `json:"id"`
	Kind      Kind       `json:"kind"`
	Scope     string     `json:"scope"`
	Requests  []int64    `json:"requests"`
	Errors    []int64    `json:"errors"`
	LatencyMs []*float64 `json:"latency_ms"`
}

// QuotaSeries is one quota's highest sampled use and limit per step (0 when
// nothing was sampled).
type QuotaSeries struct {
	Key   string  `json:"key"`
	Used  []int64 `json:"used"`
	Limit []int64 `json:"limit"`
}

// TokenSeries is one model's tokens per day.
type TokenSeries struct {
	Model  string  `json:"model"`
	In     []int64 `json:"in"`
	Out    []int64 `json:"out"`
	Cached []int64 `json:"cached"`
}

// BreakerSpans is one breaker's states over the span, from its canonical
// records: consecutive, covering [From, To] from the first record that
// matters.
type BreakerSpans struct {
	ID    string      `json:"id"`
	Kind  Kind        `json:"kind"`
	Scope string      `json:"scope"`
	Spans []StateSpan `json:"spans"`
}

// StateSpan is a time a breaker spent in one state.
type StateSpan struct {
	State State     `json:"state"`
	From  time.Time `json:"from"`
	To    time.Time `json:"to"`
}

// Aggregates reads the stored buckets and breaker records of one span. It
// does not flush: counts of the last minute show after the next Flush.
// Costs are exact: those queued are committed first.
func (m *Monitor) Aggregates(span Span) (Aggregates, error) {
	if err := m.flushCosts(); err != nil {
		return Aggregates{}, err
	}
	var res byte
	var step, length time.Duration
	days := 1
	switch span {
	case SpanDay:
		res, step, length = resFine, fineStep, 24*time.Hour
	case SpanWeek:
		res, step, length, days = resCoarse, coarseStep, 7*24*time.Hour, 7
	default:
		return Aggregates{}, ErrSpan
	}
	now := m.now()
	to := now.Truncate(step).Add(step)
	from := to.Add(-length)
	n := int(length / step)
	a := Aggregates{Span: span, Step: int64(step / time.Second), From: from, To: now,
		Times: make([]int64, n), Providers: []ProviderSeries{}, Quotas: []QuotaSeries{}, Tokens: []TokenSeries{}, Breakers: []BreakerSpans{}}
	for i := range n {
		a.Times[i] = from.Add(time.Duration(i) * step).Unix()
	}
	dayTo := now.Truncate(24 * time.Hour).Add(24 * time.Hour)
	dayFrom := dayTo.Add(-time.Duration(days) * 24 * time.Hour)
	a.Days = make([]int64, days)
	for i := range days {
		a.Days[i] = dayFrom.Add(time.Duration(i) * 24 * time.Hour).Unix()
	}
	prov := map[string]*ProviderSeries{}
	lat := map[string][]int64{}
	quotas := map[string]*QuotaSeries{}
	tokens := map[string]*TokenSeries{}
	err := m.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRollups)
		// The charts' steps.
		if err := scanRollups(b, res, from, to, func(at time.Time, series string, r rollup) {
			i := int(at.Sub(from) / step)
			if i < 0 || i >= n {
				return
			}
			switch kind, name, _ := strings.Cut(series, ":"); kind {
			case "req":
				p := prov[name]
				if p == nil {
					bk, scope, _ := strings.Cut(name, ":")
					p = &ProviderSeries{ID: name, Kind: Kind(bk), Scope: scope, Requests: make([]int64, n), Errors: make([]int64, n), LatencyMs: make([]*float64, n)}
					prov[name] = p
					lat[name] = make([]int64, n)
				}
				p.Requests[i] += r.N
				p.Errors[i] += r.Err
				lat[name][i] += r.LatMs
			case "quota":
				q := quotas[name]
				if q == nil {
					q = &QuotaSeries{Key: name, Used: make([]int64, n), Limit: make([]int64, n)}
					quotas[name] = q
				}
				q.Used[i] = max(q.Used[i], r.Used)
				q.Limit[i] = max(q.Limit[i], r.Limit)
			}
		}); err != nil {
			return err
		}
		var err error
		if a.Costs, err = costsPerDay(tx, a.Days); err != nil {
			return err
		}
		// Tokens per day, from the hourly buckets.
		return scanRollups(b, resCoarse, dayFrom, dayTo, func(at time.Time, series string, r rollup) {
			kind, name, _ := strings.Cut(series, ":")
			if kind != "tok" {
				return
			}
			i := int(at.Sub(dayFrom) / (24 * time.Hour))
			if i < 0 || i >= days {
				return
			}
			t := tokens[name]
			if t == nil {
				t = &TokenSeries{Model: name, In: make([]int64, days), Out: make([]int64, days), Cached: make([]int64, days)}
				tokens[name] = t
			}
			t.In[i] += r.In
			t.Out[i] += r.Out
			t.Cached[i] += r.Cached
		})
	})
	if err != nil {
		return Aggregates{}, fmt.Errorf("monitor: read aggregates: %w", err)
	}
	for _, id := range sortedKeys(prov) {
		p := prov[id]
		for i, c := range p.Requests {
			if c > 0 {
				v := float64(lat[id][i]) / float64(c)
				p.LatencyMs[i] = &v
			}
		}
		a.Providers = append(a.Providers, *p)
	}
	for _, k := range sortedKeys(quotas) {
		a.Quotas = append(a.Quotas, *quotas[k])
	}
	for _, k := range sortedKeys(tokens) {
		a.Tokens = append(a.Tokens, *tokens[k])
	}
	a.Breakers, err = m.breakerSpans(from, now)
	if err != nil {
		return Aggregates{}, err
	}
	return a, nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// scanRollups calls fn for each stored bucket of resolution res starting in
// [from, to).
func scanRollups(b *bolt.Bucket, res byte, from, to time.Time, fn func(time.Time, string, rollup)) error {
	end := rollupKey(res, to, "")
	c := b.Cursor()
	for k, v := c.Seek(rollupKey(res, from, "")); k != nil && len(k) >= 9 && k[0] == res && bytes.Compare(k, end) < 0; k, v = c.Next() {
		var r rollup
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("rollup %q: %w", k, err)
		}
		fn(time.Unix(int64(binary.BigEndian.Uint64(k[1:9])), 0).UTC(), string(k[9:]), r)
	}
	return nil
}

// breakerSpans turns the canonical records into each breaker's states over
// [from, to]: the state in force at from (the last earlier record's), then
// one span per transition. Breakers closed throughout are left out. The
// records are never pruned, so this reads them all; they are one per
// transition, which stays small next to the requests.
func (m *Monitor) breakerSpans(from, to time.Time) ([]BreakerSpans, error) {
	byID := map[string][]Record{}
	err := m.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRecords).ForEach(func(k, v []byte) error {
			var r Record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("record %q: %w", k, err)
			}
			if !r.At.After(to) {
				byID[r.ID] = append(byID[r.ID], r)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("monitor: read breaker records: %w", err)
	}
	out := []BreakerSpans{}
	for _, id := range sortedKeys(byID) {
		recs := byID[id]
		sort.Slice(recs, func(i, j int) bool { return recs[i].Seq < recs[j].Seq })
		bs := BreakerSpans{ID: id, Kind: recs[0].Kind, Scope: recs[0].Scope}
		cur, at := StateClosed, from
		for _, r := range recs {
			if r.At.Before(from) {
				cur = r.To
				continue
			}
			if r.At.After(at) {
				bs.Spans = append(bs.Spans, StateSpan{State: cur, From: at, To: r.At})
			}
			cur, at = r.To, r.At
		}
		bs.Spans = append(bs.Spans, StateSpan{State: cur, From: at, To: to})
		if len(bs.Spans) == 1 && cur == StateClosed {
			continue // closed throughout
		}
		out = append(out, bs)
	}
	return out, nil
}
