package mcp

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/monitor"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tools"
	"github.com/mirror-gateway/mirror/runtime/tools/mcp/mcptest"
)

// BenchmarkCall is one tool call through the registry (check, run,
// preview): a built-in (read_file of a small file) against an MCP echo over
// stdio and over loopback HTTP. The difference is what MCP adds.
func BenchmarkCall(b *testing.B) {
	b.Run("builtin", func(b *testing.B) {
		ws := b.TempDir()
		if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hello"), 0o600); err != nil {
			b.Fatal(err)
		}
		reg, err := tools.New(tools.Options{Workspace: ws})
		if err != nil {
			b.Fatal(err)
		}
		call := provider.ToolCall{ID: "c", Name: "read_file", Arguments: `{"path":"a.txt"}`}
		for b.Loop() {
			if res := reg.Run(context.Background(), call, tools.CallMeta{}); res.IsError {
				b.Fatal(res.Content)
			}
		}
	})
	for _, tc := range []struct {
		name string
		srv  func(dir string) (config.MCPServer, map[string]string)
	}{
		{"stdio", func(string) (config.MCPServer, map[string]string) {
			return stdioServer(b, "srv"), map[string]string{"srv": mcptest.ModeServe}
		}},
		{"http", func(dir string) (config.MCPServer, map[string]string) { return httpServer(b, "srv", dir, nil), nil }},
	} {
		b.Run("mcp_"+tc.name, func(b *testing.B) {
			s, modes := tc.srv("")
			f := newFixture(b, "", []config.MCPServer{s}, modes, nil, monitor.Thresholds{})
			waitFor(b, "the tools", func() bool { return f.offered("srv__echo") })
			call := provider.ToolCall{ID: "c", Name: "srv__echo", Arguments: `{"text":"hello"}`}
			for b.Loop() {
				if res := f.reg.Run(context.Background(), call, tools.CallMeta{}); res.IsError {
					b.Fatal(res.Content)
				}
			}
		})
	}
}
