package boundary

import (
	"encoding/json"
	"strings"

	"github.com/mirror-gateway/mirror/runtime/ids"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tools"
)

// The tools that get back what a checkpoint masked or folded. Their names
// are the ones the view's pointers cite (view.ToolOutput, view.GlobalSearch).
const (
	ToolToolOutput   = "tool_output"
	ToolGlobalSearch = "global_search"
)

// MaxToolOutput is how much of a stored tool output one tool_output call
// gives back, in characters.
const MaxToolOutput = 100_000

// ToolOutputTool is the tool_output definition.
var ToolOutputTool = provider.Tool{
	Name: ToolToolOutput,
	Description: "Get back the whole stored result of an earlier tool call of this chat, by its tool_call_id: " +
		"what a checkpoint masked in your view, or what a preview cut. At most 100,000 characters per call.",
	Parameters: compact(`{
		"type": "object",
		"additionalProperties": false,
		"required": ["tool_call_id"],
		"properties": {
			"tool_call_id": {"type": "string", "minLength": 1, "maxLength": 200, "description": "the id the pointer cites"}
		}
	}`),
}

// GlobalSearchTool is the global_search definition.
var GlobalSearchTool = provider.Tool{
	Name: ToolGlobalSearch,
	Description: "Show the messages of this chat around one message, by its id (such as m123): what a checkpoint " +
		"folded or evicted from your view, whole, with its neighbours.",
	Parameters: compact(`{
		"type": "object",
		"additionalProperties": false,
		"required": ["around_message_id"],
		"properties": {
			"around_message_id": {"type": "string", "pattern": "^m[0-9]+$", "description": "the message id the pointer cites"}
		}
	}`),
}

// ParseToolOutput reads tool_output arguments; errors are *tools.ArgError.
func ParseToolOutput(raw json.RawMessage) (string, error) {
	p := newArgs(ToolToolOutput, raw, "tool_call_id")
	id := p.text("tool_call_id", 1, 200)
	if err := p.err(); err != nil {
		return "", err
	}
	return strings.TrimSpace(*id), nil
}

// ParseGlobalSearch reads global_search arguments: the message id, such as
// "m123". Errors are *tools.ArgError.
func ParseGlobalSearch(raw json.RawMessage) (string, error) {
	p := newArgs(ToolGlobalSearch, raw, "around_message_id")
	id := p.text("around_message_id", 1, 32)
	if err := p.err(); err != nil {
		return "", err
	}
	if _, ok := ids.ParseMessage(*id); !ok {
		return "", &tools.ArgError{Tool: ToolGlobalSearch, Problems: []string{
			`argument "around_message_id" must be a message id such as "m123"`}}
	}
	return *id, nil
}
