package chats

import (
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime"
)

// BenchmarkHeldPerTurn is the memory chats in memory hold for their
// conversations (issue 20, item 1: the collector marks the live heap on
// every cycle, so what a chat holds per message is paid again each cycle).
// It runs chats×turns turns through the actor and the runtime with an
// instant model, collects twice, and reports per turn of history (a user
// message, its runtime context and the answer): the live heap (held_B),
// the part of it the collector scans for pointers (scan_B), and the live
// objects (objects). MIRROR_HELD_PROFILE=FILE writes a heap profile of
// what they hold to FILE.
func BenchmarkHeldPerTurn(b *testing.B) {
	const chats, turns = 100, 22
	if os.Getenv("MIRROR_HELD_PROFILE") != "" {
		goruntime.MemProfileRate = 1 // every allocation, for the profile
	}
	for b.Loop() {
		held, scan, objs := heldPerTurn(b, chats, turns)
		b.ReportMetric(held, "held_B/turn")
		b.ReportMetric(scan, "scan_B/turn")
		b.ReportMetric(objs, "objects/turn")
	}
}

func heldPerTurn(b *testing.B, chats, turns int) (held, scan, objs float64) {
	b.StopTimer()
	defer b.StartTimer()
	db, err := OpenDB(filepath.Join(b.TempDir(), "m.db"), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	store, err := NewStore(db)
	if err != nil {
		b.Fatal(err)
	}
	eng, err := runtime.NewEngine([]*runtime.Model{{Name: "m", Provider: instant{}, Remote: "fake", Window: 128000}},
		map[string][]string{"default": {"m"}}, config.Roles{Chat: "default", Reflect: "default"}, 4)
	if err != nil {
		b.Fatal(err)
	}
	svc := New(Options{Store: store, Turner: eng, Idle: time.Hour, PickupDelay: wait})
	defer func() {
		svc.Close(bg)
		store.Close()
		db.Close()
	}()
	before := liveHeap()
	b.StartTimer()
	var wg sync.WaitGroup
	errs := make(chan error, chats)
	for c := range chats {
		wg.Go(func() {
			ends := make(turnEnds, 1)
			ch, err := svc.Create(bg, "held "+strconv.Itoa(c), "", Origin{})
			if err == nil {
				err = svc.Open(bg, ch.ID, nil, ends, "")
			}
			for i := 0; i < turns && err == nil; i++ {
				text := "a question of a few words, from chat " + strconv.Itoa(c) + ", number " + strconv.Itoa(i)
				if _, err = svc.Send(bg, ch.ID, text, "k"+strconv.Itoa(i), "", Origin{Sub: ends}); err != nil {
					break
				}
				select {
				case <-ends:
				case <-time.After(wait):
					err = errTimeout
				}
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	after := liveHeap()
	if f := os.Getenv("MIRROR_HELD_PROFILE"); f != "" {
		// The live heap then, by where it was allocated.
		if w, err := os.Create(f); err == nil {
			_ = pprof.Lookup("heap").WriteTo(w, 0)
			w.Close()
		}
	}
	n := float64(chats * turns)
	return (after[0] - before[0]) / n, (after[1] - before[1]) / n, (after[2] - before[2]) / n
}

// errTimeout is a turn that did not end in time.
var errTimeout = errorString("the turn did not end")

type errorString string

func (e errorString) Error() string { return string(e) }

// liveHeap collects twice (the second finishes the sweep of the first)
// and reads the heap's live bytes, its scannable bytes and its objects.
func liveHeap() [3]float64 {
	goruntime.GC()
	goruntime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/heap:bytes"}, {Name: "/gc/heap/objects:objects"}}
	metrics.Read(s)
	var v [3]float64
	for i := range s {
		if s[i].Value.Kind() == metrics.KindUint64 {
			v[i] = float64(s[i].Value.Uint64())
		}
	}
	return v
}
