package anthropic

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
)

// The answer's cap reaches the wire as max_tokens, which Anthropic
// requires: the request's cap when it sets one, DefaultMaxTokens when not.
func TestCapOnTheWire(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		event(w, messageStart)
		event(w, textStart)
		event(w, textDelta(0, "ok"))
		event(w, textStop)
		event(w, messageDelta("end_turn", 1))
		event(w, messageStop)
	})
	for i, tt := range []struct{ max, want int }{{20000, 20000}, {1, 1}, {0, DefaultMaxTokens}} {
		req := hello()
		req.MaxTokens = tt.max
		if _, err := f.client(testKey).Stream(context.Background(), req, collect(new([]string))); err != nil {
			t.Fatal(err)
		}
		var body struct {
			MaxTokens *int `json:"max_tokens"`
		}
		if err := json.Unmarshal(f.requests()[i].Body, &body); err != nil {
			t.Fatal(err)
		}
		if body.MaxTokens == nil || *body.MaxTokens != tt.want {
			t.Fatalf("cap %d: max_tokens %v in %s, want %d", tt.max, body.MaxTokens, f.requests()[i].Body, tt.want)
		}
	}
}
