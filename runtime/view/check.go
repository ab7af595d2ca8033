package view

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // pixel sizes of data: URL images
	_ "image/jpeg"
	_ "image/png"
	"io"
	"strings"

	"github.com/mirror-gateway/mirror/runtime/budget"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tokens"
)

// ImageTokens is the flat allowance of one image part whose pixel size is
// unknown, until the model has taught its real cost (seed 000).
const ImageTokens = tokens.ImageDefault

// Report is what CheckCompression finds in one request: where its tokens
// come from, and how far masking and folding alone (no eviction) bring it.
type Report struct {
	Model    string `json:"model"`
	Window   int    `json:"window"`
	Ceiling  int    `json:"ceiling"` // at the Auto limit
	Target   int    `json:"target"`  // history target of a checkpoint
	Messages int    `json:"messages"`

	System          int `json:"system"`
	User            int `json:"user"`
	Assistant       int `json:"assistant"`
	ToolResults     int `json:"tool_results"`
	ToolCallArgs    int `json:"tool_call_args"`
	ToolDefinitions int `json:"tool_definitions"`
	Images          int `json:"images"` // tokens: OpenAI's rule, or ImageTokens per part of unknown size
	ImageParts      int `json:"image_parts"`
	Total           int `json:"total"` // with the per-message overhead

	Masked       int `json:"masked"` // tool results masking would clear
	AfterMasking int `json:"after_masking"`
	Folded       int `json:"folded"` // answers folding would fold
	AfterFolding int `json:"after_folding"`
}

// rawRequest is the part of an OpenAI chat-completions request read here.
type rawRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []json.RawMessage `json:"tools"`
}

type rawPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL    string `json:"url"`
		Detail string `json:"detail"`
	} `json:"image_url"`
}

// partsOf reads a message content: a string, null, or an array of parts,
// with the tokens of its images (imageTokens).
func partsOf(raw json.RawMessage) (text string, images, imageTokens int, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", 0, 0, nil
	}
	if raw[0] == '"' {
		err = json.Unmarshal(raw, &text)
		return text, 0, 0, err
	}
	var parts []rawPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", 0, 0, errors.New("content is neither a string nor an array of parts")
	}
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text":
			if text != "" {
				text += "\n"
			}
			text += p.Text
		case "image_url", "input_image", "image":
			images++
			imageTokens += imagePartTokens(p)
		}
	}
	return text, images, imageTokens, nil
}

// imagePartTokens sizes an image_url part by OpenAI's rule (the request is
// a chat-completions one) when it carries its bytes as a data: URL whose
// header gives the pixel size; otherwise at the flat allowance.
func imagePartTokens(p rawPart) int {
	if p.ImageURL == nil {
		return ImageTokens
	}
	rule := tokens.RuleOpenAI
	if p.ImageURL.Detail == "low" {
		rule = tokens.RuleOpenAILow
	}
	_, data, ok := strings.Cut(p.ImageURL.URL, ";base64,")
	if !ok || !strings.HasPrefix(p.ImageURL.URL, "data:image/") {
		return tokens.ImageTokens(rule, 0, 0)
	}
	// The header is at the start: 64 KiB of base64 covers JPEG's EXIF.
	data = data[:min(len(data), 64<<10)]
	data = data[:len(data)/4*4]
	head, _ := base64.StdEncoding.DecodeString(data)
	cfg, _, err := image.DecodeConfig(bytes.NewReader(head))
	if err != nil {
		return tokens.ImageTokens(rule, 0, 0)
	}
	return tokens.ImageTokens(rule, cfg.Width, cfg.Height)
}

// CheckCompression reads a raw OpenAI chat-completions request (as JSON)
// and reports its token sources and how far masking and folding alone would
// shrink it, for a model with this window (0: unknown). It plans no
// eviction and changes nothing.
func CheckCompression(raw []byte, window int) (Report, error) {
	var req rawRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return Report{}, fmt.Errorf("check-compression: not a chat-completions request: %w", err)
	}
	bud, err := budget.New(window, "auto", 0)
	if err != nil {
		return Report{}, err
	}
	count := tokens.For(req.Model).Count
	r := Report{Model: req.Model, Window: bud.Window, Ceiling: bud.Ceiling, Messages: len(req.Messages)}
	for _, t := range req.Tools {
		r.ToolDefinitions += count(string(t))
	}
	names := map[string]string{}
	var rows []Row
	systems := 0
	for i, m := range req.Messages {
		text, images, imageTokens, err := partsOf(m.Content)
		if err != nil {
			return Report{}, fmt.Errorf("check-compression: message %d: %w", i, err)
		}
		n := count(text)
		r.ImageParts += images
		r.Images += imageTokens
		row := Row{Seq: uint64(i + 1), Text: text, Tokens: n + imageTokens}
		switch m.Role {
		case "system", "developer":
			r.System += n
			systems++
			continue
		case "user":
			r.User += n
			row.Kind = KindUser
		case "assistant":
			r.Assistant += n
			row.Kind = KindAssistant
			for _, c := range m.ToolCalls {
				a := count(c.Function.Name) + count(c.Function.Arguments)
				r.ToolCallArgs += a
				row.Tokens += a
				row.ToolCalls = append(row.ToolCalls, provider.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
				names[c.ID] = c.Function.Name
			}
		case "tool", "function":
			r.ToolResults += n
			row.Kind, row.ToolCallID, row.ToolName = KindTool, m.ToolCallID, names[m.ToolCallID]
		default:
			return Report{}, fmt.Errorf("check-compression: message %d: unknown role %q", i, m.Role)
		}
		if row.Tokens == 0 {
			row.Tokens = 1 // an empty message still costs its overhead; keep it in view
		}
		rows = append(rows, row)
	}
	overhead := r.System + r.ToolDefinitions
	r.Target = bud.Target(overhead)
	b := &build{in: Input{Rows: rows, Budget: bud, Overhead: overhead}, count: count,
		tools: map[string]bool{ToolOutput: true, GlobalSearch: true}}
	b.rows = rows
	// Every message counts toward the sources, so the view is built
	// from all rows rather than through agent-history's filter.
	for i := range b.rows {
		b.base = append(b.base, b.entryOf(&b.rows[i]))
	}
	work := b.apply(nil)
	size := overhead + historyTokens(work) + systems*tokens.MessageOverhead
	r.Total = size
	tail := b.tailStart(work)
	var cp Checkpoint
	r.Masked = b.maskPass(&cp, work, tail, &size, -1)
	b.settle(&cp, work)
	r.AfterMasking = overhead + historyTokens(work) + systems*tokens.MessageOverhead
	r.Folded = b.foldPass(&cp, work, tail, &size, -1)
	b.settle(&cp, work)
	r.AfterFolding = overhead + historyTokens(work) + systems*tokens.MessageOverhead
	return r, nil
}

// String is the report as the CLI prints it.
func (r Report) String() string {
	var b bytes.Buffer
	_ = r.Write(&b)
	return b.String()
}

// Write prints the report for the CLI.
func (r Report) Write(w io.Writer) error {
	pct := func(n int) string {
		if r.Ceiling == 0 {
			return ""
		}
		return fmt.Sprintf(" (%d%% of ceiling)", n*100/r.Ceiling)
	}
	_, err := fmt.Fprintf(w, `model %s, window %d, ceiling %d at auto, checkpoint target %d (history)
%d messages, %d tokens%s
  system             %8d
  user               %8d
  assistant          %8d
  tool results       %8d
  tool call args     %8d
  tool definitions   %8d
  images             %8d  (%d parts: OpenAI's tile rule where the pixel size is known, else %d each)
masking %d tool results: %d tokens%s
then folding %d answers: %d tokens%s
eviction is not planned here
`, orDash(r.Model), r.Window, r.Ceiling, r.Target, r.Messages, r.Total, pct(r.Total),
		r.System, r.User, r.Assistant, r.ToolResults, r.ToolCallArgs, r.ToolDefinitions, r.Images, r.ImageParts, ImageTokens,
		r.Masked, r.AfterMasking, pct(r.AfterMasking), r.Folded, r.AfterFolding, pct(r.AfterFolding))
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
