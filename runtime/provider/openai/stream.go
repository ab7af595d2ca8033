package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unsafe"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/sse"
)

// maxLine bounds one SSE line (and a non-streamed body). Real chunks are far
// smaller, but one chunk may carry a whole tool call's arguments (Ollama
// sends them in one piece), so allow well past 1 MiB.
const maxLine = 16 << 20

// Wire shapes of a streamed chunk. Only what Mirror uses is decoded; absent
// and null fields decode to zero values.
type wireChunk struct {
	Model   string          `json:"model"` // the model that answered, for a diagnostic
	Choices []wireChoice    `json:"choices"`
	Usage   *wireUsage      `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

type wireChoice struct {
	Index int `json:"index"`
	Delta struct {
		Content   string          `json:"content"`
		Refusal   string          `json:"refusal"`
		ToolCalls []wireCallDelta `json:"tool_calls"`
		// Images are pictures in the answer, as OpenAI-compatible
		// routers that serve image models send them (OpenRouter:
		// [{"type":"image_url","image_url":{"url":"data:image/png;base64,..."}}]).
		Images []wireContentPart `json:"images"`
	} `json:"delta"`
	FinishReason string `json:"finish_reason"`
}

type wireCallDelta struct {
	// Index is a pointer because a few servers omit it; see addCall.
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	// DeepSeek's name for cached prompt tokens.
	PromptCacheHitTokens int `json:"prompt_cache_hit_tokens"`
}

// usage converts the wire usage; InputTokens is prompt_tokens, which
// includes the cached tokens.
func (u *wireUsage) usage() provider.Usage {
	if u == nil {
		return provider.Usage{}
	}
	cached := u.PromptCacheHitTokens
	if u.PromptTokensDetails != nil && u.PromptTokensDetails.CachedTokens > 0 {
		cached = u.PromptTokensDetails.CachedTokens
	}
	return provider.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, CachedTokens: cached}
}

// stream assembles one streamed answer.
type stream struct {
	// text is the answer's text so far, text[:textN] of it emitted; the
	// delta strings given to emit are views of it (keep).
	text    []byte
	textN   int
	calls   []*callBuf
	byIndex map[int]*callBuf
	finish  string
	usage   provider.Usage
	done    bool   // [DONE] seen
	model   string // the first chunk's "model"
	images  provider.Images

	// scratch and choice hold the chunk fastChunk decodes, reused from
	// chunk to chunk so the usual chunk allocates only its text.
	scratch wireChunk
	choice  [1]wireChoice
	// usage0 and details0 hold a usage object fastChunk decodes.
	usage0   wireUsage
	details0 struct {
		CachedTokens int `json:"cached_tokens"`
	}
}

type callBuf struct {
	id, name string
	args     strings.Builder
}

// complete reports whether the server said the answer ended. A stream cut
// without either signal may be missing its tail and is never treated as
// complete.
func (s *stream) complete() bool { return s.done || s.finish != "" }

func (s *stream) result() provider.Result {
	r := provider.Result{Text: s.answer(), Usage: s.usage, FinishReason: s.finish, Model: s.model, Images: s.images.List()}
	for _, c := range s.calls {
		r.ToolCalls = append(r.ToolCalls, provider.ToolCall{ID: c.id, Name: c.name, Arguments: c.args.String()})
	}
	return r
}

// read parses SSE from r until [DONE] or EOF, applying each event in order.
// The framing rules are package sse's; an event left open at EOF is still
// applied, and if the connection cut it short its JSON fails to decode.
func (s *stream) read(r io.Reader, emit func(provider.Delta) error) error {
	rd := sse.NewReader(r, maxLine)
	// Every event's data is copied where it is kept (text, error bodies),
	// so the reader's buffers go back to the pool when the stream ends.
	defer rd.Release()
	// [DONE] needs no blank line before or after it: a server that holds
	// the connection open after it must not hang the reply.
	rd.StopAt("[DONE]")
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			s.done = s.done || rd.Stopped()
			return nil
		}
		if err != nil {
			if errors.Is(err, sse.ErrLineTooLong) {
				return &provider.DecodeError{Msg: fmt.Sprintf("an SSE line is longer than %d MiB", maxLine>>20)}
			}
			return err
		}
		if err := s.event(ev.Name, ev.Data, emit); err != nil {
			return err
		}
		if rd.Stopped() {
			s.done = true
		}
		if s.done {
			return nil
		}
	}
}

// event applies one SSE event. Its data is normally one JSON chunk; a run of
// concatenated JSON values (servers that forget the blank lines) is applied
// value by value.
func (s *stream) event(name string, data []byte, emit func(provider.Delta) error) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil
	}
	if bytes.Equal(data, []byte("[DONE]")) {
		s.done = true
		return nil
	}
	if name == "error" {
		return &provider.StreamError{Body: bytes.Clone(data)}
	}
	// The usual event is one content chunk, read without reflection; any
	// other single chunk is decoded in place, without a decoder's buffer
	// and copy. Anything else takes the decoder, value by value.
	if ch, ok := s.fastChunk(data); ok {
		return s.apply(ch, emit)
	}
	var one wireChunk
	if json.Unmarshal(data, &one) == nil {
		return s.applyChunk(&one, data, emit)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var ch wireChunk
		err := dec.Decode(&ch)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &provider.DecodeError{Msg: "undecodable chunk: " + err.Error(), Data: bytes.Clone(data)}
		}
		if err := s.applyChunk(&ch, data, emit); err != nil {
			return err
		}
	}
}

// applyChunk applies one decoded chunk of the event data, or refuses an
// error chunk with the whole event.
func (s *stream) applyChunk(ch *wireChunk, data []byte, emit func(provider.Delta) error) error {
	if len(ch.Error) > 0 && string(ch.Error) != "null" {
		return &provider.StreamError{Body: bytes.Clone(data)}
	}
	return s.apply(ch, emit)
}

func (s *stream) apply(ch *wireChunk, emit func(provider.Delta) error) error {
	if ch.Usage != nil {
		s.usage = ch.Usage.usage()
	}
	if s.model == "" {
		s.model = ch.Model
	}
	for i := range ch.Choices {
		c := &ch.Choices[i]
		if c.Index != 0 {
			continue // Mirror asks for one choice
		}
		// A refusal is the model's answer too; show it like text.
		for _, text := range [2]string{c.Delta.Content, c.Delta.Refusal} {
			if text == "" {
				continue
			}
			if err := emit(provider.Delta{Text: s.keep(text)}); err != nil {
				return &provider.EmitError{Err: err}
			}
			s.textN = len(s.text)
		}
		// The fast path's text was a view of the event (viewOrNull).
		c.Delta.Content, c.Delta.Refusal = "", ""
		for j := range c.Delta.ToolCalls {
			s.addCall(&c.Delta.ToolCalls[j])
		}
		for _, im := range c.Delta.Images {
			if im.ImageURL != nil {
				s.images.AddDataURL(im.ImageURL.URL)
			}
		}
		if c.FinishReason != "" {
			s.finish = c.FinishReason
		}
	}
	return nil
}

// firstText is the room the text of an answer starts with: a usual
// answer's whole text, in one allocation.
const firstText = 512

// keep appends t to the answer's text and returns the copy. An answer
// comes in dozens of pieces, each a string of its own and then a copy in
// a builder: now one buffer holds them all, and each piece given to emit
// is a view of it. Bytes a view covers are never written again: a piece
// goes past the end, and a full buffer is copied to a new one, the old
// left as it is to the views of it.
func (s *stream) keep(t string) string {
	if len(s.text)+len(t) > cap(s.text) {
		grown := make([]byte, len(s.text), max(2*cap(s.text), len(s.text)+len(t), firstText))
		copy(grown, s.text)
		s.text = grown
	}
	n := len(s.text)
	s.text = append(s.text, t...)
	return unsafe.String(&s.text[n], len(t))
}

// answer is the text emitted: a view of the buffer, or a copy of its
// size when the buffer is over twice that (a short answer kept with the
// chat's history would keep the whole first buffer).
func (s *stream) answer() string {
	switch {
	case s.textN == 0:
		return ""
	case cap(s.text) > 2*s.textN:
		return string(s.text[:s.textN])
	}
	return unsafe.String(&s.text[0], s.textN)
}

// addCall merges one tool-call fragment. Fragments are keyed by index: the
// first fragment of an index brings id and name, later ones bring argument
// pieces. Without an index (some servers), a new id starts a new call and
// anything else continues the last one.
func (s *stream) addCall(d *wireCallDelta) {
	var c *callBuf
	switch {
	case d.Index != nil:
		if s.byIndex == nil {
			s.byIndex = map[int]*callBuf{}
		}
		c = s.byIndex[*d.Index]
		if c == nil {
			c = &callBuf{}
			s.byIndex[*d.Index] = c
			s.calls = append(s.calls, c)
		}
	case len(s.calls) == 0 || (d.ID != "" && s.calls[len(s.calls)-1].id != "" && s.calls[len(s.calls)-1].id != d.ID):
		c = &callBuf{}
		s.calls = append(s.calls, c)
	default:
		c = s.calls[len(s.calls)-1]
	}
	if c.id == "" {
		c.id = d.ID
	}
	if c.name == "" {
		c.name = d.Function.Name
	}
	c.args.WriteString(d.Function.Arguments)
}
