package gemini

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// outcome is everything a parse produced.
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

func TestParseFraming(t *testing.T) {
	tests := []struct {
		name     string
		raw      string
		want     []string
		complete bool
		failed   bool
	}{
		{"lf", "data: " + textChunk1 + "\n\ndata: " + stopChunk + "\n\n", []string{"Let me"}, true, false},
		{"crlf", "data: " + textChunk1 + "\r\n\r\n", []string{"Let me"}, false, false},
		{"concatenated values", "data: " + textChunk1 + "\ndata: " + textChunk2 + "\n\n", []string{"Let me", " check the weather for you."}, false, false},
		{"second candidate ignored", `data: {"candidates":[{"index":1,"content":{"parts":[{"text":"no"}]}},{"content":{"parts":[{"text":"yes"}]}}]}` + "\n\n", []string{"yes"}, false, false},
		{"null parts", `data: {"candidates":[{"content":null,"finishReason":"SAFETY"}]}` + "\n\n", nil, true, false},
		{"not json", "data: hello\n\n", nil, false, true},
		{"error", `data: {"error":{"code":500,"message":"x","status":"INTERNAL"}}` + "\n\n", nil, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := parse([]byte(tt.raw), false)
			if !slices.Equal(o.pieces, tt.want) || o.complete != tt.complete || o.failed != tt.failed {
				t.Fatalf("pieces %q complete %v failed %v", o.pieces, o.complete, o.failed)
			}
		})
	}
}

// FuzzStream feeds arbitrary bytes to the SSE parser and chunk decoder: it
// must never panic, the emitted pieces must add up to the result text in
// order, tool calls must carry ids, and reading one byte at a time must give
// exactly the same outcome.
func FuzzStream(f *testing.F) {
	f.Add([]byte("data: " + textChunk1 + "\r\n\r\ndata: " + callChunk + "\r\n\r\n"))
	f.Add([]byte("data: " + cachedChunk + "\n\n"))
	f.Add([]byte(`data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":null}},{"text":"x","thought":true}]},"finishReason":"STOP"}],"promptFeedback":{"blockReason":"OTHER"}}`))
	f.Add([]byte(`data: {"error":{"code":429}}` + "\r"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		whole := parse(raw, false)
		if strings.Join(whole.pieces, "") != whole.result.Text {
			t.Fatalf("pieces %q do not add up to %q", whole.pieces, whole.result.Text)
		}
		for _, c := range whole.result.ToolCalls {
			if c.ID == "" || c.Arguments == "" {
				t.Fatalf("call without id or arguments: %+v", c)
			}
		}
		bytewise := parse(raw, true)
		if !slices.Equal(whole.pieces, bytewise.pieces) || whole.complete != bytewise.complete || whole.failed != bytewise.failed ||
			whole.result.FinishReason != bytewise.result.FinishReason || whole.result.Usage != bytewise.result.Usage ||
			!slices.Equal(whole.result.ToolCalls, bytewise.result.ToolCalls) {
			t.Fatalf("reading byte by byte changed the outcome:\n%+v\n%+v", whole, bytewise)
		}
	})
}

// FuzzErrorBody: any error body classifies without panicking, into a class
// of the closed vocabulary.
func FuzzErrorBody(f *testing.F) {
	for _, b := range []string{bodyTPM, bodyZero, bodyBadKey, "[" + bodyNotFound + "]", `{"error":{"details":[{"@type":"x.QuotaFailure","violations":[{"quotaValue":{}}]}]}}`} {
		f.Add(b, 429)
	}
	f.Fuzz(func(t *testing.T, body string, status int) {
		c := New(Config{Name: "fuzz", APIKey: testKey})
		e := c.bodyError(status%600, nil, []byte(body), fixedNow)
		if !slices.Contains(provider.Classes(), e.Class) {
			t.Fatalf("class %q outside the vocabulary", e.Class)
		}
		if e.Class == provider.ClassQuota && e.RetryAfter != 0 {
			t.Fatalf("quota with a retry: %+v", e)
		}
	})
}
