package chats

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/boundary"
	"github.com/mirror-gateway/mirror/runtime/provider/gemini"
)

// gemini3 is a fake Gemini API (streamGenerateContent, SSE) that, asked to
// "check the record", calls handoff_update with a thought signature, the
// way Gemini 3 signs each function call part, and refuses with Gemini's
// 400 a request whose model call parts of the current turn lack theirs.
type gemini3 struct {
	mu     sync.Mutex
	bodies [][]byte
	sig    string
}

type g3Part struct {
	Text             string          `json:"text"`
	FunctionCall     json.RawMessage `json:"functionCall"`
	FunctionResponse json.RawMessage `json:"functionResponse"`
	ThoughtSignature string          `json:"thoughtSignature"`
}

type g3Body struct {
	Contents []struct {
		Role  string   `json:"role"`
		Parts []g3Part `json:"parts"`
	} `json:"contents"`
}

func (g *gemini3) serve(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body g3Body
		raw := json.RawMessage{}
		if err := json.NewDecoder(r.Body).Decode(&raw); err != nil || json.Unmarshal(raw, &body) != nil || len(body.Contents) == 0 {
			http.Error(w, `{"error":{"code":400,"message":"Invalid JSON payload received.","status":"INVALID_ARGUMENT"}}`, 400)
			return
		}
		g.mu.Lock()
		g.bodies = append(g.bodies, raw)
		g.mu.Unlock()
		// Gemini 3's rule: in the current turn (after the last user text),
		// the first call part of each model step carries its signature.
		current := 0
		for i, c := range body.Contents {
			for _, p := range c.Parts {
				if c.Role == "user" && p.Text != "" {
					current = i
				}
			}
		}
		for i := current; i < len(body.Contents); i++ {
			c := body.Contents[i]
			if c.Role == "model" && len(c.Parts) > 0 {
				for _, p := range c.Parts {
					if len(p.FunctionCall) > 0 {
						if p.ThoughtSignature == "" {
							w.Header().Set("Content-Type", "application/json; charset=UTF-8")
							w.WriteHeader(400)
							fmt.Fprintf(w, `{"error":{"code":400,"message":"Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call default_api:%s , position %d.","status":"INVALID_ARGUMENT"}}`, "handoff_update", i+1)
							return
						}
						break // only the first call part of a step is signed
					}
				}
			}
		}
		last := body.Contents[len(body.Contents)-1]
		var answer string
		switch {
		case last.Role == "user" && len(last.Parts) > 0 && len(last.Parts[0].FunctionResponse) > 0:
			answer = `{"text": "The record is up to date."}`
		case strings.Contains(string(raw), "check the record") && !strings.Contains(string(raw), "functionResponse"):
			answer = fmt.Sprintf(`{"functionCall": {"name": %q,"args": {"objective": "ship the export feature","next_action": "write the test"}},"thoughtSignature": %q}`,
				boundary.ToolHandoffUpdate, g.sig)
		default:
			answer = `{"text": "Noted."}`
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"candidates\": [{\"content\": {\"parts\": [%s],\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 0}],"+
			"\"usageMetadata\": {\"promptTokenCount\": 90,\"candidatesTokenCount\": 10,\"totalTokenCount\": 100},\"modelVersion\": \"gemini-3-pro-preview\",\"responseId\": \"r%d\"}\r\n\r\n",
			answer, len(g.bodies))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func (g *gemini3) requests() []g3Body {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]g3Body, len(g.bodies))
	for i, b := range g.bodies {
		_ = json.Unmarshal(b, &out[i])
	}
	return out
}

// signed lists the thought signatures on the call parts of a request.
func (b g3Body) signed() []string {
	var out []string
	for _, c := range b.Contents {
		for _, p := range c.Parts {
			if len(p.FunctionCall) > 0 {
				out = append(out, p.ThoughtSignature)
			}
		}
	}
	return out
}

// A Gemini 3 tool call's thought signature is stored with the call: the
// step after it carries it back, and so does the request of a turn after
// a restart, rebuilt from the record.
func TestAGeminiCallsSignatureIsKeptAndSentBack(t *testing.T) {
	g := &gemini3{sig: "EpQFCpEFAdHtim8+/zy3PSt9Ww0ZWdLaLAH4RDcCxC1FB1uQ=="}
	url := g.serve(t)
	le := &longEnv{env: &env{t: t, path: filepath.Join(t.TempDir(), "mirror.db")}, dataDir: t.TempDir()}
	if err := os.Chmod(le.dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := OpenDB(le.path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	store, err := NewStore(db)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := runtime.NewEngine([]*runtime.Model{{Name: "g3", ProvName: "google",
		Provider: gemini.New(gemini.Config{Name: "google", BaseURL: url + "/v1beta", APIKey: "AIzaSyD-test-key"}),
		Remote:   "gemini-3-pro-preview", Window: 128000}},
		map[string][]string{"default": {"g3"}}, config.Roles{Chat: "default", Reflect: "default"}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Provision(runtime.Options{DataDir: le.dataDir}); err != nil {
		t.Fatal(err)
	}
	le.db, le.store = db, store
	le.svc = New(Options{Store: store, Turner: eng, Idle: time.Minute, DataDir: le.dataDir})
	t.Cleanup(le.stop)

	c := le.chat()
	s := newSub()
	if err := le.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	le.turn(t, s, c.ID, "Please check the record.")
	for _, ev := range s.events() {
		if ev.Type == EvTurnFailed {
			t.Fatalf("the turn failed: %s", pay[*TurnFailed](ev).Error)
		}
	}
	reqs := g.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want the call and the step after it", len(reqs))
	}
	if got := reqs[1].signed(); len(got) != 1 || got[0] != g.sig {
		t.Fatalf("the step after the call sent signatures %q, want [%q]", got, g.sig)
	}
	// After a restart the conversation is rebuilt from the record, and the
	// call goes back with the signature it came with.
	le.restart2(t)
	s2 := newSub()
	if err := le.svc.Open(bg, c.ID, nil, s2, ""); err != nil {
		t.Fatal(err)
	}
	le.turn(t, s2, c.ID, "And now?")
	reqs = g.requests()
	if got := reqs[len(reqs)-1].signed(); len(got) != 1 || got[0] != g.sig {
		t.Fatalf("after a restart the call went back with signatures %q, want [%q]", got, g.sig)
	}
}
