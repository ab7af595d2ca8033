package chats

import (
	"os"
	goruntime "runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"sync"
	"testing"
	"time"
)

// BenchmarkHeldPerTurn is the memory chats in memory hold for their
// conversations, and what the collector pays for it (issue 20, item 1:
// the collector marks the live heap on every cycle, so what a chat holds
// per message is paid again each cycle). It runs chats×turns turns
// through the actor and the runtime with an instant model, collects
// twice, and reports per turn of history (a user message, its runtime
// context and the answer): the live heap (held_B), the part of it the
// collector scans for pointers (scan_B), and the live objects (objects).
// Then every chat takes more turns, and it reports what the collector pays
// for them: with GOGC=100 a cycle comes each time as much is allocated as
// the heap, stacks and globals it found live, and marks what of them it
// must scan, so marking per turn is the bytes a turn allocates (alloc_B)
// times scannable/live (scan_ratio): gc_scan_B/turn, which does not
// depend on how busy the machine is. The cycles the turns took (per 1000
// turns) and the collector's share of the process's CPU (gc_share, the
// runtime's estimate, noisy) are reported as measured.
// MIRROR_HELD_PROFILE=FILE writes a heap profile of what the chats hold.
func BenchmarkHeldPerTurn(b *testing.B) {
	const chats, turns, more = 300, 22, 8
	if os.Getenv("MIRROR_HELD_PROFILE") != "" {
		goruntime.MemProfileRate = 1 // every allocation, for the profile
	}
	for b.Loop() {
		r := heldPerTurn(b, chats, turns, more)
		b.ReportMetric(r.held, "held_B/turn")
		b.ReportMetric(r.scan, "scan_B/turn")
		b.ReportMetric(r.objects, "objects/turn")
		b.ReportMetric(r.cycles, "cycles/kturn")
		b.ReportMetric(r.ratio, "scan_ratio")
		b.ReportMetric(r.alloc, "alloc_B/turn")
		b.ReportMetric(r.ratio*r.alloc, "gc_scan_B/turn")
		b.ReportMetric(r.gcShare, "gc_share")
	}
}

type heldResult struct {
	held, scan, objects float64 // per turn of history
	ratio               float64 // scannable of the live heap, stacks and globals, after it
	alloc, cycles       float64 // of the turns after it
	gcShare             float64
}

func heldPerTurn(b *testing.B, chats, turns, more int) heldResult {
	b.StopTimer()
	defer b.StartTimer()
	svc, _, done := instantService(b, time.Hour)
	defer done()
	ids := make([]string, chats)
	ends := make([]turnEnds, chats)
	for c := range ids {
		ch, err := svc.Create(bg, "held "+strconv.Itoa(c), "", Origin{})
		if err != nil {
			b.Fatal(err)
		}
		ids[c], ends[c] = ch.ID, make(turnEnds, 1)
		if err := svc.Open(bg, ch.ID, nil, ends[c], ""); err != nil {
			b.Fatal(err)
		}
	}
	// round has every chat take turns [from, to), the chats side by side.
	round := func(from, to int) {
		var wg sync.WaitGroup
		errs := make(chan error, chats)
		for c := range ids {
			wg.Go(func() {
				for i := from; i < to; i++ {
					text := "a question of a few words, from chat " + strconv.Itoa(c) + ", number " + strconv.Itoa(i)
					if _, err := svc.Send(bg, ids[c], text, "k"+strconv.Itoa(i), "", Origin{Sub: ends[c]}); err != nil {
						errs <- err
						return
					}
					select {
					case <-ends[c]:
					case <-time.After(wait):
						errs <- errTimeout
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
	}
	before := readMetrics(true)
	b.StartTimer()
	round(0, turns)
	b.StopTimer()
	after := readMetrics(true)
	if f := os.Getenv("MIRROR_HELD_PROFILE"); f != "" {
		// The live heap then, by where it was allocated.
		if w, err := os.Create(f); err == nil {
			_ = pprof.Lookup("heap").WriteTo(w, 0)
			w.Close()
		}
	}
	n := float64(chats * turns)
	r := heldResult{held: (after[mLive] - before[mLive]) / n, scan: (after[mScanHeap] - before[mScanHeap]) / n,
		objects: (after[mObjects] - before[mObjects]) / n}
	r.ratio = after[mScanTotal] / (after[mLive] + after[mScanStack] + after[mScanGlobals])

	start := readMetrics(false)
	b.StartTimer()
	round(turns, turns+more)
	b.StopTimer()
	end := readMetrics(false)
	n = float64(chats * more)
	cycles := end[mCycles] - start[mCycles]
	r.cycles = cycles * 1000 / n
	r.alloc = (end[mAllocs] - start[mAllocs]) / n
	gc := end[mGC] - start[mGC] - (end[mGCIdle] - start[mGCIdle])
	if used := end[mTotal] - start[mTotal] - (end[mIdle] - start[mIdle]); used > 0 {
		r.gcShare = gc / used
	}
	return r
}

// The metrics readMetrics reads, by index.
const (
	mLive = iota
	mScanHeap
	mObjects
	mCycles
	mScanTotal
	mScanStack
	mScanGlobals
	mAllocs
	mGC
	mGCIdle
	mTotal
	mIdle
)

var metricNames = [...]string{
	mLive:        "/gc/heap/live:bytes",
	mScanHeap:    "/gc/scan/heap:bytes",
	mObjects:     "/gc/heap/objects:objects",
	mCycles:      "/gc/cycles/total:gc-cycles",
	mScanTotal:   "/gc/scan/total:bytes",
	mScanStack:   "/gc/scan/stack:bytes",
	mScanGlobals: "/gc/scan/globals:bytes",
	mAllocs:      "/gc/heap/allocs:bytes",
	mGC:          "/cpu/classes/gc/total:cpu-seconds",
	mGCIdle:      "/cpu/classes/gc/mark/idle:cpu-seconds",
	mTotal:       "/cpu/classes/total:cpu-seconds",
	mIdle:        "/cpu/classes/idle:cpu-seconds",
}

// readMetrics reads metricNames, after collecting twice when collect is
// set (the second finishes the sweep of the first), so the heap's
// figures are what is live.
func readMetrics(collect bool) [len(metricNames)]float64 {
	if collect {
		goruntime.GC()
		goruntime.GC()
	}
	s := make([]metrics.Sample, len(metricNames))
	for i, name := range metricNames {
		s[i].Name = name
	}
	metrics.Read(s)
	var v [len(metricNames)]float64
	for i := range s {
		switch s[i].Value.Kind() {
		case metrics.KindUint64:
			v[i] = float64(s[i].Value.Uint64())
		case metrics.KindFloat64:
			v[i] = s[i].Value.Float64()
		}
	}
	return v
}

// errTimeout is a turn that did not end in time.
var errTimeout = errorString("the turn did not end")

type errorString string

func (e errorString) Error() string { return string(e) }
