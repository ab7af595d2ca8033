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
		// Capped hard takes soft down in proportion: 90000 × 0.20/0.90.
		{"mark caps hard", 128000, 0.20, 0.90, 16384, 90000, 20000, 90000},
		// Below soft's own share, soft stays below hard: 20000 × 0.20/0.25.
		{"mark below soft", 128000, 0.20, 0.25, 16384, 20000, 16000, 20000},
		{"mark just below hard", 128000, 0.20, 0.25, 16384, 31999, 25599, 31999},
		{"tiny mark", 128000, 0.20, 0.25, 16384, 1, 0, 1},
		{"tiny window rounds together", 10, 0.21, 0.29, 0, 0, 1, 2},
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

// Whatever the mark, soft stays below hard when the ratios put it below,
// and never above its own share.
func FuzzNewLimits(f *testing.F) {
	f.Add(128000, 0.20, 0.25, 20000)
	f.Add(8000, 0.20, 0.90, 1500)
	f.Add(1000000, 0.01, 0.02, 3)
	f.Add(10, 0.21, 0.29, 0)
	f.Fuzz(func(t *testing.T, window int, soft, hard float64, mark int) {
		if window < 0 || window > 1<<30 || !(soft > 0) || !(soft < hard) || hard > 1 {
			t.Skip()
		}
		l := NewLimits(window, soft, hard, 0, mark)
		if l.Hard > 0 && l.Soft >= l.Hard {
			t.Fatalf("soft %d not below hard %d (%+v)", l.Soft, l.Hard, l)
		}
		if l.Soft > share(window, soft) || l.Hard > share(window, hard) {
			t.Fatalf("a limit above its share: %+v", l)
		}
		if mark > 0 && l.Hard > mark {
			t.Fatalf("hard %d above the mark %d", l.Hard, mark)
		}
	})
}
