package main

import (
	"context"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The collector's pace and giving memory back (issue 20, item 2).
//
// Under load: with the default GOGC=100 the collector runs each time the
// program has allocated as much again as the heap it found live. With a
// few chats the live heap is small and a turn allocates about 90 KiB, so
// the collector ran every few hundred turns and took ~18% of the CPU. A
// floor under the heap goal (heapFloor) spaces the collections out while
// the live heap is small; it adapts GOGC to the live heap. Above ~38 MiB
// of live heap (1000 chats in memory with twenty turns each hold ~150 MiB)
// GOGC is loadGOGC: each collection marks the whole live heap, so at the
// default 100 the collector's share grew with the chats' history (13 % of
// the CPU at 1000 chats); at 150 it is about a third less, for a heap goal
// of 2.5× the live heap instead of 2× (the chats' history is held once
// less since, so the goal at 1000 chats is about where it was). A GOGC
// set in the environment is left alone.
//
// Once the load ends: the runtime returns freed pages to the system only
// slowly, and only down to the heap goal of the load; with no allocation no
// collection runs to lower it, so an idle gateway kept several times the
// memory it needs (issue 20: ~300 MiB after 1000 chats, long after the last
// turn). So when almost nothing was allocated for idleChecks checks in a
// row and the runtime holds more than idleSlack of heap memory beyond what
// is live, it collects and returns it all at once (debug.FreeOSMemory) and
// asks the kernel to drop its pages of the database mapping (pageOut: bbolt
// maps the whole file, and a load leaves tens of MiB of it resident). In
// the same idle stretch it does so again only when idleSlack more is spare
// than the last return left (the chats evicted after limits.chat_idle).
// Before returning memory it sheds the chats in memory that nobody watches
// and that did nothing for the quiet stretch (chats.Service.Shed): they
// would stay for limits.chat_idle (2 minutes by default) with their
// conversations, goroutines and buffers, and a quiet gateway reloads one
// from the store in a few milliseconds when it is used again.
const (
	memCheck   = time.Second
	idleChecks = 5         // quiet checks in a row before the memory goes back
	idleAlloc  = 256 << 10 // bytes allocated per check below which the gateway is quiet
	idleSlack  = 8 << 20   // spare heap memory worth a forced collection
	heapFloor  = 96 << 20  // the heap goal's floor while the live heap is small
	loadGOGC   = 150       // GOGC when the floor asks for less
	maxGOGC    = 1000
)

// memoryWatch holds the metrics a check reads.
type memoryWatch struct {
	samples []metrics.Sample
	lastAll uint64
	quiet   int    // quiet checks in a row
	base    uint64 // spare memory right after the last return in this quiet stretch
	freed   bool   // returned in this quiet stretch: base is set at the next check
	hasBase bool
	pace    bool // adapt GOGC (GOGC is not set in the environment)
	gogc    int  // the GOGC set last
}

func newMemoryWatch(pace bool) *memoryWatch {
	return &memoryWatch{pace: pace, gogc: 100, samples: []metrics.Sample{
		{Name: "/gc/heap/allocs:bytes"},              // allocated since start
		{Name: "/memory/classes/heap/objects:bytes"}, // live, and dead not yet swept
		{Name: "/memory/classes/heap/unused:bytes"},  // in spans, not in objects
		{Name: "/memory/classes/heap/free:bytes"},    // free, not yet returned
		{Name: "/gc/heap/live:bytes"},                // marked live by the last collection
	}}
}

// check reads the metrics and decides.
func (w *memoryWatch) check() (gogc int, free bool) {
	metrics.Read(w.samples)
	held := value(w.samples[1]) + value(w.samples[2]) + value(w.samples[3])
	return w.decide(value(w.samples[0]), held, value(w.samples[4]))
}

// decide returns the GOGC to set (0: leave it), and whether the runtime
// should return its spare memory now, given the bytes allocated since the
// start, the heap memory the runtime holds, and the heap the last
// collection found live. Spare is what it holds beyond the live heap.
func (w *memoryWatch) decide(all, held, live uint64) (gogc int, free bool) {
	spare := held - min(held, live)
	if w.pace && live > 0 {
		want := loadGOGC
		if live < heapFloor {
			want = max(want, min(maxGOGC, int(100*(heapFloor-live)/live)))
		}
		// Only a real change: each SetGCPercent is a small stop of the world.
		if want*10 < w.gogc*9 || want*10 > w.gogc*11 {
			w.gogc, gogc = want, want
		}
	}
	busy := all-w.lastAll >= idleAlloc
	w.lastAll = all
	if busy {
		w.quiet, w.freed, w.hasBase = 0, false, false
		return gogc, false
	}
	w.quiet++
	if w.freed { // what a return leaves (fragmentation) is not returned again
		w.base, w.hasBase, w.freed = spare, true, false
		return gogc, false
	}
	if w.quiet < idleChecks || spare < idleSlack || w.hasBase && spare < w.base+idleSlack {
		return gogc, false
	}
	w.freed = true
	return gogc, true
}

func value(s metrics.Sample) uint64 {
	if s.Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s.Value.Uint64()
}

// watchMemory runs the watcher until ctx ends; db is the database file,
// whose mapped pages go back too (pageOut), with those of the search index
// beside it (bleve maps its segments); shed, when not nil, unloads
// the chats idle for at least the given time, before memory goes back.
func watchMemory(ctx context.Context, db string, shed func(quiet time.Duration)) {
	w := newMemoryWatch(os.Getenv("GOGC") == "")
	if p, err := filepath.EvalSymlinks(db); err == nil {
		db = p // as /proc/self/maps names it
	}
	if p, err := filepath.Abs(db); err == nil {
		db = p
	}
	index := filepath.Join(filepath.Dir(db), "search")
	t := time.NewTicker(memCheck)
	defer t.Stop()
	for {
		if gogc, free := w.check(); gogc > 0 || free {
			if gogc > 0 {
				debug.SetGCPercent(gogc)
			}
			if free {
				if shed != nil {
					shed(idleChecks * memCheck)
				}
				debug.FreeOSMemory()
				pageOut(db)
				pageOut(index)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
