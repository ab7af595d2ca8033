package chats

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats/barecommit"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/provider"
	bolt "go.etcd.io/bbolt"
)

// turnEnds is a subscriber that says when each turn of its chat ended.
type turnEnds chan struct{}

func (e turnEnds) Deliver(d Delivery) {
	if d.Event != nil && d.Event.Type == EvTurnFinished {
		e <- struct{}{}
	}
}

// instant is a model that answers at once, as many times as asked.
type instant struct{}

func (instant) Stream(ctx context.Context, req provider.Request, emit func(provider.Delta) error) (provider.Result, error) {
	if err := emit(provider.Delta{Text: "an answer"}); err != nil {
		return provider.Result{}, err
	}
	return provider.Result{Text: "an answer", Usage: provider.Usage{InputTokens: 10, OutputTokens: 2}}, nil
}

// BenchmarkLoneTurn is one chat's turns one after another (issue 20, item
// 5): a message sent with a client_id by a subscriber, answered at once by
// the model, and the commit that stores it all. It reports ns per turn and
// the bbolt pages each turn writes (the commit's cost beyond its fsync),
// and its p50 against a bare bbolt commit's on the same disk in the same
// run (barecommit, before and after the turns).
func BenchmarkLoneTurn(b *testing.B) {
	// The turn ends well within PickupDelay: one commit per turn.
	svc, db, done := instantService(b, time.Minute)
	defer done()
	ends := make(turnEnds, 1)
	var chat string
	turn := func(i int) {
		if _, err := svc.Send(bg, chat, "a question of a few words, number "+strconv.Itoa(i), "k"+strconv.Itoa(i), "", Origin{Sub: ends}); err != nil {
			b.Fatal(err)
		}
		select {
		case <-ends:
		case <-time.After(wait):
			b.Fatal("the turn did not end")
		}
	}
	// Each chat takes perChat turns, after a few of history that create
	// its buckets: what a turn costs stays that of a short chat, however
	// many turns the benchmark runs.
	const perChat, history = 200, 20
	newChat := func() {
		c, err := svc.Create(bg, "lone", "", Origin{})
		if err != nil {
			b.Fatal(err)
		}
		chat = c.ID
		if err := svc.Open(bg, chat, nil, ends, ""); err != nil {
			b.Fatal(err)
		}
		for i := range history {
			turn(-i - 1)
		}
	}
	bare := barecommit.Measure(b, b.TempDir(), 100)
	var pages int64
	var took []time.Duration
	n := 0
	for b.Loop() {
		if n%perChat == 0 {
			b.StopTimer()
			newChat()
			b.StartTimer()
		}
		before, t0 := pagesWritten(db), time.Now()
		turn(n)
		took = append(took, time.Since(t0))
		pages += pagesWritten(db) - before
		n++
	}
	b.StopTimer()
	bare = append(bare, barecommit.Measure(b, b.TempDir(), 100)...)
	slices.Sort(bare)
	slices.Sort(took)
	b.ReportMetric(float64(pages)/float64(n), "pages/turn")
	b.ReportMetric(float64(took[n/2].Microseconds()), "p50_us")
	b.ReportMetric(float64(bare[len(bare)/2].Microseconds()), "bare_us")
	b.ReportMetric(float64(took[n/2])/float64(bare[len(bare)/2]), "ratio")
}

// pagesWritten is how many pages db's commits have written so far.
func pagesWritten(db *bolt.DB) int64 {
	st := db.Stats()
	return st.TxStats.GetWrite()
}

// instantService is a service on a new database whose model answers at
// once (instant), its chats kept for idle; done closes the service (the
// store and database close when the benchmark ends).
func instantService(b *testing.B, idle time.Duration) (svc *Service, db *bolt.DB, done func()) {
	store := openTestStore(b, filepath.Join(b.TempDir(), "m.db"))
	eng, err := runtime.NewEngine([]*runtime.Model{{Name: "m", Provider: instant{}, Remote: "fake", Window: 128000}},
		map[string][]string{"default": {"m"}}, config.Roles{Chat: "default", Reflect: "default"}, 4)
	if err != nil {
		b.Fatal(err)
	}
	svc = New(Options{Store: store, Turner: eng, Idle: idle, PickupDelay: wait})
	return svc, store.db, func() { svc.Close(bg) }
}
