package openai

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
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

const testKey = "sk-test-0123456789abcdefSECRET"

func hello() provider.Request {
	return provider.Request{Model: "gpt-4o", Messages: []provider.Message{{Role: provider.RoleUser, Content: "Hi"}}}
}

// collect returns an emit that records the pieces.
func collect(pieces *[]string) func(provider.Delta) error {
	return func(d provider.Delta) error { *pieces = append(*pieces, d.Text); return nil }
}

func TestStreamText(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		event(w, roleChunk())
		for _, s := range []string{"I'm", " fine", ", thanks", "!"} {
			event(w, textChunk(s))
		}
		event(w, finishChunk("stop"))
		event(w, usageChunk(14, 30, 0))
		event(w, "[DONE]")
	})
	var got []string
	res, err := f.client(testKey).Stream(context.Background(), hello(), collect(&got))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"I'm", " fine", ", thanks", "!"}; !slices.Equal(got, want) {
		t.Fatalf("pieces %q, want %q", got, want)
	}
	want := provider.Result{Text: "I'm fine, thanks!", FinishReason: "stop", Usage: provider.Usage{InputTokens: 14, OutputTokens: 30}}
	if res.Text != want.Text || res.FinishReason != want.FinishReason || res.Usage != want.Usage || len(res.ToolCalls) != 0 {
		t.Fatalf("result %+v, want %+v", res, want)
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Method != http.MethodPost || r.Path != "/v1/chat/completions" {
		t.Fatalf("%s %s", r.Method, r.Path)
	}
	for h, v := range map[string]string{"Authorization": "Bearer " + testKey, "Content-Type": "application/json", "Accept": "text/event-stream"} {
		if got := r.Header.Get(h); got != v {
			t.Errorf("header %s = %q, want %q", h, got, v)
		}
	}
}

func TestNoKeyNoAuthorization(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		event(w, textChunk("ok"))
		event(w, finishChunk("stop"))
		event(w, "[DONE]")
	})
	if _, err := f.client("").Stream(context.Background(), hello(), collect(new([]string))); err != nil {
		t.Fatal(err)
	}
	if h, ok := f.requests()[0].Header["Authorization"]; ok {
		t.Fatalf("Authorization sent without a key: %q", h)
	}
}

func TestParallelToolCalls(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		event(w, toolStartChunk(0, "call_4XzlGBLtUe9dy3GVNV4jhq7h", "get_weather"))
		for _, a := range []string{`{"`, `city`, `":"`, `New`, ` York`, ` City`, `"}`} {
			event(w, toolArgsChunk(0, a))
		}
		event(w, toolStartChunk(1, "call_Q8ZdVpF2n9Kq1mV3xYb7Lc0T", "get_time"))
		event(w, toolArgsChunk(1, `{"tz":`))
		event(w, toolArgsChunk(0, ``)) // empty fragment of an earlier call
		event(w, toolArgsChunk(1, `"America/New_York"}`))
		event(w, finishChunk("tool_calls"))
		event(w, usageChunk(80, 40, 0))
		event(w, "[DONE]")
	})
	var got []string
	res, err := f.client(testKey).Stream(context.Background(), hello(), collect(&got))
	if err != nil {
		t.Fatal(err)
	}
	want := []provider.ToolCall{
		{ID: "call_4XzlGBLtUe9dy3GVNV4jhq7h", Name: "get_weather", Arguments: `{"city":"New York City"}`},
		{ID: "call_Q8ZdVpF2n9Kq1mV3xYb7Lc0T", Name: "get_time", Arguments: `{"tz":"America/New_York"}`},
	}
	if !slices.Equal(res.ToolCalls, want) {
		t.Fatalf("tool calls %+v\nwant %+v", res.ToolCalls, want)
	}
	if res.FinishReason != "tool_calls" || res.Text != "" || len(got) != 0 {
		t.Fatalf("finish %q, text %q, pieces %q", res.FinishReason, res.Text, got)
	}
}

// Ollama: CRLF-free but quirky: every delta has a role, tool calls arrive
// whole in one chunk, usage without details and no "usage":null; llama.cpp
// style keep-alive comments and CRLF line ends are mixed in.
func TestCompatibleServerQuirks(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		send(w, ": keep-alive\r\n\r\n")
		send(w, `data: {"id":"chatcmpl-42","object":"chat.completion.chunk","created":1,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"Let me check."},"finish_reason":null}]}`+"\r\n\r\n")
		send(w, `data: {"id":"chatcmpl-42","object":"chat.completion.chunk","created":1,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_abc123","index":0,"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":null}]}`+"\n\n")
		send(w, `data:{"id":"chatcmpl-42","object":"chat.completion.chunk","created":1,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"tool_calls"}]}`+"\n\n")
		send(w, `data: {"id":"chatcmpl-42","object":"chat.completion.chunk","created":1,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":18,"total_tokens":138}}`+"\n\n")
		send(w, "data: [DONE]\n\n")
	})
	var got []string
	res, err := f.client("").Stream(context.Background(), hello(), collect(&got))
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "Let me check." || !slices.Equal(got, []string{"Let me check."}) {
		t.Fatalf("text %q pieces %q", res.Text, got)
	}
	if want := []provider.ToolCall{{ID: "call_abc123", Name: "get_weather", Arguments: `{"city":"Paris"}`}}; !slices.Equal(res.ToolCalls, want) {
		t.Fatalf("tool calls %+v", res.ToolCalls)
	}
	if res.Usage != (provider.Usage{InputTokens: 120, OutputTokens: 18}) || res.FinishReason != "tool_calls" {
		t.Fatalf("usage %+v finish %q", res.Usage, res.FinishReason)
	}
}

func TestCachedTokens(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		event(w, textChunk("cached"))
		event(w, finishChunk("stop"))
		event(w, usageChunk(1200, 80, 1024))
		event(w, "[DONE]")
	})
	res, err := f.client(testKey).Stream(context.Background(), hello(), collect(new([]string)))
	if err != nil {
		t.Fatal(err)
	}
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
	}{
		{"finish without [DONE] is complete", func(w http.ResponseWriter) {
			event(w, textChunk("all"))
			event(w, finishChunk("length"))
		}, "", "all"},
		{"[DONE] without finish is complete", func(w http.ResponseWriter) {
			event(w, textChunk("all"))
			event(w, "[DONE]")
		}, "", "all"},
		{"clean end without either broke", func(w http.ResponseWriter) {
			event(w, roleChunk())
			event(w, textChunk("The answer is"))
		}, provider.ClassNetwork, "The answer is"},
		{"cut mid-chunk broke", func(w http.ResponseWriter) {
			event(w, textChunk("Half"))
			send(w, `data: {"id":"chatcmpl-x","choices":[{"index":0,"delta":{"content":" an`)
		}, provider.ClassNetwork, "Half"},
		{"empty body broke", func(w http.ResponseWriter) {}, provider.ClassNetwork, ""},
		{"error event mid-stream", func(w http.ResponseWriter) {
			event(w, textChunk("Part"))
			event(w, `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`)
		}, provider.ClassServer, "Part"},
		{"rate limit mid-stream", func(w http.ResponseWriter) {
			event(w, `{"error":{"message":"Rate limit reached for gpt-4o in organization org-xxx on tokens per min (TPM): Limit 30000, Used 29937, Requested 385. Please try again in 644ms.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`)
		}, provider.ClassRateLimited, ""},
		{"event: error", func(w http.ResponseWriter) {
			send(w, "event: error\ndata: {\"message\":\"model crashed\"}\n\n")
		}, provider.ClassServer, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				sseHeaders(w)
				tt.write(w)
			})
			res, err := f.client(testKey).Stream(context.Background(), hello(), collect(new([]string)))
			if got := provider.ClassOf(err); got != tt.wantClass {
				t.Fatalf("class %q (err %v), want %q", got, err, tt.wantClass)
			}
			if res.Text != tt.wantText {
				t.Fatalf("text %q, want %q", res.Text, tt.wantText)
			}
			if tt.wantClass == provider.ClassRateLimited {
				var pe *provider.Error
				if errors.As(err, &pe); pe.RetryAfter != 644*time.Millisecond {
					t.Fatalf("retry after %s", pe.RetryAfter)
				}
			}
			if tt.wantClass == provider.ClassNetwork && !strings.Contains(err.Error(), "stream broke mid-reply") {
				t.Fatalf("error %q does not say the stream broke", err)
			}
		})
	}
}

func TestConnectionDropped(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		event(w, textChunk("Before the drop"))
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // no chunked terminator: the client sees a broken body
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
		event(w, textChunk("first"))
		f.wait(r) // then silence until the client goes away
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	var (
		res provider.Result
		err error
	)
	go func() {
		defer close(done)
		res, err = f.client(testKey).Stream(ctx, hello(), func(d provider.Delta) error {
			cancel()
			return nil
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Stream did not return after cancel")
	}
	if !errors.Is(err, context.Canceled) || res.Text != "first" {
		t.Fatalf("err %v, text %q", err, res.Text)
	}
}

func TestCancelBeforeHeaders(t *testing.T) {
	var f *fake
	f = newFake(t, func(w http.ResponseWriter, r *http.Request) { f.wait(r) })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := f.client(testKey).Stream(ctx, hello(), collect(new([]string)))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
}

func TestIdleTimeout(t *testing.T) {
	var f *fake
	f = newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		event(w, textChunk("then silence"))
		f.wait(r)
	})
	c := New(Config{Name: "test", BaseURL: f.URL + "/v1", IdleTimeout: 100 * time.Millisecond})
	res, err := c.Stream(context.Background(), hello(), collect(new([]string)))
	if provider.ClassOf(err) != provider.ClassNetwork || !strings.Contains(err.Error(), "nothing received") || res.Text != "then silence" {
		t.Fatalf("err %v, text %q", err, res.Text)
	}
}

func TestEmitError(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		for _, s := range []string{"a", "b", "c"} {
			event(w, textChunk(s))
		}
		event(w, finishChunk("stop"))
		event(w, "[DONE]")
	})
	boom := errors.New("subscriber gone")
	n := 0
	res, err := f.client(testKey).Stream(context.Background(), hello(), func(d provider.Delta) error {
		if n++; n == 2 {
			return boom
		}
		return nil
	})
	if err != boom || res.Text != "a" {
		t.Fatalf("err %v, text %q", err, res.Text)
	}
}

func TestNonStreamedReply(t *testing.T) {
	whole := `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Whole answer"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`
	streamed := "data: " + textChunk("Whole answer") + "\n\ndata: " + finishChunk("stop") + "\n\ndata: " + usageChunk(9, 2, 0) + "\n\ndata: [DONE]\n\n"
	// The body decides, not a Content-Type some servers get wrong.
	for _, tc := range []struct{ name, contentType, body string }{
		{"json", "application/json", whole},
		{"json labelled sse", "text/event-stream", "\n" + whole},
		{"sse labelled json", "application/json", streamed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				fmt.Fprint(w, tc.body)
			})
			var got []string
			res, err := f.client("").Stream(context.Background(), hello(), collect(&got))
			if err != nil || res.Text != "Whole answer" || res.Usage.InputTokens != 9 || res.FinishReason != "stop" || !slices.Equal(got, []string{"Whole answer"}) {
				t.Fatalf("err %v res %+v pieces %q", err, res, got)
			}
		})
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
	if provider.ClassOf(err) != provider.ClassNetwork {
		t.Fatalf("err %v", err)
	}
	var op *net.OpError
	if !errors.As(err, &op) {
		t.Fatalf("the transport cause is not reachable: %v", err)
	}
	if !strings.HasPrefix(err.Error(), "dead: network") {
		t.Fatalf("err %q", err)
	}
}

// Error bodies are the real ones from wire-formats.md §2.2.
func TestErrorMapping(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		header    map[string]string
		body      string
		class     provider.Class
		code      string
		retry     time.Duration
		msgPrefix string
	}{
		{"tpm", 429, nil, `{"error":{"message":"Rate limit reached for gpt-4o in organization org-xxx on tokens per min (TPM): Limit 30000, Used 29937, Requested 385. Please try again in 644ms. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
			provider.ClassRateLimited, "rate_limit_exceeded", 644 * time.Millisecond, "Rate limit reached for gpt-4o"},
		{"rpm", 429, nil, `{"error":{"message":"Rate limit reached for gpt-4.1-mini in organization org-abc on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			provider.ClassRateLimited, "rate_limit_exceeded", 20 * time.Second, "Rate limit reached for gpt-4.1-mini"},
		{"retry-after-ms wins", 429, map[string]string{"retry-after-ms": "1500", "retry-after": "7"}, `{"error":{"message":"Please try again in 20s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			provider.ClassRateLimited, "rate_limit_exceeded", 1500 * time.Millisecond, "Please"},
		{"retry-after seconds", 429, map[string]string{"retry-after": "7"}, `{"error":{"message":"slow down","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			provider.ClassRateLimited, "rate_limit_exceeded", 7 * time.Second, "slow down"},
		{"quota", 429, nil, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
			provider.ClassQuota, "insufficient_quota", 0, "You exceeded your current quota"},
		{"context 2023", 400, nil, `{"error":{"message":"This model's maximum context length is 4097 tokens. However, your messages resulted in 4294 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			provider.ClassContextLength, "context_length_exceeded", 0, "This model's maximum context length"},
		{"context window, no code", 400, nil, `{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":null}}`,
			provider.ClassContextLength, "", 0, "Your input exceeds"},
		{"llama.cpp context", 400, nil, `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}`,
			provider.ClassContextLength, "400", 0, "the request exceeds"},
		{"bad key", 401, nil, `{"error":{"message":"Incorrect API key provided: sk-abc. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			provider.ClassAuth, "invalid_api_key", 0, "Incorrect API key provided: sk-[redacted]."},
		{"permission", 403, nil, `{"error":{"message":"Country, region, or territory not supported","type":"request_forbidden","param":null,"code":"unsupported_country_region_territory"}}`,
			provider.ClassPermission, "unsupported_country_region_territory", 0, "Country"},
		{"model not found", 404, nil, `{"error":{"message":"The model ` + "`gpt-9`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`,
			provider.ClassNotFound, "model_not_found", 0, "The model"},
		{"ollama not found", 404, nil, `{"error":{"message":"model \"llama9\" not found, try pulling it first","type":"not_found_error","param":null,"code":null}}`,
			provider.ClassNotFound, "", 0, "model \"llama9\""},
		{"bad request", 400, nil, `{"error":{"message":"Invalid value for 'tool_choice'.","type":"invalid_request_error","param":"tool_choice","code":"invalid_value"}}`,
			provider.ClassBadRequest, "invalid_value", 0, "Invalid value"},
		{"ollama empty messages", 400, nil, `{"error":{"message":"[] is too short - 'messages'","type":"invalid_request_error","param":null,"code":null}}`,
			provider.ClassBadRequest, "", 0, "[] is too short"},
		{"vllm 422 detail", 422, nil, `{"detail":[{"loc":["body","messages"],"msg":"field required","type":"value_error.missing"}]}`,
			provider.ClassBadRequest, "", 0, `[{"loc"`},
		{"overloaded 503", 503, map[string]string{"retry-after": "3"}, `{"error":{"message":"The engine is currently overloaded, please try again later.","type":"server_error","param":null,"code":null}}`,
			provider.ClassOverloaded, "", 3 * time.Second, "The engine is currently overloaded"},
		{"overloaded 529", 529, nil, `{"error":{"message":"Overloaded","type":"overloaded_error"}}`,
			provider.ClassOverloaded, "", 0, "Overloaded"},
		{"server 500", 500, nil, `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`,
			provider.ClassServer, "", 0, "The server had an error"},
		{"proxy 502 html", 502, nil, "<html><body><h1>502 Bad Gateway</h1></body></html>",
			provider.ClassServer, "", 0, "<html>"},
		{"empty 500", 500, nil, "", provider.ClassServer, "", 0, "Internal Server Error"},
		{"openrouter credits", 402, nil, `{"error":{"message":"Insufficient credits","code":402}}`,
			provider.ClassQuota, "402", 0, "Insufficient credits"},
		{"string error", 400, nil, `{"error":"model is required"}`, provider.ClassBadRequest, "", 0, "model is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				errorJSON(w, tt.status, tt.body)
			})
			res, err := f.client(testKey).Stream(context.Background(), hello(), collect(new([]string)))
			var pe *provider.Error
			if !errors.As(err, &pe) {
				t.Fatalf("err %v is not a provider error", err)
			}
			if pe.Class != tt.class || pe.Status != tt.status || pe.Code != tt.code || pe.RetryAfter != tt.retry || pe.Provider != "test" {
				t.Fatalf("got class=%s status=%d code=%q retry=%s provider=%s, want %s %d %q %s",
					pe.Class, pe.Status, pe.Code, pe.RetryAfter, pe.Provider, tt.class, tt.status, tt.code, tt.retry)
			}
			if !strings.HasPrefix(pe.Message, tt.msgPrefix) {
				t.Fatalf("message %q, want prefix %q", pe.Message, tt.msgPrefix)
			}
			if res.Text != "" || res.ToolCalls != nil {
				t.Fatalf("result %+v on error", res)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		header http.Header
		msg    string
		want   time.Duration
	}{
		{"none", nil, "", 0},
		{"ms header", http.Header{"Retry-After-Ms": {"250.5"}}, "", 250500 * time.Microsecond},
		{"seconds header", http.Header{"Retry-After": {"2"}}, "", 2 * time.Second},
		{"date header", http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, "", 90 * time.Second},
		{"past date", http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, "", 0},
		{"garbage header, text fallback", http.Header{"Retry-After": {"soon"}}, "Please try again in 1.898s.", 1898 * time.Millisecond},
		{"NaN header", http.Header{"Retry-After": {"NaN"}}, "", 0},
		{"huge header", http.Header{"Retry-After-Ms": {"1e300"}}, "", 0},
		{"go duration text", nil, "Please try again in 6m0s.", 6 * time.Minute},
		{"azure text", nil, "Please retry after 6 seconds.", 6 * time.Second},
	}
	for _, tt := range tests {
		if got := retryAfter(tt.header, tt.msg, now); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}

// TestKeyNeverInError checks every path an error takes: a provider echo of
// the exact key, a masked echo, an in-stream error, and a transport error
// whose URL carries the key.
func TestKeyNeverInError(t *testing.T) {
	bodies := []string{
		`{"error":{"message":"Incorrect API key provided: ` + testKey + `. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
		`{"error":{"message":"Incorrect API key provided: sk-test-********************************CRET.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
		`{"error":{"message":"key ` + testKey + ` is disabled","type":"invalid_request_error","param":null,"code":"` + testKey + `"}}`,
		`{"error":"Authorization: Bearer ` + testKey + ` rejected"}`,
		`<html>bad key ` + testKey + `</html>`,
	}
	check := func(t *testing.T, err error) {
		t.Helper()
		if err == nil {
			t.Fatal("no error")
		}
		for e := err; e != nil; e = errors.Unwrap(e) {
			for _, s := range []string{e.Error(), fmt.Sprintf("%+v", e), fmt.Sprintf("%#v", e)} {
				if strings.Contains(s, testKey) || strings.Contains(s, "0123456789abcdef") {
					t.Fatalf("key leaked: %s", s)
				}
			}
		}
		var pe *provider.Error
		if !errors.As(err, &pe) {
			t.Fatalf("not a provider error: %v", err)
		}
		if strings.Contains(pe.Message, testKey) || strings.Contains(pe.Code, testKey) {
			t.Fatalf("key in fields: %+v", pe)
		}
	}
	for i, body := range bodies {
		t.Run(fmt.Sprint("status/", i), func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) { errorJSON(w, 401, body) })
			_, err := f.client(testKey).Stream(context.Background(), hello(), collect(new([]string)))
			check(t, err)
		})
		t.Run(fmt.Sprint("stream/", i), func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				sseHeaders(w)
				event(w, strings.ReplaceAll(body, "\n", " "))
			})
			_, err := f.client(testKey).Stream(context.Background(), hello(), collect(new([]string)))
			check(t, err)
		})
	}
	t.Run("transport", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		c := New(Config{Name: "dead", BaseURL: "http://" + addr + "/v1/" + testKey, APIKey: testKey})
		_, err = c.Stream(context.Background(), hello(), collect(new([]string)))
		check(t, err)
		if provider.ClassOf(err) != provider.ClassNetwork {
			t.Fatalf("class %s", provider.ClassOf(err))
		}
	})
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"Incorrect API key provided: sk-abc.":       "Incorrect API key provided: sk-[redacted].",
		"key sk-proj-AbC_12-**xyz here":             "key sk-[redacted] here",
		"got my-local-secret twice my-local-secret": "got [redacted] twice [redacted]",
		"Authorization: Bearer abc.def-ghi==":       "Authorization: Bearer [redacted]",
		"task-list and desk-top stay":               "task-list and desk-top stay",
		"nothing secret":                            "nothing secret",
	} {
		if got := provider.Redact(in, "my-local-secret"); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
	if got := provider.Redact("x marks the spot", "x"); got != "x marks the spot" {
		t.Errorf("placeholder key redacted: %q", got)
	}
}

func goldenRequest() provider.Request {
	return provider.Request{
		Model: "gpt-4o-mini",
		Messages: []provider.Message{
			{Role: provider.RoleSystem, Content: "You are Mirror, a helpful assistant reached through a chat gateway. Answer clearly and concisely.", Tokens: 20},
			{Role: provider.RoleUser, Content: "What's the weather in Lisbon? Use <tools> & \"quotes\".", Tokens: 14},
			{Role: provider.RoleAssistant, Content: "", ToolCalls: []provider.ToolCall{
				{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Lisbon"}`},
				{ID: "call_2", Name: "get_time", Arguments: ""},
			}},
			{Role: provider.RoleTool, ToolCallID: "call_1", Content: `{"temp_c":21,"sky":"clear"}`},
			{Role: provider.RoleTool, ToolCallID: "call_2", Content: "15:04"},
			{Role: provider.RoleAssistant, Content: "It is 21 °C and clear in Lisbon at 15:04."},
		},
		Tools: []provider.Tool{{
			Name:        "get_weather",
			Description: "Current weather for a city.",
			Parameters:  []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		}},
		MaxTokens: 1024,
	}
}

func TestRequestGolden(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		event(w, finishChunk("stop"))
		event(w, "[DONE]")
	})
	if _, err := f.client(testKey).Stream(context.Background(), goldenRequest(), collect(new([]string))); err != nil {
		t.Fatal(err)
	}
	got := append(f.requests()[0].Body, '\n')
	want := providertest.Golden(t, filepath.Join("testdata", "request.golden.json"), got, *update)
	// Same request, same bytes: the provider's prefix cache depends on it.
	again, err := encodeRequest(goldenRequest(), false)
	if err != nil || !bytes.Equal(append(again, '\n'), want) {
		t.Fatalf("second encoding differs (%v)", err)
	}
}

func TestInvalidToolParameters(t *testing.T) {
	req := hello()
	req.Tools = []provider.Tool{{Name: "broken", Parameters: []byte(`{"type":`)}}
	_, err := New(Config{Name: "test", BaseURL: "http://127.0.0.1:1/v1"}).Stream(context.Background(), req, collect(new([]string)))
	if provider.ClassOf(err) != provider.ClassBadRequest {
		t.Fatalf("err %v", err)
	}
}
