package chats

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkGroupTurns is 100 chats taking turns at once, each as soon as
// its previous one ended (issue 20, item 4): the store folds the chats'
// writes into group commits. It reports the bbolt pages written and the
// commits per turn: what each turn adds to a shared commit.
func BenchmarkGroupTurns(b *testing.B) {
	const chats = 100
	svc, db, done := instantService(b, time.Minute)
	defer done()
	var commits atomic.Int64
	svc.store.commitHook = func() error { commits.Add(1); return nil }
	type chat struct {
		id   string
		ends turnEnds
	}
	all := make([]chat, chats)
	turn := func(c chat, i int) {
		if _, err := svc.Send(bg, c.id, "a question of a few words, number "+strconv.Itoa(i), "k"+strconv.Itoa(i), "", Origin{Sub: c.ends}); err != nil {
			b.Error(err)
			return
		}
		select {
		case <-c.ends:
		case <-time.After(wait):
			b.Error("the turn did not end")
		}
	}
	for i := range all {
		c, err := svc.Create(bg, "group", "", Origin{})
		if err != nil {
			b.Fatal(err)
		}
		all[i] = chat{c.ID, make(turnEnds, 1)}
		if err := svc.Open(bg, c.ID, nil, all[i].ends, ""); err != nil {
			b.Fatal(err)
		}
		for j := range 5 { // a few turns of history: each chat's record has its buckets
			turn(all[i], -j-1)
		}
	}
	var left atomic.Int64
	left.Store(int64(b.N))
	pages0, commits0 := pagesWritten(db), commits.Load()
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, c := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; left.Add(-1) >= 0 && !b.Failed(); i++ {
				turn(c, i)
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(pagesWritten(db)-pages0)/float64(b.N), "pages/turn")
	b.ReportMetric(float64(commits.Load()-commits0)/float64(b.N), "commits/turn")
}
