package gemini

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// fake is a tiny Gemini API on 127.0.0.1 (httptest) that records each
// request and answers with a test's handler. The chunk constants below are
// the bytes Gemini sends (wire-formats.md §3).
type fake struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recorded
	// release unblocks handlers that wait for the client to go away, so
	// Close never waits long even if a test fails early.
	release chan struct{}
}

type recorded struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   []byte
}

func newFake(t *testing.T, h func(w http.ResponseWriter, r *http.Request)) *fake {
	t.Helper()
	f := &fake{release: make(chan struct{})}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, recorded{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), body})
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

// client returns a client for the fake, with the base URL as runtime.yaml
// gives it: ending in /v1beta.
func (f *fake) client(key string) *Client {
	return New(Config{Name: "test", BaseURL: f.URL + "/v1beta", APIKey: key})
}

// wait blocks until the client disconnects or the test ends.
func (f *fake) wait(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-f.release:
	}
}

func sseHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
}

// send writes raw bytes and flushes them.
func send(w http.ResponseWriter, raw string) {
	io.WriteString(w, raw)
	w.(http.Flusher).Flush()
}

// chunk writes one "data: …" event the way Gemini frames them (CRLF line
// ends, a blank line after each).
func chunk(w http.ResponseWriter, data string) { send(w, "data: "+data+"\r\n\r\n") }

// Real stream lines (wire-formats.md §3), with the responseId real 2.5
// responses carry.
const (
	textChunk1 = `{"candidates": [{"content": {"parts": [{"text": "Let me"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 60,"candidatesTokenCount": 2,"totalTokenCount": 62,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 60}]},"modelVersion": "gemini-2.5-pro","responseId": "_V2BapveKcPg8QGa35aRCw"}`
	textChunk2 = `{"candidates": [{"content": {"parts": [{"text": " check the weather for you."}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 60,"candidatesTokenCount": 41,"totalTokenCount": 106,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 60}],"thoughtsTokenCount": 5},"modelVersion": "gemini-2.5-pro","responseId": "_V2BapveKcPg8QGa35aRCw"}`
	callChunk  = `{"candidates": [{"content": {"parts": [{"functionCall": {"name": "get_weather","args": {"location": "Paris"}},"thoughtSignature": "CiQB0e2Kb2xP"}],"role": "model"},"finishReason": "STOP","index": 0,"finishMessage": "Model generated function call(s)."}],"usageMetadata": {"promptTokenCount": 60,"candidatesTokenCount": 47,"totalTokenCount": 112,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 60}],"thoughtsTokenCount": 5},"modelVersion": "gemini-2.5-pro","responseId": "_V2BapveKcPg8QGa35aRCw"}`
	stopChunk  = `{"candidates": [{"content": {"parts": [{"text": ""}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 60,"candidatesTokenCount": 41,"totalTokenCount": 106,"thoughtsTokenCount": 5},"modelVersion": "gemini-2.5-pro","responseId": "_V2BapveKcPg8QGa35aRCw"}`
	// A cache hit: 1024 of the 1200 prompt tokens were read from cache.
	cachedChunk = `{"candidates": [{"content": {"parts": [{"text": "cached"}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 1200,"cachedContentTokenCount": 1024,"candidatesTokenCount": 80,"totalTokenCount": 1280,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 1200}],"cacheTokensDetails": [{"modality": "TEXT","tokenCount": 1024}]},"modelVersion": "gemini-2.5-flash"}`
)

// errorJSON writes an HTTP error with a Google error body.
func errorJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	io.WriteString(w, body)
}
