package web

import (
	"testing"
)

// TestAttentionInNode runs the pure parts of static/attention.js and
// static/notify.js under Node: what a list entry waits for, the title's
// count, and which change of a chat's entry is worth a notification (a
// wait begun, a reply finished or failed; never a stop, never a change
// that is no ending). Without node it skips.
func TestAttentionInNode(t *testing.T) {
	files := map[string][]byte{}
	for _, f := range []string{"attention", "notify"} {
		name, b := asModule(t, f)
		files[name] = b
	}
	script := `
import { waitingKind, waitingCount, titleWith } from './attention.mjs';
import { transition } from './notify.mjs';
let bad = 0;
const check = (what, got, want) => { if (JSON.stringify(got) !== JSON.stringify(want)) { bad++; console.log(what + ': got ' + JSON.stringify(got) + ', want ' + JSON.stringify(want)); } };
check('approval', waitingKind({ waiting: 'approval' }), 'approval');
check('recovery', waitingKind({ waiting: 'recovery' }), 'recovery');
check('unknown', waitingKind({ waiting: 'toString' }), '');
check('none', waitingKind({}), '');
check('count', waitingCount([{ waiting: 'approval' }, { state: 'running' }, { waiting: 'recovery' }, null].filter(Boolean)), 2);
check('title', titleWith('Plans · Mirror', 2), '(2) Plans · Mirror');
check('title again', titleWith('(2) Plans · Mirror', 1), '(1) Plans · Mirror');
check('title none', titleWith('(3) Mirror', 0), 'Mirror');
const run = { state: 'running', waiting: '', outcome: '' };
const cases = [
  ['first sight', undefined, run, null],
  ['approval asked', run, { ...run, waiting: 'approval' }, 'approval'],
  ['still asked', { ...run, waiting: 'approval' }, { ...run, waiting: 'approval' }, null],
  ['recovery asked', { state: 'idle', waiting: '' }, { state: 'idle', waiting: 'recovery' }, 'recovery'],
  ['answered', { ...run, waiting: 'approval' }, run, null],
  ['finished', run, { state: 'idle', waiting: '', outcome: 'ok' }, 'finished'],
  ['failed', run, { state: 'idle', waiting: '', outcome: 'failed' }, 'error'],
  ['stopped', run, { state: 'idle', waiting: '', outcome: 'stopped' }, null],
  ['idle stays idle', { state: 'idle', outcome: 'ok' }, { state: 'idle', outcome: 'ok' }, null],
  ['started', { state: 'idle' }, run, null],
];
for (const [what, before, after, want] of cases) check(what, transition(before, after), want);
process.exit(bad ? 1 : 0);
`
	files["run.mjs"] = []byte(script)
	runNode(t, files, "run.mjs")
}
