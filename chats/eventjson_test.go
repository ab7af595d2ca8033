package chats

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/view"
)

// fastPayloads are the payload types the hand-written encoders cover.
func fastPayloads() []Payload {
	return []Payload{&TurnStarted{}, &ReplyDelta{}, &MessageAccepted{}, &MessagePicked{}, &TurnFinished{}, &ContextReading{}, &RuntimeContext{}}
}

// nastyStrings are strings whose JSON encoding is not themselves.
var nastyStrings = []string{"", "plain", "<b>5 & 6</b>", "quote \" backslash \\ slash /", "\x00\x01\x1f\x7f", "\b\f\n\r\t",
	"naïve café 😀", "\u2028\u2029", "bad \xff\xfe utf8 \xc3", "\xed\xa0\x80 surrogate", "\ufffd", "end\xe2\x80"}

// fill sets every exported field of the struct v points to from r: strings
// from nastyStrings or random bytes, numbers of every sign and size, times
// across zones and years, pointers to filled structs or nil. A field added
// to any of these types later is filled too, so the comparison with
// reflection catches an encoder that does not know it.
func fill(r *rand.Rand, v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.Pointer:
		if r.IntN(4) == 0 || depth > 3 {
			v.SetZero()
			return
		}
		p := reflect.New(v.Type().Elem())
		fill(r, p.Elem(), depth+1)
		v.Set(p)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(randTime(r)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(r, v.Field(i), depth)
			}
		}
	case reflect.String:
		if r.IntN(3) == 0 {
			b := make([]byte, r.IntN(12))
			for i := range b {
				b[i] = byte(r.IntN(256))
			}
			v.SetString(string(b))
		} else {
			v.SetString(nastyStrings[r.IntN(len(nastyStrings))])
		}
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt([]int64{0, 0, 1, -1, 42, 1 << 40, -1 << 62}[r.IntN(7)])
	case reflect.Uint64, reflect.Uint, reflect.Uint32:
		v.SetUint([]uint64{0, 0, 1, 7, 1 << 63, 1<<64 - 1}[r.IntN(6)])
	case reflect.Slice:
		// Tool calls, attachments, sections: left to reflection; set
		// sometimes so the decline is covered.
		if r.IntN(8) != 0 {
			v.SetZero()
			return
		}
		switch v.Interface().(type) {
		case []provider.ToolCall:
			v.Set(reflect.ValueOf([]provider.ToolCall{{ID: "c1", Name: "shell", Arguments: `{"a":1}`}}))
		case []Attachment:
			v.Set(reflect.ValueOf([]Attachment{{SHA256: "ab", Type: "image/png", Size: 3}}))
		case json.RawMessage:
			raws := []string{`[ {"key": "k", "text": "<t> & \u2028"} ]`, `[{"key":"k","text":"t"}]`, `{"a": [1, 2 ,3]}`, `[`, `"x\u00e9"`, "nul\x00"}
			v.Set(reflect.ValueOf(json.RawMessage(raws[r.IntN(len(raws))])))
		}
	}
}

func randTime(r *rand.Rand) time.Time {
	zones := []*time.Location{time.UTC, time.FixedZone("", 5*3600+1800), time.FixedZone("X", -7*3600), time.FixedZone("", 24*3600+60)}
	years := []int{2026, 1, 0, 9999, 10000, -1}
	return time.Date(years[r.IntN(len(years))], time.Month(1+r.IntN(12)), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60),
		[]int{0, 1, 600_000_000, 123_456_789}[r.IntN(4)], zones[r.IntN(len(zones))])
}

// checkFrame compares the fast encoder with reflection for one event; it
// returns whether the fast encoder took it.
func checkFrame(t *testing.T, h *Header, p Payload) bool {
	t.Helper()
	want := Marshal(p.frame(h))
	raw, ok := appendFastFrame(nil, h, p)
	if got := marshalFrame(h, p); !bytes.Equal(got, want) {
		t.Fatalf("%T: marshalFrame differs\n got %s\nwant %s", p, got, want)
	}
	if ok && !bytes.Equal(raw, want) {
		t.Fatalf("%T: the fast encoder differs\n got %s\nwant %s", p, raw, want)
	}
	return ok
}

// The hand-written encoders write exactly what encoding/json writes, over
// every field of the types they cover (filled at random, nasty strings and
// times out of JSON's range included), and decline what they do not cover.
func TestFastFrameMatchesReflection(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 4))
	for _, p := range fastPayloads() {
		fast := 0
		for range 3000 {
			q := reflect.New(reflect.TypeOf(p).Elem())
			fill(r, q.Elem(), 0)
			var h Header
			fill(r, reflect.ValueOf(&h).Elem(), 0)
			pl := q.Interface().(Payload)
			h.Type = pl.eventType()
			if checkFrame(t, &h, pl) {
				fast++
			}
		}
		if fast < 500 {
			t.Fatalf("%T: the fast encoder took %d of 3000", p, fast)
		}
	}
	// The goldens' events, and a type the encoders do not cover.
	for _, e := range goldenEvents() {
		checkFrame(t, &e.Header, e.Payload)
	}
	if checkFrame(t, &Header{Type: EvChatCreated, Time: goldenTime}, &ChatCreated{Title: "x"}) {
		t.Fatal("chat.created took the fast path")
	}
	// A message with tool calls goes to reflection, the same bytes.
	m := &Message{ID: "m1", Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "c", Name: "n"}}, Time: goldenTime}
	if checkFrame(t, &Header{Type: EvTurnFinished, Time: goldenTime}, &TurnFinished{Message: m, Measured: &view.Measurement{Tokens: 1}}) {
		t.Fatal("a message with tool calls took the fast path")
	}
}

// FuzzFastFrame: any strings and numbers in the covered events encode as
// encoding/json encodes them.
func FuzzFastFrame(f *testing.F) {
	for _, s := range nastyStrings {
		f.Add(s, s, int64(1), uint64(2), int64(0))
	}
	f.Add("t", `[ {"key": "k", "text": "<a> & \u2028"} ]`, int64(3), uint64(4), int64(5))
	f.Fuzz(func(t *testing.T, a, b string, n int64, u uint64, sec int64) {
		at := time.Unix(sec, n).In(time.FixedZone(b, int(n%100000)))
		h := Header{Chat: a, Seq: u, Time: at, By: b}
		msg := &Message{ID: a, Role: b, Text: a + b, Seq: u, Time: at, State: b, Turn: a, Tokens: int(n), TextAt: u, Model: b, Regenerates: a}
		for _, p := range []Payload{
			&TurnStarted{Turn: a},
			&ReplyDelta{Turn: a, Offset: int(n), Text: b},
			&MessageAccepted{Message: msg},
			&MessagePicked{Message: msg, Turn: b},
			&TurnFinished{Message: msg, Turn: a, Reply: b, Usage: provider.Usage{InputTokens: int(n), OutputTokens: int(sec)}, Model: a,
				Measured: &view.Measurement{Tokens: int(n), Epoch: u, Seq: u, Basis: view.Basis{Model: a, Prompt: b}}, Held: int(sec)},
			&ContextReading{Turn: a, Model: b, ContextInfo: &runtime.ContextInfo{Used: int(n), Window: int(sec), SoftReached: n%2 == 0, Request: int(u % 1000), Model: a, Line: b}},
			&RuntimeContext{Turn: a, Sections: json.RawMessage(b), Tokens: int(n)},
		} {
			h.Type = p.eventType()
			checkFrame(t, &h, p)
		}
	})
}
