package tokens

import (
	"math"
	"sync"
	"testing"
)

type obs struct{ est, billed int }

func TestCalibrationCorrect(t *testing.T) {
	tests := []struct {
		name       string
		obs        []obs
		estimate   int
		want       int
		wantRatio  float64
		wantMargin float64
	}{
		{"prior", nil, 1000, 1100, 1, PriorMargin},
		{"prior rounds up", nil, 1, 2, 1, PriorMargin},
		{"zero estimate", nil, 0, 0, 1, PriorMargin},
		{"negative estimate", nil, -5, -5, 1, PriorMargin},
		// One bill replaces the prior ratio; the margin averages the prior
		// with how wrong the prior was (|1200-1000|/1200 = 1/6).
		{"first bill", []obs{{1000, 1200}}, 1000, 1360, 1.2, (PriorMargin + 1.0/6) / 2},
		// Exact bills: the ratio stays 1 and the margin decays toward its floor.
		{"steady", repeat(obs{1000, 1000}, 60), 1000, 1020, 1, MinMargin},
		{"steady high", repeat(obs{1000, 1300}, 60), 1000, 1326, 1.3, MinMargin},
		// Nonsense is ignored.
		{"billed zero", []obs{{1000, 0}}, 1000, 1100, 1, PriorMargin},
		{"estimated zero", []obs{{0, 900}}, 1000, 1100, 1, PriorMargin},
		// A bill 100× the estimate is clamped to MaxRatio; the margin to MaxMargin.
		{"crazy high", []obs{{10, 1000}}, 1000, 6000, MaxRatio, MaxMargin},
		{"crazy low", []obs{{1000, 1}}, 1000, 375, MinRatio, MaxMargin},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c Calibration
			for _, o := range tc.obs {
				c.Observe("m", o.est, o.billed)
			}
			ratio, margin, n := c.Factors("m")
			if n != countValid(tc.obs) {
				t.Errorf("observations = %d, want %d", n, countValid(tc.obs))
			}
			if math.Abs(ratio-tc.wantRatio) > 1e-9 || math.Abs(margin-tc.wantMargin) > 1e-9 {
				t.Errorf("factors = %v, %v; want %v, %v", ratio, margin, tc.wantRatio, tc.wantMargin)
			}
			if got := c.Correct("m", tc.estimate); got != tc.want {
				t.Errorf("Correct(%d) = %d, want %d", tc.estimate, got, tc.want)
			}
			// Other models keep the prior.
			if got := c.Correct("other", 1000); got != 1100 {
				t.Errorf("other model Correct = %d, want 1100", got)
			}
		})
	}
}

func repeat[T any](v T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func countValid(list []obs) int {
	n := 0
	for _, o := range list {
		if o.est > 0 && o.billed > 0 {
			n++
		}
	}
	return n
}

// A model whose bills wander gets a wider margin than a steady one, and a
// change in the bills (a new tokenizer behind the same name) is learned
// within a few requests.
func TestCalibrationAdapts(t *testing.T) {
	var c Calibration
	for i := range 40 {
		c.Observe("steady", 1000, 1100)
		billed := 900
		if i%2 == 0 {
			billed = 1300
		}
		c.Observe("noisy", 1000, billed)
	}
	_, steady, _ := c.Factors("steady")
	_, noisy, _ := c.Factors("noisy")
	if noisy <= steady+0.1 {
		t.Errorf("noisy margin %.3f not above steady margin %.3f", noisy, steady)
	}
	for range 15 {
		c.Observe("steady", 1000, 2000)
	}
	if r, _, _ := c.Factors("steady"); math.Abs(r-2) > 0.05 {
		t.Errorf("ratio after the change = %.3f, want about 2", r)
	}
	// Never below the estimate × ratio, never absurd.
	if got := c.Correct("steady", math.MaxInt/2); got <= 0 {
		t.Errorf("huge estimate corrected to %d", got)
	}
}

func TestCalibrationConcurrent(t *testing.T) {
	var c Calibration
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			model := []string{"a", "b"}[g%2]
			for range 200 {
				c.Observe(model, 1000, 1100)
				c.Correct(model, 1000)
			}
		}()
	}
	wg.Wait()
	for _, m := range []string{"a", "b"} {
		if r, _, n := c.Factors(m); n != 800 || math.Abs(r-1.1) > 1e-9 {
			t.Errorf("%s: ratio %v after %d observations", m, r, n)
		}
	}
}

// Allow is Correct's inverse: the largest estimate whose correction fits.
func TestCalibrationAllow(t *testing.T) {
	for _, bills := range [][2]int{{0, 0}, {1000, 1000}, {1000, 1300}, {1000, 700}, {1000, 3999}} {
		var c Calibration
		if bills[0] > 0 {
			for range 5 {
				c.Observe("m", bills[0], bills[1])
			}
		}
		for _, room := range []int{-5, 0, 1, 7, 100, 9600, 111616, 1 << 40} {
			n := c.Allow("m", room)
			if room <= 0 {
				if n != room {
					t.Errorf("Allow(%d) = %d", room, n)
				}
				continue
			}
			if c.Correct("m", n) > room || (n+1 > 0 && c.Correct("m", n+1) <= room) {
				t.Errorf("bills %v: Allow(%d) = %d, whose correction is %d and the next %d", bills, room, n, c.Correct("m", n), c.Correct("m", n+1))
			}
		}
	}
}
