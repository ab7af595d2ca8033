package tokens

import (
	"math"
	"sync"
)

// Calibration learns, per model, how the local estimate relates to what the
// provider bills, and corrects the next estimate with it. A local count is
// only an estimate: the provider wraps messages and tools in its own format,
// and a non-OpenAI model uses another tokenizer. Two numbers are learned:
//
//   - the ratio billed/estimated, an exponential moving average;
//   - the margin, a moving average of how far the corrected estimate was
//     from the bill, relative to the bill (its absolute relative error).
//
// Correct returns estimate × ratio × (1 + margin), so a model whose bills
// wander gets more room than one whose bills are steady. Before the first
// bill of a model the prior is ratio 1 and margin PriorMargin.
//
// The zero value is ready to use; it is safe for concurrent use and meant
// to live as long as the process (one per gateway, shared by every chat).
type Calibration struct {
	mu     sync.Mutex
	models map[string]*calibration
}

// Calibration constants.
const (
	// PriorMargin is the margin before any bill has been seen: tiktoken is
	// within a few percent for OpenAI models and within about ten for
	// others, so ten percent keeps an uncalibrated model safe.
	PriorMargin = 0.10
	// MinRatio and MaxRatio bound one observation. A bill that far from the
	// estimate is not the same request counted differently (a retry, a bill
	// with a cached prefix counted twice, a bug); it is clamped so one bad
	// number cannot make every later estimate absurd.
	MinRatio = 0.25
	MaxRatio = 4
	// MinMargin keeps a little room even for a model whose bills have matched
	// the correction exactly: the next request is never the same request.
	MinMargin = 0.02
	// MaxMargin caps the margin: past it the limits would trip on noise.
	MaxMargin = 0.50
	// alpha is the weight of a new observation once a model has a history,
	// about the last ten bills. The first observations are averaged plainly
	// (weight 1/n), so the first bill replaces the prior ratio at once
	// rather than being diluted by it.
	alpha = 0.2
)

type calibration struct {
	ratio, margin float64
	n             int // observations so far
}

// Observe learns from one request: estimated is the local count of what was
// sent, billed the input tokens the provider reported for it. Observations
// with a non-positive side are ignored (a provider that reports no usage
// says 0, which teaches nothing).
func (c *Calibration) Observe(model string, estimated, billed int) {
	if estimated <= 0 || billed <= 0 {
		return
	}
	r := clamp(float64(billed)/float64(estimated), MinRatio, MaxRatio)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.models == nil {
		c.models = make(map[string]*calibration)
	}
	m := c.models[model]
	if m == nil {
		m = &calibration{ratio: 1, margin: PriorMargin}
		c.models[model] = m
	}
	// How wrong the correction in force was, judged before learning from
	// this bill: that is the error the next estimate is exposed to. The
	// ratio is clamped, so this relative error is at most MaxRatio/MinRatio.
	predicted := float64(estimated) * m.ratio
	relErr := math.Abs(float64(billed)-predicted) / float64(billed)
	m.n++
	w := math.Max(alpha, 1/float64(m.n))
	m.ratio += w * (r - m.ratio)
	// The prior margin counts as one observation: one lucky bill must not
	// drop the margin to its floor.
	wm := math.Max(alpha, 1/float64(m.n+1))
	m.margin = clamp(m.margin+wm*(relErr-m.margin), MinMargin, MaxMargin)
}

// Correct returns estimated corrected for model: estimated × ratio ×
// (1 + margin), rounded up. A non-positive estimate is returned as it is.
func (c *Calibration) Correct(model string, estimated int) int {
	if estimated <= 0 {
		return estimated
	}
	ratio, margin, _ := c.Factors(model)
	v := math.Ceil(float64(estimated) * ratio * (1 + margin))
	if v >= 1<<62 { // beyond any window; int conversion would overflow
		return math.MaxInt
	}
	return int(v)
}

// Factors reports what Correct applies for model and how many bills it was
// learned from (0: the prior). For diagnostics and tests.
func (c *Calibration) Factors(model string) (ratio, margin float64, observations int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.models[model]; m != nil {
		return m.ratio, m.margin, m.n
	}
	return 1, PriorMargin, 0
}

func clamp(v, lo, hi float64) float64 {
	switch {
	case math.IsNaN(v):
		return lo
	case v < lo:
		return lo
	case v > hi:
		return hi
	}
	return v
}

// Allow is the inverse of Correct: the largest local estimate whose
// correction for model is at most corrected. A caller that compares local
// counts (the per-request safety net) against a room measured in billed
// tokens uses it to size the room, so it trims to the same figure Correct
// would check. A non-positive room is returned as it is.
func (c *Calibration) Allow(model string, corrected int) int {
	if corrected <= 0 {
		return corrected
	}
	ratio, margin, _ := c.Factors(model)
	n := int(math.Floor(float64(corrected) / (ratio * (1 + margin))))
	for n > 0 && c.Correct(model, n) > corrected { // float rounding at the edge
		n--
	}
	return n
}
