package web

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/boundary"
)

// TestLimitsInNode runs static/limits.js under Node: limitsFor gives the
// soft and hard the runtime's boundary.NewLimits gives for the same shares
// and cap (so the Model details' preview never contradicts what is then
// used), the ring scales to the limit the reading is nearer to, and
// applyLimits moves a reading to saved limits. Without node it skips.
func TestLimitsInNode(t *testing.T) {
	type limCase struct {
		Window   int     `json:"window"`
		S        float64 `json:"s"`
		H        float64 `json:"h"`
		Cap      int     `json:"cap"`
		WantSoft int     `json:"want_soft"`
		WantHard int     `json:"want_hard"`
	}
	var cases []limCase
	for _, w := range []int{8000, 128000, 200000, 1_000_000, 2_000_000} {
		for _, r := range [][2]float64{{0.2, 0.25}, {0.2, 0.9}, {0.05, 0.1}, {0.5, 0.5}, {0.33, 1}, {0.7, 1.2}, {0.123, 0.456}} {
			for _, cap := range []int{0, 5000, 94873, 231200, 765000} {
				l := boundary.NewLimits(w, r[0], r[1], 0, cap)
				cases = append(cases, limCase{Window: w, S: r[0], H: r[1], Cap: cap, WantSoft: l.Soft, WantHard: l.Hard})
			}
		}
	}
	table, _ := json.Marshal(cases)
	name, limits := asModule(t, "limits")
	files := map[string][]byte{name: limits}
	script := fmt.Sprintf(`
import { limitsFor, ringScale, applyLimits } from './limits.mjs';
let bad = 0;
const check = (what, got, want) => { if (JSON.stringify(got) !== JSON.stringify(want)) { bad++; console.log(what + '\n got  ' + JSON.stringify(got) + '\n want ' + JSON.stringify(want)); } };
for (const c of %s) check('limitsFor ' + JSON.stringify(c), limitsFor(c.window, c.s, c.h, c.cap), { soft: c.want_soft, hard: c.want_hard });
// A 128k model: the conversation at 21k of hard 32k is nearer its limit
// than the request (21k of 112k): the ring is on hard, soft its tick.
const small = { used: 20583, soft: 25600, hard: 32000, request: 20583, ceiling: 111616, next_checkpoint: 94873, window: 128000 };
const s1 = ringScale(small);
check('hard basis', [s1.basis, s1.val, s1.den, s1.ticks], ['hard', 20583, 32000, [[25600, 'tick-soft']]]);
// A long tool roster: the request (100k of 112k) is nearer the ceiling.
const s2 = ringScale({ ...small, used: 4000, request: 100000 });
check('ceiling basis', [s2.basis, s2.val, s2.den, s2.ticks], ['ceiling', 100000, 111616, [[94873, 'tick-next']]]);
// No hard: the ceiling; no ceiling either: the window; nothing: null.
check('no hard', ringScale({ used: 10, request: 50, ceiling: 100 }).basis, 'ceiling');
check('window', ringScale({ used: 10, window: 100 }).den, 100);
check('nothing', ringScale({ used: 10 }), null);
check('past the limit', ringScale({ used: 50000, hard: 32000, soft: 25600 }).frac, 1);
// Saved limits move the reading: new soft, hard and ceiling, reached again.
const m = { name: 'default', soft: 10000, hard: 20000, window: 128000, budget: { ceiling: 60000, mark: 51000 } };
const moved = applyLimits({ ...small, model: 'default' }, m);
check('applied', [moved.soft, moved.hard, moved.ceiling, moved.next_checkpoint, moved.soft_reached, moved.hard_reached], [10000, 20000, 60000, 51000, true, true]);
check('other model untouched', applyLimits({ ...small, model: 'other' }, m).hard, 32000);
process.exit(bad ? 1 : 0);
`, table)
	files["run.mjs"] = []byte(script)
	runNode(t, files, "run.mjs")
}
