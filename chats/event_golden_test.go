package chats

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tools"
	"github.com/mirror-gateway/mirror/runtime/view"
	bolt "go.etcd.io/bbolt"
)

// goldenTime is the time of every golden event, so their bytes are fixed.
var goldenTime = time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC)

// goldenEvents is one event of each type, with every field its type
// carries, as the code writing that type fills it.
func goldenEvents() []*Event {
	no := false
	reply := "Done: <b>5 & 6</b>"
	call := provider.ToolCall{ID: "call_1", Name: "shell", Arguments: `{"cmd":"ls"}`, Signature: "c2ln"}
	ap := Approval{ID: "a_c1_x", Call: call, Tool: "shell", Turn: "t5", Time: goldenTime,
		Change: &tools.Proposal{Path: "plan.md", Status: tools.StatusModified, Diff: "@@ -1 +1 @@\n-two\n+TWO\n", Added: 1, Removed: 1}}
	apr := ap
	apr.Allow, apr.Reason = &no, ReasonStopped
	apr.ForChat = true
	rc := Recovery{ID: "r_c1_y", Call: call, Turn: "t5", Time: goldenTime, Process: ProcStopped}
	rr := rc
	rr.Action = "repeat"
	user := func(state string) *Message {
		return &Message{ID: "m2", Role: provider.RoleUser, Text: "hello <there> & all", Seq: 2, Time: goldenTime, State: state,
			Mode: ModeQueue, ClientID: "k1", Tokens: 6, Attachments: []Attachment{{SHA256: "ab12", Type: "image/png", Size: 10, Name: "a.png", Width: 2, Height: 3}}}
	}
	picked := user(MsgPicked)
	picked.Turn = "t5"
	ci := runtime.ContextInfo{Used: 100, Window: 1000, Soft: 200, Hard: 250, SoftReached: false, HardReached: false,
		Request: 300, Ceiling: 900, NextCheckpoint: 765, Model: "default", Line: "Context: 100 of 1000"}
	ps := []Payload{
		&ChatCreated{Title: "Plans"},
		&MessageAccepted{Message: user(MsgPending)},
		&MessageUpdated{Message: user(MsgPending)},
		&MessageDeleted{Message: user(MsgDeleted)},
		&MessagePicked{Message: picked, Turn: "t5"},
		&TurnStarted{Turn: "t5"},
		&ReplyDelta{Turn: "t5", Offset: 7, Text: "more"},
		&QuotaWait{Turn: "t5", Quota: 30000, Usage: 29000, WaitMS: 1500},
		&TurnFinished{Turn: "t5", Reply: reply, Usage: provider.Usage{InputTokens: 10, OutputTokens: 5, CachedTokens: 2},
			Model: "default", Fallback: true, Stopped: true, Message: &Message{ID: "m9", Role: provider.RoleAssistant, Text: reply, Seq: 9, Time: goldenTime,
				State: MsgDone, Turn: "t5", Stopped: true, Tokens: 5, Model: "default", Fallback: true},
			Measured: &view.Measurement{Tokens: 10, Epoch: 1, Seq: 8}, Pruned: true, Held: 2},
		&TurnFailed{Turn: "t5", Class: string(runtime.ClassInternal), Error: "it broke",
			Message: &Message{ID: "m9", Seq: 9, Role: provider.RoleAssistant, Text: "partial", State: MsgFailed, Turn: "t5", Time: goldenTime}},
		&AssistantStep{Turn: "t5", Message: &Message{ID: "m6", Seq: 6, Role: provider.RoleAssistant, Text: "Let me look.",
			State: MsgStep, Turn: "t5", ToolCalls: []provider.ToolCall{call}, Tokens: 9, Time: goldenTime}},
		&ToolCallStarted{Turn: "t5", Call: &call},
		&ToolResult{Turn: "t5", Result: &ToolOutcome{CallID: "call_1", Name: "shell", Content: "no such file", IsError: true,
			Handle: "h_1", Size: 12}, Error: "no such file"},
		&ApprovalRequested{Turn: "t5", Approval: &ap},
		&ApprovalResolved{Turn: "t5", Approval: &apr},
		&RecoveryRequested{Turn: "t5", Recovery: &rc, Call: &rc.Call},
		&RecoveryResolved{Turn: "t5", Recovery: &rr},
		&Rewound{Turn: "t3", Text: "Restored 2 files."},
		&ContextReading{Turn: "t5", ContextInfo: &ci, Model: ci.Model},
		&RuntimeContext{Turn: "t5", Sections: json.RawMessage(`[{"name":"time","text":"now"}]`), Tokens: 4},
		&CheckpointTaken{Turn: "t5", Checkpoint: json.RawMessage(`{"epoch":1,"evicted":4}`), Through: 4},
		&HandoffUpdated{Turn: "t5", Handoff: json.RawMessage(`{"goal":"ship"}`), Reason: "asked"},
		&BoundaryCrossed{Turn: "t5", Reason: "hard", Continued: true, Record: "# Record\nwork", Through: 20,
			Notes: []string{"n1.md"}, Why: "none"},
		&BoundaryFailed{Turn: "t5", Reason: "hard", Error: "The boundary could not be written: disk"},
		&Continuity{Turn: "t5", Message: &Message{ID: "m22", Seq: 22, Role: provider.RoleUser, Text: "Carry on from the record.",
			State: MsgContinuity, Turn: "t5", Tokens: 6, Time: goldenTime}},
		&MessagePinned{Message: &Message{ID: "m2", Role: provider.RoleUser, Seq: 2, Pinned: true}},
		&Cleared{},
		&CompactRequested{Text: "keep the plan"},
		&MessageTranscribed{Turn: "t5", Error: "the transcription server answered 503", Message: &Message{ID: "m2", Role: provider.RoleUser,
			Text: "listen", Seq: 2, Time: goldenTime, State: MsgPicked, Turn: "t5",
			Attachments: []Attachment{{SHA256: "cd34", Type: "audio/ogg", Size: 99, Name: "voice.ogg"}}}},
		&FileSent{Turn: "t5", Call: &call, Message: &Message{ID: "m12", Role: provider.RoleAssistant, Text: "Here is the chart",
			Seq: 12, Time: goldenTime, State: MsgDone, Turn: "t5", Attachments: []Attachment{{SHA256: "ef56", Type: "image/png", Size: 10, Width: 2, Height: 3}}}},
		&Diagnosed{Turn: "t5", Diagnostic: &runtime.Diagnostic{Kind: runtime.DiagAttempt, Purpose: "turn", Model: "default",
			Remote: "gpt-4o", Answered: "gpt-4o-2024", RequestID: "req_1", Attempt: 2, Outcome: "overloaded", Status: 503, LatencyMS: 420,
			Error: "503 Service Unavailable"}},
		&ToolProgress{Turn: "t5", Text: "working 1/2", Call: &provider.ToolCall{ID: "call_1", Name: "srv__slow"}},
		&ToolAllowed{Tool: "shell", Allowed: true, Approval: "a_c1_x"},
	}
	evs := make([]*Event, len(ps))
	for i, p := range ps {
		evs[i] = NewEvent("c_golden", uint64(i+1), goldenTime, p)
	}
	return evs
}

// TestEventWireGolden pins the wire bytes of every event type, one golden
// file each under testdata/events, so the protocol cannot drift unnoticed
// (docs/protocol.md, "Events of a chat"). -update rewrites them.
func TestEventWireGolden(t *testing.T) {
	seen := map[string]bool{}
	for _, ev := range goldenEvents() {
		seen[ev.Type] = true
		path := filepath.Join("testdata", "events", ev.Type+".json")
		got := append(ev.JSON(), '\n')
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v (run with -update to write it)", ev.Type, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: wire bytes changed\n got %s\nwant %s", ev.Type, got, want)
		}
		if !json.Valid(got) {
			t.Errorf("%s: not JSON: %s", ev.Type, got)
		}
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "events", "*.json"))
	for _, f := range files {
		if typ := filepath.Base(f[:len(f)-len(".json")]); !seen[typ] {
			t.Errorf("golden %s names no event type the test writes", f)
		}
	}
}

// rowsGolden holds rows as the record stored them before events had a
// payload type per event type (written by main's rowBytes, commit
// e5c220e), one "seq<TAB>row" a line; rowsDecoded, what reading each row
// gives (its wire bytes). The rows are never rewritten: old data dirs must
// keep reading.
const (
	rowsGolden  = "testdata/rows/v1.rows"
	rowsDecoded = "testdata/rows/v1.decoded"
)

// loadGoldenRows puts the golden rows into a fresh database's record of
// chat "c_golden" and returns it.
func loadGoldenRows(t testing.TB) (*bolt.DB, [][2][]byte) {
	t.Helper()
	raw, err := os.ReadFile(rowsGolden)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][2][]byte
	for _, line := range bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte("\t"))
		seq, err := strconv.ParseUint(string(k), 10, 64)
		if !ok || err != nil {
			t.Fatalf("bad golden row %q", line)
		}
		rows = append(rows, [2][]byte{seqKey(seq), v})
	}
	db, err := OpenDB(filepath.Join(t.TempDir(), "m.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketRecords)
		if err != nil {
			return err
		}
		rb, err := b.CreateBucket([]byte("c_golden"))
		if err != nil {
			return err
		}
		for _, r := range rows {
			if err := rb.Put(r[0], r[1]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return db, rows
}

// TestOldRowsDecode reads rows in the format the record had before typed
// payloads (a golden file written by that code) and checks that each
// decodes to the same event, message texts named by text_at filled back
// in, and that writing the decoded event again gives the same row (the same
// JSON, text_at included): old
// data dirs keep working, and new rows are what old code wrote.
func TestOldRowsDecode(t *testing.T) {
	db, rows := loadGoldenRows(t)
	wantRaw, err := os.ReadFile(rowsDecoded)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Split(bytes.TrimSuffix(wantRaw, []byte("\n")), []byte("\n"))
	if len(want) != len(rows) {
		t.Fatalf("%d decoded lines for %d rows", len(want), len(rows))
	}
	err = db.View(func(tx *bolt.Tx) error {
		i := 0
		err := eventsSince(tx, "c_golden", 0, func(ev *Event) error {
			if got := ev.JSON(); !bytes.Equal(got, want[i]) {
				t.Errorf("row %d decodes to\n %s\nwant %s", i+1, got, want[i])
			}
			if got := rowBytes(ev); !sameJSON(got, rows[i][1]) {
				t.Errorf("row %d is written again as\n %s\nwas %s", i+1, got, rows[i][1])
			}
			i++
			return nil
		})
		if err != nil {
			return err
		}
		frames, more, err := readFrames(tx, "c_golden", 0, 1<<30)
		if err != nil || more || len(frames) != len(want) {
			return fmt.Errorf("readFrames: %d frames, more %v, err %v", len(frames), more, err)
		}
		for i, f := range frames {
			if !bytes.Equal(f.Raw, want[i]) {
				t.Errorf("frame %d is\n %s\nwant %s", f.Seq, f.Raw, want[i])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// sameJSON reports whether a and b are the same JSON value, whatever the
// order of their objects' keys.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// goldenRowEvents is the record the rows golden was written from (by
// main's rowBytes, before typed payloads), as the actor writes it: messages whose text
// another row holds (textAt) are stored naming that row.
func goldenRowEvents() []*Event {
	by := map[string]*Event{}
	for _, ev := range goldenEvents() {
		by[ev.Type] = ev
	}
	clone := func(typ string) *Event {
		src := by[typ]
		var ev Event
		if err := json.Unmarshal(src.JSON(), &ev); err != nil {
			panic(err)
		}
		return &ev
	}
	var out []*Event
	add := func(ev *Event, textAt uint64) *Event {
		ev.Seq = uint64(len(out) + 1)
		if m := ev.Message(); m != nil {
			m.textAt = textAt
		}
		out = append(out, ev)
		return ev
	}
	add(clone(EvChatCreated), 0)
	acc := add(clone(EvMessageAccepted), 2) // its own text
	upd := add(clone(EvMessageUpdated), 3)  // its own text again
	add(clone(EvMessagePicked), upd.Seq)    // names the update
	add(clone(EvTurnStarted), 0)
	add(clone(EvContext), 0)
	add(clone(EvRuntimeContext), 0)
	add(clone(EvCheckpoint), 0)
	step := add(clone(EvAssistantStep), 0) // its own text
	add(clone(EvToolCall), 0)
	add(clone(EvApprovalRequested), 0)
	add(clone(EvApprovalResolved), 0)
	add(clone(EvToolResult), 0)
	fin := add(clone(EvTurnFinished), 0) // the reply is the message
	add(clone(EvHandoff), 0)
	add(clone(EvMessagePinned), 0) // no text
	add(clone(EvCompact), 0)
	add(clone(EvClear), 0)
	add(clone(EvRewind), 0)
	add(clone(EvRecoveryRequested), 0)
	add(clone(EvRecoveryResolved), 0)
	failed := add(clone(EvTurnFailed), 0) // its own partial text
	add(clone(EvBoundary), 0)
	cont := add(clone(EvContinuity), 0)  // its own text
	add(clone(EvMessagePicked), upd.Seq) // carried across: names the update again
	add(clone(EvBoundaryFailed), 0)
	add(clone(EvMessageDeleted), acc.Seq) // names the accepted row
	atB := add(clone(EvTurnFinished), 0)  // stopped at a boundary: no message
	atB.Payload.(*TurnFinished).Message, atB.Payload.(*TurnFinished).Stopped = nil, false
	intr := add(clone(EvTurnFailed), 0) // interrupted: no message
	intr.Payload.(*TurnFailed).Message, intr.Payload.(*TurnFailed).Class = nil, string(runtime.ClassInterrupted)
	// Message ids and seqs follow the rows that created them.
	for _, ev := range []*Event{step, fin, failed, cont} {
		ev.Message().ID, ev.Message().Seq = "m"+strconv.FormatUint(ev.Seq, 10), ev.Seq
	}
	for _, ev := range out {
		ev.Chat, ev.Time = "c_golden", goldenTime
		if m := ev.Message(); m != nil && m.textAt == 0 {
			m.textAt = ev.Seq
		}
	}
	return out
}

// TestPayloadRegistry checks that every event type decodes into the payload
// type that writes it, and that every golden event reads back as itself.
func TestPayloadRegistry(t *testing.T) {
	for typ, mk := range payloads {
		if got := mk().eventType(); got != typ {
			t.Errorf("payloads[%q] makes a %s payload", typ, got)
		}
	}
	for _, ev := range goldenEvents() {
		if payloads[ev.Type] == nil {
			t.Errorf("%s: not in payloads, so a stored row of it would not decode", ev.Type)
			continue
		}
		if a, b := ev.JSON(), ev.JSON(); &a[0] != &b[0] {
			t.Errorf("%s: encoded twice; every subscriber must share one encoding", ev.Type)
		}
		var back Event
		if err := json.Unmarshal(ev.JSON(), &back); err != nil {
			t.Fatalf("%s: %v", ev.Type, err)
		}
		if reflect.TypeOf(back.Payload) != reflect.TypeOf(ev.Payload) || !bytes.Equal(back.JSON(), ev.JSON()) {
			t.Errorf("%s reads back as %T: %s", ev.Type, back.Payload, back.JSON())
		}
		if back.Turn() != ev.Turn() || (ev.Message() == nil) != (back.Message() == nil) {
			t.Errorf("%s: turn %q message %v after reading, %q %v before", ev.Type, back.Turn(), back.Message(), ev.Turn(), ev.Message())
		}
	}
	// A context reading keeps its model: the frame carries it before the
	// reading's other fields, and Info puts it back in the reading.
	var cr Event
	raw, _ := os.ReadFile(filepath.Join("testdata", "events", EvContext+".json"))
	if err := json.Unmarshal(raw, &cr); err != nil || pay[*ContextReading](&cr).Info().Model != "default" {
		t.Fatalf("context reading %s (%v)", cr.JSON(), err)
	}
}

// TestUnknownEventTypeKeepsItsBytes: a row of a type this version does not
// know (written by a newer one) is read, not refused, and sent on as it was
// stored.
func TestUnknownEventTypeKeepsItsBytes(t *testing.T) {
	row := []byte(`{"type":"from.the.future","chat":"c1","seq":4,"time":"2026-01-02T03:04:05Z","what":{"x":1}}`)
	var ev Event
	if err := json.Unmarshal(row, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != "from.the.future" || ev.Seq != 4 || ev.Chat != "c1" || !bytes.Equal(ev.JSON(), row) || ev.Turn() != "" || ev.Message() != nil {
		t.Fatalf("read as %+v, sent as %s", ev.Header, ev.JSON())
	}
	if err := json.Unmarshal([]byte(`{"type":"tool.call","call":7}`), &ev); err == nil {
		t.Fatal("a known type with a field of the wrong shape was read")
	}
}

// TestMarkJSON: a snapshot's mark is its event's frame with "at" first, as
// it was when Event was one struct (the event's own MarshalJSON, promoted,
// would drop At), and it reads back.
func TestMarkJSON(t *testing.T) {
	mk := Mark{At: 3, Event: NewEvent("c1", 5, goldenTime, &TurnFailed{Turn: "t4", Error: "it broke", Class: "internal"})}
	got, err := json.Marshal(Snapshot{Type: "chat.snapshot", Marks: []Mark{mk}})
	if err != nil {
		t.Fatal(err)
	}
	want := `"marks":[{"at":3,"type":"turn.failed","chat":"c1","seq":5,"time":"2026-01-02T03:04:05.6Z","turn":"t4","error":"it broke","class":"internal"}]`
	if !bytes.Contains(got, []byte(want)) {
		t.Fatalf("snapshot %s\nwant it to hold %s", got, want)
	}
	var back Snapshot
	if err := json.Unmarshal(got, &back); err != nil || len(back.Marks) != 1 || back.Marks[0].At != 3 ||
		pay[*TurnFailed](back.Marks[0].Event).Error != "it broke" {
		t.Fatalf("read back %+v (%v)", back.Marks, err)
	}
	clear := Mark{Event: NewEvent("c1", 6, goldenTime, &Cleared{})}
	if b, _ := json.Marshal(clear); !json.Valid(b) || !bytes.HasPrefix(b, []byte(`{"at":0,"type":"clear"`)) {
		t.Fatalf("clear mark %s", b)
	}
}
