package providertest

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// StreamOpenAI writes a chat-completions stream (SSE) as OpenAI sends it:
// text as one content delta, each of calls as a tool_calls delta, the
// finish reason (tool_calls when there are calls, else stop), then usage
// billing promptTokens and completionTokens, and [DONE]. Fake model
// servers share it so each speaks the same wire format.
func StreamOpenAI(w http.ResponseWriter, text string, calls []provider.ToolCall, promptTokens, completionTokens int) {
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	if text != "" {
		chunk(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": text}}}})
	}
	for i, c := range calls {
		chunk(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{
			map[string]any{"index": i, "id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Arguments}}}}}}})
	}
	finish := "stop"
	if len(calls) > 0 {
		finish = "tool_calls"
	}
	chunk(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}})
	chunk(map[string]any{"choices": []any{}, "usage": map[string]any{"prompt_tokens": promptTokens, "completion_tokens": completionTokens}})
	fmt.Fprint(w, "data: [DONE]\n\n")
}
