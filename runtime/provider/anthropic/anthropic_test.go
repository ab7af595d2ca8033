package anthropic

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

const testKey = "sk-ant-api03-0123456789abcdefSECRET-AAAA"

func hello() provider.Request {
	return provider.Request{Model: "claude-sonnet-4-20250514", Messages: []provider.Message{{Role: provider.RoleUser, Content: "Weather in Paris?"}}}
}

func collect(pieces *[]string) func(provider.Delta) error {
	return func(d provider.Delta) error { *pieces = append(*pieces, d.Text); return nil }
}

// The tool_use fixture of wire-formats.md §4, event for event.
func writeToolUse(w http.ResponseWriter) {
	event(w, messageStart)
	event(w, textStart)
	event(w, ping)
	event(w, textDelta(0, "I'll check the weather."))
	event(w, textStop)
	event(w, toolStart)
	event(w, jsonDelta(1, ""))
	event(w, jsonDelta(1, `{"locati`))
	event(w, jsonDelta(1, `on": "Paris"}`))
	event(w, toolStop)
	event(w, messageDelta("tool_use", 65))
	event(w, messageStop)
}

func TestStreamText(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		event(w, messageStart)
		event(w, textStart)
		event(w, ping)
		for _, s := range []string{"Hello", ", ", "world", "!"} {
			event(w, textDelta(0, s))
		}
		event(w, textStop)
		event(w, messageDelta("end_turn", 12))
		event(w, messageStop)
	})
	var got []string
	res, err := f.client(testKey).Stream(context.Background(), hello(), collect(&got))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"Hello", ", ", "world", "!"}; !slices.Equal(got, want) {
		t.Fatalf("pieces %q, want %q", got, want)
	}
	if res.Text != "Hello, world!" || res.FinishReason != "stop" || res.Usage != (provider.Usage{InputTokens: 377, OutputTokens: 12}) || res.ToolCalls != nil {
		t.Fatalf("result %+v", res)
	}
	if res.Limits == nil || res.Limits.Requests == nil || res.Limits.Requests.Remaining != 49 || res.Limits.InputTokens.Limit != 40000 {
		t.Fatalf("limits %+v", res.Limits)
	}
	r := f.requests()[0]
	if r.Method != http.MethodPost || r.Path != "/v1/messages" {
		t.Fatalf("%s %s", r.Method, r.Path)
	}
	for h, v := range map[string]string{"X-Api-Key": testKey, "Anthropic-Version": "2023-06-01", "Content-Type": "application/json", "Accept": "text/event-stream"} {
		if got := r.Header.Get(h); got != v {
			t.Errorf("header %s = %q, want %q", h, got, v)
		}
	}
	if r.Header.Get("Authorization") != "" {
		t.Error("Authorization sent to Anthropic")
	}
}

func TestToolUse(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) { sseHeaders(w); writeToolUse(w) })
	var got []string
	res, err := f.client(testKey).Stream(context.Background(), hello(), collect(&got))
	if err != nil {
		t.Fatal(err)
	}
	want := []provider.ToolCall{{ID: "toolu_01NRLabsLyVHZPKxbKvkfSMn", Name: "get_weather", Arguments: `{"location": "Paris"}`}}
	if !slices.Equal(res.ToolCalls, want) || res.FinishReason != "tool_calls" || res.Text != "I'll check the weather." || !slices.Equal(got, []string{"I'll check the weather."}) {
		t.Fatalf("result %+v pieces %q", res, got)
	}
	if res.Usage != (provider.Usage{InputTokens: 377, OutputTokens: 65}) {
		t.Fatalf("usage %+v", res.Usage)
	}
}

func TestParallelToolsWithoutInput(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		event(w, messageStart)
		event(w, `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_a","name":"get_time","input":{}}}`)
		event(w, `{"type":"content_block_stop","index":0}`)
		event(w, `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_b","name":"get_weather","input":{}}}`)
		event(w, jsonDelta(1, `{"city":`))
		event(w, jsonDelta(1, `"Oslo"}`))
		event(w, `{"type":"content_block_stop","index":1}`)
		event(w, messageDelta("tool_use", 30))
		event(w, messageStop)
	})
	res, err := f.client(testKey).Stream(context.Background(), hello(), collect(new([]string)))
	if err != nil {
		t.Fatal(err)
	}
	want := []provider.ToolCall{{ID: "toolu_a", Name: "get_time", Arguments: "{}"}, {ID: "toolu_b", Name: "get_weather", Arguments: `{"city":"Oslo"}`}}
	if !slices.Equal(res.ToolCalls, want) {
		t.Fatalf("calls %+v", res.ToolCalls)
	}
}

func TestCachedTokens(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		event(w, messageStartCached)
		event(w, textStart)
		event(w, textDelta(0, "cached"))
		event(w, textStop)
		// message_delta is cumulative and may repeat the input counts.
		event(w, `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":377,"cache_creation_input_tokens":100,"cache_read_input_tokens":2048,"output_tokens":80,"server_tool_use":{"web_search_requests":0}}}`)
		event(w, messageStop)
	})
	res, err := f.client(testKey).Stream(context.Background(), hello(), collect(new([]string)))
	if err != nil {
		t.Fatal(err)
	}
	// Input counts everything the model read: uncached + cache read + cache write.
	if want := (provider.Usage{InputTokens: 377 + 2048 + 100, OutputTokens: 80, CachedTokens: 2048}); res.Usage != want {
		t.Fatalf("usage %+v, want %+v", res.Usage, want)
	}
}

func TestStreamEnds(t *testing.T) {
	tests := []struct {
		name      string
		write     func(w http.ResponseWriter)
		wantClass provider.Class // "" = success
		wantText  string
	}{
		{"stop reason without message_stop is complete", func(w http.ResponseWriter) {
			event(w, messageStart)
			event(w, textStart)
			event(w, textDelta(0, "all"))
			event(w, messageDelta("max_tokens", 3))
		}, "", "all"},
		{"clean end mid-message broke", func(w http.ResponseWriter) {
			event(w, messageStart)
			event(w, textStart)
			event(w, textDelta(0, "The answer is"))
		}, provider.ClassNetwork, "The answer is"},
		{"end mid-tool broke, no half call", func(w http.ResponseWriter) {
			event(w, messageStart)
			event(w, toolStart)
			event(w, jsonDelta(1, `{"locati`))
		}, provider.ClassNetwork, ""},
		{"cut mid-event broke", func(w http.ResponseWriter) {
			event(w, messageStart)
			event(w, textStart)
			event(w, textDelta(0, "Half"))
			send(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_del")
		}, provider.ClassNetwork, "Half"},
		{"empty body broke", func(w http.ResponseWriter) {}, provider.ClassNetwork, ""},
		{"overloaded mid-stream", func(w http.ResponseWriter) {
			event(w, messageStart)
			event(w, textStart)
			event(w, textDelta(0, "Part"))
			event(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
		}, provider.ClassOverloaded, "Part"},
		{"api error mid-stream", func(w http.ResponseWriter) {
			event(w, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`)
		}, provider.ClassServer, ""},
		{"unknown events ignored", func(w http.ResponseWriter) {
			event(w, messageStart)
			event(w, `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`)
			event(w, `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}`)
			event(w, `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}`)
			event(w, `{"type":"future_event","x":1}`)
			event(w, `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`)
			event(w, textDelta(1, "ok"))
			event(w, messageDelta("end_turn", 5))
			event(w, messageStop)
		}, "", "ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) { sseHeaders(w); tt.write(w) })
			res, err := f.client(testKey).Stream(context.Background(), hello(), collect(new([]string)))
			if got := provider.ClassOf(err); got != tt.wantClass {
				t.Fatalf("class %q (err %v), want %q", got, err, tt.wantClass)
			}
			if res.Text != tt.wantText {
				t.Fatalf("text %q, want %q", res.Text, tt.wantText)
			}
			if err != nil && res.ToolCalls != nil {
				t.Fatalf("tool calls on a failed stream: %+v", res.ToolCalls)
			}
			if tt.wantClass == provider.ClassNetwork && !strings.Contains(err.Error(), "stream broke mid-reply") {
				t.Fatalf("error %q does not say the stream broke", err)
			}
		})
	}
}

// A server that keeps the connection open after message_stop must not
// hang the reply.
func TestMessageStopEndsRead(t *testing.T) {
	var f *fake
	f = newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		writeToolUse(w)
		f.wait(r)
	})
	if _, err := f.client(testKey).Stream(context.Background(), hello(), collect(new([]string))); err != nil {
		t.Fatal(err)
	}
}

func TestConnectionDropped(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		event(w, messageStart)
		event(w, textStart)
		event(w, textDelta(0, "Before the drop"))
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	})
	res, err := f.client(testKey).Stream(context.Background(), hello(), collect(new([]string)))
	if provider.ClassOf(err) != provider.ClassNetwork || res.Text != "Before the drop" {
		t.Fatalf("err %v, text %q", err, res.Text)
	}
}

func TestCancelMidStream(t *testing.T) {
	var f *fake
	f = newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		event(w, messageStart)
		event(w, textStart)
		event(w, textDelta(0, "first"))
		f.wait(r)
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := f.client(testKey).Stream(ctx, hello(), func(provider.Delta) error { cancel(); return nil })
	if !errors.Is(err, context.Canceled) || res.Text != "first" {
		t.Fatalf("err %v, text %q", err, res.Text)
	}
}

func TestCancelBeforeHeaders(t *testing.T) {
	var f *fake
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f = newFake(t, func(w http.ResponseWriter, r *http.Request) { cancel(); f.wait(r) })
	if _, err := f.client(testKey).Stream(ctx, hello(), collect(new([]string))); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
}

func TestIdleTimeout(t *testing.T) {
	var f *fake
	f = newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		event(w, messageStart)
		event(w, textStart)
		event(w, textDelta(0, "then silence"))
		f.wait(r)
	})
	c := New(Config{Name: "test", BaseURL: f.URL + "/v1", IdleTimeout: 50 * time.Millisecond})
	res, err := c.Stream(context.Background(), hello(), collect(new([]string)))
	if provider.ClassOf(err) != provider.ClassNetwork || !strings.Contains(err.Error(), "nothing received") || res.Text != "then silence" {
		t.Fatalf("err %v, text %q", err, res.Text)
	}
}

func TestEmitError(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		event(w, messageStart)
		event(w, textStart)
		for _, s := range []string{"a", "b", "c"} {
			event(w, textDelta(0, s))
		}
		event(w, messageDelta("end_turn", 3))
		event(w, messageStop)
	})
	boom := errors.New("subscriber gone")
	n := 0
	res, err := f.client(testKey).Stream(context.Background(), hello(), func(provider.Delta) error {
		if n++; n == 2 {
			return boom
		}
		return nil
	})
	if err != boom || res.Text != "a" {
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
	_, err = New(Config{Name: "dead", BaseURL: "http://" + addr + "/v1", APIKey: testKey}).Stream(context.Background(), hello(), collect(new([]string)))
	var op *net.OpError
	if provider.ClassOf(err) != provider.ClassNetwork || !errors.As(err, &op) {
		t.Fatalf("err %v", err)
	}
}

func goldenRequest() provider.Request {
	return provider.Request{
		Model: "claude-sonnet-4-20250514",
		Messages: []provider.Message{
			{Role: provider.RoleSystem, Content: "You are Mirror, a helpful assistant reached through a chat gateway."},
			{Role: provider.RoleSystem, Content: "Answer clearly and concisely."},
			{Role: provider.RoleUser, Content: "What's the weather in Lisbon? Use <tools> & \"quotes\"."},
			{Role: provider.RoleAssistant, Content: "Checking.", ToolCalls: []provider.ToolCall{
				{ID: "toolu_1", Name: "get_weather", Arguments: `{"city": "Lisbon"}`},
				{ID: "toolu_2", Name: "get_time", Arguments: ""},
			}},
			{Role: provider.RoleTool, ToolCallID: "toolu_1", Content: `{"temp_c":21,"sky":"clear"}`},
			// A redirect read at the tool boundary, between the results.
			{Role: provider.RoleUser, Content: "Also Porto, please."},
			{Role: provider.RoleTool, ToolCallID: "toolu_2", Content: "15:04"},
			{Role: provider.RoleAssistant, Content: "It is 21 °C and clear in Lisbon at 15:04."},
			{Role: provider.RoleSystem, Content: "Runtime note: the user is on Telegram."},
			{Role: provider.RoleUser, Content: "Thanks!"},
		},
		Tools: []provider.Tool{
			{Name: "get_weather", Description: "Current weather for a city.",
				Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)},
			{Name: "get_time", Description: "The local time."},
		},
	}
}

func TestRequestGolden(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) { sseHeaders(w); writeToolUse(w) })
	if _, err := f.client(testKey).Stream(context.Background(), goldenRequest(), collect(new([]string))); err != nil {
		t.Fatal(err)
	}
	got := append(f.requests()[0].Body, '\n')
	want := providertest.Golden(t, filepath.Join("testdata", "request.golden.json"), got, *update)
	again, err := encodeRequest(goldenRequest())
	if err != nil || !bytes.Equal(append(again, '\n'), want) {
		t.Fatalf("second encoding differs (%v)", err)
	}
}

func TestMaxTokens(t *testing.T) {
	for _, tt := range []struct {
		max  int
		want string
	}{{0, `"max_tokens":4096`}, {-1, `"max_tokens":4096`}, {1024, `"max_tokens":1024`}} {
		req := hello()
		req.MaxTokens = tt.max
		body, err := encodeRequest(req)
		if err != nil || !strings.Contains(string(body), tt.want) {
			t.Errorf("max %d: %s (%v)", tt.max, body, err)
		}
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
			{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "a", Name: "f", Arguments: `[1]`}}}}}},
		{"bad tool schema", provider.Request{Model: "m", Messages: hello().Messages, Tools: []provider.Tool{{Name: "t", Parameters: []byte(`{"type":`)}}}},
	}
	for _, tt := range tests {
		_, err := New(Config{Name: "test", BaseURL: "http://127.0.0.1:1/v1", APIKey: testKey}).Stream(context.Background(), tt.req, collect(new([]string)))
		if provider.ClassOf(err) != provider.ClassBadRequest {
			t.Errorf("%s: err %v", tt.name, err)
		}
	}
}

func TestVersionHeader(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) { sseHeaders(w); writeToolUse(w) })
	c := New(Config{BaseURL: f.URL + "/v1", APIKey: testKey, Version: "2099-01-01"})
	if _, err := c.Stream(context.Background(), hello(), collect(new([]string))); err != nil {
		t.Fatal(err)
	}
	if v := f.requests()[0].Header.Get("anthropic-version"); v != "2099-01-01" {
		t.Fatalf("version %q", v)
	}
	if c.Fingerprint() != provider.Fingerprint(testKey) {
		t.Fatal("fingerprint")
	}
}
