package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/config/datadir"
	mruntime "github.com/mirror-gateway/mirror/runtime"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestReplayPrintsTheNumbersOfAChat builds a chat with a few turns on the
// built-in model, stops, and replays it read-only against a golden file.
func TestReplayPrintsTheNumbersOfAChat(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	dir, err := datadir.Prepare(data)
	if err != nil {
		t.Fatal(err)
	}
	db, err := chats.OpenDB(filepath.Join(dir, DBFile), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	store, err := chats.NewStore(db)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.DataDir = data
	zero := time.Duration(0)
	cfg.Providers[0].Delay = &zero
	engine, err := mruntime.New(cfg, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	// The turns offer the tools replay offers: a measurement counts only
	// for the tool list it was billed with.
	toolbox, err := toolsFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.Provision(mruntime.Options{Tools: toolbox, DataDir: dir}); err != nil {
		t.Fatal(err)
	}
	svc := chats.New(chats.Options{Store: store, Turner: engine})
	ctx := context.Background()
	c, err := svc.Create(ctx, "replayed", "", chats.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 8)
	w := waiter{done}
	if err := svc.Open(ctx, c.ID, nil, w, ""); err != nil {
		t.Fatal(err)
	}
	for i, text := range []string{"Hello there, this is the first message.", "A second message, somewhat longer than the first one was."} {
		if _, err := svc.Send(ctx, c.ID, text, "k"+string(rune('a'+i)), "", chats.Origin{}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the turn did not finish")
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	svc.Close(cctx)
	cancel()
	store.Close()
	db.Close()

	var out, errb bytes.Buffer
	if code := run(ctx, []string{"replay", c.ID, "--data", data}, &out, &errb, func(string) string { return "" }); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	got := strings.ReplaceAll(out.String(), c.ID, "CHAT")
	golden(t, "replay.golden", got)

	// With a gateway running (it holds the database), replay asks it over
	// HTTP and prints the same.
	cfgPath := filepath.Join(t.TempDir(), "runtime.yaml")
	if err := os.WriteFile(cfgPath, []byte("listen: "+freeAddr(t)+"\nproviders: [{name: builtin, kind: builtin, delay: 0s}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(k string) string {
		if k == "MIRROR_TOKEN" {
			return "pair-token-0123456789abcdef"
		}
		return ""
	}
	stop := servePair(t, cfgPath, data)
	out.Reset()
	if code := run(ctx, []string{"replay", c.ID, "--config", cfgPath, "--data", data}, &out, &errb, env); code != 0 {
		t.Fatalf("replay over HTTP: exit %d: %s", code, errb.String())
	}
	if over := strings.ReplaceAll(out.String(), c.ID, "CHAT"); over != got {
		t.Fatalf("replay over HTTP differs:\n%s\n--- from the database\n%s", over, got)
	}
	if code := run(ctx, []string{"replay", "c_nope", "--config", cfgPath, "--data", data}, &out, &errb, env); code != 1 {
		t.Fatalf("replay of an unknown chat over HTTP: exit %d", code)
	}
	stop()

	// Bad usage is refused with exit 2; an unknown chat is a runtime failure.
	if code := run(ctx, []string{"replay"}, &out, &errb, nil); code != 2 {
		t.Fatalf("replay without a chat: exit %d", code)
	}
	if code := run(ctx, []string{"replay", "c_nope", "--data", data}, &out, &errb, func(string) string { return "" }); code != 1 {
		t.Fatalf("replay of an unknown chat: exit %d", code)
	}
}

// waiter signals each finished turn.
type waiter struct{ done chan struct{} }

func (w waiter) Deliver(d chats.Delivery) {
	if d.Event != nil && (d.Event.Type == chats.EvTurnFinished || d.Event.Type == chats.EvTurnFailed) {
		w.done <- struct{}{}
	}
}

func TestCheckCompression(t *testing.T) {
	dir := t.TempDir()
	req := filepath.Join(dir, "req.json")
	body := `{"model":"gpt-4o","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Read the log."},` +
		`{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"app.log\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"` + strings.Repeat("error: connection refused at line 42\\n", 400) + `"},` +
		`{"role":"user","content":"What failed?"}]}`
	if err := os.WriteFile(req, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	ctx := context.Background()
	if code := run(ctx, []string{"check-compression", req, "--context-window", "32000"}, &out, &errb, nil); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "tool") {
		t.Fatalf("report without tool results:\n%s", out.String())
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"messages": [`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"check-compression"}, 2},
		{[]string{"check-compression", bad}, 2},
		{[]string{"check-compression", req, "--context-window", "0"}, 2},
		{[]string{"check-compression", filepath.Join(dir, "missing.json")}, 1},
	} {
		if code := run(ctx, c.args, &out, &errb, nil); code != c.code {
			t.Errorf("%v: exit %d, want %d", c.args, code, c.code)
		}
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		t.Fatalf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}
