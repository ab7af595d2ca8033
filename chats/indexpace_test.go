package chats

import (
	"testing"
	"time"
)

// While chats keep changing, the index is committed once per pause, not
// once per change: a whole turn (its acceptance, pickup and answer) goes
// in one batch. A search does not wait for the pause: it cuts it short
// and finds what was committed before it.
func TestIndexPacedUnderLoadButNotForSearch(t *testing.T) {
	asked := make(chan struct{}, 64)
	fire := make(chan time.Time)
	old := indexPause
	indexPause = func(time.Duration) <-chan time.Time {
		select {
		case asked <- struct{}{}:
		default:
		}
		return fire // the pause ends only when the test says so
	}
	t.Cleanup(func() { indexPause = old })
	e := manageEnv(t, time.Hour)
	c := e.chat()

	// A search during a pause: answered from an index that has the turn.
	e.talk(c.ID, "the okapi question")
	if hits, err := e.svc.Search(bg, "okapi", 10); err != nil || len(hits) != 2 {
		t.Fatalf("search during a pause: %+v %v", hits, err)
	}

	// A turn while paused: nothing is committed to the index until the
	// pause ends, then the whole turn is, in one batch.
	ix := e.svc.manage.ix
	before := ix.commits.Load()
	e.talk(c.ID, "the zebra question")
	select {
	case <-asked:
	case <-time.After(wait):
		t.Fatal("the indexer did not pause")
	}
	if n := ix.commits.Load(); n != before {
		t.Fatalf("%d index commits during the pause", n-before)
	}
	select {
	case fire <- time.Now():
	case <-time.After(wait):
		t.Fatal("the indexer was not waiting out a pause")
	}
	eventually(t, "the turn indexed", func() bool { return ix.commits.Load() > before })
	if n := ix.commits.Load() - before; n != 1 {
		t.Fatalf("the turn took %d index commits, want 1", n)
	}
	close(fire)
	if hits, err := e.svc.Search(bg, "zebra", 10); err != nil || len(hits) != 2 {
		t.Fatalf("after the pause: %+v %v", hits, err)
	}
}
