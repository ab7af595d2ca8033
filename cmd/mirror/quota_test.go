package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestQuotaSurvivesRestart: an OpenAI-compatible server reports a
// 40,000-token minute quota in its rate-limit headers; `mirror serve`
// learns it from one answer, stops with SIGTERM, starts again on the same
// database, and GET /api/quotas still shows what the provider reported.
func TestQuotaSurvivesRestart(t *testing.T) {
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("x-ratelimit-limit-tokens", "40000")
		w.Header().Set("x-ratelimit-remaining-tokens", "39000")
		w.Header().Set("x-ratelimit-reset-tokens", "1m0s")
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n")
		fmt.Fprint(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
		fmt.Fprint(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake\",\"choices\":[],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":1,\"total_tokens\":21}}\n\ndata: [DONE]\n\n")
	}))
	defer model.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "runtime.yaml")
	yaml := fmt.Sprintf(`providers: [{name: local, kind: openai, base_url: %s/v1}]
models: [{name: default, provider: local, model: fake-model, window: 128000}]
chains: {default: [default]}
`, model.URL)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	const token = "test-token-0123456789abcdef"
	start := func() *proc {
		cmd := exec.Command(os.Args[0], "serve", "--config", cfg, "--data", filepath.Join(dir, "data"), "--addr", "127.0.0.1:0")
		cmd.Env = append(os.Environ(), "MIRROR_AS_MAIN=1", "MIRROR_TOKEN="+token)
		return startCmd(t, cmd)
	}
	quotas := func(p *proc) []map[string]any {
		req, _ := http.NewRequest("GET", "http://"+p.addr+"/api/quotas", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Quotas []map[string]any }
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET /api/quotas: %d %v", resp.StatusCode, err)
		}
		return body.Quotas
	}
	limitOf := func(rows []map[string]any) any {
		for _, q := range rows {
			if q["provider"] == "local" && q["model"] == "fake-model" {
				if o, ok := q["quota"].(map[string]any); ok {
					return o["limit"]
				}
			}
		}
		return nil
	}

	p := start()
	c, _, err := websocket.DefaultDialer.Dial("ws://"+p.addr+"/ws", http.Header{"Authorization": {"Bearer " + token}})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	next := func(typ string) map[string]any {
		for {
			var m map[string]any
			if err := c.ReadJSON(&m); err != nil {
				t.Fatalf("waiting for %s: %v", typ, err)
			}
			if m["type"] == typ {
				return m
			}
			if m["type"] == "error" || m["type"] == "turn.failed" {
				t.Fatalf("%v", m)
			}
		}
	}
	_ = c.WriteJSON(map[string]any{"type": "chat.create", "title": "q"})
	id := next("chat.created")["chat"].(map[string]any)["id"].(string)
	_ = c.WriteJSON(map[string]any{"type": "chat.open", "chat": id})
	next("chat.snapshot")
	_ = c.WriteJSON(map[string]any{"type": "message.send", "chat": id, "text": "hello", "client_id": "k"})
	next("turn.finished")
	c.Close()
	if got := limitOf(quotas(p)); got != float64(40000) {
		t.Fatalf("before the restart the quota is %v, want 40000", got)
	}
	p.stop(t)

	p = start()
	if got := limitOf(quotas(p)); got != float64(40000) {
		t.Fatalf("after the restart the quota is %v, want 40000 (the last one reported)", got)
	}
	p.stop(t)
}
