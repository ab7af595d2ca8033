package web

import (
	"testing"
)

// TestQuotaWordsInNode runs static/quota.js's pure functions in Node (no
// browser needed): the token shorthand, the wait's words with its
// countdown, and the Chains facts of a quota row. Without node it skips.
func TestQuotaWordsInNode(t *testing.T) {
	name, quota := asModule(t, "quota")
	files := map[string][]byte{name: quota}
	script := `
import { compactTokens, waitFrom, waitText, quotaFacts } from './quota.mjs';
const cases = [
  [compactTokens(950), '950'], [compactTokens(38000), '38k'], [compactTokens(38450), '38.5k'],
  [compactTokens(2000000), '2M'], [compactTokens(1260000), '1.3M'],
];
const w = waitFrom({ quota: 40000, usage: 38000, wait_ms: 12000 }, 1000);
cases.push([waitText(w, 1000), "Waiting 12 s for the provider's tokens-per-minute quota (used 38k of 40k), then the same request continues."]);
cases.push([waitText(w, 2500), "Waiting 11 s for the provider's tokens-per-minute quota (used 38k of 40k), then the same request continues."]);
cases.push([waitText(w, 13000), "Continuing — the wait for the provider's tokens-per-minute quota (used 38k of 40k) is over."]);
cases.push([waitText(waitFrom({ quota: 0, usage: 0, wait_ms: 5000 }, 0), 0), 'Waiting 5 s for the provider, which asked to retry later, then the same request continues.']);
cases.push([waitText(waitFrom({ wait_ms: 'x' }, 0), 0).startsWith('Continuing'), true]);
const facts = quotaFacts({ quota: null, usage: 0, budget: 0, waiting: 0 });
cases.push([facts.map((f) => f[0] + '=' + f[2]).join(' '), 'quota=none yet usage=0 tokens in the last minute wait=none now']);
const active = quotaFacts({ quota: { limit: 40000, source: '429', active: true, observed_at: '2026-03-01T12:00:00Z', expires_at: '2026-03-01T12:10:00Z' },
  usage: 38000, budget: 36000, reserved: 100, waiting: 2, last_wait: { quota: 40000, usage: 38000, wait_ms: 60000, at: '2026-03-01T12:00:01Z' } }, 0);
cases.push([active[0][2], '40,000 input tokens per minute']);
cases.push([active[1][2], '38,000 tokens in the last minute of 36,000 usable (10 % headroom kept)']);
cases.push([active[2][2], '2 requests waiting now']);
let bad = 0;
for (const [got, want] of cases) if (got !== want) { bad++; console.log('got  ' + JSON.stringify(got) + '\nwant ' + JSON.stringify(want)); }
process.exit(bad ? 1 : 0);
`
	files["run.mjs"] = []byte(script)
	runNode(t, files, "run.mjs")
}
