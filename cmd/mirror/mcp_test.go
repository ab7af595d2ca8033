package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/runtime/tools/mcp/mcptest"
)

const mcpSecret = "mcp-S3cret-7f2a9b"

// mcpGateway writes a runtime.yaml whose one MCP server, srv, is this test
// binary run as mcptest.Main, and returns what starts the gateway on it.
func mcpGateway(t *testing.T, policies string) (start func() *proc, notes, data string) {
	t.Helper()
	dir := t.TempDir()
	notes = filepath.Join(dir, "notes")
	if err := os.Mkdir(notes, 0o700); err != nil {
		t.Fatal(err)
	}
	data = filepath.Join(dir, "data")
	cfg := fmt.Sprintf(`mcp:
  servers:
    - name: srv
      command: %s
      env: {%s: MCPTEST_MAIN_SRV, MCPTEST_SECRET: MCP_SECRET}
tools:
  policies:
%s`, strconv.Quote(os.Args[0]), mcptest.EnvMain, policies)
	path := filepath.Join(dir, "runtime.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	start = func() *proc {
		return startProcIn(t, dir, []string{"serve", "--config", path, "--data", data, "--addr", "127.0.0.1:0"},
			"MCPTEST_MAIN_SRV="+mcptest.ModeServe+" "+notes, "MCP_SECRET="+mcpSecret)
	}
	return start, notes, data
}

// until polls cond (a file, a process) with a bound.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling, bounded
	}
}

func countLines(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// gone reports whether pid has ended (a zombie no one reaped yet counts).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && len(b) > i+2 && b[i+2] == 'Z'
}

// TestMCPCallAfterKillMinusNine runs the gateway as a real process with a
// stdio MCP server. An MCP call is approved (ask is the default) and
// reaches the server; the gateway is killed with SIGKILL mid-call. The
// server dies with it. After a restart the server is started again, the
// call becomes exactly one recovery, is never sent again on its own, and
// skipping it finishes the turn.
func TestMCPCallAfterKillMinusNine(t *testing.T) {
	start, notes, _ := mcpGateway(t, "    shell: deny\n")
	p := start()
	a := dialWS(t, p.addr)
	a.send(map[string]any{"type": "hello", "client": "a"})
	a.next("welcome", nil)
	until(t, "the server's start", func() bool { return len(mcptest.Lines(notes, mcptest.StartsFile)) == 1 })
	a.send(map[string]any{"type": "chat.create", "title": "mcp"})
	chat := a.next("chat.created", nil)["chat"].(map[string]any)["id"].(string)
	a.send(map[string]any{"type": "chat.open", "chat": chat})
	a.next("chat.snapshot", nil)
	// The tools are listed once the server answered; the model (builtin)
	// calls only what it is offered, so ask until it is.
	var ap map[string]any
	for i := 0; ap == nil; i++ {
		a.send(map[string]any{"type": "message.send", "chat": chat, "text": `/tool srv__slow {}`, "client_id": fmt.Sprint("k", i)})
		for {
			m := a.frame()
			if m["type"] == "approval.requested" {
				ap = m["approval"].(map[string]any)
				break
			}
			if m["type"] == "turn.finished" {
				break // not offered yet
			}
		}
		if i > 200 {
			t.Fatal("srv__slow was never offered")
		}
	}
	if ap["tool"] != "srv__slow" {
		t.Fatalf("approval %v", ap)
	}
	a.send(map[string]any{"type": "approval.answer", "approval": ap["id"], "allow": true})
	until(t, "the call to reach the server", func() bool { return countLines(mcptest.Lines(notes, mcptest.CallsFile), "slow") == 1 })
	first := mcptest.Lines(notes, mcptest.StartsFile)[0]
	pid, _ := strconv.Atoi(strings.TrimPrefix(first, "start "))

	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	until(t, "the MCP server to die with the gateway", func() bool { return gone(pid) })

	p = start()
	b := dialWS(t, p.addr)
	b.send(map[string]any{"type": "chat.open", "chat": chat, "since": 0})
	recoveries := map[string]bool{}
	count := func(m map[string]any) {
		t.Logf("frame %v", m["type"])
		if m["type"] == "recovery.requested" {
			recoveries[m["recovery"].(map[string]any)["id"].(string)] = true
		}
	}
	rec := b.next("recovery.requested", count)["recovery"].(map[string]any)
	if rec["call"].(map[string]any)["name"] != "srv__slow" {
		t.Fatalf("recovery %v", rec)
	}
	b.next("chat.resumed", count)
	// The server is back, and still the call was not sent again.
	until(t, "the server's restart", func() bool { return len(mcptest.Lines(notes, mcptest.StartsFile)) == 2 })
	b.send(map[string]any{"type": "recovery.answer", "recovery": rec["id"], "action": "skip"})
	res := b.next("tool.result", count)["result"].(map[string]any)
	if res["is_error"] != true || !strings.Contains(fmt.Sprint(res["content"]), "not repeated") {
		t.Fatalf("skipped result %v", res)
	}
	b.next("turn.finished", count)
	if len(recoveries) != 1 {
		t.Fatalf("%d recoveries, want 1", len(recoveries))
	}
	if got := mcptest.Lines(notes, mcptest.CallsFile); countLines(got, "slow") != 1 {
		t.Fatalf("the server saw %q: the interrupted call was sent again", got)
	}
}

// TestMCPSecretsStayOut gives a stdio server a secret through env; the
// server writes it to its stderr and returns it. Neither the gateway's log
// nor the database holds it.
func TestMCPSecretsStayOut(t *testing.T) {
	start, notes, data := mcpGateway(t, "    srv__secret: allow\n")
	p := start()
	a := dialWS(t, p.addr)
	a.send(map[string]any{"type": "hello", "client": "a"})
	a.next("welcome", nil)
	until(t, "the server's start", func() bool { return len(mcptest.Lines(notes, mcptest.StartsFile)) == 1 })
	a.send(map[string]any{"type": "chat.create", "title": "secret"})
	chat := a.next("chat.created", nil)["chat"].(map[string]any)["id"].(string)
	a.send(map[string]any{"type": "chat.open", "chat": chat})
	a.next("chat.snapshot", nil)
	var result map[string]any
	for i := 0; result == nil; i++ {
		a.send(map[string]any{"type": "message.send", "chat": chat, "text": `/tool srv__secret {}`, "client_id": fmt.Sprint("k", i)})
		for {
			m := a.frame()
			if m["type"] == "tool.result" {
				result = m["result"].(map[string]any)
			}
			if m["type"] == "turn.finished" {
				break
			}
		}
		if i > 200 {
			t.Fatal("srv__secret was never offered")
		}
	}
	if result["content"] != "the secret is [redacted]" {
		t.Fatalf("result %v", result)
	}
	p.stop(t)
	logs := p.errs.String()
	if !strings.Contains(logs, "my secret is [redacted]") {
		t.Errorf("the server's stderr is not in the log:\n%s", logs)
	}
	db, err := os.ReadFile(filepath.Join(data, DBFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs, mcpSecret) || bytes.Contains(db, []byte(mcpSecret)) {
		t.Fatal("the secret reached the log or the database")
	}
}

// frame reads the next frame, whatever its type.
func (w *wsClient) frame() map[string]any {
	w.t.Helper()
	var m map[string]any
	if err := w.c.ReadJSON(&m); err != nil {
		w.t.Fatalf("reading a frame: %v", err)
	}
	if m["type"] == "error" {
		w.t.Fatalf("error frame %v", m)
	}
	return m
}

// BenchmarkStartWithMCPServers is BenchmarkStartToFirstConn with 5 stdio
// MCP servers configured (this test binary as mcptest.Main): "ready"
// servers answer at once, "slow" ones take a minute to answer. The gateway
// must accept connections without waiting for either; each iteration is
// one process, the metrics the median and the slowest.
func BenchmarkStartWithMCPServers(b *testing.B) {
	for _, mode := range []string{mcptest.ModeServe, mcptest.ModeSlowStart} {
		b.Run(map[string]string{mcptest.ModeServe: "ready", mcptest.ModeSlowStart: "slow"}[mode], func(b *testing.B) {
			dir := b.TempDir()
			var y strings.Builder
			y.WriteString(benchYAML + "mcp:\n  servers:\n")
			var env []string
			for i := range 5 {
				fmt.Fprintf(&y, "    - {name: s%d, command: %s, env: {%s: MCPTEST_MAIN_%d}}\n", i, strconv.Quote(os.Args[0]), mcptest.EnvMain, i)
				env = append(env, fmt.Sprintf("MCPTEST_MAIN_%d=%s %s", i, mode, dir))
			}
			cfg := filepath.Join(dir, "runtime.yaml")
			if err := os.WriteFile(cfg, []byte(y.String()), 0o600); err != nil {
				b.Fatal(err)
			}
			var times []float64
			i := 0
			for b.Loop() {
				i++
				addr := freeAddr(b)
				cmd := newServeCmd(cfg, filepath.Join(dir, fmt.Sprintf("data%d", i)), addr)
				cmd.Env = append(cmd.Env, env...)
				client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
				t0 := time.Now()
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				c := &child{cmd: cmd, waited: make(chan error, 1), stderr: cmd.Stderr.(*lockedBuffer)}
				go func() { c.waited <- cmd.Wait() }()
				deadline := time.Now().Add(benchWait)
				for healthz(client, addr) != nil {
					if time.Now().After(deadline) {
						c.kill()
						b.Fatalf("no /healthz in %s; stderr %s", benchWait, c.stderr)
					}
					time.Sleep(200 * time.Microsecond)
				}
				times = append(times, ms(time.Since(t0)))
				c.kill() // the servers' leaders see the gateway go and end them
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(median(times), "start_ms")
			b.ReportMetric(slices.Max(times), "max_ms")
		})
	}
}
