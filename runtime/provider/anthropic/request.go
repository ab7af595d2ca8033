package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// Wire shapes of the request. Field order is the JSON order, which the
// golden test pins so that the same view gives the same bytes.
type wireRequest struct {
	Model     string        `json:"model"`
	MaxTokens int           `json:"max_tokens"`
	System    []wireBlock   `json:"system,omitempty"`
	Messages  []wireMessage `json:"messages"`
	Tools     []wireTool    `json:"tools,omitempty"`
	// ToolChoice forces one tool: {"type":"tool","name":...}.
	ToolChoice *wireChoice `json:"tool_choice,omitempty"`
	Stream     bool        `json:"stream"`
}

type wireChoice struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

type wireMessage struct {
	Role    string      `json:"role"`
	Content []wireBlock `json:"content"`
}

// wireBlock is a content block: text, image, document, tool_use or
// tool_result.
type wireBlock struct {
	Type         string          `json:"type"`
	Text         string          `json:"text,omitempty"`
	Source       *wireSource     `json:"source,omitempty"`
	ID           string          `json:"id,omitempty"`
	Name         string          `json:"name,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	Content      string          `json:"content,omitempty"`
	CacheControl *cacheControl   `json:"cache_control,omitempty"`
}

// wireSource is an image's or document's inline bytes.
type wireSource struct {
	Type      string `json:"type"` // base64
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

type cacheControl struct {
	Type string `json:"type"`
}

type wireTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// encodeRequest builds the JSON body for req.
//
// Leading system messages become the top-level system prompt; a system
// message after the conversation started becomes user text in place, so the
// cached prefix never changes. Tool results become tool_result blocks of a
// user message; consecutive messages of one role are merged (the parallel
// results of one turn travel together, and Anthropic wants tool_result
// blocks first in their message, so they are moved ahead of any text).
//
// Anthropic caches only up to explicit breakpoints, so the request marks
// two: the end of the system prompt (tools and system, stable for a whole
// conversation) and the end of the last message (the growing conversation,
// read back on the next turn). Prompts shorter than the model's minimum are
// simply not cached.
func encodeRequest(req provider.Request) ([]byte, error) {
	if strings.TrimSpace(req.Model) == "" {
		return nil, errors.New("request names no model")
	}
	w := wireRequest{Model: req.Model, MaxTokens: req.MaxTokens, Stream: true, Messages: []wireMessage{}}
	if w.MaxTokens <= 0 {
		w.MaxTokens = DefaultMaxTokens
	}
	started := false
	for i, m := range req.Messages {
		switch m.Role {
		case provider.RoleSystem:
			if m.Content == "" {
				continue
			}
			if !started {
				w.System = append(w.System, wireBlock{Type: "text", Text: m.Content})
				continue
			}
			w.Messages = appendBlock(w.Messages, "user", wireBlock{Type: "text", Text: m.Content})
		case provider.RoleUser:
			started = true
			for _, p := range m.Parts {
				b, err := partBlock(p)
				if err != nil {
					return nil, fmt.Errorf("message %d: %w", i, err)
				}
				w.Messages = appendBlock(w.Messages, "user", b)
			}
			if m.Content != "" {
				w.Messages = appendBlock(w.Messages, "user", wireBlock{Type: "text", Text: m.Content})
			}
		case provider.RoleAssistant:
			started = true
			if m.Content != "" {
				w.Messages = appendBlock(w.Messages, "assistant", wireBlock{Type: "text", Text: m.Content})
			}
			for _, tc := range m.ToolCalls {
				input, err := provider.ObjectJSON(tc.Arguments)
				if err != nil {
					return nil, fmt.Errorf("message %d: tool call %s (%s): arguments %w", i, tc.ID, tc.Name, err)
				}
				w.Messages = appendBlock(w.Messages, "assistant", wireBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: input})
			}
		case provider.RoleTool:
			started = true
			w.Messages = appendBlock(w.Messages, "user", wireBlock{Type: "tool_result", ToolUseID: m.ToolCallID, Content: m.Content})
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	if len(w.Messages) == 0 {
		return nil, errors.New("request has no user, assistant or tool messages")
	}
	for i := range w.Messages {
		// Stable: the order among results and among other blocks stays.
		slices.SortStableFunc(w.Messages[i].Content, func(a, b wireBlock) int {
			return boolRank(b.Type == "tool_result") - boolRank(a.Type == "tool_result")
		})
	}
	ephemeral := &cacheControl{Type: "ephemeral"}
	if n := len(w.System); n > 0 {
		w.System[n-1].CacheControl = ephemeral
	}
	last := &w.Messages[len(w.Messages)-1]
	last.Content[len(last.Content)-1].CacheControl = ephemeral

	for _, t := range req.Tools {
		schema := bytes.TrimSpace(t.Parameters)
		if len(schema) == 0 {
			schema = []byte(`{"type":"object","properties":{}}`)
		} else if !json.Valid(schema) {
			return nil, fmt.Errorf("tool %s: parameters are not valid JSON", t.Name)
		}
		w.Tools = append(w.Tools, wireTool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	if req.ToolChoice != "" {
		w.ToolChoice = &wireChoice{Type: "tool", Name: req.ToolChoice}
	}
	return provider.MarshalWire(w)
}

// imageTypes are the image media types the Messages API takes
// (docs.claude.com vision: JPEG, PNG, GIF, WebP).
var imageTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}

// partBlock is one attachment as a content block, placed before the
// message's text (the vision guide: images before the question work
// best). Images become image blocks and PDFs document blocks, both with a
// base64 source; text-like files a text block with a header naming the
// file. Audio, which the API does not take, and unknown kinds become a
// text note, so the model can say what it did not get. A part sent as
// text in its place (a transcript, a withheld part) is that text.
func partBlock(p provider.Part) (wireBlock, error) {
	if text, ok := p.InPlace(); ok {
		return wireBlock{Type: "text", Text: text}, nil
	}
	switch {
	case p.Kind == provider.PartImage && imageTypes[p.MediaType], p.Kind == provider.PartDocument && p.MediaType == "application/pdf":
		data, err := p.Base64()
		if err != nil {
			return wireBlock{}, err
		}
		return wireBlock{Type: p.Kind, Source: &wireSource{Type: "base64", MediaType: p.MediaType, Data: data}}, nil
	case p.Kind == provider.PartImage:
		return wireBlock{Type: "text", Text: p.Note("this provider takes JPEG, PNG, GIF and WebP images only")}, nil
	case p.Kind == provider.PartText:
		t, err := p.AsText()
		if err != nil {
			return wireBlock{}, err
		}
		return wireBlock{Type: "text", Text: t}, nil
	case p.Kind == provider.PartAudio:
		return wireBlock{Type: "text", Text: p.Note("audio reaches this model only as a transcript (roles.transcribe)")}, nil
	}
	return wireBlock{Type: "text", Text: p.Note("Mirror does not send this kind of file to models")}, nil
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// appendBlock adds b to the last message if it has role, else starts one.
func appendBlock(ms []wireMessage, role string, b wireBlock) []wireMessage {
	if n := len(ms); n > 0 && ms[n-1].Role == role {
		ms[n-1].Content = append(ms[n-1].Content, b)
		return ms
	}
	return append(ms, wireMessage{Role: role, Content: []wireBlock{b}})
}

// finishReason maps Anthropic's stop_reason onto the reasons Mirror shares
// across providers: stop, tool_calls, length, content_filter; others
// (pause_turn) are passed on.
func finishReason(raw string) string {
	switch raw {
	case "end_turn", "stop_sequence":
		return "stop"
	case "tool_use":
		return "tool_calls"
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "refusal":
		return "content_filter"
	}
	return raw
}
