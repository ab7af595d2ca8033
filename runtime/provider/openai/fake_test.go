package openai

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// fake is a tiny OpenAI-compatible server on 127.0.0.1 (httptest) that
// records each request and answers with a test's handler. The chunk helpers
// below write the bytes real servers send (wire-formats.md §2).
type fake struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recorded
	// release unblocks handlers that wait for the client to go away, so
	// Close never waits long even if a test fails early.
	release chan struct{}
}

type recorded struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

func newFake(t *testing.T, h func(w http.ResponseWriter, r *http.Request)) *fake {
	t.Helper()
	f := &fake{release: make(chan struct{})}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, recorded{r.Method, r.URL.Path, r.Header.Clone(), body})
		f.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(f.Close)                     // runs second
	t.Cleanup(func() { close(f.release) }) // runs first
	return f
}

func (f *fake) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

// client returns a client for the fake, as configured in runtime.yaml:
// base URL ending in /v1.
func (f *fake) client(key string) *Client {
	return New(Config{Name: "test", BaseURL: f.URL + "/v1", APIKey: key})
}

// wait blocks until the client disconnects or the test ends.
func (f *fake) wait(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-f.release:
	}
}

// sseHeaders starts an SSE response the way OpenAI does.
func sseHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}

// send writes raw SSE bytes and flushes them.
func send(w http.ResponseWriter, raw string) {
	io.WriteString(w, raw)
	w.(http.Flusher).Flush()
}

// event writes one "data: …\n\n" event.
func event(w http.ResponseWriter, data string) { send(w, "data: "+data+"\n\n") }

const chunkHead = `{"id":"chatcmpl-ABfw0RdYmzAcDqP7AlR4wnLbS6mWz","object":"chat.completion.chunk","created":1727346168,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_5050236cbd",`

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func roleChunk() string {
	return chunkHead + `"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`
}

func textChunk(s string) string {
	return chunkHead + `"choices":[{"index":0,"delta":{"content":` + quote(s) + `},"logprobs":null,"finish_reason":null}],"usage":null}`
}

func finishChunk(reason string) string {
	return chunkHead + `"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"` + reason + `"}],"usage":null}`
}

func usageChunk(prompt, completion, cached int) string {
	return chunkHead + fmt.Sprintf(`"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`,
		prompt, completion, prompt+completion, cached)
}

func toolStartChunk(index int, id, name string) string {
	return chunkHead + fmt.Sprintf(`"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":%d,"id":"%s","type":"function","function":{"name":"%s","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`,
		index, id, name)
}

func toolArgsChunk(index int, args string) string {
	return chunkHead + fmt.Sprintf(`"choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]},"logprobs":null,"finish_reason":null}],"usage":null}`,
		index, quote(args))
}

// errorJSON writes an HTTP error with an OpenAI error body.
func errorJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}
