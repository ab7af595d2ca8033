package chats

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/tools"
	"github.com/mirror-gateway/mirror/runtime/tools/mcp"
	"github.com/mirror-gateway/mirror/runtime/tools/mcp/mcptest"
)

// mcpEnv is a tool env whose registry also has a real MCP server (the SDK's
// own, over loopback HTTP) named srv.
type mcpEnv struct {
	*env
	dir       string        // the server's notes
	cancelled chan struct{} // a slow call was cancelled on the server
}

func newMCPEnv(t *testing.T, patterns ...config.PolicyPattern) *mcpEnv {
	t.Helper()
	me := &mcpEnv{dir: t.TempDir(), cancelled: make(chan struct{}, 4)}
	ts := httptest.NewServer(mcptest.Handler(me.dir, "", me.cancelled))
	m, err := mcp.New(mcp.Options{Servers: []config.MCPServer{{Name: "srv", URL: ts.URL, Timeout: wait}}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	m.Start(context.Background())
	e := &env{t: t, path: filepath.Join(t.TempDir(), "mirror.db"), tools: true, workspace: filepath.Join(t.TempDir(), "ws"),
		sources: []tools.Source{m}, patterns: patterns, mcpServers: []string{"srv"}, prompts: m}
	e.start()
	t.Cleanup(func() {
		e.stop()
		m.Close()
		ts.Close()
	})
	me.env = e
	deadline := time.Now().Add(wait)
	for !slices.ContainsFunc(m.Tools(), func(x tools.External) bool { return x.Name == "srv__echo" }) {
		if time.Now().After(deadline) {
			t.Fatal("the MCP server's tools never came")
		}
		time.Sleep(2 * time.Millisecond) // polling a condition, bounded above
	}
	return me
}

func finishedReply(evs []*Event) string {
	for _, ev := range evs {
		if fin := pay[*TurnFinished](ev); fin != nil {
			return fin.Reply
		}
	}
	return ""
}

func resultOf(evs []*Event, n int) *ToolOutcome {
	for _, ev := range evs {
		if ev.Type == EvToolResult {
			if n--; n == 0 {
				return pay[*ToolResult](ev).Result
			}
		}
	}
	return nil
}

// An MCP tool is ask unless a policy says otherwise: the call waits for
// the same approval as a built-in, runs once allowed, is refused when the
// person denies it, and a deny policy refuses it without asking.
func TestMCPToolApprovals(t *testing.T) {
	t.Run("ask", func(t *testing.T) {
		e := newMCPEnv(t)
		c := e.chat()
		s := newSub()
		if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Send(bg, c.ID, `/tool srv__echo {"text":"over mcp"}`, "1", "", Origin{}); err != nil {
			t.Fatal(err)
		}
		ap := approvalOf(t, s, 1)
		if ap.Tool != "srv__echo" {
			t.Fatalf("approval for %s", ap.Tool)
		}
		if got := mcptest.Lines(e.dir, mcptest.CallsFile); len(got) != 0 {
			t.Fatalf("the server was called before the approval: %q", got)
		}
		if err := e.svc.AnswerApproval(bg, ap.ID, true, Origin{}); err != nil {
			t.Fatal(err)
		}
		evs := s.waitFor(t, "finished", has(EvTurnFinished, 1))
		if r := resultOf(evs, 1); r == nil || r.IsError || r.Content != "over mcp" {
			t.Fatalf("result %+v", r)
		}
		if _, err := e.svc.Send(bg, c.ID, `/tool srv__echo {"text":"again"}`, "2", "", Origin{}); err != nil {
			t.Fatal(err)
		}
		ap = approvalOf(t, s, 2)
		if err := e.svc.AnswerApproval(bg, ap.ID, false, Origin{}); err != nil {
			t.Fatal(err)
		}
		evs = s.waitFor(t, "finished", has(EvTurnFinished, 2))
		if r := resultOf(evs, 2); r == nil || !r.IsError || !strings.Contains(r.Content, "denied") {
			t.Fatalf("denied result %+v", r)
		}
		if got := mcptest.Lines(e.dir, mcptest.CallsFile); !slices.Equal(got, []string{"echo"}) {
			t.Fatalf("the server saw %q, want the one allowed echo", got)
		}
		if n := count(e.durable(c.ID), EvToolCall); n != 2 {
			t.Fatalf("%d tool.call rows, want 2 (journaled before each call)", n)
		}
	})
	t.Run("deny policy", func(t *testing.T) {
		e := newMCPEnv(t, config.PolicyPattern{Pattern: "srv__*", Policy: config.PolicyDeny})
		c := e.chat()
		s := newSub()
		if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Send(bg, c.ID, `/tool srv__echo {"text":"x"}`, "1", "", Origin{}); err != nil {
			t.Fatal(err)
		}
		// Not offered at all: the model (the builtin one calls only what it
		// is offered) says so instead of calling it.
		evs := s.waitFor(t, "finished", has(EvTurnFinished, 1))
		if r := finishedReply(evs); !strings.Contains(r, "«srv__echo» is not available here") {
			t.Fatalf("reply %q", r)
		}
		if count(evs, EvApprovalRequested) != 0 || count(evs, EvToolCall) != 0 || len(mcptest.Lines(e.dir, mcptest.CallsFile)) != 0 {
			t.Fatal("a denied MCP tool was asked about or called")
		}
	})
}

// Stop cancels a running MCP call on the server (notifications/cancelled),
// and the call's progress reaches the chat's subscribers without being
// stored.
func TestMCPStopCancelsTheCall(t *testing.T) {
	e := newMCPEnv(t, config.PolicyPattern{Pattern: "srv__slow", Policy: config.PolicyAllow})
	c := e.chat()
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Send(bg, c.ID, `/tool srv__slow {}`, "1", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	evs := s.waitFor(t, "progress", has(EvToolProgress, 1))
	for _, ev := range evs {
		if p := pay[*ToolProgress](ev); p != nil && (p.Call == nil || p.Call.Name != "srv__slow" || p.Text != "working 1/2") {
			t.Fatalf("progress %+v", ev)
		}
	}
	if err := e.svc.Stop(bg, c.ID, Origin{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.cancelled:
	case <-time.After(wait):
		t.Fatal("the server never saw the cancellation")
	}
	s.waitFor(t, "finished", has(EvTurnFinished, 1))
	if n := count(e.durable(c.ID), EvToolProgress); n != 0 {
		t.Fatalf("%d tool.progress rows stored", n)
	}
}

// A chat may leave a server out: its tools are not offered (so not
// called), and /status says how much the tool definitions take.
func TestMCPServersPerChat(t *testing.T) {
	e := newMCPEnv(t, config.PolicyPattern{Pattern: "srv__*", Policy: config.PolicyAllow})
	c := e.chat()
	st, err := e.svc.Command(bg, c.ID, "/status", Origin{})
	if err != nil || !strings.Contains(st, "(7 from MCP servers)") {
		t.Fatalf("/status = %q, %v", st, err)
	}
	out, err := e.svc.Command(bg, c.ID, "/mcp off srv", Origin{})
	if err != nil || !strings.Contains(out, "offered in this chat: none; left out: srv") || !strings.Contains(out, "(0 from MCP servers)") {
		t.Fatalf("/mcp off = %q, %v", out, err)
	}
	if _, err := e.svc.Command(bg, c.ID, "/mcp on nosuch", Origin{}); err == nil {
		t.Fatal("/mcp on an unknown server was accepted")
	}
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Send(bg, c.ID, `/tool srv__echo {"text":"x"}`, "1", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	evs := s.waitFor(t, "finished", has(EvTurnFinished, 1))
	if r := finishedReply(evs); !strings.Contains(r, "«srv__echo» is not available here") {
		t.Fatalf("reply %q", r)
	}
	// The choice is the chat's, kept across a restart.
	e.restart()
	out, err = e.svc.Command(bg, c.ID, "/mcp", Origin{})
	if err != nil || !strings.Contains(out, "left out: srv") {
		t.Fatalf("/mcp after restart = %q, %v", out, err)
	}
	if out, err = e.svc.Command(bg, c.ID, "/mcp all", Origin{}); err != nil || !strings.Contains(out, "offered in this chat: srv.") {
		t.Fatalf("/mcp all = %q, %v", out, err)
	}
	if len(mcptest.Lines(e.dir, mcptest.CallsFile)) != 0 {
		t.Fatal("a left-out server was called")
	}
}

// /prompt lists the servers' prompts and sends one, filled in, as the
// person's message: the turn answers it like any other.
func TestMCPPromptIsSentAsAMessage(t *testing.T) {
	e := newMCPEnv(t)
	c := e.chat()
	out, err := e.svc.Command(bg, c.ID, "/prompt", Origin{})
	if err != nil || !strings.Contains(out, "srv greet name*: Greets someone.") {
		t.Fatalf("/prompt = %q, %v", out, err)
	}
	for _, bad := range []string{"/prompt srv", "/prompt srv greet name", "/prompt nosuch greet", "/prompt srv nosuch"} {
		if _, err := e.svc.Command(bg, c.ID, bad, Origin{}); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	if out, err = e.svc.Command(bg, c.ID, "/prompt srv greet name=Ada", Origin{}); err != nil || !strings.Contains(out, "Sent the prompt greet of srv") {
		t.Fatalf("/prompt srv greet = %q, %v", out, err)
	}
	evs := s.waitFor(t, "finished", has(EvTurnFinished, 1))
	if r := finishedReply(evs); !strings.Contains(r, "Say hello to Ada.") {
		t.Fatalf("reply %q", r)
	}
}

// probe is a tool source whose one tool reports whether its call's
// approval was durable when the call arrived.
type probe struct{ e *env }

func (p probe) Generation() uint64 { return 1 }
func (p probe) Tools() []tools.External {
	return []tools.External{{Name: "probe__check", Description: "Reports.", Parameters: []byte(`{"type":"object"}`), Server: "probe"}}
}
func (p probe) Call(_ context.Context, _ string, _ []byte, meta tools.CallMeta) (string, bool, error) {
	for _, ev := range p.e.durable(meta.Chat) {
		if ev.Type == EvApprovalResolved {
			return "approval durable", false, nil
		}
	}
	return "approval not durable yet", true, nil
}

// An approved call is sent only once its approval is stored: an MCP call
// journals nothing else before it goes, and after a crash a call whose
// approval was lost would be asked for again as if it never ran.
func TestApprovedCallRunsOnceTheApprovalIsDurable(t *testing.T) {
	e := &env{t: t, path: filepath.Join(t.TempDir(), "mirror.db"), tools: true, workspace: filepath.Join(t.TempDir(), "ws")}
	e.sources = []tools.Source{probe{e}}
	e.start()
	t.Cleanup(e.stop)
	for i := range 5 {
		c := e.chat()
		s := newSub()
		if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Send(bg, c.ID, `/tool probe__check {}`, "1", "", Origin{}); err != nil {
			t.Fatal(err)
		}
		ap := approvalOf(t, s, 1)
		if err := e.svc.AnswerApproval(bg, ap.ID, true, Origin{}); err != nil {
			t.Fatal(err)
		}
		evs := s.waitFor(t, "finished", has(EvTurnFinished, 1))
		if r := resultOf(evs, 1); r == nil || r.Content != "approval durable" {
			t.Fatalf("try %d: result %+v", i, r)
		}
	}
}
