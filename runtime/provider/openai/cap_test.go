package openai

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// The answer's cap reaches the wire under the name the endpoint reads:
// max_completion_tokens on OpenAI's own API for every model, max_tokens on
// a compatible server (Ollama, llama.cpp, vLLM) unless the model is one of
// OpenAI's reasoning models, and nothing when the request sets no cap.
// OpenAI's host is reached over TLS on 127.0.0.1: the test dials the fake
// whatever the name.
func TestCapFieldOnTheWire(t *testing.T) {
	tests := []struct {
		name     string
		official bool
		model    string
		max      int
		field    string // "" for no cap at all
	}{
		{"openai gpt-4o", true, "gpt-4o", 16384, fieldMaxCompletionTokens},
		{"openai gpt-4.1", true, "gpt-4.1-mini", 900, fieldMaxCompletionTokens},
		{"openai o3", true, "o3-mini", 900, fieldMaxCompletionTokens},
		{"openai no cap", true, "gpt-4o", 0, ""},
		{"ollama llama", false, "llama3.2:3b", 16384, fieldMaxTokens},
		{"compatible gpt-4o", false, "gpt-4o", 500, fieldMaxTokens},
		{"router o1", false, "o1", 500, fieldMaxCompletionTokens},
		{"router gpt-5", false, "openai/gpt-5-mini", 500, fieldMaxCompletionTokens},
		{"router gpt-5.1", false, "gpt-5.1", 500, fieldMaxCompletionTokens},
		{"not o1", false, "o1x-custom", 500, fieldMaxTokens},
		{"not gpt-50", false, "gpt-50", 500, fieldMaxTokens},
		{"compatible no cap", false, "llama3.2:3b", 0, ""},
	}
	var (
		mu     sync.Mutex
		bodies [][]byte
	)
	handler := func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		event(w, textChunk("ok"))
		event(w, finishChunk("stop"))
		event(w, "[DONE]")
	}
	plain := newFake(t, handler)
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var raw json.RawMessage
		if err := json.NewDecoder(r.Body).Decode(&raw); err == nil {
			mu.Lock()
			bodies = append(bodies, raw)
			mu.Unlock()
		}
		handler(w, r)
	}))
	t.Cleanup(tlsSrv.Close)
	// OpenAI's own name, dialled to the local fake, trusted by its cert.
	tr := tlsSrv.Client().Transport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, tlsSrv.Listener.Addr().String())
	}
	tr.TLSClientConfig = &tls.Config{RootCAs: tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, ServerName: "example.com"}
	official := New(Config{Name: "openai", BaseURL: "https://api.openai.com/v1", APIKey: testKey, HTTPClient: &http.Client{Transport: tr}})
	compatible := plain.client("")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := hello()
			req.Model, req.MaxTokens = tt.model, tt.max
			c := compatible
			if tt.official {
				c = official
			}
			if _, err := c.Stream(context.Background(), req, collect(new([]string))); err != nil {
				t.Fatal(err)
			}
			var body []byte
			if tt.official {
				mu.Lock()
				body = bodies[len(bodies)-1]
				mu.Unlock()
			} else {
				reqs := plain.requests()
				body = reqs[len(reqs)-1].Body
			}
			var got map[string]any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{fieldMaxTokens, fieldMaxCompletionTokens} {
				v, ok := got[f]
				switch {
				case f == tt.field && (!ok || v != float64(tt.max)):
					t.Fatalf("%s = %v in %s, want %d", f, v, body, tt.max)
				case f != tt.field && ok:
					t.Fatalf("%s sent (%v) in %s; want only %q", f, v, body, tt.field)
				}
			}
		})
	}
}
