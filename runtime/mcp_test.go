package runtime

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/builtin"
	"github.com/mirror-gateway/mirror/runtime/tools"
	"github.com/mirror-gateway/mirror/runtime/tools/mcp"
	"github.com/mirror-gateway/mirror/runtime/tools/mcp/mcptest"
)

// mcpEngine is an engine whose registry has a real MCP server (the SDK's
// own, over loopback HTTP) named srv, its tools allowed.
func mcpEngine(t *testing.T) (*Engine, *tools.Registry, string) {
	t.Helper()
	dir := t.TempDir()
	ts := httptest.NewServer(mcptest.Handler(dir, "", nil))
	t.Cleanup(ts.Close)
	m, err := mcp.New(mcp.Options{Servers: []config.MCPServer{{Name: "srv", URL: ts.URL, Timeout: 10 * time.Second}}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	m.Start(context.Background())
	t.Cleanup(func() { m.Close() })
	reg, err := tools.New(tools.Options{Workspace: t.TempDir(), Sources: []tools.Source{m},
		Patterns: []config.PolicyPattern{{Pattern: "srv__*", Policy: config.PolicyAllow}}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEngine([]*Model{{Name: "m", Provider: builtin.New(0), Remote: "gpt-4o", Window: 128000}},
		map[string][]string{"default": {"m"}}, config.Roles{Chat: "default"}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Provision(Options{Tools: reg}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the MCP tools", func() bool { return offers(e.offered(true), "srv__echo") })
	return e, reg, dir
}

func offers(defs []provider.Tool, name string) bool {
	return slices.ContainsFunc(defs, func(d provider.Tool) bool { return d.Name == name })
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond) // polling a condition, bounded
	}
}

// MCP tool definitions are part of the fixed part of every request: the
// engine says how much, per chat's choice of servers, and offers a
// server's new list once it changed, counted again.
func TestMCPToolsInTheFixedPart(t *testing.T) {
	e, reg, _ := mcpEngine(t)
	all, none := e.Tools("default", nil), e.Tools("default", []string{})
	if all.MCP != 7 || none.MCP != 0 || all.Tools != none.Tools+7 || all.Tokens <= none.Tokens || all.Window != 128000 {
		t.Fatalf("Tools: all %+v, none %+v", all, none)
	}
	if !strings.Contains(all.Line(), "(7 from MCP servers)") {
		t.Errorf("Line() = %s", all.Line())
	}
	if mi := e.Models()[0].Tools; mi != all {
		t.Errorf("model details say %+v, want %+v", mi, all)
	}
	// The sizer counts the same tokens as the fixed part.
	if sz := e.sizer(e.models["m"], e.offered(true)); sz.defs != all.Tokens {
		t.Errorf("sizer counts %d, Tools %d", sz.defs, all.Tokens)
	}
	res := reg.Run(context.Background(), provider.ToolCall{ID: "c", Name: "srv__add_tool", Arguments: "{}"}, tools.CallMeta{})
	if res.IsError {
		t.Fatal(res.Content)
	}
	waitUntil(t, "the changed list", func() bool { return offers(e.offered(true), "srv__added") })
	if got := e.Tools("default", nil); got.MCP != 8 || got.Tokens <= all.Tokens {
		t.Errorf("after the change: %+v (before %+v)", got, all)
	}
	if defs, _ := e.offer(true, []string{"other"}); offers(defs, "srv__echo") {
		t.Error("a chat without srv is offered its tools")
	}
}

// recorder is a journal that keeps each result.
type recorder struct {
	journal
	mu  sync.Mutex
	out []ToolResult
}

func (r *recorder) CallFinished(call provider.ToolCall, res ToolResult) (uint64, error) {
	r.mu.Lock()
	r.out = append(r.out, res)
	r.mu.Unlock()
	return r.journal.CallFinished(call, res)
}

// A call of a server the chat no longer offers (a recovery repeated after
// /mcp off) is refused without reaching the server.
func TestMCPCallOfALeftOutServerIsRefused(t *testing.T) {
	e, _, dir := mcpEngine(t)
	call := provider.ToolCall{ID: "call_1", Name: "srv__echo", Arguments: `{"text":"x"}`}
	j := &recorder{}
	_, err := e.Run(context.Background(), TurnInput{Chat: "c1", Turn: 3, Chain: "default", Host: j, Servers: []string{},
		Settle:  map[string]string{call.ID: Repeat},
		History: []provider.Message{{Role: provider.RoleUser, Content: "echo"}, {Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{call}}}},
		func(string) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(j.out) == 0 || !j.out[0].IsError || !strings.Contains(j.out[0].Content, "not offered in this chat") {
		t.Fatalf("results %+v", j.out)
	}
	if got := mcptest.Lines(dir, mcptest.CallsFile); len(got) != 0 {
		t.Fatalf("the server saw %q", got)
	}
}
