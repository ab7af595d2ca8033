package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// Wire shapes of the request. Field order is the JSON order, which the
// request golden test pins so that the same view gives the same bytes.
type wireRequest struct {
	Model               string          `json:"model"`
	Messages            []wireMessage   `json:"messages"`
	Tools               []wireTool      `json:"tools,omitempty"`
	ToolChoice          *wireToolChoice `json:"tool_choice,omitempty"`
	MaxTokens           int             `json:"max_tokens,omitempty"`
	MaxCompletionTokens int             `json:"max_completion_tokens,omitempty"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type wireMessage struct {
	Role string `json:"role"`
	// Content is always a string, "" when empty: Ollama rejects
	// "content":null ("invalid message content type: <nil>").
	Content    string         `json:"content"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type wireToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// wireToolChoice forces one function: {"type":"function","function":{"name":...}}.
type wireToolChoice struct {
	Type     string       `json:"type"`
	Function wireToolName `json:"function"`
}

type wireToolName struct {
	Name string `json:"name"`
}

type wireTool struct {
	Type     string      `json:"type"`
	Function wireToolDef `json:"function"`
}

type wireToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// encodeRequest builds the JSON body for req.
func encodeRequest(req provider.Request) ([]byte, error) {
	w := wireRequest{
		Model:         req.Model,
		Messages:      make([]wireMessage, 0, len(req.Messages)),
		Stream:        true,
		StreamOptions: &streamOptions{IncludeUsage: true},
	}
	for _, m := range req.Messages {
		wm := wireMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			args := tc.Arguments
			if strings.TrimSpace(args) == "" {
				// Servers that parse the arguments (Ollama) reject "".
				args = "{}"
			}
			wm.ToolCalls = append(wm.ToolCalls, wireToolCall{ID: tc.ID, Type: "function", Function: wireFunction{Name: tc.Name, Arguments: args}})
		}
		w.Messages = append(w.Messages, wm)
	}
	for _, t := range req.Tools {
		params := bytes.TrimSpace(t.Parameters)
		if len(params) == 0 {
			params = []byte(`{"type":"object","properties":{}}`)
		} else if !json.Valid(params) {
			return nil, fmt.Errorf("tool %s: parameters are not valid JSON", t.Name)
		}
		w.Tools = append(w.Tools, wireTool{Type: "function", Function: wireToolDef{Name: t.Name, Description: t.Description, Parameters: params}})
	}
	if req.ToolChoice != "" {
		w.ToolChoice = &wireToolChoice{Type: "function", Function: wireToolName{Name: req.ToolChoice}}
	}
	if req.MaxTokens > 0 {
		// OpenAI's reasoning models refuse max_tokens ("Use
		// 'max_completion_tokens' instead"); most compatible servers know
		// only max_tokens.
		if usesMaxCompletionTokens(req.Model) {
			w.MaxCompletionTokens = req.MaxTokens
		} else {
			w.MaxTokens = req.MaxTokens
		}
	}
	return provider.MarshalWire(w)
}

// usesMaxCompletionTokens reports OpenAI models that accept only
// max_completion_tokens: the o-series and gpt-5.
func usesMaxCompletionTokens(model string) bool {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	for _, p := range []string{"o1", "o3", "o4", "gpt-5"} {
		if m == p || strings.HasPrefix(m, p+"-") {
			return true
		}
	}
	return false
}
