package view

import (
	"fmt"
	"math"
	"testing"
)

// TestStageNotesAsFmt holds the stage notes, now written without fmt, to
// the formats they were written with: the replay shows them, and its
// goldens hold them.
func TestStageNotesAsFmt(t *testing.T) {
	ints := []int{0, 1, -1, 9, 10, 255, 256, 99999, math.MaxInt, math.MinInt}
	strs := []string{"", "compact", "admission", `a "quoted" due`, "é\u2028\x00\xff", "tab\tnew\nline"}
	for _, n := range ints {
		for _, m := range ints {
			for _, s := range strs {
				for _, bl := range []bool{false, true} {
					check := func(name, got, want string) {
						t.Helper()
						if got != want {
							t.Fatalf("%s(%d, %d, %q, %v) = %q, want %q", name, n, m, s, bl, got, want)
						}
					}
					check("clearCut", clearCutNote(s, n, uint64(m)), fmt.Sprintf("%s; %d rows at or before evicted m%d", s, n, uint64(m)))
					check("context", contextNote(n, bl, s), fmt.Sprintf("%d sections; warned %v; due %q", n, bl, s))
					check("checkpoint", checkpointNote(n, s), fmt.Sprintf("history %d before; %s", n, s))
					check("preflight", preflightNote(n, m), fmt.Sprintf("least possible request %d of ceiling %d", n, m))
					check("dropped", droppedNote(n), fmt.Sprintf("%d rows dropped", n))
					check("noContext", noContextNote(s), fmt.Sprintf("no runtime context this turn; due %q", s))
					check("notDue", notDueNote(uint64(n)), fmt.Sprintf("epoch %d; no checkpoint due", uint64(n)))
					check("admission", admissionNote(s, n, bl, m), fmt.Sprintf("%ssize %d (measured %v) of ceiling %d", s, n, bl, m))
				}
			}
		}
	}
}
