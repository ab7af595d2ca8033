package gemini

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// gemini3Calls is a Gemini 3 answer of function calls (one part each), the
// first of them carrying sig (Gemini 3 signs only the first call part of a
// parallel set; "" sends none).
func gemini3Calls(response, sig string, cities ...string) string {
	parts := make([]string, len(cities))
	for i, c := range cities {
		parts[i] = fmt.Sprintf(`{"functionCall": {"name": "get_weather","args": {"location": %q}}}`, c)
		if i == 0 && sig != "" {
			parts[i] = fmt.Sprintf(`{"functionCall": {"name": "get_weather","args": {"location": %q}},"thoughtSignature": %q}`, c, sig)
		}
	}
	return `{"candidates": [{"content": {"parts": [` + strings.Join(parts, ",") + `],"role": "model"},"finishReason": "STOP","index": 0}],` +
		`"usageMetadata": {"promptTokenCount": 80,"candidatesTokenCount": 20,"totalTokenCount": 100,"thoughtsTokenCount": 12},` +
		`"modelVersion": "gemini-3-pro-preview","responseId": "` + response + `"}`
}

// signature is an opaque signature as long and as varied as real ones
// (base64 with +, / and padding), different for each n.
func signature(n int) string {
	raw := make([]byte, 700+n)
	for i := range raw {
		raw[i] = byte(i*31 + n*7)
	}
	return base64.StdEncoding.EncodeToString(raw)
}

// sentPart is a part of a request as the fake reads it, with the
// signature's presence told apart from an empty value.
type sentPart struct {
	FunctionCall *struct {
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
	ThoughtSignature *string `json:"thoughtSignature"`
}

// Each step of a multi-step tool turn sends back, in the very part each
// call came in, the exact thought signature Gemini gave it; a parallel
// set's later calls, which came unsigned, go back unsigned. The calls pass
// through JSON between steps, as the record stores them, so what survives
// a restart is what is sent.
func TestThoughtSignaturesGoBackWithTheirCalls(t *testing.T) {
	tests := []struct {
		name  string
		steps [][]string // per step: the cities called; the step's signature is signature(step)
	}{
		{"one call", [][]string{{"Paris"}}},
		{"sequential steps", [][]string{{"Paris"}, {"Lyon"}, {"Nice"}}},
		{"parallel calls", [][]string{{"Paris", "Tokyo", "Lima"}}},
		{"parallel then sequential", [][]string{{"Paris", "Tokyo"}, {"Lyon"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				sseHeaders(w)
				if n < len(tc.steps) {
					chunk(w, gemini3Calls(fmt.Sprintf("resp-%d", n), signature(n), tc.steps[n]...))
				} else {
					chunk(w, stopChunk)
				}
				n++
			})
			c := f.client(testKey)
			req := hello()
			req.Model = "gemini-3-pro-preview"
			req.Tools = []provider.Tool{{Name: "get_weather", Parameters: []byte(`{"type":"object"}`)}}
			var want []*string // the signature each call part of the last request must carry
			for step := range tc.steps {
				res, err := c.Stream(context.Background(), req, collect(new([]string)))
				if err != nil {
					t.Fatal(err)
				}
				if len(res.ToolCalls) != len(tc.steps[step]) {
					t.Fatalf("step %d: %d calls", step, len(res.ToolCalls))
				}
				// Stored and read back, as the chat's record does.
				raw, err := json.Marshal(res.ToolCalls)
				if err != nil {
					t.Fatal(err)
				}
				var calls []provider.ToolCall
				if err := json.Unmarshal(raw, &calls); err != nil {
					t.Fatal(err)
				}
				req.Messages = append(req.Messages, provider.Message{Role: provider.RoleAssistant, ToolCalls: calls})
				for i, call := range calls {
					req.Messages = append(req.Messages, provider.Message{Role: provider.RoleTool, ToolCallID: call.ID, Content: "sunny"})
					if i == 0 {
						s := signature(step)
						want = append(want, &s)
					} else {
						want = append(want, nil)
					}
				}
			}
			if _, err := c.Stream(context.Background(), req, collect(new([]string))); err != nil {
				t.Fatal(err)
			}
			reqs := f.requests()
			var body struct {
				Contents []struct {
					Role  string     `json:"role"`
					Parts []sentPart `json:"parts"`
				} `json:"contents"`
			}
			if err := json.Unmarshal(reqs[len(reqs)-1].Body, &body); err != nil {
				t.Fatal(err)
			}
			var got []*string
			for _, content := range body.Contents {
				for _, p := range content.Parts {
					if p.FunctionCall != nil {
						if content.Role != "model" {
							t.Fatalf("a call in a %s content", content.Role)
						}
						got = append(got, p.ThoughtSignature)
					}
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%d call parts sent, want %d", len(got), len(want))
			}
			for i := range want {
				switch {
				case want[i] == nil && got[i] != nil:
					t.Errorf("call part %d: signature %.20q… sent for a call that came unsigned", i, *got[i])
				case want[i] != nil && got[i] == nil:
					t.Errorf("call part %d: no signature, want the one it came with", i)
				case want[i] != nil && *got[i] != *want[i]:
					t.Errorf("call part %d: signature %.20q…, want %.20q…", i, *got[i], *want[i])
				}
			}
		})
	}
}

// FuzzSignatureRoundTrip: whatever stream arrives, each call it yields goes
// back in the next request with exactly the signature its part carried,
// and a call that came unsigned goes back unsigned.
func FuzzSignatureRoundTrip(f *testing.F) {
	f.Add([]byte("data: " + gemini3Calls("r", signature(1), "Paris", "Tokyo") + "\r\n\r\n"))
	f.Add([]byte("data: " + callChunk + "\n\n"))
	f.Add([]byte(`data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"f"},"thoughtSignature":"a\u0000\"b"},{"text":"x","thoughtSignature":"t"}]},"finishReason":"STOP"}]}` + "\n\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		o := parse(raw, false)
		calls := o.result.ToolCalls
		if o.failed || len(calls) == 0 {
			t.Skip()
		}
		body, err := encodeRequest(provider.Request{Messages: []provider.Message{
			{Role: provider.RoleUser, Content: "go"}, {Role: provider.RoleAssistant, ToolCalls: calls}}})
		if err != nil {
			t.Fatal(err)
		}
		var sent struct {
			Contents []struct {
				Parts []sentPart `json:"parts"`
			} `json:"contents"`
		}
		if err := json.Unmarshal(body, &sent); err != nil {
			t.Fatal(err)
		}
		var got []sentPart
		for _, c := range sent.Contents {
			for _, p := range c.Parts {
				if p.FunctionCall != nil {
					got = append(got, p)
				}
			}
		}
		if len(got) != len(calls) {
			t.Fatalf("%d call parts for %d calls", len(got), len(calls))
		}
		for i, c := range calls {
			sig := ""
			if got[i].ThoughtSignature != nil {
				sig = *got[i].ThoughtSignature
			}
			if sig != c.Signature || (c.Signature == "") != (got[i].ThoughtSignature == nil) {
				t.Fatalf("call %d: sent signature %q, it came with %q", i, sig, c.Signature)
			}
		}
	})
}
