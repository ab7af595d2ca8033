package builtin

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// Asked for its record at a boundary, the built-in model answers with the
// one call it is forced to make, naming what it can see.
func TestForcedHandoffUpdate(t *testing.T) {
	req := provider.Request{ToolChoice: "handoff_update",
		Tools: []provider.Tool{{Name: "handoff_update"}, {Name: "consolidate"}},
		Messages: []provider.Message{{Role: provider.RoleUser, Content: "ship the export"}, {Role: provider.RoleAssistant, Content: "ok"},
			{Role: provider.RoleUser, Content: "now the tests"}, {Role: provider.RoleSystem, Content: "<runtime-context>…"}}}
	res, err := New(0).Stream(context.Background(), req, func(provider.Delta) error { return nil })
	if err != nil || len(res.ToolCalls) != 1 || res.ToolCalls[0].Name != "handoff_update" {
		t.Fatalf("%+v %v", res, err)
	}
	var args map[string]string
	if err := json.Unmarshal([]byte(res.ToolCalls[0].Arguments), &args); err != nil || args["objective"] != "ship the export" || args["next_action"] != "now the tests" {
		t.Fatalf("arguments %s (%v)", res.ToolCalls[0].Arguments, err)
	}
}
