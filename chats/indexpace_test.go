package chats

import (
	"fmt"
	"sync/atomic"
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

// Under a steady stream of turns the indexer still pauses between passes:
// what a chat commits while a pass runs waits for the next one, after the
// pause, instead of a pass going on until nothing is dirty (which under
// load committed the index tens of times a second). A search right after
// a turn still finds its text: it cuts the pause short, and one that comes
// while a pass runs waits for the pass after it.
func TestIndexPausesBetweenPassesAndSearchFindsTheLastTurn(t *testing.T) {
	var paused atomic.Bool
	asked := make(chan struct{}, 64)
	never := make(chan time.Time)
	oldPause, oldApply := indexPause, indexApplying
	indexPause = func(time.Duration) <-chan time.Time {
		if !paused.Load() {
			return nil
		}
		select {
		case asked <- struct{}{}:
		default:
		}
		return never
	}
	var armed atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	indexApplying = func() {
		if armed.CompareAndSwap(true, false) {
			entered <- struct{}{}
			<-release
		}
	}
	t.Cleanup(func() { indexPause, indexApplying = oldPause, oldApply })
	e := manageEnv(t, time.Hour)
	c := e.chat()
	if _, err := e.svc.Search(bg, "anything", 10); err != nil { // the indexer has caught up
		t.Fatal(err)
	}
	ix := e.svc.manage.ix
	hold := func() {
		t.Helper()
		select {
		case <-entered:
		case <-time.After(wait):
			t.Fatal("no pass reached the index")
		}
	}
	free := func() {
		t.Helper()
		select {
		case release <- struct{}{}:
		case <-time.After(wait):
			t.Fatal("the pass was not held")
		}
	}

	// A pass held while the next turn commits: once it ends, the indexer
	// pauses before indexing that turn.
	armed.Store(true)
	e.talk(c.ID, "the okapi question")
	hold()
	paused.Store(true)
	before := ix.commits.Load()
	e.talk(c.ID, "the zebra question")
	free()
	select {
	case <-asked:
	case <-time.After(wait):
		t.Fatal("the indexer did not pause")
	}
	if n := ix.commits.Load() - before; n != 1 {
		t.Fatalf("%d index commits before the pause, want 1 (the held pass)", n)
	}
	if hits, err := e.svc.Search(bg, "zebra", 10); err != nil || len(hits) != 2 {
		t.Fatalf("search right after the turn: %+v %v", hits, err)
	}

	// A search that comes while a pass runs, for a turn committed after
	// the pass began, gets the pass after it, not the pause.
	armed.Store(true)
	e.talk(c.ID, "the quokka question")
	first := make(chan error, 1)
	go func() {
		hits, err := e.svc.Search(bg, "quokka", 10)
		if err == nil && len(hits) != 2 {
			err = fmt.Errorf("quokka: %d hits, want 2", len(hits))
		}
		first <- err
	}()
	hold()
	e.talk(c.ID, "the wombat question")
	second := make(chan error, 1)
	go func() {
		hits, err := e.svc.Search(bg, "wombat", 10)
		if err == nil && len(hits) != 2 {
			err = fmt.Errorf("wombat: %d hits, want 2", len(hits))
		}
		second <- err
	}()
	free()
	for _, ch := range []chan error{first, second} {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(wait):
			t.Fatal("a search did not answer")
		}
	}
}
