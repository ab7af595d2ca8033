package tools_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/builtin"
	"github.com/mirror-gateway/mirror/runtime/tools"
)

// The whole tool path runs offline: the builtin model calls a tool on
// "/tool", the registry checks and runs it, and the model ends the turn by
// quoting the result.
func TestBuiltinDrivesTools(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hello from the workspace\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reg, err := tools.New(tools.Options{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	model := builtin.New(0)
	tests := []struct {
		name, say string
		isErr     bool
		answer    string
	}{
		{"good call", `/tool read_file {"path": "hello.txt"}`, false, "The tool read_file returned: «hello from the workspace»."},
		{"bad arguments", `/tool read_file {"file": "hello.txt"}`, true,
			`The tool read_file returned: «read_file: argument "path" is required; unknown argument "file" (arguments: limit, offset, path)».`},
		{"bad json", `/tool list_dir {"path":`, true, "The tool list_dir returned: «list_dir: the arguments are not valid JSON: it ends too early»."},
		{"escape", `/tool read_file {"path": "../../etc/passwd"}`, true,
			`The tool read_file returned: «read_file: path "../../etc/passwd" leads out of the workspace (..)».`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msgs := []provider.Message{{Role: provider.RoleUser, Content: tc.say}}
			req := provider.Request{Messages: msgs, Tools: reg.Definitions()}
			res, err := model.Stream(context.Background(), req, func(provider.Delta) error { return nil })
			if err != nil || len(res.ToolCalls) != 1 {
				t.Fatalf("no call: %+v %v", res, err)
			}
			call := res.ToolCalls[0]
			out := reg.Run(context.Background(), call, tools.CallMeta{Chat: "c", Turn: 1, CallID: call.ID})
			if out.IsError != tc.isErr {
				t.Fatalf("result %+v", out)
			}
			msgs = append(msgs,
				provider.Message{Role: provider.RoleAssistant, ToolCalls: res.ToolCalls},
				provider.Message{Role: provider.RoleTool, ToolCallID: call.ID, Content: out.Content})
			res, err = model.Stream(context.Background(), provider.Request{Messages: msgs, Tools: reg.Definitions()}, func(provider.Delta) error { return nil })
			if err != nil || len(res.ToolCalls) != 0 || res.FinishReason != "stop" {
				t.Fatalf("turn did not end: %+v %v", res, err)
			}
			if res.Text != tc.answer {
				t.Errorf("answer\n got %s\nwant %s", res.Text, tc.answer)
			}
		})
	}
	// A denied tool is not offered, so the model says it is not available.
	reg2, err := tools.New(tools.Options{Workspace: ws, Policies: map[string]tools.Policy{"shell": tools.Deny}})
	if err != nil {
		t.Fatal(err)
	}
	req := provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "/tool shell {\"command\": \"id\"}"}}, Tools: reg2.Definitions()}
	if text := builtin.Answer(req); !strings.HasPrefix(text, "The tool «shell» is not available here.") {
		t.Errorf("denied tool: %s", text)
	}
}
