package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

func text(s string) string {
	b, _ := json.Marshal(s)
	return `{"choices":[{"index":0,"delta":{"content":` + string(b) + `},"finish_reason":null}],"usage":null}`
}

const stop = `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`

func TestSSEFraming(t *testing.T) {
	tests := []struct {
		name     string
		raw      string
		want     []string
		done     bool
		errClass string // "" no error, "decode", "stream"
	}{
		{"lf", "data: " + text("a") + "\n\ndata: " + text("b") + "\n\ndata: [DONE]\n\n", []string{"a", "b"}, true, ""},
		{"crlf", "data: " + text("a") + "\r\n\r\ndata: [DONE]\r\n\r\n", []string{"a"}, true, ""},
		{"lone cr", "data: " + text("a") + "\r\rdata: [DONE]\r\r", []string{"a"}, true, ""},
		{"no space after colon", "data:" + text("a") + "\n\n", []string{"a"}, false, ""},
		{"comments and unknown fields", ": ping\n\nid: 7\nretry: 100\nevent: message\ndata: " + text("a") + "\n\n: ping\n\n", []string{"a"}, false, ""},
		{"bom", "\xEF\xBB\xBFdata: " + text("a") + "\n\n", []string{"a"}, false, ""},
		{"multi-line data joins", "data: {\"choices\":[{\"index\":0,\n" + "data: \"delta\":{\"content\":\"x\"}}]}\n\n", []string{"x"}, false, ""},
		{"no blank line between events", "data: " + text("a") + "\ndata: " + text("b") + "\n\n", []string{"a", "b"}, false, ""},
		{"last event without blank line", "data: " + text("a") + "\ndata: [DONE]", []string{"a"}, true, ""},
		{"done without blank line ends at once", "data: " + text("a") + "\n\ndata: [DONE]\ndata: " + text("never") + "\n\n", []string{"a"}, true, ""},
		{"blank lines only", "\n\n\r\n", nil, false, ""},
		{"second choice ignored", `data: {"choices":[{"index":1,"delta":{"content":"no"}},{"index":0,"delta":{"content":"yes"}}]}` + "\n\n", []string{"yes"}, false, ""},
		{"refusal shown", `data: {"choices":[{"index":0,"delta":{"content":null,"refusal":"I can't help with that."}}]}` + "\n\n", []string{"I can't help with that."}, false, ""},
		{"null error is no error", `data: {"error":null,"choices":[{"index":0,"delta":{"content":"a"}}]}` + "\n\n", []string{"a"}, false, ""},
		{"cut json", "data: " + text("a") + "\n\ndata: {\"choices\":[{\"ind", []string{"a"}, false, "decode"},
		{"not json", "data: hello\n\n", nil, false, "decode"},
		{"error chunk", "data: " + text("a") + "\n\ndata: {\"error\":{\"message\":\"boom\"}}\n\n", []string{"a"}, false, "stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			var st stream
			err := st.read(strings.NewReader(tt.raw), collect(&got))
			var de *provider.DecodeError
			var se *provider.StreamError
			switch tt.errClass {
			case "":
				if err != nil {
					t.Fatalf("err %v", err)
				}
			case "decode":
				if !errors.As(err, &de) {
					t.Fatalf("err %v, want decode error", err)
				}
			case "stream":
				if !errors.As(err, &se) {
					t.Fatalf("err %v, want stream error", err)
				}
			}
			if !slices.Equal(got, tt.want) || st.done != tt.done {
				t.Fatalf("pieces %q done %v, want %q done %v", got, st.done, tt.want, tt.done)
			}
		})
	}
}

func TestLongLine(t *testing.T) {
	// One chunk of 3 MiB: a whole file written by a tool call, as Ollama
	// sends arguments in one piece.
	big := strings.Repeat("x", 3<<20)
	args, _ := json.Marshal(`{"content":"` + big + `"}`)
	raw := `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"write","arguments":` + string(args) + `}}]}}]}` + "\n\n" + "data: " + stop + "\n\ndata: [DONE]\n\n"
	var st stream
	if err := st.read(strings.NewReader(raw), collect(new([]string))); err != nil {
		t.Fatal(err)
	}
	res := st.result()
	if len(res.ToolCalls) != 1 || len(res.ToolCalls[0].Arguments) != len(big)+14 {
		t.Fatalf("tool call lost: %d calls", len(res.ToolCalls))
	}

	var tooLong stream
	err := tooLong.read(strings.NewReader("data: "+strings.Repeat("y", maxLine+1)+"\n\n"), collect(new([]string)))
	var de *provider.DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("err %v, want decode error for an over-long line", err)
	}
}

func TestToolCallsWithoutIndex(t *testing.T) {
	raw := `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"a","function":{"name":"one","arguments":"{\"x\""}}]}}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":":1}"}}]}}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"b","function":{"name":"two","arguments":"{}"}}]}}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n"
	var st stream
	if err := st.read(strings.NewReader(raw), collect(new([]string))); err != nil {
		t.Fatal(err)
	}
	want := []provider.ToolCall{{ID: "a", Name: "one", Arguments: `{"x":1}`}, {ID: "b", Name: "two", Arguments: "{}"}}
	if got := st.result().ToolCalls; !slices.Equal(got, want) {
		t.Fatalf("%+v", got)
	}
}

// outcome is everything a parse produced.
type outcome struct {
	pieces []string
	result provider.Result
	done   bool
	failed bool
}

// parse reads raw whole, or one byte per Read when oneByte is set.
func parse(raw []byte, oneByte bool) outcome {
	var o outcome
	var st stream
	var r io.Reader = bytes.NewReader(raw)
	if oneByte {
		r = iotest.OneByteReader(r)
	}
	err := st.read(r, collect(&o.pieces))
	o.result, o.done, o.failed = st.result(), st.done, err != nil
	return o
}

// FuzzStream feeds arbitrary bytes to the SSE parser and chunk decoder: it
// must never panic, the emitted pieces must add up to the result text in
// order, and reading one byte at a time must give exactly the same outcome.
func FuzzStream(f *testing.F) {
	f.Add([]byte("data: " + text("a") + "\n\ndata: " + text("b") + "\r\n\r\ndata: [DONE]\n\n"))
	f.Add([]byte("data: " + toolStartChunk(0, "call_1", "get") + "\n\ndata: " + toolArgsChunk(0, `{"a":1}`) + "\n\n"))
	f.Add([]byte(": c\r\rdata:" + text("x") + "\r"))
	f.Add([]byte("event: error\ndata: {}\n\n"))
	f.Add([]byte(`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"z"}}]}}],"usage":{"prompt_tokens":1,"prompt_tokens_details":null}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		whole := parse(raw, false)
		if strings.Join(whole.pieces, "") != whole.result.Text {
			t.Fatalf("pieces %q do not add up to %q", whole.pieces, whole.result.Text)
		}
		bytewise := parse(raw, true)
		if !slices.Equal(whole.pieces, bytewise.pieces) || whole.done != bytewise.done || whole.failed != bytewise.failed ||
			whole.result.FinishReason != bytewise.result.FinishReason || whole.result.Usage != bytewise.result.Usage ||
			!slices.Equal(whole.result.ToolCalls, bytewise.result.ToolCalls) {
			t.Fatalf("reading byte by byte changed the outcome:\n%+v\n%+v", whole, bytewise)
		}
	})
}

// FuzzRoundTrip encodes fuzzed text pieces as real chunks with fuzzed line
// endings and keep-alive comments, and checks every piece comes back, in
// order, unchanged.
func FuzzRoundTrip(f *testing.F) {
	f.Add("Hello|, world|!", uint8(0))
	f.Add("line\nbreak|\r\n|«ünï»|", uint8(5))
	f.Add("a||b", uint8(2))
	f.Fuzz(func(t *testing.T, joined string, mode uint8) {
		eol := []string{"\n", "\r\n", "\r"}[mode%3]
		var raw strings.Builder
		var want []string
		for i, p := range strings.Split(joined, "|") {
			if mode&4 != 0 && i%2 == 0 {
				raw.WriteString(": keep-alive" + eol + eol)
			}
			raw.WriteString("data: " + text(p) + eol + eol)
			// JSON carries invalid UTF-8 as U+FFFD; expect what it decodes to.
			var decoded string
			b, _ := json.Marshal(p)
			if json.Unmarshal(b, &decoded); decoded != "" {
				want = append(want, decoded)
			}
		}
		raw.WriteString("data: " + stop + eol + eol + "data: [DONE]" + eol + eol)
		var got []string
		var st stream
		if err := st.read(strings.NewReader(raw.String()), collect(&got)); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) || !st.complete() {
			t.Fatalf("got %q, want %q (complete %v)", got, want, st.complete())
		}
	})
}
