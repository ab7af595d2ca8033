package view

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

func TestSafetyNet(t *testing.T) {
	count := func(s string) int { return (len(s) + 3) / 4 }
	msgs := []provider.Message{
		{Role: "system", Content: "sys", Tokens: 100},
		{Role: "user", Content: "old turn", Tokens: 10},
		{Role: "assistant", ToolCalls: []provider.ToolCall{{ID: "a", Name: "shell"}}, Tokens: 10},
		{Role: "tool", ToolCallID: "a", Content: "old result", Tokens: 30000},
		{Role: "user", Content: "this turn", Tokens: 10},
	}
	for i := 1; i <= 3; i++ {
		id := fmt.Sprint("c", i)
		msgs = append(msgs,
			provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{{ID: id, Name: "shell"}}, Tokens: 10},
			provider.Message{Role: "tool", ToolCallID: id, Content: "result " + id, Tokens: 20000})
	}
	// Under the mark: untouched, the same slice.
	if out, n := SafetyNet(msgs, len(msgs), 200000, count); n.Fired() || &out[0] != &msgs[0] {
		t.Fatal("pruned a request far from the ceiling")
	}
	// All of this turn's results were sent: the older ones go first,
	// oldest first; the newest result stays; the earlier turn's result was
	// not needed.
	out, n := SafetyNet(msgs, len(msgs), 70000, count)
	if n.Cleared != 2 || n.Trimmed != 0 {
		t.Fatalf("pruned %+v, want 2 cleared", n)
	}
	if !strings.Contains(out[6].Content, `tool_output {"tool_call_id": "c1"}`) || !strings.Contains(out[8].Content, "c2") {
		t.Errorf("wrong results pruned: %q / %q", out[6].Content, out[8].Content)
	}
	if out[10].Content != "result c3" || out[3].Content != "old result" {
		t.Error("the newest result or an unneeded earlier result was pruned")
	}
	if msgs[6].Content != "result c1" {
		t.Error("SafetyNet changed its input")
	}
	// Tighter: the earlier turn's result goes too, never the newest.
	out, n = SafetyNet(msgs, len(msgs), 40000, count)
	if n.Cleared != 3 || out[10].Content != "result c3" {
		t.Errorf("pruned %+v; newest %q", n, out[10].Content)
	}
	// Results not sent yet go first, largest first: c1 is the larger one
	// here, and only it must go.
	big := append([]provider.Message(nil), msgs...)
	big[6].Tokens = 25000
	out, n = SafetyNet(big, 5, 75000, count)
	if n.Cleared != 1 || !strings.HasPrefix(out[6].Content, netPrefix) || out[8].Content != "result c2" {
		t.Errorf("unsent largest first: %+v %q %q", n, out[6].Content, out[8].Content)
	}
	// Past what clearing can free: earlier turns are trimmed whole, cut
	// before a user message; the system prompt and this turn stay.
	out, n = SafetyNet(msgs, len(msgs), 600, count)
	if n.Trimmed != 3 || out[0].Role != "system" || out[1].Content != "this turn" {
		t.Errorf("trim: %+v, first %q", n, out[1].Content)
	}
}

const sampleRequest = `{
 "model": "gpt-4o",
 "messages": [
  {"role": "system", "content": "You are helpful."},
  {"role": "user", "content": [{"type": "text", "text": "look at this"}, {"type": "image_url", "image_url": {"url": "data:x"}}]},
  {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"a.go\"}"}}]},
  {"role": "tool", "tool_call_id": "c1", "content": %q},
  {"role": "assistant", "content": %q},
  {"role": "user", "content": "thanks"},
  {"role": "assistant", "content": "welcome"},
  {"role": "user", "content": "one more"},
  {"role": "assistant", "content": "sure"},
  {"role": "user", "content": "and another"},
  {"role": "assistant", "content": "done"},
  {"role": "user", "content": "bye"},
  {"role": "assistant", "content": "bye"}
 ],
 "tools": [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]
}`

func TestCheckCompression(t *testing.T) {
	raw := fmt.Sprintf(sampleRequest, strings.Repeat("line of code\n", 3000), strings.Repeat("A long answer sentence. ", 400))
	r, err := CheckCompression([]byte(raw), 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Model != "gpt-4o" || r.Window != 128000 || r.ImageParts != 1 || r.Images != ImageTokens || r.System == 0 ||
		r.ToolResults < 6000 || r.ToolCallArgs == 0 || r.ToolDefinitions == 0 || r.Masked != 1 || r.Folded != 1 {
		t.Errorf("report %+v", r)
	}
	if !(r.Total > r.AfterMasking && r.AfterMasking > r.AfterFolding) {
		t.Errorf("no gain: %d → %d → %d", r.Total, r.AfterMasking, r.AfterFolding)
	}
	golden(t, "check_compression.golden", []byte(r.String()))

	for _, bad := range []string{``, `{`, `[]`, `{"messages": [{"role": "user", "content": 5}]}`, `{"messages": [{"role": "robot", "content": "x"}]}`} {
		if _, err := CheckCompression([]byte(bad), 0); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func FuzzCheckCompression(f *testing.F) {
	f.Add([]byte(fmt.Sprintf(sampleRequest, "x", "y")), 0)
	f.Add([]byte(`{"messages":[{"role":"tool","content":[{"type":"text","text":"a"}]}]}`), 1000)
	f.Add([]byte(`{"model":"gpt-4","messages":[{"role":"assistant","tool_calls":[{"id":"","function":{}}]}],"tools":[1]}`), -5)
	f.Fuzz(func(t *testing.T, raw []byte, window int) {
		r, err := CheckCompression(raw, window%3000000)
		if err == nil {
			_ = r.String()
		}
	})
}

// check-compression sizes an image sent as a data: URL by OpenAI's tile
// rule (the one place the rules live, runtime/tokens), detail low by its
// flat base, and one it cannot size at the flat allowance.
func TestCheckCompressionSizesImages(t *testing.T) {
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 1024, 1024))); err != nil {
		t.Fatal(err)
	}
	url := "data:image/png;base64," + base64.StdEncoding.EncodeToString(b.Bytes())
	for _, c := range []struct {
		part string
		want int
	}{
		{`{"type":"image_url","image_url":{"url":"` + url + `"}}`, 765}, // the docs' 1024x1024 example
		{`{"type":"image_url","image_url":{"url":"` + url + `","detail":"low"}}`, 85},
		{`{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}`, ImageTokens},
		{`{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}`, ImageTokens},
	} {
		raw := `{"model":"gpt-4o","messages":[{"role":"user","content":[` + c.part + `]}]}`
		r, err := CheckCompression([]byte(raw), 0)
		if err != nil || r.Images != c.want || r.ImageParts != 1 {
			t.Errorf("%.80s: images %d (%d parts), %v; want %d", c.part, r.Images, r.ImageParts, err, c.want)
		}
	}
}
