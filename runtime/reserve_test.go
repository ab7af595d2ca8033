package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/budget"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/openai"
)

// capServer is a fake OpenAI-compatible server that answers "ok" and
// keeps each request's max_tokens (0 when absent).
func capServer(t *testing.T) (string, func() []int) {
	var mu sync.Mutex
	var caps []int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			MaxTokens int `json:"max_tokens"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, 400)
			return
		}
		mu.Lock()
		caps = append(caps, body.MaxTokens)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"ok"}}]}`+"\n\n")
		fmt.Fprint(w, `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		fmt.Fprint(w, `data: {"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":1,"total_tokens":41}}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []int { mu.Lock(); defer mu.Unlock(); return append([]int(nil), caps...) }
}

// Every request of a turn asks for the response reserve as the answer's
// cap, the reserve of the model that is asked, unless runtime.yaml's
// max_output sets one; a context limit chosen in the browser moves the
// reserve with the policy window.
func TestTurnAsksForTheReserve(t *testing.T) {
	url, caps := capServer(t)
	tests := []struct {
		name      string
		window    int
		limit     string // chosen in the browser; "" keeps runtime.yaml's auto
		maxOutput int
	}{
		{"128k window", 128000, "", 0},
		{"small window", 8000, "", 0},
		{"1M window, auto", 1000000, "", 0},
		{"1M window, full", 1000000, "full", 0},
		{"max_output set", 128000, "", 777},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &Model{Name: "m", ProvName: "fake", Provider: openai.New(openai.Config{Name: "fake", BaseURL: url}),
				Remote: "llama3.2:3b", Window: tt.window, MaxOutput: tt.maxOutput, ContextLimit: config.ContextAuto}
			e, err := NewEngine([]*Model{m}, map[string][]string{"default": {"m"}}, config.Roles{Chat: "default"}, 1)
			if err != nil {
				t.Fatal(err)
			}
			if tt.limit != "" {
				if _, err := e.SetContextLimit("m", tt.limit); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := e.Run(context.Background(), TurnInput{Chain: "default", History: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}},
				func(string) error { return nil }); err != nil {
				t.Fatal(err)
			}
			want := tt.maxOutput
			if want == 0 {
				limit := tt.limit
				if limit == "" {
					limit = config.ContextAuto
				}
				b, err := budget.New(tt.window, limit, 0)
				if err != nil {
					t.Fatal(err)
				}
				want = b.Reserve
				if info := e.Models()[0]; info.Budget.Reserve != want {
					t.Fatalf("the model details show reserve %d, the turn's budget %d", info.Budget.Reserve, want)
				}
			}
			got := caps()
			if len(got) != i+1 || got[i] != want || want <= 0 {
				t.Fatalf("max_tokens %v, want %d on request %d", got, want, i+1)
			}
		})
	}
}
