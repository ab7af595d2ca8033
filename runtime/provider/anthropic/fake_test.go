package anthropic

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fake is a tiny Messages API on 127.0.0.1 (httptest) that records each
// request and answers with a test's handler. The events below are the
// bytes Anthropic sends (wire-formats.md §4, from the Python SDK's
// recorded fixtures).
type fake struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recorded
	// release unblocks handlers that wait for the client to go away.
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

// client returns a client for the fake, base URL ending in /v1 as in
// runtime.yaml.
func (f *fake) client(key string) *Client {
	return New(Config{Name: "test", BaseURL: f.URL + "/v1", APIKey: key})
}

func (f *fake) wait(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-f.release:
	}
}

// rateHeaders are the rate-limit headers every real response carries.
var rateHeaders = map[string]string{
	"request-id":                                 "req_011CV5J4YZo4J3KLTDZgDN7S",
	"anthropic-ratelimit-requests-limit":         "50",
	"anthropic-ratelimit-requests-remaining":     "49",
	"anthropic-ratelimit-requests-reset":         "2025-08-21T12:40:01Z",
	"anthropic-ratelimit-input-tokens-limit":     "40000",
	"anthropic-ratelimit-input-tokens-remaining": "39000",
	"anthropic-ratelimit-input-tokens-reset":     "2025-08-21T12:40:59Z",
}

func sseHeaders(w http.ResponseWriter) {
	for k, v := range rateHeaders {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
}

func send(w http.ResponseWriter, raw string) {
	io.WriteString(w, raw)
	w.(http.Flusher).Flush()
}

// event writes one "event: …\ndata: …\n\n" event; the name is the data's
// type, as Anthropic sends it.
func event(w http.ResponseWriter, data string) {
	typ := data[strings.Index(data, `"type":"`)+8:]
	typ = typ[:strings.IndexByte(typ, '"')]
	send(w, "event: "+typ+"\ndata: "+data+"\n\n")
}

const (
	messageStart = `{"type":"message_start","message":{"id":"msg_019Q1hrJbZG26Fb9BQhrkHEr","type":"message","role":"assistant","model":"claude-sonnet-4-20250514","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":377,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1,"service_tier":"standard"}}}`
	// A cache hit: 2048 read, 100 written, 377 uncached.
	messageStartCached = `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-20250514","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":377,"cache_creation_input_tokens":100,"cache_read_input_tokens":2048,"cache_creation":{"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":0},"output_tokens":1,"service_tier":"standard"}}}`
	textStart          = `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`
	ping               = `{"type": "ping"}`
	textStop           = `{"type":"content_block_stop","index":0}`
	toolStart          = `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01NRLabsLyVHZPKxbKvkfSMn","name":"get_weather","input":{}}}`
	toolStop           = `{"type":"content_block_stop","index":1}`
	messageStop        = `{"type":"message_stop"}`
)

func textDelta(index int, s string) string {
	return `{"type":"content_block_delta","index":` + itoa(index) + `,"delta":{"type":"text_delta","text":` + quote(s) + `}}`
}

func jsonDelta(index int, s string) string {
	return `{"type":"content_block_delta","index":` + itoa(index) + `,"delta":{"type":"input_json_delta","partial_json":` + quote(s) + `}}`
}

func messageDelta(stop string, output int) string {
	return `{"type":"message_delta","delta":{"stop_reason":"` + stop + `","stop_sequence":null},"usage":{"output_tokens":` + itoa(output) + `}}`
}

// errorJSON writes an HTTP error with an Anthropic error body and the
// headers real errors carry.
func errorJSON(w http.ResponseWriter, status int, header map[string]string, body string) {
	for k, v := range header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("request-id", "req_011CV5J4YZo4J3KLTDZgDN7S")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

func itoa(n int) string { return strconv.Itoa(n) }

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
