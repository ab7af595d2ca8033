package web

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEventReadersReadTheGoldens runs static/events.js in Node (no browser
// needed) on the wire bytes of every event type as the gateway writes them
// (chats/testdata/events, one golden per type, pinned by
// chats.TestEventWireGolden): each type has exactly one reader, and each
// reader finds its type's fields where the gateway puts them. A change of
// the wire that the client does not follow fails here. Without node it
// skips.
func TestEventReadersReadTheGoldens(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "..", "chats", "testdata", "events", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no goldens (%v)", err)
	}
	goldens := map[string]json.RawMessage{}
	for _, f := range paths {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		goldens[strings.TrimSuffix(filepath.Base(f), ".json")] = json.RawMessage(b)
	}
	all, _ := json.Marshal(goldens)
	name, events := asModule(t, "events")
	files := map[string][]byte{name: events, "goldens.json": all}
	script := `
import { readFileSync } from 'node:fs';
import { readers, readEvent } from './events.mjs';
const goldens = JSON.parse(readFileSync('goldens.json', 'utf8'));
const CALL = { id: 'call_1', name: 'shell', arguments: '{"cmd":"ls"}' };
// What each reader must find in its golden (chats/event_golden_test.go
// fills every field a type has).
const want = {
  'chat.created': { title: 'Plans' },
  'message.accepted': { message: { id: 'm2', state: 'pending' } },
  'message.updated': { message: { id: 'm2', text: 'hello <there> & all' } },
  'message.deleted': { message: { id: 'm2', state: 'deleted' } },
  'message.picked': { turn: 't5', message: { id: 'm2', state: 'picked' } },
  'turn.started': { turn: 't5' },
  'reply.delta': { turn: 't5', offset: 7, text: 'more' },
  'quota.wait': { turn: 't5', quota: 30000, usage: 29000, wait_ms: 1500 },
  'turn.finished': { turn: 't5', reply: 'Done: <b>5 & 6</b>', stopped: true, model: 'default', fallback: true,
    message: { id: 'm9', stopped: true, model: 'default', fallback: true } },
  'turn.failed': { turn: 't5', error: 'it broke', class: 'internal', message: { text: 'partial', state: 'failed' } },
  'assistant.message': { turn: 't5', message: { id: 'm6', state: 'step' } },
  'tool.call': { turn: 't5', call: CALL },
  'tool.result': { turn: 't5', callId: 'call_1', failed: true },
  'approval.requested': { turn: 't5', approval: { id: 'a_c1_x', tool: 'shell', call: CALL,
    change: { path: 'plan.md', status: 'modified', diff: '@@ -1 +1 @@\n-two\n+TWO\n', added: 1, removed: 1 } } },
  'approval.resolved': { id: 'a_c1_x', for_chat: true },
  'recovery.requested': { turn: 't5', recovery: { id: 'r_c1_y', process: 'stopped', call: CALL } },
  'recovery.resolved': { id: 'r_c1_y' },
  rewind: { turn: 't3', text: 'Restored 2 files.' },
  context: { context: { used: 100, window: 1000, soft: 200, hard: 250, soft_reached: false, hard_reached: false,
    request: 300, ceiling: 900, next_checkpoint: 765, model: 'default', line: 'Context: 100 of 1000' } },
  'runtime.context': { turn: 't5' },
  checkpoint: { through: 4 },
  'handoff.updated': { turn: 't5' },
  boundary: { reason: 'hard', continued: true, record: '# Record\nwork', through: 20, notes: ['n1.md'], why: 'none' },
  'boundary.failed': { error: 'The boundary could not be written: disk' },
  continuity: { turn: 't5', message: { id: 'm22', state: 'continuity' } },
  'message.pinned': { id: 'm2', pinned: true },
  clear: {},
  compact: { text: 'keep the plan' },
  'message.transcribed': { turn: 't5', error: 'the transcription server answered 503',
    message: { id: 'm2', attachments: [{ sha256: 'cd34', type: 'audio/ogg' }] } },
  diagnostic: { turn: 't5', diagnostic: { kind: 'attempt', model: 'default', answered: 'gpt-4o-2024', request_id: 'req_1', attempt: 2,
    outcome: 'overloaded', status: 503, latency_ms: 420, error: '503 Service Unavailable' } },
  'tool.progress': { turn: 't5', text: 'working 1/2', call: { id: 'call_1', name: 'srv__slow' } },
  'file.sent': { turn: 't5', call: CALL, message: { id: 'm12', text: 'Here is the chart', attachments: [{ sha256: 'ef56' }] } },
  'tool.allowed': { tool: 'shell', allowed: true, approval: 'a_c1_x' },
};
// has reports whether got holds every field of w (objects and arrays:
// recursively).
const has = (got, w) => Array.isArray(w)
  ? Array.isArray(got) && got.length === w.length && w.every((x, i) => has(got[i], x))
  : w !== null && typeof w === 'object'
    ? got !== null && typeof got === 'object' && Object.keys(w).every((k) => has(got[k], w[k]))
    : JSON.stringify(got) === JSON.stringify(w);
let bad = 0;
const fail = (s) => { bad++; console.log(s); };
for (const t of Object.keys(readers)) if (!(t in goldens)) fail('reader without a golden: ' + t);
for (const [t, ev] of Object.entries(goldens)) {
  if (!(t in want)) fail('no expectation for ' + t);
  const got = readEvent(ev);
  if (!got) { fail('no reader for ' + t); continue; }
  if (got.type !== t || got.chat !== 'c_golden' || got.seq !== ev.seq || got.time !== ev.time) fail(t + ': header ' + JSON.stringify(got));
  if (!has(got, want[t] || {})) fail(t + ': read ' + JSON.stringify(got) + '\n  want ' + JSON.stringify(want[t]));
}
if (readEvent({ type: 'no.such.type', chat: 'c', seq: 1 }) !== null) fail('an unknown type was read');
process.exit(bad ? 1 : 0);
`
	files["run.mjs"] = []byte(script)
	runNode(t, files, "run.mjs")
}
