package monitor

// The cost ledger: what providers billed for each request (provider.Usage),
// priced by models[].prices, per chat, model and UTC day, and the daily
// budgets (limits.daily_budget, limits.chat_daily_budget) checked against
// it before a turn sends anything.
//
// Bucket "monitor_costs". A request's cost is queued (costQueue) and rides
// the next commit of the chats' store (CarryCosts), which is the commit of
// the turn that made the request, so a lone turn pays no fsync of its own
// for it and the cost is durable with the turn's end; what no commit carries
// within costFlushDelay is committed by the monitor itself. Unlike the
// rollups it is never held for a minute: a budget must see every request,
// also across a restart, and CheckBudget reads the queue too. Keys:
//
//	'd' DAY MODEL            all chats' requests to a model on a day
//	'c' CHAT 0x00 DAY MODEL  one chat's requests to a model on a day
//	'p' PERSON 0x00 DAY MODEL  one person's requests (whom the turn was billed to)
//
// DAY is the unix seconds of the UTC day's start, 8 bytes big endian. A
// request that names no person (no people kept, or no chat) has no 'p'
// key. The cost is summed as it is recorded, at
// the prices then in force, so changing a price does not rewrite the past.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mirror-gateway/mirror/config"
	bolt "go.etcd.io/bbolt"
)

var bucketCosts = []byte("monitor_costs")

const day = 24 * time.Hour

// Spend is what a set of requests billed and cost.
type Spend struct {
	Requests int64   `json:"requests"`
	In       int64   `json:"input_tokens"`  // every input token, cached included
	Cached   int64   `json:"cached_tokens"` // input tokens read from the cache
	Out      int64   `json:"output_tokens"`
	Cost     float64 `json:"cost"`
}

func (s *Spend) add(o Spend) {
	s.Requests += o.Requests
	s.In += o.In
	s.Cached += o.Cached
	s.Out += o.Out
	s.Cost += o.Cost
}

// RecordCost adds one request's billed usage for chat ("" for a request no
// chat made) and model (a configured model name) to the ledger, priced by
// the model's prices, and returns the cost. A request billed nothing is not
// recorded.
func (m *Monitor) RecordCost(chat, model string, in, out, cached int) (float64, error) {
	return m.RecordCostBy(chat, "", model, in, out, cached)
}

// RecordCostBy is RecordCost billed to person too (their id; "" for
// none), so the Monitor shows what each person spent.
func (m *Monitor) RecordCostBy(chat, person, model string, in, out, cached int) (float64, error) {
	if m == nil || in+out+cached <= 0 {
		return 0, nil
	}
	cached = min(max(cached, 0), max(in, 0))
	s := Spend{Requests: 1, In: int64(max(in, 0)), Cached: int64(cached), Out: int64(max(out, 0))}
	s.Cost = m.prices[model].Cost(in, out, cached)
	d := dayOf(m.now())
	m.costs.add(m, costKeys(chat, person, d, model), s)
	return s.Cost, nil
}

// costKeys are the ledger keys one request of chat billed to person adds
// to on day d: all chats', the chat's, and the person's when there is one.
func costKeys(chat, person string, d time.Time, model string) [][]byte {
	keys := [][]byte{costKey('d', "", d, model), costKey('c', chat, d, model)}
	if person != "" {
		keys = append(keys, costKey('p', person, d, model))
	}
	return keys
}

// PeopleCost is what each person's requests cost on the UTC day of d, by
// person id, every model summed.
func (m *Monitor) PeopleCost(d time.Time) (map[string]Spend, error) {
	out := map[string]Spend{}
	if m == nil {
		return out, nil
	}
	want := uint64(max(dayOf(d).Unix(), 0))
	if err := m.flushCosts(); err != nil {
		return out, err
	}
	err := m.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketCosts).Cursor()
		for k, v := c.Seek([]byte{'p'}); len(k) > 0 && k[0] == 'p'; k, v = c.Next() {
			i := bytes.IndexByte(k, 0)
			if i < 0 || len(k) < i+9 || binary.BigEndian.Uint64(k[i+1:]) != want {
				continue
			}
			s, err := readSpend(k, v)
			if err != nil {
				return err
			}
			id := string(k[1:i])
			cur := out[id]
			cur.add(s)
			out[id] = cur
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("monitor: read cost: %w", err)
	}
	return out, nil
}

// ChatCost is the body of GET /api/chats/{id}/cost: a chat's spending today
// and in all, and per UTC day and model, newest day first.
type ChatCost struct {
	Chat  string    `json:"chat"`
	Today Spend     `json:"today"`
	Total Spend     `json:"total"`
	Days  []DayCost `json:"days"`
	// Budget is the chat's daily budget, the tighter of limits.daily_budget
	// and limits.chat_daily_budget; 0 when there is none.
	Budget float64 `json:"budget"`
}

// DayCost is one model's spending in one UTC day.
type DayCost struct {
	Day   time.Time `json:"day"`
	Model string    `json:"model"`
	Spend
}

// ChatCost reads chat's ledger.
func (m *Monitor) ChatCost(chat string) (ChatCost, error) {
	out := ChatCost{Chat: chat, Days: []DayCost{}, Budget: m.chatBudget()}
	today := dayOf(m.now())
	if err := m.flushCosts(); err != nil {
		return ChatCost{}, err
	}
	err := m.db.View(func(tx *bolt.Tx) error {
		prefix := chatPrefix(chat)
		c := tx.Bucket(bucketCosts).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			rest := k[len(prefix):]
			if len(rest) < 8 {
				continue
			}
			s, err := readSpend(k, v)
			if err != nil {
				return err
			}
			d := time.Unix(int64(binary.BigEndian.Uint64(rest)), 0).UTC()
			out.Days = append(out.Days, DayCost{Day: d, Model: string(rest[8:]), Spend: s})
			out.Total.add(s)
			if d.Equal(today) {
				out.Today.add(s)
			}
		}
		return nil
	})
	if err != nil {
		return ChatCost{}, fmt.Errorf("monitor: read cost: %w", err)
	}
	sort.SliceStable(out.Days, func(i, j int) bool { return out.Days[i].Day.After(out.Days[j].Day) })
	return out, nil
}

// SpendingLimitError refuses a turn: a daily budget is spent.
type SpendingLimitError struct {
	Scope  string  // "all chats" or "this chat"
	Limit  float64 // the budget
	Spent  float64 // what the day has cost so far
	Resets time.Time
}

func (e *SpendingLimitError) Error() string {
	who := ""
	if e.Scope == ScopeChat {
		who = " for this chat"
	}
	return fmt.Sprintf("today's spending limit%s of $%.2f is reached ($%.2f spent); it resets at %s UTC",
		who, e.Limit, e.Spent, e.Resets.UTC().Format("15:04"))
}

// The scopes of a SpendingLimitError.
const (
	ScopeAll  = "all chats"
	ScopeChat = "this chat"
)

// ErrSpendingLimit matches every *SpendingLimitError with errors.Is.
var ErrSpendingLimit = errors.New("spending limit reached")

// Is makes errors.Is(err, ErrSpendingLimit) true.
func (e *SpendingLimitError) Is(target error) bool { return target == ErrSpendingLimit }

// CheckBudget returns a *SpendingLimitError when today's spending of all
// chats reached limits.daily_budget or chat's reached
// limits.chat_daily_budget, nil otherwise. A turn checks it before it sends
// anything; the budget resets at 00:00 UTC.
func (m *Monitor) CheckBudget(chat string) error {
	if m == nil || (m.dailyBudget <= 0 && m.chatDailyBudget <= 0) {
		return nil
	}
	d := dayOf(m.now())
	// What is queued first, then the stored sums: a cost committed in
	// between is counted twice for that instant (a budget errs towards
	// refusing), never missed.
	all := m.costs.sum(costKey('d', "", d, ""))
	mine := m.costs.sum(costKey('c', chat, d, ""))
	err := m.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCosts)
		if m.dailyBudget > 0 {
			v, err := sumCost(b, costKey('d', "", d, ""))
			if err != nil {
				return err
			}
			all += v
		}
		if m.chatDailyBudget > 0 {
			v, err := sumCost(b, costKey('c', chat, d, ""))
			if err != nil {
				return err
			}
			mine += v
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("monitor: read cost: %w", err)
	}
	switch {
	case m.dailyBudget > 0 && all >= m.dailyBudget:
		return &SpendingLimitError{Scope: ScopeAll, Limit: m.dailyBudget, Spent: all, Resets: d.Add(day)}
	case m.chatDailyBudget > 0 && mine >= m.chatDailyBudget:
		return &SpendingLimitError{Scope: ScopeChat, Limit: m.chatDailyBudget, Spent: mine, Resets: d.Add(day)}
	}
	return nil
}

// chatBudget is the tighter of the two daily budgets that apply to a chat;
// 0 when neither is set.
func (m *Monitor) chatBudget() float64 {
	b := math.Inf(1)
	for _, v := range []float64{m.dailyBudget, m.chatDailyBudget} {
		if v > 0 {
			b = min(b, v)
		}
	}
	if math.IsInf(b, 1) {
		return 0
	}
	return b
}

// CostSeries is one model's cost per day, on Aggregates.Days.
type CostSeries struct {
	Model string    `json:"model"`
	Cost  []float64 `json:"cost"`
}

// costsPerDay reads every model's cost on each of days (UTC day starts).
func costsPerDay(tx *bolt.Tx, days []int64) ([]CostSeries, error) {
	byModel := map[string]*CostSeries{}
	b := tx.Bucket(bucketCosts)
	for i, d := range days {
		prefix := costKey('d', "", time.Unix(d, 0), "")
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			s, err := readSpend(k, v)
			if err != nil {
				return nil, err
			}
			model := string(k[len(prefix):])
			cs := byModel[model]
			if cs == nil {
				cs = &CostSeries{Model: model, Cost: make([]float64, len(days))}
				byModel[model] = cs
			}
			cs.Cost[i] += s.Cost
		}
	}
	out := []CostSeries{}
	for _, k := range sortedKeys(byModel) {
		out = append(out, *byModel[k])
	}
	return out, nil
}

func sumCost(b *bolt.Bucket, prefix []byte) (float64, error) {
	var sum float64
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		s, err := readSpend(k, v)
		if err != nil {
			return 0, err
		}
		sum += s.Cost
	}
	return sum, nil
}

func readSpend(k, v []byte) (Spend, error) {
	var s Spend
	if v == nil {
		return s, nil
	}
	if err := json.Unmarshal(v, &s); err != nil {
		return s, fmt.Errorf("cost %q: %w", k, err)
	}
	return s, nil
}

func dayOf(t time.Time) time.Time { return t.UTC().Truncate(day) }

func chatPrefix(chat string) []byte {
	k := append([]byte{'c'}, chat...)
	return append(k, 0)
}

// costKey is kind's key of owner (a chat or a person; "" for 'd'), the day of d and
// model; with model "" it is the prefix of that day's keys.
func costKey(kind byte, owner string, d time.Time, model string) []byte {
	var k []byte
	if kind == 'd' {
		k = []byte{'d'}
	} else {
		k = append([]byte{kind}, owner...)
		k = append(k, 0)
	}
	k = binary.BigEndian.AppendUint64(k, uint64(max(dayOf(d).Unix(), 0)))
	return append(k, model...)
}

// pricesOf indexes the configured models' prices by name.
func pricesOf(cfg *config.Config) map[string]config.Prices {
	p := map[string]config.Prices{}
	for _, md := range cfg.Models {
		p[md.Name] = md.Prices
	}
	return p
}

// costFlushDelay is how long a queued cost waits for a commit of the
// chats' store to carry it before the monitor commits it itself.
const costFlushDelay = 100 * time.Millisecond

// costQueue holds the costs recorded and not yet committed: pending, and
// flight (taken by a commit under way). Costs add up per ledger key.
type costQueue struct {
	mu      sync.Mutex
	settled sync.Cond // flight went back to nil; L is &mu (Open)
	pending map[string]Spend
	flight  map[string]Spend
	timer   *time.Timer
	closed  bool
}

// add queues s under each of keys; the monitor commits it after
// costFlushDelay unless a commit of the store carries it first. Once the
// monitor is closed it is committed at once.
func (q *costQueue) add(m *Monitor, keys [][]byte, s Spend) {
	q.mu.Lock()
	if q.pending == nil {
		q.pending = map[string]Spend{}
	}
	for _, k := range keys {
		cur := q.pending[string(k)]
		cur.add(s)
		q.pending[string(k)] = cur
	}
	closed := q.closed
	if !closed && q.timer == nil {
		q.later(m)
	}
	q.mu.Unlock()
	if closed {
		if err := m.flushCosts(); err != nil {
			m.log.Error("cost ledger: not committed", "err", err)
		}
	}
}

// later commits the queue after costFlushDelay (m.costDelay in tests),
// unless a commit of the store carried it by then; q.mu is held.
func (q *costQueue) later(m *Monitor) {
	d := costFlushDelay
	if m.costDelay > 0 {
		d = m.costDelay
	}
	q.timer = time.AfterFunc(d, func() {
		q.mu.Lock()
		q.timer = nil
		q.mu.Unlock()
		err := m.flushCosts()
		if err != nil {
			m.log.Error("cost ledger: not committed; tried again with the next cost", "err", err)
		}
		if m.costsFlushed != nil {
			m.costsFlushed <- err
		}
	})
}

// take moves what is pending into flight, unless a commit already has a
// flight (nil then).
func (q *costQueue) take() map[string]Spend {
	if len(q.pending) == 0 || q.flight != nil {
		return nil
	}
	t := q.pending
	q.pending, q.flight = map[string]Spend{}, t
	return t
}

// settle ends a flight: committed, or put back in the queue.
func (q *costQueue) settle(m *Monitor, t map[string]Spend, committed bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !committed {
		for k, s := range t {
			cur := q.pending[k]
			cur.add(s)
			q.pending[k] = cur
		}
		if !q.closed && q.timer == nil {
			q.later(m)
		}
	}
	q.flight = nil
	q.settled.Broadcast()
}

// sum is the cost queued under keys starting with prefix.
func (q *costQueue) sum(prefix []byte) float64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	var v float64
	for _, m := range []map[string]Spend{q.pending, q.flight} {
		for k, s := range m {
			if strings.HasPrefix(k, string(prefix)) {
				v += s.Cost
			}
		}
	}
	return v
}

// CarryCosts writes the queued costs into tx, a commit of another writer
// of the same database (the chats' store runs it in each of its commits),
// and returns done, to be called with whether tx committed: if not, the
// costs go back to the queue. Nothing queued (or another commit under way
// with the queue): nil, nil.
func (m *Monitor) CarryCosts(tx *bolt.Tx) (done func(committed bool), err error) {
	if m == nil {
		return nil, nil
	}
	q := &m.costs
	q.mu.Lock()
	t := q.take()
	q.mu.Unlock()
	if t == nil {
		return nil, nil
	}
	done = func(ok bool) { q.settle(m, t, ok) }
	return done, writeCosts(tx, t)
}

// flushCosts commits the queued costs in a transaction of their own, after
// any commit carrying some has ended, so that once it returns every cost
// recorded before it is stored.
func (m *Monitor) flushCosts() error {
	if m == nil {
		return nil
	}
	q := &m.costs
	q.mu.Lock()
	for q.flight != nil {
		q.settled.Wait()
	}
	t := q.take()
	q.mu.Unlock()
	if t == nil {
		return nil
	}
	err := m.db.Update(func(tx *bolt.Tx) error { return writeCosts(tx, t) })
	q.settle(m, t, err == nil)
	if err != nil {
		return fmt.Errorf("monitor: record cost: %w", err)
	}
	return nil
}

// closeCosts commits what is queued; later costs are committed as they
// are recorded.
func (m *Monitor) closeCosts() {
	q := &m.costs
	q.mu.Lock()
	q.closed = true
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
	q.mu.Unlock()
	if err := m.flushCosts(); err != nil {
		m.log.Error("cost ledger: not committed at close", "err", err)
	}
}

// writeCosts adds t's spends to the ledger in tx, in key order.
func writeCosts(tx *bolt.Tx, t map[string]Spend) error {
	b := tx.Bucket(bucketCosts)
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cur, err := readSpend([]byte(k), b.Get([]byte(k)))
		if err != nil {
			return err
		}
		cur.add(t[k])
		data, err := json.Marshal(cur)
		if err != nil {
			return err
		}
		if err := b.Put([]byte(k), data); err != nil {
			return err
		}
	}
	return nil
}
