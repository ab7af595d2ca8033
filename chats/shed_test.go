package chats

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestShedUnloadsIdleChats (issue 20, item 2): Shed unloads the chats that
// are idle and unwatched, and only those done with for the quiet time asked
// for, long before limits.chat_idle; a chat shed works again at its next
// use, its conversation read back from the store.
func TestShedUnloadsIdleChats(t *testing.T) {
	e := manageEnv(t, time.Hour) // Idle: a minute
	a, b, watched := e.chat(), e.chat(), e.chat()
	e.talk(a.ID, "first of a")
	e.talk(b.ID, "first of b")
	s := newSub()
	if err := e.svc.Open(bg, watched.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	if got := e.svc.Live(); got != 3 {
		t.Fatalf("%d chats in memory; want 3", got)
	}
	if n := e.svc.Shed(time.Hour); n != 0 {
		t.Fatalf("Shed(an hour) unloaded %d chats just used; want none", n)
	}
	if n := e.svc.Shed(0); n != 2 {
		t.Fatalf("Shed(0) unloaded %d chats; want the 2 nobody watches", n)
	}
	if got := e.svc.Live(); got != 1 {
		t.Fatalf("%d chats in memory after Shed; want the watched one", got)
	}
	e.talk(a.ID, "second of a")
	if got := e.svc.Live(); got != 2 {
		t.Fatalf("%d chats in memory; want a back, with the watched one", got)
	}
	// The conversation came back from the store: a's next view holds what
	// the watched chat's, never unloaded, holds after the same two turns.
	e.talk(watched.ID, "first of watched")
	e.talk(watched.ID, "second of watched")
	msgs := func(id string) (n int) {
		if err := e.svc.do(bg, id, func(ac *actor) error { n = len(ac.msgs); return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got, want := msgs(a.ID), msgs(watched.ID); got != want || got == 0 {
		t.Fatalf("a's conversation holds %d messages after it was shed; the watched chat's %d", got, want)
	}
	e.svc.Unsubscribe(bg, watched.ID, s)
}

// TestCommittedWritesAreLetGo: once a group of writes is committed, the
// committer keeps none of them. It reused its group's array without
// clearing it, so the writes of the last large group of a load (and every
// chat their closures named: up to 512) stayed reachable, and their memory
// never went back (issue 20, item 2). With a shed chat as the proof:
// TestShedChatIsLetGo.
func TestCommittedWritesAreLetGo(t *testing.T) {
	st := openTestStore(t, filepath.Join(t.TempDir(), "mirror.db"))

	// A first write holds the committer while ten more queue behind it,
	// so they commit as one group; a last one commits alone after them.
	// held has room for the one signal, sent whether or not the test
	// waits for it yet; hold is let go at the end whatever happens, before
	// the store closes (cleanups run last registered first).
	hold, held := make(chan struct{}), make(chan struct{}, 1)
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	t.Cleanup(release)
	first := make(chan error, 1)
	go func() {
		first <- st.Write(bg, func(*bolt.Tx) error {
			select {
			case held <- struct{}{}:
			default: // run again alone: the group is not held twice
			}
			<-hold
			return nil
		})
	}()
	within := func(what string, c <-chan struct{}) {
		t.Helper()
		select {
		case <-c:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not within 10 s", what)
		}
	}
	within("the first write runs", held)
	const n = 10
	gone := make(chan int, n)
	var wg sync.WaitGroup
	for i := range n {
		obj := new([64]byte) // what a write's closure names, as a chat's does
		runtime.AddCleanup(obj, func(i int) { gone <- i }, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := st.Write(bg, func(*bolt.Tx) error { obj[0]++; return nil }); err != nil {
				t.Error(err)
			}
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(st.writes) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d writes queued after 10 s", len(st.writes), n)
		}
		runtime.Gosched()
	}
	release()
	committed := make(chan struct{})
	go func() { wg.Wait(); close(committed) }()
	within("the group commits", committed)
	if err := <-first; err != nil { // committed before the group
		t.Fatal(err)
	}
	if err := st.Write(bg, func(*bolt.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}

	timeout := time.After(10 * time.Second)
	for got := 0; got < n; {
		runtime.GC()
		select {
		case <-gone:
			got++
		case <-timeout:
			t.Fatalf("%d of %d committed writes still reachable 10 s after their commit", n-got, n)
		case <-time.After(10 * time.Millisecond): // cleanups run on their own goroutine
		}
	}
}

// TestShedChatIsLetGo: a chat shed leaves nothing that keeps it in memory.
func TestShedChatIsLetGo(t *testing.T) {
	e := manageEnv(t, time.Hour)
	c := e.chat()
	e.talk(c.ID, "hello")
	gone := make(chan struct{})
	if err := e.svc.do(bg, c.ID, func(a *actor) error {
		runtime.AddCleanup(a, func(ch chan struct{}) { close(ch) }, gone)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n := e.svc.Shed(0); n != 1 {
		t.Fatalf("Shed(0) unloaded %d chats; want 1", n)
	}
	deadline := time.After(10 * time.Second)
	for {
		runtime.GC()
		select {
		case <-gone:
			return
		case <-deadline:
			t.Fatal("the shed chat is still reachable 10 s after Shed")
		case <-time.After(10 * time.Millisecond): // the cleanup runs on its own goroutine
		}
	}
}

// TestNewDatabaseGrowsOnce: a new database file grows to initialMap at
// once, not by doubling from 32 KiB (a remap and a synced resize inside
// each of the first turns' commits).
func TestNewDatabaseGrowsOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mirror.db")
	st := openTestStore(t, path)
	value := make([]byte, 1000)
	for i := range 200 { // about 200 KiB: four doublings from 32 KiB
		if err := st.Write(bg, func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("grow"))
			if err != nil {
				return err
			}
			return b.Put(fmt.Appendf(nil, "%04d", i), value)
		}); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != initialMap {
		t.Fatalf("the file is %d bytes after 200 KiB of writes; want %d, grown once", fi.Size(), initialMap)
	}
}

// openTestStore opens a database at path and its store, both closed when
// the test ends.
func openTestStore(t testing.TB, path string) *Store {
	t.Helper()
	db, err := OpenDB(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := NewStore(db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}
