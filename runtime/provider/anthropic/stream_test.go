package anthropic

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

type outcome struct {
	pieces   []string
	result   provider.Result
	complete bool
	failed   bool
}

func parse(raw []byte, oneByte bool) outcome {
	var o outcome
	var st stream
	var r io.Reader = bytes.NewReader(raw)
	if oneByte {
		r = iotest.OneByteReader(r)
	}
	err := st.read(r, collect(&o.pieces))
	o.result, o.complete, o.failed = st.result(), st.complete(), err != nil
	return o
}

func events(evs ...string) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString("event: x\ndata: " + e + "\n\n")
	}
	return b.String()
}

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		raw      string
		want     []string
		calls    []provider.ToolCall
		complete bool
		failed   bool
	}{
		{"fixture", events(messageStart, textStart, ping, textDelta(0, "I'll check."), textStop, toolStart, jsonDelta(1, `{"a":`), jsonDelta(1, `1}`), toolStop, messageDelta("tool_use", 9), messageStop),
			[]string{"I'll check."}, []provider.ToolCall{{ID: "toolu_01NRLabsLyVHZPKxbKvkfSMn", Name: "get_weather", Arguments: `{"a":1}`}}, true, false},
		{"crlf framing", strings.ReplaceAll(events(textStart, textDelta(0, "x"), messageStop), "\n", "\r\n"), []string{"x"}, nil, true, false},
		{"type from the event name", "event: message_stop\ndata: {}\n\n", nil, nil, true, false},
		{"text in content_block_start", events(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"Hi"}}`), []string{"Hi"}, nil, false, false},
		{"delta for an unknown block", events(textDelta(3, "lost")), nil, nil, false, false},
		{"text delta on a tool block ignored", events(toolStart, textDelta(1, "no")), nil, []provider.ToolCall{{ID: "toolu_01NRLabsLyVHZPKxbKvkfSMn", Name: "get_weather", Arguments: "{}"}}, false, false},
		{"not json", "data: nope\n\n", nil, nil, false, true},
		{"error event", events(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), nil, nil, false, true},
		{"stops at message_stop", events(textStart, messageStop, textDelta(0, "after")), nil, nil, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := parse([]byte(tt.raw), false)
			if !slices.Equal(o.pieces, tt.want) || !slices.Equal(o.result.ToolCalls, tt.calls) || o.complete != tt.complete || o.failed != tt.failed {
				t.Fatalf("pieces %q calls %+v complete %v failed %v", o.pieces, o.result.ToolCalls, o.complete, o.failed)
			}
		})
	}
}

// FuzzStream feeds arbitrary bytes to the SSE parser and event decoder: it
// must never panic, the emitted pieces must add up to the result text in
// order, and reading one byte at a time must give exactly the same outcome.
func FuzzStream(f *testing.F) {
	f.Add([]byte(events(messageStartCached, textStart, textDelta(0, "a"), toolStart, jsonDelta(1, `{"x"`), jsonDelta(1, `:1}`), messageDelta("tool_use", 3), messageStop)))
	f.Add([]byte("event: error\r\ndata: {\"type\":\"error\"}\r\n\r\n"))
	f.Add([]byte(`data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","input":null}}` + "\n\n"))
	f.Add([]byte(`data: {"type":"message_delta","usage":{"input_tokens":null,"output_tokens":7}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		whole := parse(raw, false)
		if strings.Join(whole.pieces, "") != whole.result.Text {
			t.Fatalf("pieces %q do not add up to %q", whole.pieces, whole.result.Text)
		}
		bytewise := parse(raw, true)
		if !slices.Equal(whole.pieces, bytewise.pieces) || whole.complete != bytewise.complete || whole.failed != bytewise.failed ||
			whole.result.FinishReason != bytewise.result.FinishReason || whole.result.Usage != bytewise.result.Usage ||
			!slices.Equal(whole.result.ToolCalls, bytewise.result.ToolCalls) {
			t.Fatalf("reading byte by byte changed the outcome:\n%+v\n%+v", whole, bytewise)
		}
	})
}
