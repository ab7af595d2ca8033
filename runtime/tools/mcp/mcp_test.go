package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	bolt "go.etcd.io/bbolt"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/monitor"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tools"
	"github.com/mirror-gateway/mirror/runtime/tools/mcp/mcptest"
)

func TestMain(m *testing.M) {
	mcptest.Main() // a re-executed test binary serves MCP over stdio
	os.Exit(m.Run())
}

const secretValue = "s3cr3t-Value-4711"

// syncBuf is a log destination read while servers write to it.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// fixture is a Manager and a Registry around one test server.
type fixture struct {
	m   *Manager
	reg *tools.Registry
	dir string // the server's notes
	log *syncBuf
	mon *monitor.Monitor
}

// stdioServer is a server running this test binary as mcptest.Main.
func stdioServer(t testing.TB, name string) config.MCPServer {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return config.MCPServer{Name: name, Command: exe, Env: map[string]string{
		mcptest.EnvMain: "TEST_MAIN_" + name, "MCPTEST_SECRET": "TEST_SECRET"}, Timeout: 20 * time.Second}
}

// httpServer is a loopback server that wants the secret as a bearer token.
func httpServer(t testing.TB, name, dir string, cancelled chan<- struct{}) config.MCPServer {
	ts := httptest.NewServer(mcptest.Handler(dir, "Bearer "+secretValue, cancelled))
	t.Cleanup(ts.Close)
	return config.MCPServer{Name: name, URL: ts.URL, Headers: map[string]string{"Authorization": "TEST_AUTH"}, Timeout: 20 * time.Second}
}

func newFixture(t testing.TB, dir string, servers []config.MCPServer, modes map[string]string, pats []config.PolicyPattern, th monitor.Thresholds) *fixture {
	t.Helper()
	f := &fixture{dir: dir, log: &syncBuf{}}
	env := map[string]string{"TEST_SECRET": secretValue, "TEST_AUTH": "Bearer " + secretValue}
	for name, mode := range modes {
		env["TEST_MAIN_"+name] = mode + " " + f.dir
	}
	db, err := bolt.Open(filepath.Join(t.TempDir(), "m.db"), 0o600, &bolt.Options{Timeout: time.Second, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f.mon, err = monitor.Open(db, config.Default(), monitor.Options{Thresholds: th})
	if err != nil {
		t.Fatal(err)
	}
	f.m, err = New(Options{Servers: servers, Getenv: func(k string) string { return env[k] }, Monitor: f.mon,
		Log: slog.New(slog.NewTextHandler(f.log, nil)), MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Stable: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	f.m.Start(context.Background())
	t.Cleanup(func() { f.m.Close() })
	f.reg, err = tools.New(tools.Options{Workspace: t.TempDir(), Sources: []tools.Source{f.m}, Patterns: pats})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// waitFor polls cond until it holds; every wait is bounded.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func (f *fixture) offered(name string) bool {
	return slices.ContainsFunc(f.reg.Definitions(), func(d provider.Tool) bool { return d.Name == name })
}

func (f *fixture) run(ctx context.Context, name, args string, meta tools.CallMeta) tools.Result {
	return f.reg.Run(ctx, provider.ToolCall{ID: "c1", Name: name, Arguments: args}, meta)
}

// transports runs a test over stdio and over HTTP.
func transports(t *testing.T, fn func(t *testing.T, srv func(dir string, cancelled chan<- struct{}) (config.MCPServer, map[string]string))) {
	t.Run("stdio", func(t *testing.T) {
		fn(t, func(dir string, _ chan<- struct{}) (config.MCPServer, map[string]string) {
			return stdioServer(t, "srv"), map[string]string{"srv": mcptest.ModeServe}
		})
	})
	t.Run("http", func(t *testing.T) {
		fn(t, func(dir string, c chan<- struct{}) (config.MCPServer, map[string]string) {
			return httpServer(t, "srv", dir, c), nil
		})
	})
}

func TestListAndCall(t *testing.T) {
	transports(t, func(t *testing.T, srv func(string, chan<- struct{}) (config.MCPServer, map[string]string)) {
		dir := t.TempDir()
		s, modes := srv(dir, nil)
		f := newFixture(t, dir, []config.MCPServer{s}, modes, []config.PolicyPattern{{Pattern: "srv__big", Policy: config.PolicyAllow}, {Pattern: "srv__c*", Policy: config.PolicyDeny}}, monitor.Thresholds{})
		waitFor(t, "the tools", func() bool { return f.offered("srv__echo") })
		var echo provider.Tool
		for _, d := range f.reg.Definitions() {
			if d.Name == "srv__echo" {
				echo = d
			}
		}
		if echo.Description != "Returns its text." || !strings.Contains(string(echo.Parameters), `"maxLength":1000`) {
			t.Errorf("srv__echo offered as %+v %s", echo, echo.Parameters)
		}
		// Policies: default ask, a key allows, a pattern denies (and hides).
		if p := f.reg.Policy("srv__echo"); p != tools.Ask {
			t.Errorf("default policy = %s, want ask", p)
		}
		if p := f.reg.Policy("srv__big"); p != tools.Allow {
			t.Errorf("srv__big policy = %s, want allow", p)
		}
		if f.offered("srv__crash") {
			t.Error("a denied tool is offered")
		}
		if err := f.reg.Check(provider.ToolCall{Name: "srv__crash", Arguments: "{}"}); !errors.Is(err, tools.ErrDenied) {
			t.Errorf("Check(denied) = %v", err)
		}
		// Arguments are checked against the server's schema before it is asked.
		for _, bad := range []string{`{}`, `{"text": 3}`, `{"text": "a", "x": 1}`, `[1]`, `{"text": "` + strings.Repeat("a", 1001) + `"}`} {
			err := f.reg.Check(provider.ToolCall{Name: "srv__echo", Arguments: bad})
			if !errors.Is(err, tools.ErrInvalidArguments) {
				t.Errorf("Check(%.30s) = %v, want invalid arguments", bad, err)
			}
		}
		res := f.run(context.Background(), "srv__echo", `{"text":"hello over mcp"}`, tools.CallMeta{})
		if res.IsError || res.Content != "hello over mcp" {
			t.Errorf("echo = %+v", res)
		}
		// A long result is stored whole with a handle; the model reads a preview.
		res = f.run(context.Background(), "srv__big", `{"n": 40000}`, tools.CallMeta{})
		if res.Handle == "" || len(res.Full) != 40000 || len(res.Content) >= len(res.Full) || !strings.Contains(res.Content, res.Handle) {
			t.Errorf("big: handle %q, full %d, content %d", res.Handle, len(res.Full), len(res.Content))
		}
		// Resources are read through SERVER__read_resource, which names them.
		for _, d := range f.reg.Definitions() {
			if d.Name == "srv__read_resource" && !strings.Contains(d.Description, "mem://notes (notes)") {
				t.Errorf("read_resource offered as %q", d.Description)
			}
		}
		res = f.run(context.Background(), "srv__read_resource", `{"uri":"mem://notes"}`, tools.CallMeta{})
		if res.IsError || res.Content != "the notes" {
			t.Errorf("read_resource = %+v", res)
		}
		if res = f.run(context.Background(), "srv__read_resource", `{"uri":"mem://none"}`, tools.CallMeta{}); !res.IsError {
			t.Errorf("read_resource of nothing = %+v", res)
		}
		if v := f.mon.MCP("srv").View(); v.State != monitor.StateClosed {
			t.Errorf("a missing resource counted against the server: %+v", v)
		}
		if got := mcptest.Lines(dir, mcptest.CallsFile); !slices.Equal(got, []string{"echo", "read mem://notes"}) {
			t.Errorf("the server saw %q, want one echo (bad arguments never reach it)", got)
		}
		st := f.m.Status()
		if len(st) != 1 || st[0].State != StateReady || st[0].Tools != 7 || st[0].Breaker != "mcp:srv" {
			t.Errorf("Status = %+v", st)
		}
	})
}

func TestStopCancelsOnServer(t *testing.T) {
	transports(t, func(t *testing.T, srv func(string, chan<- struct{}) (config.MCPServer, map[string]string)) {
		dir := t.TempDir()
		s, modes := srv(dir, nil)
		f := newFixture(t, dir, []config.MCPServer{s}, modes, nil, monitor.Thresholds{})
		waitFor(t, "the tools", func() bool { return f.offered("srv__slow") })
		ctx, stop := context.WithCancel(context.Background())
		progress := make(chan string, 4)
		done := make(chan tools.Result, 1)
		go func() {
			done <- f.run(ctx, "srv__slow", `{}`, tools.CallMeta{Progress: func(m string) { progress <- m }})
		}()
		select {
		case p := <-progress:
			if p != "working 1/2" {
				t.Errorf("progress = %q", p)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("no progress")
		}
		stop() // what Stop does to the turn's context
		var res tools.Result
		select {
		case res = <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("the call did not end")
		}
		if !res.IsError || !strings.Contains(res.Content, "cancelled on the server") {
			t.Errorf("stopped call = %+v", res)
		}
		waitFor(t, "the server to see the cancellation", func() bool {
			return slices.Contains(mcptest.Lines(dir, mcptest.CallsFile), "cancelled slow")
		})
	})
}

func TestToolListChanges(t *testing.T) {
	transports(t, func(t *testing.T, srv func(string, chan<- struct{}) (config.MCPServer, map[string]string)) {
		dir := t.TempDir()
		s, modes := srv(dir, nil)
		f := newFixture(t, dir, []config.MCPServer{s}, modes, []config.PolicyPattern{{Pattern: "srv__*", Policy: config.PolicyAllow}}, monitor.Thresholds{})
		waitFor(t, "the tools", func() bool { return f.offered("srv__add_tool") })
		gen := f.reg.Generation()
		if f.offered("srv__added") {
			t.Fatal("srv__added before it was added")
		}
		if res := f.run(context.Background(), "srv__add_tool", `{}`, tools.CallMeta{}); res.IsError {
			t.Fatalf("add_tool = %+v", res)
		}
		waitFor(t, "the new tool", func() bool { return f.offered("srv__added") })
		if f.reg.Generation() == gen {
			t.Error("Generation did not change with the list")
		}
		if res := f.run(context.Background(), "srv__added", `{}`, tools.CallMeta{}); res.IsError || res.Content != "added works" {
			t.Errorf("added = %+v", res)
		}
	})
}

func TestSecretsNeverLogged(t *testing.T) {
	transports(t, func(t *testing.T, srv func(string, chan<- struct{}) (config.MCPServer, map[string]string)) {
		dir := t.TempDir()
		s, modes := srv(dir, nil)
		f := newFixture(t, dir, []config.MCPServer{s}, modes, nil, monitor.Thresholds{})
		waitFor(t, "the tools", func() bool { return f.offered("srv__secret") })
		res := f.run(context.Background(), "srv__secret", `{}`, tools.CallMeta{})
		if strings.Contains(res.Full, secretValue) || strings.Contains(res.Content, secretValue) {
			t.Errorf("the result carries the secret: %q", res.Full)
		}
		if s.Stdio() {
			// The server got it (it says so, redacted), and its stderr is logged.
			if res.Content != "the secret is [redacted]" {
				t.Errorf("result = %q", res.Content)
			}
			waitFor(t, "the stderr line", func() bool { return strings.Contains(f.log.String(), "my secret is [redacted]") })
		}
		for _, st := range f.m.Status() {
			if strings.Contains(st.Error, secretValue) {
				t.Errorf("status carries the secret: %+v", st)
			}
		}
		if strings.Contains(f.log.String(), secretValue) {
			t.Errorf("the log carries the secret:\n%s", f.log.String())
		}
	})
}

// A stdio server that crashes is started again and serves; one that keeps
// failing to start opens its breaker, and its tools then tell the model
// they are unavailable.
func TestCrashRestartAndBreaker(t *testing.T) {
	tests := []struct {
		name, mode string
		open       bool
	}{
		{"restarts", mcptest.ModeServe, false},
		{"keeps crashing", mcptest.ModeFailAfterOnce, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			f := newFixture(t, dir, []config.MCPServer{stdioServer(t, "srv")}, map[string]string{"srv": tc.mode}, nil,
				monitor.Thresholds{Failures: 3, Cooldown: time.Hour})
			waitFor(t, "the tools", func() bool { return f.offered("srv__crash") })
			res := f.run(context.Background(), "srv__crash", `{}`, tools.CallMeta{})
			if !res.IsError {
				t.Errorf("crash = %+v", res)
			}
			if !tc.open {
				waitFor(t, "the restart", func() bool { st := f.m.Status()[0]; return st.Restarts >= 1 && st.State == StateReady })
				if res := f.run(context.Background(), "srv__echo", `{"text":"back"}`, tools.CallMeta{}); res.IsError || res.Content != "back" {
					t.Errorf("echo after restart = %+v", res)
				}
				if v := f.mon.MCP("srv").View(); v.State != monitor.StateClosed {
					t.Errorf("breaker = %+v", v)
				}
				return
			}
			waitFor(t, "the breaker", func() bool { return f.mon.MCP("srv").View().State == monitor.StateOpen })
			if st := f.m.Status()[0]; st.State != StateUnavailable || st.Restarts < 3 {
				t.Errorf("Status = %+v", st)
			}
			if !f.offered("srv__echo") {
				t.Error("the tools of an open server are no longer offered; the model would not learn why")
			}
			res = f.run(context.Background(), "srv__echo", `{"text":"x"}`, tools.CallMeta{})
			if !res.IsError || !strings.Contains(res.Content, "unavailable: the MCP server srv keeps failing") {
				t.Errorf("echo while open = %+v", res)
			}
			if !strings.Contains(f.log.String(), "refusing to start again") {
				t.Error("the failing server's stderr is not in the log")
			}
		})
	}
}

// Start returns at once: a server that takes a minute to answer does not
// hold up the others, and shows as starting.
func TestSlowServerDoesNotHoldStart(t *testing.T) {
	dir := t.TempDir()
	slow := stdioServer(t, "slow")
	slow.Timeout = time.Minute
	fast := stdioServer(t, "fast")
	f := newFixture(t, dir, []config.MCPServer{slow, fast}, map[string]string{"slow": mcptest.ModeSlowStart, "fast": mcptest.ModeServe}, nil, monitor.Thresholds{})
	waitFor(t, "the fast server", func() bool { return f.offered("fast__echo") })
	if st := f.m.Status()[0]; st.Name != "slow" || st.State != StateStarting {
		t.Errorf("slow server = %+v", st)
	}
	res := f.run(context.Background(), "fast__echo", `{"text":"x"}`, tools.CallMeta{})
	if res.IsError {
		t.Errorf("echo = %+v", res)
	}
}

func TestShellLine(t *testing.T) {
	got := shellLine("/bin/my server", []string{"a b", "it's", "$HOME"})
	want := `exec '/bin/my server' 'a b' 'it'\''s' '$HOME'`
	if got != want {
		t.Errorf("shellLine = %s, want %s", got, want)
	}
}

// An HTTP server that goes away opens its breaker too: its calls fail,
// it cannot be reached again, and its tools then answer unavailable.
func TestHTTPOutageOpensBreaker(t *testing.T) {
	dir := t.TempDir()
	ts := httptest.NewServer(mcptest.Handler(dir, "", nil))
	s := config.MCPServer{Name: "srv", URL: ts.URL, Timeout: 5 * time.Second}
	f := newFixture(t, dir, []config.MCPServer{s}, nil, []config.PolicyPattern{{Pattern: "srv__*", Policy: config.PolicyAllow}},
		monitor.Thresholds{Failures: 3, Cooldown: time.Hour})
	waitFor(t, "the tools", func() bool { return f.offered("srv__echo") })
	ts.CloseClientConnections()
	ts.Close()
	waitFor(t, "the breaker", func() bool {
		f.run(context.Background(), "srv__echo", `{"text":"x"}`, tools.CallMeta{})
		return f.mon.MCP("srv").View().State == monitor.StateOpen
	})
	res := f.run(context.Background(), "srv__echo", `{"text":"x"}`, tools.CallMeta{})
	if !res.IsError || !strings.Contains(res.Content, "unavailable: the MCP server srv keeps failing") {
		t.Errorf("echo while open = %+v", res)
	}
	if st := f.m.Status()[0]; st.State != StateUnavailable || st.Error == "" {
		t.Errorf("Status = %+v", st)
	}
}

// FuzzCheck feeds arbitrary arguments through the registry's check of an
// MCP tool: never a panic, and what passes is a JSON object.
func FuzzCheck(f *testing.F) {
	srv := &server{cfg: config.MCPServer{Name: "srv"}, m: &Manager{log: slog.New(slog.DiscardHandler)}}
	ext := srv.externals([]*sdk.Tool{{Name: "t", InputSchema: map[string]any{"type": "object",
		"properties": map[string]any{"n": map[string]any{"type": "integer", "minimum": 0}, "s": map[string]any{"type": "string"}},
		"required":   []any{"n"}}}})
	reg, err := tools.New(tools.Options{Workspace: f.TempDir(), Sources: []tools.Source{staticSource(ext)}})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{`{"n":1}`, `{"n":-1}`, `{"s":"x"}`, `[]`, `{"n":1e400}`, ``, `{"n":1,"n":2}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		err := reg.Check(provider.ToolCall{Name: "srv__t", Arguments: args})
		if err == nil && !json.Valid([]byte(args)) && strings.TrimSpace(args) != "" {
			t.Fatalf("invalid JSON %q passed", args)
		}
	})
}

// staticSource is a Source with a fixed list, for checks that call nothing.
type staticSource []tools.External

func (s staticSource) Tools() []tools.External { return s }
func (s staticSource) Generation() uint64      { return 1 }
func (s staticSource) Call(context.Context, string, []byte, tools.CallMeta) (string, bool, error) {
	return "", true, errors.New("not callable")
}
