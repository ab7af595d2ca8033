package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/mirror-gateway/mirror/runtime/tools/mcp/mcptest"
)

// The test binary doubles as the mirror binary, so the tests below run the
// gateway as a real process without building it separately.
func TestMain(m *testing.M) {
	mcptest.Main() // re-executed as an MCP server of a gateway under test
	if os.Getenv("MIRROR_AS_MAIN") == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
	}
	os.Exit(m.Run())
}

func TestUsageAndConfigErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "runtime.yaml")
	if err := os.WriteFile(bad, []byte("listen: 127.0.0.1:8765\nwhatever: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no command", nil, 2, "usage"},
		{"unknown command", []string{"fly"}, 2, `unknown command "fly"`},
		{"bad flag", []string{"serve", "--nope"}, 2, "flag provided but not defined"},
		{"bad config", []string{"serve", "--config", bad, "--data", filepath.Join(dir, "d")}, 2, "runtime.yaml:2: "},
		{"missing explicit config", []string{"serve", "--config", filepath.Join(dir, "none.yaml")}, 2, "none.yaml"},
		{"bad addr", []string{"serve", "--data", filepath.Join(dir, "d"), "--addr", "nonsense"}, 2, "--addr"},
		{"version", []string{"version"}, 0, ""},
		// Every subcommand answers --help with its flags and exit 0, also
		// those that take a leading argument.
		{"replay help", []string{"replay", "--help"}, 0, "-data"},
		{"pair approve help", []string{"pair", "approve", "--help"}, 0, "-data"},
		{"pair list help", []string{"pair", "list", "-h"}, 0, "-data"},
		{"pair help", []string{"pair", "--help"}, 0, "mirror pair approve CODE"},
		{"check-compression help", []string{"check-compression", "--help"}, 0, "-context-window"},
		{"replay without chat", []string{"replay"}, 2, "missing CHAT"},
		{"pair approve without code", []string{"pair", "approve"}, 2, "missing CODE"},
		{"check-compression without file", []string{"check-compression"}, 2, "missing FILE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), tc.args, &out, &errb, func(string) string { return "" })
			if code != tc.code || !strings.Contains(out.String()+errb.String(), tc.want) {
				t.Fatalf("exit %d (want %d), output %q / %q", code, tc.code, out.String(), errb.String())
			}
		})
	}
}

func TestTokenIsKeptPrivately(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	var a, b bytes.Buffer
	if code := run(context.Background(), []string{"token", "--data", data}, &a, io.Discard, func(string) string { return "" }); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if code := run(context.Background(), []string{"token", "--data", data}, &b, io.Discard, func(string) string { return "" }); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if a.String() != b.String() || len(strings.TrimSpace(a.String())) < 32 {
		t.Fatalf("tokens %q %q", a.String(), b.String())
	}
	for path, want := range map[string]os.FileMode{data: 0o700, filepath.Join(data, "token"): 0o600} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != want {
			t.Fatalf("%s: %v %v, want %v", path, fi.Mode(), err, want)
		}
	}
}

// proc is mirror serve running as a child process.
type proc struct {
	cmd  *exec.Cmd
	addr string
	errs *logBuffer
}

// logBuffer is a child's stderr: written by the process's copier while
// tests read it, so every access is under its lock.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is what was written so far.
func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Bytes is a copy of what was written so far.
func (l *logBuffer) Bytes() []byte { return []byte(l.String()) }

func startServe(t *testing.T, data string, env ...string) *proc {
	t.Helper()
	// Beside the data dir, with no runtime.yaml: built-in defaults, and the
	// default workspace (next to the config) stays the same across restarts.
	return startProcIn(t, filepath.Dir(data), []string{"serve", "--data", data, "--addr", "127.0.0.1:0"}, env...)
}

// startProc runs the mirror process with args and waits for its listening line.
func startProc(t *testing.T, args []string, env ...string) *proc {
	t.Helper()
	return startProcIn(t, t.TempDir(), args, env...) // no runtime.yaml there: built-in defaults
}

// startProcIn is startProc in the working directory dir.
func startProcIn(t *testing.T, dir string, args []string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append([]string{"MIRROR_AS_MAIN=1", "MIRROR_TOKEN=test-token-0123456789abcdef"}, env...)...)
	return startCmd(t, cmd)
}

// startCmd starts cmd (a `mirror serve` with --addr 127.0.0.1:0), killed
// when t ends, and waits for its listening line.
func startCmd(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, errs: &logBuffer{}}
	cmd.Stderr = p.errs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line := make(chan string, 1)
	closed := make(chan struct{}) // stdout closed: the process has exited
	go func() {
		defer close(closed)
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case s := <-line:
		addr, ok := strings.CutPrefix(strings.TrimSpace(s), "mirror: listening on http://")
		if !ok {
			t.Fatalf("first line %q; stderr %s", s, p.errs)
		}
		p.addr = addr
	case <-time.After(20 * time.Second):
		// Where the start stands: on SIGQUIT the Go runtime writes every
		// goroutine's stack to stderr and exits.
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-closed:
			_ = cmd.Wait() // stderr copied whole
		case <-time.After(5 * time.Second):
		}
		t.Fatalf("no listening line in 20 s; stderr, with the goroutines at that moment: %s", p.errs)
	}
	return p
}

func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v; stderr %s", err, p.errs)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("did not exit after SIGTERM")
	}
}

func TestServeAsAProcess(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	p := startServe(t, data)
	resp, err := http.Get("http://" + p.addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz %d", resp.StatusCode)
	}

	// A second process on the same data dir fails clearly instead of hanging.
	second := exec.Command(os.Args[0], "serve", "--data", data, "--addr", "127.0.0.1:0")
	second.Env = append(os.Environ(), "MIRROR_AS_MAIN=1")
	second.Dir = t.TempDir()
	out, err := second.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "in use by another mirror process") {
		t.Fatalf("second process: %v %s", err, out)
	}

	// Chat over the WebSocket, then stop with SIGTERM: exit 0.
	h := http.Header{"Authorization": {"Bearer test-token-0123456789abcdef"}}
	c, _, err := websocket.DefaultDialer.Dial("ws://"+p.addr+"/ws", h)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
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
			if m["type"] == "error" {
				t.Fatalf("error %v", m)
			}
		}
	}
	_ = c.WriteJSON(map[string]any{"type": "chat.create", "title": "kept"})
	id := next("chat.created")["chat"].(map[string]any)["id"].(string)
	_ = c.WriteJSON(map[string]any{"type": "chat.open", "chat": id})
	next("chat.snapshot")
	_ = c.WriteJSON(map[string]any{"type": "message.send", "chat": id, "text": "remember me", "client_id": "k"})
	next("message.accepted")
	next("turn.finished")
	c.Close()
	p.stop(t)

	// Started again, the chat and its messages are there.
	p = startServe(t, data)
	req, _ := http.NewRequest("GET", "http://"+p.addr+"/api/chats", nil)
	req.Header = h
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Chats []map[string]any }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Chats) != 1 || list.Chats[0]["title"] != "kept" {
		t.Fatalf("after restart: %v %v", list, err)
	}
	p.stop(t)
}

// TestKillMinusNineLosesNoAcknowledgedMessage kills the process right after
// a message is acknowledged, mid-turn: the next start answers it.
func TestKillMinusNineLosesNoAcknowledgedMessage(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	p := startServe(t, data)
	h := http.Header{"Authorization": {"Bearer test-token-0123456789abcdef"}}
	dial := func(addr string) (*websocket.Conn, func(string) map[string]any) {
		c, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/ws", h)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
		return c, func(typ string) map[string]any {
			for {
				var m map[string]any
				if err := c.ReadJSON(&m); err != nil {
					t.Fatalf("waiting for %s: %v", typ, err)
				}
				if m["type"] == typ {
					return m
				}
			}
		}
	}
	c, next := dial(p.addr)
	_ = c.WriteJSON(map[string]any{"type": "chat.create"})
	id := next("chat.created")["chat"].(map[string]any)["id"].(string)
	_ = c.WriteJSON(map[string]any{"type": "message.send", "chat": id, "text": "tell me something", "client_id": "k"})
	next("message.accepted")
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()

	p = startServe(t, data)
	c, next = dial(p.addr)
	_ = c.WriteJSON(map[string]any{"type": "chat.open", "chat": id, "since": 0})
	for {
		m := next("turn.finished")
		if strings.Contains(m["reply"].(string), "tell me something") {
			break
		}
	}
	p.stop(t)
}

func TestPairWithoutARunningGateway(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "runtime.yaml")
	// Nothing listens on port 1, so the command opens the database itself.
	if err := os.WriteFile(cfgPath, []byte("listen: 127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	env := func(string) string { return "" }
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"pair"}, 2, "usage"},
		{[]string{"pair", "frob"}, 2, "unknown subcommand"},
		{[]string{"pair", "approve"}, 2, "missing CODE"},
		{[]string{"pair", "list", "--config", cfgPath, "--data", data}, 0, ""},
		{[]string{"pair", "approve", "NOPE42", "--config", cfgPath, "--data", data}, 1, ""},
	}
	for _, tc := range cases {
		var out, errb bytes.Buffer
		code := run(context.Background(), tc.args, &out, &errb, env)
		if code != tc.code || !strings.Contains(out.String()+errb.String(), tc.want) {
			t.Errorf("%v: exit %d (want %d), %q %q", tc.args, code, tc.code, out.String(), errb.String())
		}
	}
}

// TestSubcommandsFindTheGatewayOffItsConfiguredAddress: a gateway moved off
// runtime.yaml's listen by --addr is still found by the subcommands that ask
// it (through data_dir/listen), and the file goes when it stops.
func TestSubcommandsFindTheGatewayOffItsConfiguredAddress(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	p := startServe(t, data)
	b, err := os.ReadFile(filepath.Join(data, ListenFile))
	if err != nil || strings.TrimSpace(string(b)) != p.addr {
		t.Fatalf("listen file %q (%v), gateway at %s", b, err, p.addr)
	}
	var out, errb bytes.Buffer
	env := func(k string) string {
		if k == "MIRROR_TOKEN" {
			return "test-token-0123456789abcdef"
		}
		return ""
	}
	if code := run(context.Background(), []string{"check", "--data", data}, &out, &errb, env); code != 0 ||
		!strings.Contains(out.String(), "checked by the gateway running at "+p.addr) {
		t.Fatalf("check: exit %d, %q / %q", code, out.String(), errb.String())
	}
	p.stop(t)
	if _, err := os.Stat(filepath.Join(data, ListenFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the listen file outlived the gateway: %v", err)
	}
}
