package gemini

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/mirror-gateway/mirror/runtime/ids"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/sse"
)

// maxLine bounds one SSE line. Function calls arrive whole in one chunk, and
// a call that writes a file carries the file, so allow well past 1 MiB.
const maxLine = 16 << 20

// Wire shapes of a stream chunk (a GenerateContentResponse). Only what
// Mirror uses is decoded.
type wireChunk struct {
	Candidates     []wireCandidate `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	UsageMetadata *wireUsage      `json:"usageMetadata"`
	ResponseID    string          `json:"responseId"`
	ModelVersion  string          `json:"modelVersion"` // the model that answered, for a diagnostic
	Error         json.RawMessage `json:"error"`
}

type wireCandidate struct {
	Content *struct {
		Parts []wirePart `json:"parts"`
	} `json:"content"`
	FinishReason string `json:"finishReason"`
	Index        int    `json:"index"`
}

type wireUsage struct {
	PromptTokenCount        int `json:"promptTokenCount"`
	CachedContentTokenCount int `json:"cachedContentTokenCount"`
	CandidatesTokenCount    int `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int `json:"thoughtsTokenCount"`
}

// usage converts usageMetadata. InputTokens is promptTokenCount, which
// already includes the cached tokens (cachedContentTokenCount is a part of
// it, not an addition). OutputTokens adds the thinking tokens, which are
// billed as output and count against maxOutputTokens.
func (u *wireUsage) usage() provider.Usage {
	return provider.Usage{
		InputTokens:  u.PromptTokenCount,
		OutputTokens: u.CandidatesTokenCount + u.ThoughtsTokenCount,
		CachedTokens: u.CachedContentTokenCount,
	}
}

// stream assembles one streamed answer. Gemini sends no terminator: the
// answer is complete when a finishReason (or a prompt block) arrived, and a
// body that ends before that was cut short.
type stream struct {
	seed       [32]byte
	text       strings.Builder
	calls      []provider.ToolCall
	finish     string // Gemini's raw finishReason
	blocked    string // promptFeedback.blockReason
	usage      provider.Usage
	responseID string
	model      string // modelVersion
	images     provider.Images
}

func (s *stream) complete() bool { return s.finish != "" || s.blocked != "" }

func (s *stream) result() provider.Result {
	r := provider.Result{Text: s.text.String(), Usage: s.usage, FinishReason: finishReason(s.finish, len(s.calls) > 0),
		Model: s.model, RequestID: s.responseID, Images: s.images.List()}
	if s.blocked != "" {
		r.FinishReason = "content_filter"
	}
	for i, c := range s.calls {
		if c.ID == "" {
			c.ID = s.callID(i, c)
		}
		r.ToolCalls = append(r.ToolCalls, c)
	}
	return r
}

// callID synthesizes an id for a call Gemini sent without one (real traffic
// usually has none). It hashes the request, the response id and the call,
// so it is deterministic for a given exchange and different across turns,
// which keeps ids unique within a chat's record.
func (s *stream) callID(i int, c provider.ToolCall) string {
	h := sha256.New()
	h.Write(s.seed[:])
	h.Write([]byte(s.responseID))
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(i))
	h.Write(n[:])
	h.Write([]byte(c.Name))
	h.Write([]byte{0})
	h.Write([]byte(c.Arguments))
	return ids.Call(hex.EncodeToString(h.Sum(nil)[:12]))
}

// read parses SSE from r until EOF, applying each chunk in order.
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
		if err := s.event(ev.Data, emit); err != nil {
			return err
		}
	}
}

// event applies one SSE event's data: normally one JSON chunk; a run of
// concatenated values is applied value by value.
func (s *stream) event(data []byte, emit func(provider.Delta) error) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil
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
		if len(ch.Error) > 0 && string(ch.Error) != "null" {
			return &provider.StreamError{Body: bytes.Clone(data)}
		}
		if err := s.apply(&ch, emit); err != nil {
			return err
		}
	}
}

func (s *stream) apply(ch *wireChunk, emit func(provider.Delta) error) error {
	if ch.UsageMetadata != nil {
		// Usage is cumulative on every chunk; the last one counts.
		s.usage = ch.UsageMetadata.usage()
	}
	if ch.ResponseID != "" && s.responseID == "" {
		s.responseID = ch.ResponseID
	}
	if s.model == "" {
		s.model = ch.ModelVersion
	}
	if ch.PromptFeedback != nil && ch.PromptFeedback.BlockReason != "" {
		s.blocked = ch.PromptFeedback.BlockReason
	}
	for i := range ch.Candidates {
		c := &ch.Candidates[i]
		if c.Index != 0 {
			continue // Mirror asks for one candidate
		}
		if c.Content != nil {
			for j := range c.Content.Parts {
				p := &c.Content.Parts[j]
				if p.Thought {
					continue // thought summaries are not the answer
				}
				if p.Text != "" {
					if err := emit(provider.Delta{Text: p.Text}); err != nil {
						return &provider.EmitError{Err: err}
					}
					s.text.WriteString(p.Text)
				}
				if d := p.InlineData; d != nil {
					// An image the model drew (image-output models).
					s.images.AddBase64(d.MimeType, d.Data)
				}
				if fc := p.FunctionCall; fc != nil {
					args := "{}"
					var buf bytes.Buffer
					if json.Compact(&buf, fc.Args) == nil && buf.Len() > 0 && buf.String() != "null" {
						args = buf.String()
					}
					// The part's thought signature goes back with the call
					// (only the first of parallel calls carries one).
					s.calls = append(s.calls, provider.ToolCall{ID: fc.ID, Name: fc.Name, Arguments: args, Signature: p.ThoughtSignature})
				}
			}
		}
		if c.FinishReason != "" {
			s.finish = c.FinishReason
		}
	}
	return nil
}
