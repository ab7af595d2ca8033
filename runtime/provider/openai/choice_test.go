package openai

import (
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// A forced tool (a boundary's one ask for the record) reaches the wire in
// the provider's own form; without one, nothing is added.
func TestToolChoiceForcesOneTool(t *testing.T) {
	req := provider.Request{Model: "m", MaxTokens: 100,
		Messages: []provider.Message{{Role: provider.RoleSystem, Content: "s"}, {Role: provider.RoleUser, Content: "u"}},
		Tools:    []provider.Tool{{Name: "handoff_update", Parameters: []byte(`{"type":"object"}`)}}}
	plain, err := encodeRequest(req, false)
	if err != nil {
		t.Fatal(err)
	}
	req.ToolChoice = "handoff_update"
	forced, err := encodeRequest(req, false)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(plain), `"tool_choice"`) || !strings.Contains(string(forced), `"tool_choice":{"type":"function","function":{"name":"handoff_update"}}`) {
		t.Fatalf("plain %s\nforced %s", plain, forced)
	}
}
