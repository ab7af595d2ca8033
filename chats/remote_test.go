package chats

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime"
)

// TestOpFrameRoundTrip: every op, with the fields it takes, reads back as
// written; keep distinguishes absent (keep all) from empty (keep none).
func TestOpFrameRoundTrip(t *testing.T) {
	text, empty := "hello", ""
	since := uint64(0)
	none := []string{}
	some := []string{"ab", "cd"}
	origin := &opOrigin{By: "p_1", Owner: true, Req: "r1", Sub: true, Asker: "x.1"}
	tests := []opFrame{
		{Op: opCreate, Origin: origin, Title: "t", Chain: "c"},
		{Op: opGet},
		{Op: opOpen, Origin: &opOrigin{Req: "r"}, Since: &since},
		{Op: opOpen},
		{Op: opCatchUp, After: 7},
		{Op: opEvents, After: 3, MaxBytes: 1 << 18},
		{Op: opHistory, Before: 9},
		{Op: opSend, Origin: origin, Text: &text, ClientID: "c1", Mode: ModeRedirect, Sums: some},
		{Op: opSend, Text: &empty, ClientID: "c1", Sums: some},
		{Op: opEdit, Msg: "m2", Text: &text, Keep: &none},
		{Op: opEdit, Msg: "m2", Keep: &some},
		{Op: opEdit, Msg: "m2"},
		{Op: opDelete, Origin: origin, Msg: "m2"},
		{Op: opStop, Origin: origin},
		{Op: opPin, Msg: "m2", Pinned: true},
		{Op: opRegenerate, Msg: "m2", ClientID: "c2"},
		{Op: opCommand, Text: &text},
		{Op: opContinue},
		{Op: opApprove, ID: "a_x", Allow: true, ForChat: true},
		{Op: opRecover, ID: "r_x", Action: runtime.Skip},
		{Op: opRevokeTool, Tool: "shell"},
		{Op: opRename, Title: "new"},
		{Op: opSetChain, Chain: "x"},
		{Op: opArchive, Archived: true},
		{Op: opDeleteChat},
		{Op: opRestoreChat},
		{Op: opHandoffs},
		{Op: opMediaRefused, Via: "telegram", Outcome: runtime.OutcomeTooLarge, Reason: "big"},
		{Op: opExport},
		{Op: opTranscript, After: 500},
		{Op: opPurge},
		{Op: opPrune, Before: 1700000000000000000},
	}
	seen := map[string]bool{}
	for _, f := range tests {
		t.Run(f.Op, func(t *testing.T) {
			got, err := decodeOp(encodeOp(&f))
			if err != nil {
				t.Fatalf("decode %s: %v", encodeOp(&f), err)
			}
			if !reflect.DeepEqual(*got, f) {
				t.Fatalf("read back %+v, wrote %+v", *got, f)
			}
		})
		seen[f.Op] = true
	}
	for op := range opFields {
		if !seen[op] {
			t.Errorf("op %s has no round-trip case", op)
		}
	}
}

// TestDecodeOpRefuses: anything but a frame this version writes is an
// ErrBadInput, never a partly read op.
func TestDecodeOpRefuses(t *testing.T) {
	tests := []struct{ name, frame, want string }{
		{"empty", ``, "not a JSON object"},
		{"array", `[]`, "not a JSON object"},
		{"null", `null`, "not a JSON object"},
		{"no version", `{"op":"get"}`, "version 0"},
		{"other version", `{"v":2,"op":"get"}`, "version 2"},
		{"unknown op", `{"v":1,"op":"format_disk"}`, "unknown op"},
		{"no op", `{"v":1}`, "unknown op"},
		{"unknown field", `{"v":1,"op":"get","x":1}`, "unknown field"},
		{"field of another op", `{"v":1,"op":"get","text":"hi"}`, `takes no field "text"`},
		{"origin where none is taken", `{"v":1,"op":"rename","title":"t","origin":{"by":"p"}}`, `takes no field "origin"`},
		{"wrong type", `{"v":1,"op":"send","text":5}`, "cannot unmarshal"},
		{"unknown origin field", `{"v":1,"op":"stop","origin":{"who":"p"}}`, "unknown field"},
		{"trailing data", `{"v":1,"op":"get"} {}`, "after the JSON value"},
		{"trailing garbage", `{"v":1,"op":"get"}x`, "after the JSON value"},
		{"duplicate op", `{"v":1,"op":"get","op":"send"}`, ""},
		{"too large", `{"v":1,"op":"command","text":"` + strings.Repeat("a", maxOpFrame) + `"}`, "limit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := decodeOp([]byte(tc.frame))
			if tc.want == "" {
				// Go's JSON keeps the last of duplicate keys: the frame
				// reads as that op, whole.
				if err == nil && f.Op != opSend {
					t.Fatalf("read as %q", f.Op)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("decode %.60q: %v, want ErrBadInput with %q", tc.frame, err, tc.want)
			}
		})
	}
}

// TestErrorKindsAcrossNodes: an error keeps its kinds through a reply, so
// errors.Is on the asking node answers as on the owner (and a transport
// picks the same HTTP status); a rate limit keeps when it frees up.
func TestErrorKindsAcrossNodes(t *testing.T) {
	rl := &RateLimited{Msg: "today's tokens are spent", RetryAfter: 90 * time.Minute}
	tests := []struct {
		err  error
		want []error
	}{
		{fmt.Errorf("chat c_1: %w", ErrNotFound), []error{ErrNotFound}},
		{busyError{"c_1"}, []error{ErrInUse}},
		{fmt.Errorf("%w: text is empty", ErrBadInput), []error{ErrBadInput}},
		{fmt.Errorf("chat c: %w", ErrNoTurn), []error{ErrNoTurn}},
		{ErrClosed, []error{ErrClosed}},
		{fmt.Errorf("%w: 9 queued", ErrTooLarge), []error{ErrTooLarge}},
		{fmt.Errorf("%w: ab", ErrUnknownAttachment), []error{ErrUnknownAttachment}},
		{ErrSearchOff, []error{ErrSearchOff}},
		{fmt.Errorf("write: %w", ErrFenced), []error{ErrFenced}},
		{fmt.Errorf("%w: x", ErrUnavailable), []error{ErrUnavailable}},
		{fmt.Errorf("%w: %w", ErrUnavailable, ErrNotFound), []error{ErrUnavailable, ErrNotFound}},
		{fmt.Errorf("%w: %q", runtime.ErrNoSuchModel, "x"), []error{runtime.ErrNoSuchModel}},
		{context.DeadlineExceeded, []error{context.DeadlineExceeded}},
		{rl, []error{ErrRateLimited}},
		{errors.New("disk on fire"), nil},
	}
	for _, tc := range tests {
		t.Run(tc.err.Error(), func(t *testing.T) {
			_, got, _, err := decodeReply("c_1", encodeReply(nil, tc.err, nil))
			if err != nil {
				t.Fatal(err)
			}
			if got == nil || got.Error() != tc.err.Error() {
				t.Fatalf("error %v, want the text %q", got, tc.err)
			}
			for _, k := range errKinds {
				want := false
				for _, w := range tc.want {
					want = want || w == k.err
				}
				if errors.Is(got, k.err) != want {
					t.Errorf("errors.Is(%v, %v) = %v, want %v", got, k.err, !want, want)
				}
			}
		})
	}
	_, got, _, _ := decodeReply("c_1", encodeReply(nil, fmt.Errorf("send: %w", rl), nil))
	var back *RateLimited
	if !errors.As(got, &back) || back.RetryAfter != rl.RetryAfter || back.Msg != "send: "+rl.Msg {
		t.Fatalf("rate limit read back as %#v", back)
	}
}

// TestReplyRoundTrip: a value and the asker's events read back; an answer
// with events of another chat, both a value and an error, or an unknown
// error kind is refused.
func TestReplyRoundTrip(t *testing.T) {
	m := Message{ID: "m2", Role: "user", Text: "hi", Seq: 2, State: MsgPending, ClientID: "c"}
	ev := NewEvent("c_1", 2, time.Unix(1700000000, 0).UTC(), &MessageAccepted{Message: &m})
	ok, opErr, asker, err := decodeReply("c_1", encodeReply(m, nil, []*Event{ev}))
	if err != nil || opErr != nil {
		t.Fatal(err, opErr)
	}
	var back Message
	if err := strictJSON(ok, &back); err != nil || back.Text != "hi" || back.ClientID != "c" {
		t.Fatalf("value %s read as %+v (%v)", ok, back, err)
	}
	if len(asker) != 1 || string(asker[0].JSON()) != string(ev.JSON()) {
		t.Fatalf("events read back %v", asker)
	}
	bad := []string{
		string(encodeReply(m, nil, []*Event{NewEvent("c_2", 2, ev.Time, &MessageAccepted{Message: &m})})),
		`{"v":1,"ok":{},"err":{"msg":"x"}}`,
		`{"v":1,"err":{"kinds":["on_fire"],"msg":"x"}}`,
		`{"v":1,"asker":[{"chat":"c_1"}]}`,
		`{"v":2}`,
		`{"v":1,"extra":1}`,
	}
	for _, b := range bad {
		if _, _, _, err := decodeReply("c_1", []byte(b)); err == nil {
			t.Errorf("answer %.80s read without error", b)
		}
	}
}

// TestHandleOpAnswersBadFrame: an unreadable op is answered (not failed)
// with an ErrBadInput the asker reads; a known op runs on the chat.
func TestHandleOpAnswersBadFrame(t *testing.T) {
	e := newEnv(t, newGate(true))
	c := e.chat()
	out, err := e.svc.HandleOp(context.Background(), c.ID, []byte(`{"v":1,"op":"nope"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, opErr, _, err := decodeReply(c.ID, out); err != nil || !errors.Is(opErr, ErrBadInput) {
		t.Fatalf("bad frame answered %v / %v", opErr, err)
	}
	out, err = e.svc.HandleOp(context.Background(), c.ID, encodeOp(&opFrame{Op: opRename, Title: "renamed"}))
	if err != nil {
		t.Fatal(err)
	}
	ok, opErr, _, err := decodeReply(c.ID, out)
	var got Chat
	if err != nil || opErr != nil || strictJSON(ok, &got) != nil || got.Title != "renamed" {
		t.Fatalf("rename answered %s %v %v", ok, opErr, err)
	}
	out, _ = e.svc.HandleOp(context.Background(), c.ID, encodeOp(&opFrame{Op: opApprove, ID: "a_nope"}))
	if _, opErr, _, _ := decodeReply(c.ID, out); !errors.Is(opErr, ErrNotFound) {
		t.Fatalf("approval of another chat answered %v", opErr)
	}
}

// FuzzDecodeOp: any bytes either fail with ErrBadInput or read as an op
// that writes back to a frame reading the same.
func FuzzDecodeOp(f *testing.F) {
	text := "hi"
	for _, fr := range []opFrame{{Op: opGet}, {Op: opSend, Text: &text, ClientID: "c", Origin: &opOrigin{By: "p", Sub: true}}, {Op: opEdit, Msg: "m1", Keep: &[]string{}}} {
		f.Add(encodeOp(&fr))
	}
	f.Add([]byte(`{"v":1,"op":"open","since":0}`))
	f.Add([]byte(`{"v":1,"op":"get","x":1}`))
	f.Add([]byte(`{"v":1,"op":"send","sums":[],"keep":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		op, err := decodeOp(b)
		if err != nil {
			if !errors.Is(err, ErrBadInput) {
				t.Fatalf("error without its kind: %v", err)
			}
			return
		}
		again, err := decodeOp(encodeOp(op))
		if err != nil {
			t.Fatalf("%q read, but its rewrite %q not: %v", b, encodeOp(op), err)
		}
		if !reflect.DeepEqual(again, op) {
			t.Fatalf("%q read as %+v, rewritten as %+v", b, op, again)
		}
	})
}

// FuzzDecodeReply: any bytes either fail or read as an answer whose
// events all belong to the chat.
func FuzzDecodeReply(f *testing.F) {
	m := Message{ID: "m2", Role: "user", Text: "hi", Seq: 2}
	f.Add(encodeReply(m, nil, []*Event{NewEvent("c_1", 2, time.Unix(1, 0).UTC(), &MessageAccepted{Message: &m})}))
	f.Add(encodeReply(nil, fmt.Errorf("%w: x", ErrNotFound), nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, evs, err := decodeReply("c_1", b)
		if err != nil {
			return
		}
		for _, e := range evs {
			if e.Chat != "c_1" {
				t.Fatalf("event of chat %q", e.Chat)
			}
		}
	})
}

// FuzzHandleOp: whatever frame reaches a chat's owner, HandleOp answers
// with a reply the asker can read, and never panics.
func FuzzHandleOp(f *testing.F) {
	text := "hi"
	for _, fr := range []opFrame{{Op: opGet}, {Op: opSend, Text: &text, ClientID: "c"}, {Op: opRename, Title: "x"},
		{Op: opHistory}, {Op: opEvents, MaxBytes: 10}, {Op: opCommand, Text: &text}, {Op: opPin, Msg: "m1", Pinned: true}} {
		f.Add(encodeOp(&fr))
	}
	f.Add([]byte(`{"v":1,"op":"open","since":0}`))
	db, err := OpenDB(filepath.Join(f.TempDir(), "mirror.db"), time.Second)
	if err != nil {
		f.Fatal(err)
	}
	store, err := NewStore(db)
	if err != nil {
		f.Fatal(err)
	}
	eng, err := runtime.NewEngine([]*runtime.Model{{Name: "m", Provider: newGate(true), Remote: "fake", Window: 128000}},
		map[string][]string{"default": {"m"}}, config.Roles{Chat: "default", Reflect: "default"}, 8)
	if err != nil {
		f.Fatal(err)
	}
	svc := New(Options{Store: store, Turner: eng, Idle: time.Minute})
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		svc.Close(ctx)
		store.Close()
		db.Close()
	})
	c, err := svc.Create(context.Background(), "fuzzed", "", Origin{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		out, err := svc.HandleOp(ctx, c.ID, b)
		if err != nil {
			t.Fatalf("HandleOp failed instead of answering: %v", err)
		}
		if _, _, _, err := decodeReply(c.ID, out); err != nil {
			t.Fatalf("answer %q unreadable: %v", out, err)
		}
	})
}
