package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// Wire shapes of the request. Field order is the JSON order, which the
// request golden test pins so that the same view gives the same bytes.
// A field set per request (other than the messages and tools) goes into
// frameKey too (enccache.go): frames are kept by that key.
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
	// Content is a string, "" when empty: Ollama rejects
	// "content":null ("invalid message content type: <nil>"). A user
	// message with attachments carries an array of content parts instead.
	Content    any            `json:"content"`
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

// encodeRequest builds the JSON body for req. official says the endpoint is
// OpenAI's own API (api.openai.com), which decides how the answer's cap is
// named (capField).
func encodeRequest(req provider.Request, official bool) ([]byte, error) {
	return encodeRequestWith(req, official, nil)
}

// encodeRequestWith is encodeRequest taking the messages' encodings from
// cache where it has them (nil: none); the bytes are the same either way.
func encodeRequestWith(req provider.Request, official bool, cache *encCache) ([]byte, error) {
	return encodeRequestInto(nil, req, official, cache)
}

// encodeRequestInto is encodeRequestWith writing into buf, an empty buffer
// (a pooled request body's), or into one of its own when buf is nil; the
// result is buf's bytes.
func encodeRequestInto(buf *bytes.Buffer, req provider.Request, official bool, cache *encCache) ([]byte, error) {
	w := wireRequest{
		Model:         req.Model,
		Stream:        true,
		StreamOptions: &streamOptions{IncludeUsage: true},
	}
	if cache == nil {
		w.Messages = make([]wireMessage, 0, len(req.Messages))
		for i, m := range req.Messages {
			wm, err := wireMessageOf(i, m, official, req.Model)
			if err != nil {
				return nil, err
			}
			w.Messages = append(w.Messages, wm)
		}
	}
	if cache == nil {
		var err error
		if w.Tools, err = wireToolsOf(req.Tools); err != nil {
			return nil, err
		}
	}
	if req.ToolChoice != "" {
		w.ToolChoice = &wireToolChoice{Type: "function", Function: wireToolName{Name: req.ToolChoice}}
	}
	if req.MaxTokens > 0 {
		if capField(req.Model, official) == fieldMaxCompletionTokens {
			w.MaxCompletionTokens = req.MaxTokens
		} else {
			w.MaxTokens = req.MaxTokens
		}
	}
	if cache == nil {
		b, err := provider.MarshalWire(w)
		if err != nil || buf == nil {
			return b, err
		}
		buf.Write(b)
		return buf.Bytes(), nil
	}
	// The request without its messages and tools, then the messages
	// spliced in where the empty list is and the tools after them, where
	// the struct has them.
	rest, head, err := cache.frame(&w)
	if err != nil {
		return nil, err
	}
	var tools []byte
	if len(req.Tools) > 0 {
		if tools, err = cache.encodeTools(req.Tools); err != nil {
			return nil, err
		}
	}
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	extra := len(rest) - head + len(`,"tools":`) + len(tools) + 64
	if err := cache.encodeMessages(buf, rest[:head], req.Messages, official, req.Model, extra, req.Conversation); err != nil {
		return nil, err
	}
	if len(tools) > 0 {
		buf.WriteString(`,"tools":`)
		buf.Write(tools)
	}
	buf.Write(rest[head+2:])
	return buf.Bytes(), nil
}

// encodeFrame encodes w (without messages or tools) with an empty message
// list, and finds where the list is: "messages" follows "model", the
// first field.
func encodeFrame(w *wireRequest) (frame, error) {
	f := *w
	f.Messages, f.Tools = []wireMessage{}, nil
	rest, err := provider.MarshalWire(f)
	if err != nil {
		return frame{}, err
	}
	model, err := provider.MarshalWire(f.Model)
	if err != nil {
		return frame{}, err
	}
	head := len(`{"model":`) + len(model) + len(`,"messages":`)
	if !bytes.HasPrefix(rest[head:], []byte("[]")) {
		return frame{}, fmt.Errorf("request encoding: no messages list at %d", head)
	}
	return frame{rest: rest, head: head}, nil
}

// wireToolsOf is the tools of a request as sent.
func wireToolsOf(tools []provider.Tool) ([]wireTool, error) {
	var out []wireTool
	for _, t := range tools {
		params := bytes.TrimSpace(t.Parameters)
		if len(params) == 0 {
			params = []byte(`{"type":"object","properties":{}}`)
		} else if !json.Valid(params) {
			return nil, fmt.Errorf("tool %s: parameters are not valid JSON", t.Name)
		}
		out = append(out, wireTool{Type: "function", Function: wireToolDef{Name: t.Name, Description: t.Description, Parameters: params}})
	}
	return out, nil
}

// wireMessageOf is the i-th message m of a request for model as sent.
func wireMessageOf(i int, m provider.Message, official bool, model string) (wireMessage, error) {
	wm := wireMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
	if len(m.Parts) > 0 {
		if m.Role != provider.RoleUser {
			return wm, fmt.Errorf("message %d: attachments on a %s message", i, m.Role)
		}
		parts, err := contentParts(m, official, model)
		if err != nil {
			return wm, fmt.Errorf("message %d: %w", i, err)
		}
		wm.Content = parts
	}
	for _, tc := range m.ToolCalls {
		args := tc.Arguments
		if strings.TrimSpace(args) == "" {
			// Servers that parse the arguments (Ollama) reject "".
			args = "{}"
		}
		wm.ToolCalls = append(wm.ToolCalls, wireToolCall{ID: tc.ID, Type: "function", Function: wireFunction{Name: tc.Name, Arguments: args}})
	}
	return wm, nil
}

// wireContentPart is one part of a user message's content array.
type wireContentPart struct {
	Type     string        `json:"type"`
	Text     string        `json:"text,omitempty"`
	ImageURL *wireImageURL `json:"image_url,omitempty"`
	File     *wireFile     `json:"file,omitempty"`
	// InputAudio is audio for a model that hears it (input_audio).
	InputAudio *wireInputAudio `json:"input_audio,omitempty"`
}

// wireInputAudio is an input_audio part: the bytes in base64 without a
// data: prefix, and their format, wav or mp3 (the only two the API takes).
type wireInputAudio struct {
	Data   string `json:"data"`
	Format string `json:"format"`
}

type wireImageURL struct {
	URL string `json:"url"`
}

type wireFile struct {
	Filename string `json:"filename,omitempty"`
	FileData string `json:"file_data"`
}

// imageTypes are the image media types chat completions takes
// (platform.openai.com/docs/guides/images-vision: PNG, JPEG, WEBP,
// non-animated GIF).
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/webp": true, "image/gif": true}

// contentParts is m's content as an array: the attachments first, then
// the text. Images go as image_url parts with a data: URL and no detail
// ("auto"). A PDF goes as a file part with file_data (a data: URL) on
// OpenAI's own API, which documents PDF input for chat completions
// (platform.openai.com/docs/guides/pdf-files?api-mode=chat); compatible
// servers (Ollama, llama.cpp, vLLM) take no file parts, so there a text
// note says what was not sent. Audio goes as an input_audio part (WAV or
// MP3) to a model that hears audio (audioModel), else as a note. A part
// sent as text in its place (a transcript, a withheld part) goes as that
// text. Text-like files go as text.
func contentParts(m provider.Message, official bool, model string) ([]wireContentPart, error) {
	out := make([]wireContentPart, 0, len(m.Parts)+1)
	note := func(p provider.Part, why string) {
		out = append(out, wireContentPart{Type: "text", Text: p.Note(why)})
	}
	for _, p := range m.Parts {
		if text, ok := p.InPlace(); ok {
			out = append(out, wireContentPart{Type: "text", Text: text})
			continue
		}
		switch {
		case p.Kind == provider.PartAudio && audioModel(model) && audioFormats[p.MediaType] != "":
			data, err := p.Base64()
			if err != nil {
				return nil, err
			}
			out = append(out, wireContentPart{Type: "input_audio", InputAudio: &wireInputAudio{Data: data, Format: audioFormats[p.MediaType]}})
		case p.Kind == provider.PartAudio && audioModel(model):
			note(p, "this model hears WAV and MP3 audio only")
		case p.Kind == provider.PartImage && imageTypes[p.MediaType]:
			u, err := p.DataURL()
			if err != nil {
				return nil, err
			}
			out = append(out, wireContentPart{Type: "image_url", ImageURL: &wireImageURL{URL: u}})
		case p.Kind == provider.PartImage:
			note(p, "this provider takes PNG, JPEG, WEBP and GIF images only")
		case p.Kind == provider.PartDocument && official && p.MediaType == "application/pdf":
			u, err := p.DataURL()
			if err != nil {
				return nil, err
			}
			out = append(out, wireContentPart{Type: "file", File: &wireFile{Filename: p.Name, FileData: u}})
		case p.Kind == provider.PartDocument && p.MediaType == "application/pdf":
			note(p, "this OpenAI-compatible endpoint takes no PDF files; OpenAI's own API, Anthropic and Gemini do")
		case p.Kind == provider.PartDocument:
			note(p, "documents go to models as PDF only")
		case p.Kind == provider.PartText:
			t, err := p.AsText()
			if err != nil {
				return nil, err
			}
			out = append(out, wireContentPart{Type: "text", Text: t})
		case p.Kind == provider.PartAudio:
			note(p, "audio reaches this model only as a transcript (roles.transcribe)")
		default:
			note(p, "Mirror does not send this kind of file to models")
		}
	}
	if m.Content != "" {
		out = append(out, wireContentPart{Type: "text", Text: m.Content})
	}
	return out, nil
}

// audioFormats maps the media types of input_audio's two formats.
var audioFormats = map[string]string{"audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}

// audioModel reports the names of chat-completions models that take
// audio input: OpenAI's gpt-4o-audio-preview, gpt-4o-mini-audio-preview,
// gpt-audio and gpt-audio-mini, and models served elsewhere under names
// that say so (qwen2-audio). Any other model gets audio as a transcript
// (roles.transcribe) or a note.
func audioModel(model string) bool {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	return strings.Contains(m, "audio") && !strings.Contains(m, "transcribe") && !strings.Contains(m, "tts")
}

// The two names of the answer's cap in a chat-completions request.
const (
	fieldMaxTokens           = "max_tokens"
	fieldMaxCompletionTokens = "max_completion_tokens"
)

// capField names the answer's cap for model. OpenAI documents
// max_completion_tokens for every chat-completions model and keeps
// max_tokens only as deprecated, which its reasoning models (o-series,
// gpt-5 and later) refuse outright ("Use 'max_completion_tokens'
// instead"): on OpenAI's own API it is always max_completion_tokens.
// Compatible servers are another matter: Ollama's documented request
// fields list max_tokens only, llama.cpp's server and older vLLM read
// max_tokens and ignore a field they do not know, so there the cap would
// silently not apply. Elsewhere, then, max_tokens, except for a model
// that is named as one of OpenAI's reasoning models: an endpoint serving
// those (a proxy or router in front of OpenAI) passes the field to a model
// that refuses max_tokens.
func capField(model string, official bool) string {
	if official || reasoningModel(model) {
		return fieldMaxCompletionTokens
	}
	return fieldMaxTokens
}

// isOfficial reports a base URL on OpenAI's own API host.
func isOfficial(base string) bool {
	u, err := url.Parse(base)
	return err == nil && strings.EqualFold(u.Hostname(), "api.openai.com")
}

// reasoningModel reports the names of OpenAI's models that accept only
// max_completion_tokens: the o-series and gpt-5 with its point releases
// (gpt-5.1, gpt-5.2-mini), with or without a router's "openai/" prefix.
func reasoningModel(model string) bool {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	for _, p := range []string{"o1", "o3", "o4", "gpt-5"} {
		if rest, ok := strings.CutPrefix(m, p); ok && (rest == "" || rest[0] == '-' || rest[0] == '.') {
			return true
		}
	}
	return false
}
