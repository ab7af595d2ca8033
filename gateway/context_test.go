package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/tools"
)

// newLongStack is newStack with a data dir (0700, as datadir.Prepare
// makes it) that the engine, the chat service and the gateway share, and
// the builtin model on a tiny window: 3000 tokens, soft 600, hard 750, so a
// boundary comes after a few messages. The builtin model answers the
// forced handoff_update ask by itself.
func newLongStack(t *testing.T) (*stack, string) {
	t.Helper()
	dataDir := t.TempDir()
	if err := os.Chmod(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	zero := time.Duration(0)
	cfg.Providers[0].Delay = &zero
	m := &cfg.Models[0]
	m.Window = 3000
	m.Compaction.SoftRatio, m.Compaction.HardRatio = 0.20, 0.25
	m.Boundary.ContinuityBudgetTokens = 1000
	db, err := chats.OpenDB(filepath.Join(dataDir, "mirror.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	store, err := chats.NewStore(db)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := runtime.New(cfg, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Workspace = filepath.Join(t.TempDir(), "workspace")
	// The tiny window is sized for the tools offered before send_file:
	// its definition would leave no room for the turns this stack drives.
	cfg.Tools.Policies.SendFile = config.PolicyDeny
	reg, err := tools.New(tools.OptionsFrom(cfg, nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Provision(runtime.Options{Tools: reg, DataDir: dataDir}); err != nil {
		t.Fatal(err)
	}
	svc := chats.New(chats.Options{Store: store, Turner: eng, DataDir: dataDir})
	st := serveStack(t, cfg, svc, store, db, Options{DataDir: dataDir, Models: eng})
	return st, dataDir
}

// writeNote writes a memory note as boundaries do (0600 in a 0700 dir),
// dated mod.
func writeNote(t *testing.T, dataDir, name, body string, mod time.Time) {
	t.Helper()
	dir := filepath.Join(dataDir, "memory")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mod, mod); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, st *stack, path string, h http.Header) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest("GET", st.http.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func TestMemoryRoutes(t *testing.T) {
	st, dataDir := newLongStack(t)
	base := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	launch := "# Launch code\n\nThe launch code is 4417.\n\n---\nFrom chat c_abc, the boundary at event 36, 2026-12-02.\n"
	writeNote(t, dataDir, "2026-12-02-c_abc-launch-code.md", launch, base)
	writeNote(t, dataDir, "2026-12-03-c_abc-deploy-steps.md", "# Deploy steps\n\nRun make deploy.\n", base.Add(24*time.Hour))
	writeNote(t, dataDir, "notes.txt", "not markdown", base)
	writeNote(t, dataDir, ".hidden.md", "# Hidden", base)
	// Refused objects: a symlink to a file outside, one to a note, a
	// directory named like a note, and a world-readable file.
	outside := filepath.Join(t.TempDir(), "secret.md")
	if err := os.WriteFile(outside, []byte("# Secret\nTOPSECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	mem := filepath.Join(dataDir, "memory")
	for _, l := range [][2]string{{outside, "link-out.md"}, {filepath.Join(mem, "2026-12-02-c_abc-launch-code.md"), "link-in.md"}} {
		if err := os.Symlink(l[0], filepath.Join(mem, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(mem, "dir.md"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeNote(t, dataDir, "open.md", "# Open", base)
	if err := os.Chmod(filepath.Join(mem, "open.md"), 0o644); err != nil {
		t.Fatal(err)
	}

	code, body, _ := get(t, st, "/api/memory", bearer())
	if code != 200 {
		t.Fatalf("list: %d %s", code, body)
	}
	var list struct {
		Notes []MemoryNote `json:"notes"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range list.Notes {
		names = append(names, n.Name+"|"+n.Title)
	}
	want := []string{"2026-12-03-c_abc-deploy-steps.md|Deploy steps", "2026-12-02-c_abc-launch-code.md|Launch code"}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Fatalf("notes = %v, want %v (newest first, only private regular .md files)", names, want)
	}
	if n := list.Notes[1]; n.Size != int64(len(launch)) || !n.Modified.Equal(base) || n.Chat != "c_abc" || n.Through != 36 {
		t.Fatalf("note meta = %+v", n)
	}

	cases := []struct {
		name, path string
		header     http.Header
		code       int
		contains   string
	}{
		{"list needs the token", "/api/memory", nil, 401, ""},
		{"list with a wrong token", "/api/memory", http.Header{"Authorization": {"Bearer wrong"}}, 401, ""},
		{"list with the cookie", "/api/memory", http.Header{"Cookie": {CookieName + "=" + testToken}}, 200, "launch-code"},
		{"note needs the token", "/api/memory/2026-12-02-c_abc-launch-code.md", nil, 401, ""},
		{"note", "/api/memory/2026-12-02-c_abc-launch-code.md", bearer(), 200, "The launch code is 4417."},
		{"unknown note", "/api/memory/2026-01-01-c_x-nothing.md", bearer(), 404, ""},
		{"not markdown", "/api/memory/notes.txt", bearer(), 404, ""},
		{"hidden", "/api/memory/.hidden.md", bearer(), 404, ""},
		{"symlink out", "/api/memory/link-out.md", bearer(), 404, ""},
		{"symlink in", "/api/memory/link-in.md", bearer(), 404, ""},
		{"directory", "/api/memory/dir.md", bearer(), 404, ""},
		{"world-readable", "/api/memory/open.md", bearer(), 404, ""},
		{"traversal encoded", "/api/memory/..%2Fmirror.db", bearer(), 404, ""},
		{"traversal encoded md", "/api/memory/..%2F..%2Fsecret.md", bearer(), 404, ""},
		{"backslash", "/api/memory/a%5Cb.md", bearer(), 404, ""},
		{"dotdot", "/api/memory/..md", bearer(), 404, ""},
		{"nul", "/api/memory/a%00.md", bearer(), 404, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body, h := get(t, st, c.path, c.header)
			if code != c.code {
				t.Fatalf("%s: %d, want %d (%s)", c.path, code, c.code, body)
			}
			if c.contains != "" && !strings.Contains(body, c.contains) {
				t.Fatalf("%s: body %q lacks %q", c.path, body, c.contains)
			}
			if strings.Contains(body, "TOPSECRET") || strings.Contains(body, "# Open") {
				t.Fatalf("%s leaked a refused file: %q", c.path, body)
			}
			if c.code == 200 && strings.HasPrefix(c.path, "/api/memory/") && !strings.HasPrefix(h.Get("Content-Type"), "text/markdown") {
				t.Fatalf("content type %q", h.Get("Content-Type"))
			}
		})
	}
	// A path that leaves /api/memory/ never reaches the handler as a name:
	// the mux cleans it and redirects, and nothing of the data dir is served.
	if code, body, _ := get(t, st, "/api/memory/../../mirror.db", bearer()); code == 200 && !strings.HasPrefix(body, "{") {
		t.Fatalf("traversal served %d %q", code, body)
	}
}

func TestMemoryWithoutNotes(t *testing.T) {
	st, _ := newLongStack(t)
	if code, body, _ := get(t, st, "/api/memory", bearer()); code != 200 || strings.TrimSpace(body) != `{"notes":[]}` {
		t.Fatalf("no memory dir: %d %s", code, body)
	}
	if code, _, _ := get(t, st, "/api/memory/anything.md", bearer()); code != 404 {
		t.Fatalf("note without a memory dir: %d", code)
	}
	// A server without a data dir lists nothing either.
	plain := newStack(t, nil)
	if code, body, _ := get(t, plain, "/api/memory", bearer()); code != 200 || strings.TrimSpace(body) != `{"notes":[]}` {
		t.Fatalf("no data dir: %d %s", code, body)
	}
}

// TestHandoffRoutes drives a chat over the tiny window until a boundary
// archives it, then reads the record back from /api/chats/{id}/handoffs.
func TestHandoffRoutes(t *testing.T) {
	st, _ := newLongStack(t)
	cl := st.connect()
	cl.send(map[string]any{"type": "chat.create", "title": "Long", "req": "c"})
	chat := cl.expect("chat.created")["chat"].(map[string]any)["id"].(string)
	cl.send(map[string]any{"type": "chat.open", "chat": chat})
	cl.expect("chat.snapshot")

	code, body, _ := get(t, st, "/api/chats/"+chat+"/handoffs", bearer())
	if code != 200 || strings.TrimSpace(body) != `{"handoffs":[]}` {
		t.Fatalf("before any boundary: %d %s", code, body)
	}
	driveToBoundary(t, cl, chat)

	code, body, _ = get(t, st, "/api/chats/"+chat+"/handoffs", bearer())
	if code != 200 {
		t.Fatalf("handoffs: %d %s", code, body)
	}
	var got struct {
		Handoffs []chats.HandoffEntry `json:"handoffs"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Handoffs) != 1 || got.Handoffs[0].Number != 1 || !strings.Contains(got.Handoffs[0].Record, "## Objective") || got.Handoffs[0].Boundary == 0 {
		t.Fatalf("handoffs = %+v", got.Handoffs)
	}

	cases := []struct {
		name, path string
		header     http.Header
		code       int
	}{
		{"needs the token", "/api/chats/" + chat + "/handoffs", nil, 401},
		{"wrong token", "/api/chats/" + chat + "/handoffs", http.Header{"Authorization": {"Bearer nope"}}, 401},
		{"cookie", "/api/chats/" + chat + "/handoffs", http.Header{"Cookie": {CookieName + "=" + testToken}}, 200},
		{"unknown chat", "/api/chats/c_0000000000/handoffs", bearer(), 404},
		{"odd id", "/api/chats/..%2F..%2Fetc/handoffs", bearer(), 404},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if code, body, _ := get(t, st, c.path, c.header); code != c.code {
				t.Fatalf("%s: %d, want %d (%s)", c.path, code, c.code, body)
			}
		})
	}
}

// driveToBoundary sends long messages until a boundary event arrives,
// each one after the previous turn finished.
func driveToBoundary(t *testing.T, cl *client, chat string) map[string]any {
	t.Helper()
	for i := 1; i <= 12; i++ {
		cl.send(map[string]any{"type": "message.send", "chat": chat, "client_id": fmt.Sprintf("k%d", i),
			"text": fmt.Sprintf("Step %d of the export: %s", i, strings.Repeat("lorem ipsum dolor ", 40))})
		deadline := time.After(20 * time.Second)
		for done := false; !done; {
			select {
			case m, ok := <-cl.in:
				if !ok {
					t.Fatal("socket closed")
				}
				switch m["type"] {
				case "boundary":
					return m
				case "turn.finished", "turn.failed":
					done = true
				case "error", "_closed":
					t.Fatalf("driving to a boundary: %v", m)
				}
			case <-deadline:
				t.Fatalf("message %d: no turn end", i)
			}
		}
	}
	t.Fatal("no boundary after 12 long messages")
	return nil
}
