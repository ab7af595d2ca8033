package boundary

import "testing"

func TestNewLimits(t *testing.T) {
	tests := []struct {
		name             string
		window           int
		soft, hard       float64
		maxAnswer, mark  int
		wantSoft, wantHd int
	}{
		{"defaults", 128000, 0.20, 0.25, 16384, 0, 25600, 32000},
		{"mark above hard", 128000, 0.20, 0.25, 16384, 90000, 25600, 32000},
		{"mark caps hard", 128000, 0.20, 0.90, 16384, 90000, 25600, 90000},
		{"mark below soft", 128000, 0.20, 0.25, 16384, 20000, 20000, 20000},
		{"ratio above 1", 1000, 0.5, 2, 0, 0, 500, 1000},
		{"no window", 0, 0.2, 0.25, 0, 0, 0, 0},
		{"rounds down", 999, 0.2, 0.25, 0, 0, 199, 249},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLimits(tc.window, tc.soft, tc.hard, tc.maxAnswer, tc.mark)
			if l.Soft != tc.wantSoft || l.Hard != tc.wantHd || l.Window != tc.window || l.MaxAnswer != tc.maxAnswer {
				t.Errorf("NewLimits = %+v, want soft %d hard %d", l, tc.wantSoft, tc.wantHd)
			}
		})
	}
}

func TestAssessAndContextLine(t *testing.T) {
	l := NewLimits(128000, 0.20, 0.25, 16384, 0)
	tests := []struct {
		name             string
		used, fixed      int
		soft, hard, over bool
		line             string
	}{
		{"fresh", 1200, 9000, false, false, false,
			"Context: 1200 of 128000 tokens. Soft 25600: not reached. Hard 32000: not reached."},
		{"just below soft", 25599, 9000, false, false, false,
			"Context: 25599 of 128000 tokens. Soft 25600: not reached. Hard 32000: not reached."},
		{"at soft", 25600, 9000, true, false, false,
			"Context: 25600 of 128000 tokens. Soft 25600: reached. Hard 32000: not reached.\n" +
				"Finish the step you are on, then bring the handoff up to date with `handoff_update`."},
		{"at hard", 32000, 9000, true, true, false,
			"Context: 32000 of 128000 tokens. Soft 25600: reached. Hard 32000: reached.\n" +
				"Finish the step you are on, then bring the handoff up to date with `handoff_update`."},
		// 20000 is below both shares, but with 95000 of fixed prompt and
		// tools and the longest answer it cannot fit: past hard.
		{"would not fit", 20000, 95000, true, true, true,
			"Context: 20000 of 128000 tokens. Soft 25600: reached. Hard 32000: reached.\n" +
				"Finish the step you are on, then bring the handoff up to date with `handoff_update`."},
		{"fits exactly", 20000, 128000 - 16384 - 20000, false, false, false,
			"Context: 20000 of 128000 tokens. Soft 25600: not reached. Hard 32000: not reached."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := l.Assess(tc.used, tc.fixed)
			if r.SoftReached != tc.soft || r.HardReached != tc.hard || r.Overflow != tc.over {
				t.Errorf("Assess = soft %v hard %v overflow %v, want %v %v %v", r.SoftReached, r.HardReached, r.Overflow, tc.soft, tc.hard, tc.over)
			}
			if got := ContextLine(r); got != tc.line {
				t.Errorf("ContextLine:\n got %q\nwant %q", got, tc.line)
			}
		})
	}
}
