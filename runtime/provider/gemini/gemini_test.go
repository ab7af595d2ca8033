package gemini

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const testKey = "AIzaSyD-0123456789abcdefSECRETkeyABCDEF"

func hello() provider.Request {
	return provider.Request{Model: "gemini-2.5-pro", Messages: []provider.Message{{Role: provider.RoleUser, Content: "Weather in Paris?"}}}
}

func collect(pieces *[]string) func(provider.Delta) error {
	return func(d provider.Delta) error { *pieces = append(*pieces, d.Text); return nil }
}

func TestStreamText(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		chunk(w, textChunk1)
		chunk(w, textChunk2)
		chunk(w, stopChunk)
	})
	var got []string
	res, err := f.client(testKey).Stream(context.Background(), hello(), collect(&got))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"Let me", " check the weather for you."}; !slices.Equal(got, want) {
		t.Fatalf("pieces %q, want %q", got, want)
	}
	// Output counts the thinking tokens: Google bills them as output.
	if res.Text != "Let me check the weather for you." || res.FinishReason != "stop" ||
		res.Usage != (provider.Usage{InputTokens: 60, OutputTokens: 46}) || res.ToolCalls != nil || res.Limits != nil {
		t.Fatalf("result %+v", res)
	}
	r := f.requests()[0]
	if r.Method != http.MethodPost || r.Path != "/v1beta/models/gemini-2.5-pro:streamGenerateContent" || r.RawQuery != "alt=sse" {
		t.Fatalf("%s %s?%s", r.Method, r.Path, r.RawQuery)
	}
	for h, v := range map[string]string{"X-Goog-Api-Key": testKey, "Content-Type": "application/json", "Accept": "text/event-stream"} {
		if got := r.Header.Get(h); got != v {
			t.Errorf("header %s = %q, want %q", h, got, v)
		}
	}
	if strings.Contains(r.Path+r.RawQuery, testKey) {
		t.Fatal("the key is in the URL")
	}
}

func TestModelPrefix(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) { sseHeaders(w); chunk(w, stopChunk) })
	req := hello()
	req.Model = "models/gemini-2.5-flash"
	if _, err := f.client(testKey).Stream(context.Background(), req, collect(new([]string))); err != nil {
		t.Fatal(err)
	}
	if p := f.requests()[0].Path; p != "/v1beta/models/gemini-2.5-flash:streamGenerateContent" {
		t.Fatalf("path %s", p)
	}
}

func TestFunctionCalls(t *testing.T) {
	two := `{"candidates": [{"content": {"parts": [{"functionCall": {"name": "get_weather","args": {"location": "Paris"}}},{"functionCall": {"name": "get_weather","args": {"location": "Paris"}}},{"functionCall": {"id": "given-1","name": "get_time","args": {}}}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 60,"candidatesTokenCount": 20,"totalTokenCount": 80},"responseId": "r2"}`
	tests := []struct {
		name   string
		chunks []string
		want   []provider.ToolCall // ids "" = synthesized, checked below
	}{
		{"after text (wire-formats §3)", []string{textChunk2, callChunk}, []provider.ToolCall{{Name: "get_weather", Arguments: `{"location":"Paris"}`}}},
		{"parallel, identical and given ids", []string{two}, []provider.ToolCall{
			{Name: "get_weather", Arguments: `{"location":"Paris"}`},
			{Name: "get_weather", Arguments: `{"location":"Paris"}`},
			{ID: "given-1", Name: "get_time", Arguments: `{}`},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				sseHeaders(w)
				for _, c := range tt.chunks {
					chunk(w, c)
				}
			})
			run := func(req provider.Request) provider.Result {
				res, err := f.client(testKey).Stream(context.Background(), req, collect(new([]string)))
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			res := run(hello())
			if res.FinishReason != "tool_calls" || len(res.ToolCalls) != len(tt.want) {
				t.Fatalf("finish %q calls %+v", res.FinishReason, res.ToolCalls)
			}
			ids := map[string]bool{}
			for i, c := range res.ToolCalls {
				w := tt.want[i]
				if c.Name != w.Name || c.Arguments != w.Arguments || (w.ID != "" && c.ID != w.ID) {
					t.Fatalf("call %d %+v, want %+v", i, c, w)
				}
				if w.ID == "" && !strings.HasPrefix(c.ID, "call_") {
					t.Fatalf("call %d has id %q", i, c.ID)
				}
				if ids[c.ID] {
					t.Fatalf("id %s repeated", c.ID)
				}
				ids[c.ID] = true
			}
			// Deterministic for the same exchange, different for another turn.
			if again := run(hello()); !slices.Equal(again.ToolCalls, res.ToolCalls) {
				t.Fatalf("ids changed: %+v vs %+v", again.ToolCalls, res.ToolCalls)
			}
			other := hello()
			other.Messages = append(other.Messages, provider.Message{Role: provider.RoleAssistant, Content: "Sunny."}, provider.Message{Role: provider.RoleUser, Content: "And now?"})
			if next := run(other); next.ToolCalls[0].ID == res.ToolCalls[0].ID {
				t.Fatalf("the next turn reuses id %s", next.ToolCalls[0].ID)
			}
		})
	}
}

func TestCachedTokens(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) { sseHeaders(w); chunk(w, cachedChunk) })
	res, err := f.client(testKey).Stream(context.Background(), hello(), collect(new([]string)))
	if err != nil {
		t.Fatal(err)
	}
	// Gemini's prompt count already includes the cached part.
	if want := (provider.Usage{InputTokens: 1200, OutputTokens: 80, CachedTokens: 1024}); res.Usage != want {
		t.Fatalf("usage %+v, want %+v", res.Usage, want)
	}
}

func TestStreamEnds(t *testing.T) {
	tests := []struct {
		name      string
		write     func(w http.ResponseWriter)
		wantClass provider.Class // "" = success
		wantText  string
		finish    string
	}{
		{"finish reason ends it", func(w http.ResponseWriter) { chunk(w, textChunk1); chunk(w, stopChunk) }, "", "Let me", "stop"},
		{"max tokens", func(w http.ResponseWriter) {
			chunk(w, `{"candidates":[{"content":{"parts":[{"text":"Long"}],"role":"model"},"finishReason":"MAX_TOKENS","index":0}]}`)
		}, "", "Long", "length"},
		{"prompt blocked", func(w http.ResponseWriter) {
			chunk(w, `{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9}}`)
		}, "", "", "content_filter"},
		{"thoughts are not text", func(w http.ResponseWriter) {
			chunk(w, `{"candidates":[{"content":{"parts":[{"text":"pondering","thought":true},{"text":"Answer"}],"role":"model"},"finishReason":"STOP","index":0}]}`)
		}, "", "Answer", "stop"},
		{"clean end without finish broke", func(w http.ResponseWriter) { chunk(w, textChunk1) }, provider.ClassNetwork, "Let me", ""},
		{"cut mid-chunk broke", func(w http.ResponseWriter) {
			chunk(w, textChunk1)
			send(w, `data: {"candidates": [{"content": {"parts": [{"text": " che`)
		}, provider.ClassNetwork, "Let me", ""},
		{"empty body broke", func(w http.ResponseWriter) {}, provider.ClassNetwork, "", ""},
		{"error mid-stream", func(w http.ResponseWriter) {
			chunk(w, textChunk1)
			chunk(w, `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`)
		}, provider.ClassOverloaded, "Let me", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) { sseHeaders(w); tt.write(w) })
			res, err := f.client(testKey).Stream(context.Background(), hello(), collect(new([]string)))
			if got := provider.ClassOf(err); got != tt.wantClass {
				t.Fatalf("class %q (err %v), want %q", got, err, tt.wantClass)
			}
			if res.Text != tt.wantText || res.FinishReason != tt.finish {
				t.Fatalf("text %q finish %q, want %q %q", res.Text, res.FinishReason, tt.wantText, tt.finish)
			}
			if tt.wantClass == provider.ClassNetwork && !strings.Contains(err.Error(), "stream broke mid-reply") {
				t.Fatalf("error %q does not say the stream broke", err)
			}
			if err != nil && res.ToolCalls != nil {
				t.Fatalf("tool calls on a failed stream: %+v", res.ToolCalls)
			}
		})
	}
}

func TestConnectionDropped(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		chunk(w, textChunk1)
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close() // no chunked terminator: the client sees a broken body
		}
	})
	res, err := f.client(testKey).Stream(context.Background(), hello(), collect(new([]string)))
	if provider.ClassOf(err) != provider.ClassNetwork || res.Text != "Let me" {
		t.Fatalf("err %v, text %q", err, res.Text)
	}
}

func TestCancelMidStream(t *testing.T) {
	var f *fake
	f = newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		chunk(w, textChunk1)
		f.wait(r) // then silence until the client goes away
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := f.client(testKey).Stream(ctx, hello(), func(provider.Delta) error { cancel(); return nil })
	if !errors.Is(err, context.Canceled) || res.Text != "Let me" {
		t.Fatalf("err %v, text %q", err, res.Text)
	}
}

func TestCancelBeforeHeaders(t *testing.T) {
	var f *fake
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Cancel once the request is at the server, which never answers.
	f = newFake(t, func(w http.ResponseWriter, r *http.Request) { cancel(); f.wait(r) })
	if _, err := f.client(testKey).Stream(ctx, hello(), collect(new([]string))); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
}

func TestIdleTimeout(t *testing.T) {
	var f *fake
	f = newFake(t, func(w http.ResponseWriter, r *http.Request) { sseHeaders(w); chunk(w, textChunk1); f.wait(r) })
	c := New(Config{Name: "test", BaseURL: f.URL + "/v1beta", IdleTimeout: 50 * time.Millisecond})
	res, err := c.Stream(context.Background(), hello(), collect(new([]string)))
	if provider.ClassOf(err) != provider.ClassNetwork || !strings.Contains(err.Error(), "nothing received") || res.Text != "Let me" {
		t.Fatalf("err %v, text %q", err, res.Text)
	}
}

func TestEmitError(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		chunk(w, textChunk1)
		chunk(w, textChunk2)
		chunk(w, stopChunk)
	})
	boom := errors.New("subscriber gone")
	n := 0
	res, err := f.client(testKey).Stream(context.Background(), hello(), func(provider.Delta) error {
		if n++; n == 2 {
			return boom
		}
		return nil
	})
	if err != boom || res.Text != "Let me" {
		t.Fatalf("err %v, text %q", err, res.Text)
	}
}

func TestTransportError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = New(Config{Name: "dead", BaseURL: "http://" + addr + "/v1beta", APIKey: testKey}).Stream(context.Background(), hello(), collect(new([]string)))
	var op *net.OpError
	if provider.ClassOf(err) != provider.ClassNetwork || !errors.As(err, &op) || strings.Contains(err.Error(), testKey) {
		t.Fatalf("err %v", err)
	}
}

func goldenRequest() provider.Request {
	return provider.Request{
		Model: "gemini-2.5-flash",
		Messages: []provider.Message{
			{Role: provider.RoleSystem, Content: "You are Mirror, a helpful assistant reached through a chat gateway."},
			{Role: provider.RoleSystem, Content: "Answer clearly and concisely."},
			{Role: provider.RoleUser, Content: "What's the weather in Lisbon? Use <tools> & \"quotes\"."},
			{Role: provider.RoleAssistant, Content: "Checking.", ToolCalls: []provider.ToolCall{
				{ID: "call_1", Name: "get_weather", Arguments: `{"city": "Lisbon"}`, Signature: "CiQB0e2Kb2xP"},
				{ID: "call_2", Name: "get_time", Arguments: ""},
			}},
			{Role: provider.RoleTool, ToolCallID: "call_1", Content: `{"temp_c":21,"sky":"clear"}`},
			{Role: provider.RoleTool, ToolCallID: "call_2", Content: "15:04"},
			{Role: provider.RoleAssistant, Content: "It is 21 °C and clear in Lisbon at 15:04."},
			{Role: provider.RoleSystem, Content: "Runtime note: the user is on Telegram."},
			{Role: provider.RoleUser, Content: "Thanks!"},
		},
		Tools: []provider.Tool{
			{Name: "get_weather", Description: "Current weather for a city.",
				Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)},
			{Name: "get_time", Description: "The local time."},
		},
		MaxTokens: 1024,
	}
}

func TestRequestGolden(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) { sseHeaders(w); chunk(w, stopChunk) })
	if _, err := f.client(testKey).Stream(context.Background(), goldenRequest(), collect(new([]string))); err != nil {
		t.Fatal(err)
	}
	got := append(f.requests()[0].Body, '\n')
	want := providertest.Golden(t, filepath.Join("testdata", "request.golden.json"), got, *update)
	// Same request, same bytes: the implicit prefix cache depends on it.
	again, err := encodeRequest(goldenRequest())
	if err != nil || !bytes.Equal(append(again, '\n'), want) {
		t.Fatalf("second encoding differs (%v)", err)
	}
}

func TestRefusedLocally(t *testing.T) {
	tests := []struct {
		name string
		req  provider.Request
	}{
		{"no model", provider.Request{Messages: hello().Messages}},
		{"system only", provider.Request{Model: "m", Messages: []provider.Message{{Role: provider.RoleSystem, Content: "x"}}}},
		{"unknown role", provider.Request{Model: "m", Messages: []provider.Message{{Role: "narrator", Content: "x"}}}},
		{"arguments not an object", provider.Request{Model: "m", Messages: []provider.Message{
			{Role: provider.RoleUser, Content: "x"},
			{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "a", Name: "f", Arguments: `{"cut`}}}}}},
		{"bad tool schema", provider.Request{Model: "m", Messages: hello().Messages, Tools: []provider.Tool{{Name: "t", Parameters: []byte(`{"type":`)}}}},
	}
	for _, tt := range tests {
		_, err := New(Config{Name: "test", BaseURL: "http://127.0.0.1:1/v1beta", APIKey: testKey}).Stream(context.Background(), tt.req, collect(new([]string)))
		if provider.ClassOf(err) != provider.ClassBadRequest {
			t.Errorf("%s: err %v", tt.name, err)
		}
	}
}

func TestFingerprint(t *testing.T) {
	fp := New(Config{APIKey: testKey}).Fingerprint()
	if fp != provider.Fingerprint(testKey) || fp == "" || strings.Contains(testKey, fp) {
		t.Fatalf("fingerprint %q", fp)
	}
}
