package main

import (
	"testing"
)

// TestMemoryWatch: the collector's pace follows the live heap (a floor
// under the heap goal while it is small, loadGOGC above), and memory goes
// back after idleChecks quiet checks when enough is spare, and again in the
// same quiet stretch only when that much more is spare than it left.
func TestMemoryWatch(t *testing.T) {
	const MiB = 1 << 20
	type step struct {
		alloc, held, live uint64 // alloc: bytes allocated since the previous check
		gogc              int
		free              bool
	}
	quiet := func(held, live uint64, free bool) step { return step{0, held, live, 0, free} }
	tests := []struct {
		name  string
		pace  bool
		steps []step
	}{
		{"small live heap: goal raised to the floor", true, []step{
			{100 * MiB, 60 * MiB, 24 * MiB, 300, false},     // (96-24)/24
			{100 * MiB, 60 * MiB, 25 * MiB, 0, false},       // 284: within 10%, left alone
			{100 * MiB, 120 * MiB, 40 * MiB, 150, false},    // (96-40)/40 = 140 < loadGOGC
			{100 * MiB, 320 * MiB, 150 * MiB, 0, false},     // past the floor: loadGOGC still
			{100 * MiB, 120 * MiB, 30 * MiB, 220, false},    // (96-30)/30
			{100 * MiB, 120 * MiB, 1 * MiB, maxGOGC, false}, // capped
		}},
		{"GOGC from the environment is left alone", false, []step{
			{100 * MiB, 60 * MiB, 24 * MiB, 0, false},
		}},
		{"idle: memory goes back once, after the quiet checks", false, []step{
			{100 * MiB, 80 * MiB, 20 * MiB, 0, false}, // busy
			quiet(80*MiB, 20*MiB, false),
			quiet(80*MiB, 20*MiB, false),
			quiet(80*MiB, 20*MiB, false),
			quiet(80*MiB, 20*MiB, false),
			quiet(80*MiB, 20*MiB, true),               // the fifth quiet check
			quiet(80*MiB, 20*MiB, false),              // not again in the same stretch
			{idleAlloc, 80 * MiB, 20 * MiB, 0, false}, // busy again
			quiet(80*MiB, 20*MiB, false),
			quiet(80*MiB, 20*MiB, false),
			quiet(80*MiB, 20*MiB, false),
			quiet(80*MiB, 20*MiB, false),
			quiet(80*MiB, 20*MiB, true),
		}},
		{"idle with little spare: nothing to do", false, []step{
			{100 * MiB, 22 * MiB, 20 * MiB, 0, false},
			quiet(22*MiB, 20*MiB, false),
			quiet(22*MiB, 20*MiB, false),
			quiet(22*MiB, 20*MiB, false),
			quiet(22*MiB, 20*MiB, false),
			quiet(22*MiB, 20*MiB, false),
			quiet(22*MiB, 20*MiB, false),
		}},
		{"a trickle below idleAlloc is quiet", false, []step{
			{100 * MiB, 80 * MiB, 20 * MiB, 0, false},
			{idleAlloc - 1, 80 * MiB, 20 * MiB, 0, false},
			{idleAlloc - 1, 80 * MiB, 20 * MiB, 0, false},
			{idleAlloc - 1, 80 * MiB, 20 * MiB, 0, false},
			{idleAlloc - 1, 80 * MiB, 20 * MiB, 0, false},
			{idleAlloc - 1, 80 * MiB, 20 * MiB, 0, true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newMemoryWatch(tt.pace)
			var all uint64
			for i, s := range tt.steps {
				all += s.alloc
				gogc, free := w.decide(all, s.held, s.live)
				if gogc != s.gogc || free != s.free {
					t.Fatalf("step %d: gogc %d, free %v; want %d, %v", i, gogc, free, s.gogc, s.free)
				}
			}
		})
	}
}
