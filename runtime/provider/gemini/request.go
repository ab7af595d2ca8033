package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// Wire shapes of the request (field names from go-genai's JSON tags).
// Field order is the JSON order, which the golden test pins so that the
// same view gives the same bytes and Gemini's implicit cache stays warm.
type wireRequest struct {
	SystemInstruction *wireContent          `json:"systemInstruction,omitempty"`
	Contents          []wireContent         `json:"contents"`
	Tools             []wireTool            `json:"tools,omitempty"`
	ToolConfig        *wireToolConfig       `json:"toolConfig,omitempty"`
	GenerationConfig  *wireGenerationConfig `json:"generationConfig,omitempty"`
}

type wireContent struct {
	Role  string     `json:"role,omitempty"`
	Parts []wirePart `json:"parts"`
}

// wirePart is one part of a content, in requests and in stream chunks.
type wirePart struct {
	Text             string                `json:"text,omitempty"`
	Thought          bool                  `json:"thought,omitempty"`
	FunctionCall     *wireFunctionCall     `json:"functionCall,omitempty"`
	FunctionResponse *wireFunctionResponse `json:"functionResponse,omitempty"`
	ThoughtSignature string                `json:"thoughtSignature,omitempty"`
	InlineData       *wireBlob             `json:"inlineData,omitempty"`
}

// wireBlob is inline media: an image, a PDF or audio, base64 in data.
type wireBlob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type wireFunctionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type wireFunctionResponse struct {
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

// wireToolConfig forces a call to the named functions (mode ANY).
type wireToolConfig struct {
	FunctionCallingConfig wireCallingConfig `json:"functionCallingConfig"`
}

type wireCallingConfig struct {
	Mode                 string   `json:"mode"`
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

type wireTool struct {
	FunctionDeclarations []wireFunctionDeclaration `json:"functionDeclarations"`
}

// wireFunctionDeclaration carries the schema as parametersJsonSchema, which
// takes JSON Schema as Mirror's tools write it (additionalProperties,
// lowercase types); the older "parameters" field takes only an OpenAPI
// subset and refuses additionalProperties.
type wireFunctionDeclaration struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description,omitempty"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

type wireGenerationConfig struct {
	MaxOutputTokens int `json:"maxOutputTokens,omitempty"`
}

// Gemini's roles: only user and model exist.
const (
	roleUser  = "user"
	roleModel = "model"
)

// encodeRequest builds the JSON body for req.
//
// Leading system messages become systemInstruction. A system message after
// the conversation started becomes a user part in place, because Gemini has
// one instruction only and moving text into it would change the cached
// prefix. Tool calls go back as functionCall parts with the thought
// signature each came with. Tool results become functionResponse parts
// named after the call they answer. Consecutive contents of one role are merged, so the parallel
// results of one model turn travel together, as Gemini expects.
func encodeRequest(req provider.Request) ([]byte, error) {
	var w wireRequest
	callNames := map[string]string{}
	started := false
	for i, m := range req.Messages {
		switch m.Role {
		case provider.RoleSystem:
			if m.Content == "" {
				continue
			}
			if !started {
				if w.SystemInstruction == nil {
					w.SystemInstruction = &wireContent{}
				}
				w.SystemInstruction.Parts = append(w.SystemInstruction.Parts, wirePart{Text: m.Content})
				continue
			}
			w.Contents = appendPart(w.Contents, roleUser, wirePart{Text: m.Content})
		case provider.RoleUser:
			started = true
			for _, p := range m.Parts {
				wp, err := partOf(p)
				if err != nil {
					return nil, fmt.Errorf("message %d: %w", i, err)
				}
				w.Contents = appendPart(w.Contents, roleUser, wp)
			}
			if m.Content != "" {
				w.Contents = appendPart(w.Contents, roleUser, wirePart{Text: m.Content})
			}
		case provider.RoleAssistant:
			started = true
			if m.Content != "" {
				w.Contents = appendPart(w.Contents, roleModel, wirePart{Text: m.Content})
			}
			for _, tc := range m.ToolCalls {
				args, err := provider.ObjectJSON(tc.Arguments)
				if err != nil {
					return nil, fmt.Errorf("message %d: tool call %s (%s): arguments %w", i, tc.ID, tc.Name, err)
				}
				callNames[tc.ID] = tc.Name
				// The call's thought signature returns in the very part it
				// came in; Gemini 3 validates it for every step of a turn.
				w.Contents = appendPart(w.Contents, roleModel, wirePart{FunctionCall: &wireFunctionCall{ID: tc.ID, Name: tc.Name, Args: args},
					ThoughtSignature: tc.Signature})
			}
		case provider.RoleTool:
			started = true
			name := callNames[m.ToolCallID]
			if name == "" {
				// A result whose call is not in the view (evicted or
				// from elsewhere): Gemini needs a name, the id is the
				// best stable one.
				name = m.ToolCallID
			}
			w.Contents = appendPart(w.Contents, roleUser, wirePart{FunctionResponse: &wireFunctionResponse{
				ID: m.ToolCallID, Name: name, Response: responseJSON(m.Content)}})
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	if len(w.Contents) == 0 {
		return nil, errors.New("request has no user, assistant or tool messages")
	}
	if w.Contents == nil {
		w.Contents = []wireContent{}
	}
	if len(req.Tools) > 0 {
		decls := make([]wireFunctionDeclaration, 0, len(req.Tools))
		for _, t := range req.Tools {
			params := bytes.TrimSpace(t.Parameters)
			if len(params) > 0 && !json.Valid(params) {
				return nil, fmt.Errorf("tool %s: parameters are not valid JSON", t.Name)
			}
			decls = append(decls, wireFunctionDeclaration{Name: t.Name, Description: t.Description, ParametersJSONSchema: params})
		}
		w.Tools = []wireTool{{FunctionDeclarations: decls}}
		if req.ToolChoice != "" {
			w.ToolConfig = &wireToolConfig{FunctionCallingConfig: wireCallingConfig{Mode: "ANY", AllowedFunctionNames: []string{req.ToolChoice}}}
		}
	}
	if req.MaxTokens > 0 {
		w.GenerationConfig = &wireGenerationConfig{MaxOutputTokens: req.MaxTokens}
	}
	return provider.MarshalWire(w)
}

// inlineTypes are the media types Gemini takes as inline data
// (ai.google.dev/gemini-api/docs: image understanding PNG, JPEG, WEBP,
// HEIC, HEIF; document processing PDF; audio understanding WAV, MP3,
// AIFF, AAC, OGG, FLAC).
var inlineTypes = map[string]bool{
	"image/png": true, "image/jpeg": true, "image/webp": true, "image/heic": true, "image/heif": true,
	"application/pdf": true,
	"audio/wav":       true, "audio/x-wav": true, "audio/mp3": true, "audio/mpeg": true, "audio/aiff": true,
	"audio/aac": true, "audio/ogg": true, "audio/flac": true,
}

// partOf is one attachment as a part, placed before the message's text.
// Images, PDFs and audio go as inlineData with their media type; Gemini
// reads a PDF as a document and hears audio itself. Text-like files go as
// text naming the file; anything else as a note. A part sent as text in
// its place (a transcript, a withheld part) is that text.
func partOf(p provider.Part) (wirePart, error) {
	if text, ok := p.InPlace(); ok {
		return wirePart{Text: text}, nil
	}
	switch {
	case p.Kind == provider.PartText:
		t, err := p.AsText()
		if err != nil {
			return wirePart{}, err
		}
		return wirePart{Text: t}, nil
	case (p.Kind == provider.PartImage || p.Kind == provider.PartDocument || p.Kind == provider.PartAudio) && inlineTypes[p.MediaType]:
		data, err := p.Base64()
		if err != nil {
			return wirePart{}, err
		}
		return wirePart{InlineData: &wireBlob{MimeType: p.MediaType, Data: data}}, nil
	case p.Kind == provider.PartImage || p.Kind == provider.PartDocument || p.Kind == provider.PartAudio:
		return wirePart{Text: p.Note("Gemini does not take " + p.MediaType + " inline")}, nil
	}
	return wirePart{Text: p.Note("Mirror does not send this kind of file to models")}, nil
}

// appendPart adds p to the last content if it has role, else starts one.
func appendPart(cs []wireContent, role string, p wirePart) []wireContent {
	if n := len(cs); n > 0 && cs[n-1].Role == role {
		cs[n-1].Parts = append(cs[n-1].Parts, p)
		return cs
	}
	return append(cs, wireContent{Role: role, Parts: []wirePart{p}})
}

// responseJSON shapes a tool result as functionResponse.response, which must
// be an object: a result that is a JSON object goes as it is (no escaping,
// fewer tokens), anything else as {"output": text}, the key go-genai
// documents for a function's output.
func responseJSON(content string) json.RawMessage {
	b := bytes.TrimSpace([]byte(content))
	if len(b) > 0 && b[0] == '{' && json.Valid(b) {
		return b
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]string{"output": content}) // a string always encodes
	return bytes.TrimSpace(buf.Bytes())
}

// finishReason maps Gemini's finishReason onto the reasons Mirror shares
// across providers: stop, tool_calls, length, content_filter; others are
// passed on in lower case.
func finishReason(raw string, calls bool) string {
	switch strings.ToUpper(raw) {
	case "":
		return ""
	case "STOP":
		if calls {
			return "tool_calls"
		}
		return "stop"
	case "MAX_TOKENS":
		return "length"
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION":
		return "content_filter"
	}
	return strings.ToLower(raw)
}
