package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/sse"
)

// maxLine bounds one SSE line. Anthropic splits tool input into small
// input_json_delta pieces, but a text delta can still be long; allow well
// past 1 MiB.
const maxLine = 16 << 20

// wireEvent is the data of any stream event; which fields are set depends
// on Type. Only what Mirror uses is decoded.
type wireEvent struct {
	Type    string `json:"type"`
	Message *struct {
		Usage *wireUsage `json:"usage"`
		Model string     `json:"model"` // the model that answered, for a diagnostic
	} `json:"message"`
	Index        int `json:"index"`
	ContentBlock *struct {
		Type  string          `json:"type"`
		Text  string          `json:"text"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"content_block"`
	Delta *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *wireUsage      `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// wireUsage fields are pointers because message_delta repeats only some of
// them; an absent field keeps what message_start said.
type wireUsage struct {
	InputTokens              *int `json:"input_tokens"`
	OutputTokens             *int `json:"output_tokens"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
}

// stream assembles one streamed message.
type stream struct {
	text   strings.Builder
	blocks []*block
	byIdx  map[int]*block
	stop   string // stop_reason
	ended  bool   // message_stop seen
	model  string // message_start's message.model
	// Usage counters as last reported.
	input, output, cacheRead, cacheWrite int
}

// block is one content block being assembled.
type block struct {
	typ, id, name string
	start         json.RawMessage // content_block_start's input
	args          strings.Builder // input_json_delta pieces
}

// complete reports whether the message ended: message_stop, or a stop
// reason (everything of the content has arrived by then).
func (s *stream) complete() bool { return s.ended || s.stop != "" }

// result returns the message. Usage.InputTokens counts all input the model
// read, input_tokens + cache_read + cache_creation, because Anthropic's
// input_tokens leaves both cache counts out while every other provider
// includes them; CachedTokens is the cache read.
func (s *stream) result() provider.Result {
	r := provider.Result{
		Text:         s.text.String(),
		FinishReason: finishReason(s.stop),
		Model:        s.model,
		Usage: provider.Usage{
			InputTokens:  s.input + s.cacheRead + s.cacheWrite,
			OutputTokens: s.output,
			CachedTokens: s.cacheRead,
		},
	}
	for _, b := range s.blocks {
		if b.typ != "tool_use" {
			continue
		}
		args := b.args.String()
		if strings.TrimSpace(args) == "" {
			// A tool without parameters gets no deltas (or one ""):
			// the input is what content_block_start said, or {}.
			args = "{}"
			var buf bytes.Buffer
			if json.Compact(&buf, b.start) == nil && buf.Len() > 0 && buf.String() != "null" {
				args = buf.String()
			}
		}
		r.ToolCalls = append(r.ToolCalls, provider.ToolCall{ID: b.id, Name: b.name, Arguments: args})
	}
	return r
}

// read parses SSE from r until message_stop or EOF, applying each event in
// order. message_stop ends the read at once, so a connection held open
// after it cannot hang the reply.
func (s *stream) read(r io.Reader, emit func(provider.Delta) error) error {
	rd := sse.NewReader(r, maxLine)
	for {
		ev, err := rd.Next()
		if err == io.EOF {
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
		if s.ended {
			return nil
		}
	}
}

// event applies one SSE event. The data's own "type" decides; the event
// name stands in when the data has none.
func (s *stream) event(name string, data []byte, emit func(provider.Delta) error) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil
	}
	var ev wireEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return &provider.DecodeError{Msg: "undecodable event: " + err.Error(), Data: bytes.Clone(data)}
	}
	typ := ev.Type
	if typ == "" {
		typ = name
	}
	switch typ {
	case "error":
		return &provider.StreamError{Body: bytes.Clone(data)}
	case "message_start":
		if ev.Message != nil {
			s.addUsage(ev.Message.Usage)
			s.model = ev.Message.Model
		}
	case "content_block_start":
		if ev.ContentBlock == nil {
			return nil
		}
		b := &block{typ: ev.ContentBlock.Type, id: ev.ContentBlock.ID, name: ev.ContentBlock.Name, start: bytes.Clone(ev.ContentBlock.Input)}
		if s.byIdx == nil {
			s.byIdx = map[int]*block{}
		}
		s.byIdx[ev.Index] = b
		s.blocks = append(s.blocks, b)
		if b.typ == "text" && ev.ContentBlock.Text != "" {
			return s.emitText(ev.ContentBlock.Text, emit)
		}
	case "content_block_delta":
		b := s.byIdx[ev.Index]
		if b == nil || ev.Delta == nil {
			return nil // a delta for a block never started: nothing to attach it to
		}
		switch ev.Delta.Type {
		case "text_delta":
			if b.typ == "text" {
				return s.emitText(ev.Delta.Text, emit)
			}
		case "input_json_delta":
			b.args.WriteString(ev.Delta.PartialJSON)
		}
		// thinking_delta, signature_delta, citations_delta: not the answer.
	case "message_delta":
		if ev.Delta != nil && ev.Delta.StopReason != "" {
			s.stop = ev.Delta.StopReason
		}
		s.addUsage(ev.Usage)
	case "message_stop":
		s.ended = true
	}
	// ping, content_block_stop and event types added later need nothing:
	// Anthropic may add events, and clients are to ignore unknown ones.
	return nil
}

func (s *stream) emitText(t string, emit func(provider.Delta) error) error {
	if t == "" {
		return nil
	}
	if err := emit(provider.Delta{Text: t}); err != nil {
		return &provider.EmitError{Err: err}
	}
	s.text.WriteString(t)
	return nil
}

// addUsage takes the counters u reports; message_delta's are cumulative,
// so a later value replaces an earlier one.
func (s *stream) addUsage(u *wireUsage) {
	if u == nil {
		return
	}
	for _, f := range []struct {
		src *int
		dst *int
	}{
		{u.InputTokens, &s.input}, {u.OutputTokens, &s.output},
		{u.CacheReadInputTokens, &s.cacheRead}, {u.CacheCreationInputTokens, &s.cacheWrite},
	} {
		if f.src != nil {
			*f.dst = *f.src
		}
	}
}
