package gemini

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
)

// The answer's cap reaches the wire as generationConfig.maxOutputTokens;
// a request without one sends no generationConfig.
func TestCapOnTheWire(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		chunk(w, textChunk1)
		chunk(w, stopChunk)
	})
	for i, max := range []int{30222, 1, 0} {
		req := hello()
		req.MaxTokens = max
		if _, err := f.client(testKey).Stream(context.Background(), req, collect(new([]string))); err != nil {
			t.Fatal(err)
		}
		var body struct {
			GenerationConfig *struct {
				MaxOutputTokens *int `json:"maxOutputTokens"`
			} `json:"generationConfig"`
		}
		raw := f.requests()[i].Body
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatal(err)
		}
		switch {
		case max == 0 && body.GenerationConfig != nil:
			t.Fatalf("no cap, yet %s", raw)
		case max > 0 && (body.GenerationConfig == nil || body.GenerationConfig.MaxOutputTokens == nil || *body.GenerationConfig.MaxOutputTokens != max):
			t.Fatalf("cap %d: %s", max, raw)
		}
	}
}
