package builtin

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tokens"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const sys = "You are Mirror, a helpful assistant reached through a chat gateway. Answer clearly and concisely."

func user(s string) provider.Message { return provider.Message{Role: provider.RoleUser, Content: s} }

var goldenCases = []struct {
	name string
	req  provider.Request
}{
	{"hello", provider.Request{Messages: []provider.Message{
		{Role: provider.RoleSystem, Content: sys}, user("Hello there!")}}},
	{"history", provider.Request{Messages: []provider.Message{
		{Role: provider.RoleSystem, Content: sys, Tokens: 20},
		user("What is the weather?"),
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "call_1", Name: "weather", Arguments: `{"city":"Lisbon"}`}}},
		{Role: provider.RoleTool, ToolCallID: "call_1", Content: `{"temp":21}`},
		{Role: provider.RoleAssistant, Content: "It is 21 °C in Lisbon."},
		user("  And   tomorrow?\n\nThanks  "),
	}}},
	{"truncated", provider.Request{Messages: []provider.Message{user(strings.Repeat("Grüße aus Köln, wie geht es dir heute? ", 10))}}},
	{"markdown", provider.Request{Messages: []provider.Message{user("Show me some MARKDOWN, please.")}}},
	{"long", provider.Request{Messages: []provider.Message{user("Give me a long answer")}}},
	{"both", provider.Request{Messages: []provider.Message{user("long markdown")}}},
	{"no-user", provider.Request{Messages: []provider.Message{{Role: provider.RoleSystem, Content: sys}}}},
	{"empty", provider.Request{}},
	// "belong" and "markdowns" are not keywords: whole words only.
	{"not-keywords", provider.Request{Messages: []provider.Message{user("These belong to the markdowns folder")}}},

	// Tools: the text answers around a call.
	{"tool-result", provider.Request{Tools: fileTools, Messages: []provider.Message{
		{Role: provider.RoleSystem, Content: sys},
		user(`/tool read_file {"path": "notes/todo.md"}`),
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "call_2", Name: "read_file", Arguments: `{"path": "notes/todo.md"}`}}},
		{Role: provider.RoleTool, ToolCallID: "call_2", Content: "- buy milk\n- write   the tool registry\n" + strings.Repeat("- more things to do\n", 10)},
	}}},
	{"tool-results", provider.Request{Tools: fileTools, Messages: []provider.Message{
		user("/tool list_dir"),
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "call_1", Name: "list_dir", Arguments: `{}`}, {ID: "call_x", Name: "read_file", Arguments: `{}`}}},
		{Role: provider.RoleTool, ToolCallID: "call_1", Content: "notes/\ntodo.md"},
		{Role: provider.RoleTool, ToolCallID: "call_x", Content: `read_file: argument "path" is required`},
		{Role: provider.RoleTool, ToolCallID: "call_unknown", Content: ""},
	}}},
	// Attachments are described: kind, size, pixel size (stored, or read
	// from the image header), a text file's first lines.
	{"attachments", provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "Look at these", Parts: attachments()}}}},
	{"tool-unavailable", provider.Request{Tools: fileTools, Messages: []provider.Message{user(`/tool shell {"command": "ls"}`)}}},
	{"tool-none-offered", provider.Request{Messages: []provider.Message{user("/tool read_file")}}},
	{"tool-bare", provider.Request{Tools: fileTools, Messages: []provider.Message{user("  /tool  ")}}},
	// Only the last message counts, and only a whole "/tool" word.
	{"tool-not-last", provider.Request{Tools: fileTools, Messages: []provider.Message{user("/tool list_dir"), {Role: provider.RoleAssistant, Content: "ok"}, user("thanks")}}},
	{"toolbox", provider.Request{Tools: fileTools, Messages: []provider.Message{user("/toolbox list_dir")}}},
}

var fileTools = []provider.Tool{
	{Name: "read_file", Parameters: []byte(`{"type":"object"}`)},
	{Name: "list_dir", Parameters: []byte(`{"type":"object"}`)},
}

func TestToolCall(t *testing.T) {
	tests := []struct {
		name string
		msg  string
		want provider.ToolCall // zero: no call
	}{
		{"with json", `/tool read_file {"path": "a.txt"}`, provider.ToolCall{ID: "call_2", Name: "read_file", Arguments: `{"path": "a.txt"}`}},
		{"without json", "/tool list_dir", provider.ToolCall{ID: "call_2", Name: "list_dir", Arguments: `{}`}},
		{"json glued on", `/tool read_file{"path":"b"}`, provider.ToolCall{ID: "call_2", Name: "read_file", Arguments: `{"path":"b"}`}},
		{"spaces and lines", "\n /tool \t list_dir\n  {\"path\": \"x\"}\n", provider.ToolCall{ID: "call_2", Name: "list_dir", Arguments: `{"path": "x"}`}},
		// Bad JSON is passed on: the registry's check answers it.
		{"bad json kept", `/tool read_file {"path":`, provider.ToolCall{ID: "call_2", Name: "read_file", Arguments: `{"path":`}},
		{"not offered", `/tool shell {}`, provider.ToolCall{}},
		{"bare", `/tool`, provider.ToolCall{}},
		{"other word", `/tools`, provider.ToolCall{}},
		{"not first", `please /tool list_dir`, provider.ToolCall{}},
	}
	m := New(0)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := provider.Request{Tools: fileTools, Messages: []provider.Message{{Role: provider.RoleSystem, Content: sys}, user(tc.msg)}}
			got, ok := ToolCall(req)
			if ok != (tc.want.Name != "") || got != tc.want {
				t.Fatalf("ToolCall = %+v, %v; want %+v", got, ok, tc.want)
			}
			var deltas int
			res, err := m.Stream(context.Background(), req, func(provider.Delta) error { deltas++; return nil })
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				if len(res.ToolCalls) != 0 || res.FinishReason != "stop" || res.Text == "" {
					t.Fatalf("no call expected: %+v", res)
				}
				return
			}
			if deltas != 0 || res.Text != "" || res.FinishReason != "tool_calls" || len(res.ToolCalls) != 1 || res.ToolCalls[0] != tc.want {
				t.Fatalf("Stream = %+v after %d deltas", res, deltas)
			}
			if Answer(req) != "" {
				t.Fatal("Answer has text for a call")
			}
			wantUsage := provider.Usage{InputTokens: inputTokens(req.Messages) + tokens.Overhead(2) + toolTokens(req.Tools),
				OutputTokens: tokens.Count(tc.want.Name) + tokens.Count(tc.want.Arguments)}
			if res.Usage != wantUsage {
				t.Fatalf("usage %+v, want %+v", res.Usage, wantUsage)
			}
		})
	}
}

// The call's id follows the message count, so a replayed request gets the
// same id and the next call in a conversation a new one.
func TestToolCallID(t *testing.T) {
	msgs := []provider.Message{user("/tool list_dir")}
	for _, want := range []string{"call_1", "call_4", "call_7"} {
		call, ok := ToolCall(provider.Request{Tools: fileTools, Messages: msgs})
		if !ok || call.ID != want {
			t.Fatalf("id %q, want %q", call.ID, want)
		}
		msgs = append(msgs,
			provider.Message{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{call}},
			provider.Message{Role: provider.RoleTool, ToolCallID: call.ID, Content: "x"},
			user("/tool list_dir"))
	}
}

func TestToolCallCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := provider.Request{Tools: fileTools, Messages: []provider.Message{user("/tool list_dir")}}
	res, err := New(0).Stream(ctx, req, func(provider.Delta) error { return nil })
	if !errors.Is(err, context.Canceled) || len(res.ToolCalls) != 0 {
		t.Fatalf("Stream = %+v, %v", res, err)
	}
}

func attachments() []provider.Part {
	stored := providertest.NewPart(provider.PartImage, "image/png", "stored.png", make([]byte, 2600))
	stored.Width, stored.Height = 1280, 720 // the stored pixel size is enough
	read := providertest.NewPart(provider.PartImage, "image/png", "read.png", pngHeader(33, 21))
	corrupt := providertest.NewPart(provider.PartImage, "image/jpeg", "broken.jpg", []byte("not a jpeg"))
	text := providertest.NewPart(provider.PartText, "text/x-go", "main.go", []byte("package main\r\n\nfunc main() {\n\tprintln(\"hi\")\n}\n"))
	pdf := providertest.NewPart(provider.PartDocument, "application/pdf", "report.pdf", bytes.Repeat([]byte("%PDF"), 3000))
	voice := providertest.NewPart(provider.PartAudio, "audio/ogg", "", []byte("OggS"))
	other := providertest.NewPart("", "application/zip", "x.zip", make([]byte, 3<<20))
	return []provider.Part{stored, read, corrupt, text, pdf, voice, other}
}

// pngHeader is the start of a PNG of w × h pixels: its signature and
// IHDR chunk, all image.DecodeConfig reads; fixed bytes, whatever the
// encoder of the Go release.
func pngHeader(w, h uint32) []byte {
	ihdr := binary.BigEndian.AppendUint32([]byte("IHDR"), w)
	ihdr = binary.BigEndian.AppendUint32(ihdr, h)
	ihdr = append(ihdr, 8, 0, 0, 0, 0) // 8-bit grey, no interlace
	b := []byte("\x89PNG\r\n\x1a\n")
	b = binary.BigEndian.AppendUint32(b, 13)
	b = append(b, ihdr...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(ihdr))
}

// Attachments are billed at seed 000's allowance by the built-in model.
func TestAttachmentsBilled(t *testing.T) {
	img := providertest.ImagePart("a.png", 10, 10)
	with := provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi", Parts: []provider.Part{img, img}}}}
	without := provider.Request{Messages: []provider.Message{user("hi")}}
	a, _ := New(0).Stream(context.Background(), with, func(provider.Delta) error { return nil })
	b, _ := New(0).Stream(context.Background(), without, func(provider.Delta) error { return nil })
	if d := a.Usage.InputTokens - b.Usage.InputTokens; d != 2*1600 {
		t.Fatalf("two images billed %d more tokens, want 3200", d)
	}
}

func TestGolden(t *testing.T) {
	m := New(0)
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := m.Stream(context.Background(), tc.req, func(provider.Delta) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != Answer(tc.req) {
				t.Fatal("streamed text differs from Answer")
			}
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(res.Text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if res.Text != string(want) {
				t.Fatalf("answer differs from %s:\n--- got\n%s\n--- want\n%s", path, res.Text, want)
			}
			// Deterministic: a second run gives the same bytes.
			if again := Answer(tc.req); again != res.Text {
				t.Fatal("second answer differs")
			}
		})
	}
}

func TestStreamOrderAndUsage(t *testing.T) {
	req := provider.Request{
		Messages: []provider.Message{{Role: provider.RoleSystem, Content: sys, Tokens: 20}, user("long")},
		Tools:    []provider.Tool{{Name: "weather", Parameters: []byte(`{"type":"object"}`)}},
	}
	var got []string
	res, err := New(0).Stream(context.Background(), req, func(d provider.Delta) error {
		got = append(got, d.Text)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := pieces(Answer(req), wordsPerPiece)
	if len(got) != len(want) || len(got) < 50 {
		t.Fatalf("got %d pieces, want %d (> 50)", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("piece %d = %q, want %q", i, got[i], want[i])
		}
		if n := len(strings.Fields(got[i])); n == 0 || n > wordsPerPiece {
			t.Fatalf("piece %d has %d words: %q", i, n, got[i])
		}
	}
	if strings.Join(got, "") != res.Text {
		t.Fatal("pieces do not add up to Result.Text")
	}
	if len(res.ToolCalls) != 0 || res.FinishReason != "stop" {
		t.Fatalf("tool calls %v, finish %q", res.ToolCalls, res.FinishReason)
	}
	wantUsage := provider.Usage{InputTokens: 20 + tokens.Count("long") + tokens.Overhead(2) + toolTokens(req.Tools), OutputTokens: tokens.Count(res.Text)}
	if res.Usage != wantUsage {
		t.Fatalf("usage %+v, want %+v", res.Usage, wantUsage)
	}
}

func TestCancelDuringDelay(t *testing.T) {
	// An hour between pieces: the stream can only end this test by honouring
	// the cancellation that arrives with the first piece.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []string
	done := make(chan struct{})
	var (
		res provider.Result
		err error
	)
	go func() {
		defer close(done)
		res, err = New(time.Hour).Stream(ctx, provider.Request{Messages: []provider.Message{user("hi")}}, func(d provider.Delta) error {
			got = append(got, d.Text)
			cancel()
			return nil
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Stream did not return after cancel")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if len(got) != 1 || res.Text != got[0] || res.Text == "" {
		t.Fatalf("partial text %q, pieces %q", res.Text, got)
	}
	if res.FinishReason != "" || res.Usage.OutputTokens != tokens.Count(res.Text) {
		t.Fatalf("partial result %+v", res)
	}
}

func TestCancelZeroDelay(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	res, err := New(0).Stream(ctx, provider.Request{Messages: []provider.Message{user("long")}}, func(d provider.Delta) error {
		if n++; n == 3 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || n != 3 {
		t.Fatalf("err = %v after %d pieces", err, n)
	}
	if want := strings.Join(pieces(Answer(provider.Request{Messages: []provider.Message{user("long")}}), wordsPerPiece)[:3], ""); res.Text != want {
		t.Fatalf("partial %q, want %q", res.Text, want)
	}
}

func TestEmitError(t *testing.T) {
	boom := errors.New("socket gone")
	n := 0
	res, err := New(0).Stream(context.Background(), provider.Request{Messages: []provider.Message{user("hi")}}, func(d provider.Delta) error {
		if n++; n == 2 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if first := pieces(res.Text, wordsPerPiece); len(first) != 1 {
		t.Fatalf("partial text %q should hold the one accepted piece", res.Text)
	}
}

func TestDelayBetweenPieces(t *testing.T) {
	const d = 2 * time.Millisecond
	req := provider.Request{Messages: []provider.Message{user("hi")}}
	n := len(pieces(Answer(req), wordsPerPiece))
	start := time.Now()
	if _, err := New(d).Stream(context.Background(), req, func(provider.Delta) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < time.Duration(n-1)*d {
		t.Fatalf("%d pieces took %s, want at least %s", n, el, time.Duration(n-1)*d)
	}
}

func TestPieces(t *testing.T) {
	for _, s := range []string{"", "a", "  lead", "a b c d e f g", "line one\nline two\n\n", "tab\tsep  \r\n", "ünï cödé «x» …"} {
		ps := pieces(s, wordsPerPiece)
		if strings.Join(ps, "") != s {
			t.Errorf("pieces(%q) = %q do not concatenate back", s, ps)
		}
		for _, p := range ps {
			if p == "" {
				t.Errorf("pieces(%q) has an empty piece", s)
			}
			if i := strings.IndexByte(p, '\n'); i >= 0 && strings.TrimSpace(p[i:]) != "" {
				t.Errorf("piece %q continues past a line break", p)
			}
		}
	}
}

func FuzzPieces(f *testing.F) {
	f.Add("hello world, this is a test\nof pieces")
	f.Add("  \n\n x")
	f.Fuzz(func(t *testing.T, s string) {
		if got := strings.Join(pieces(s, wordsPerPiece), ""); got != s {
			t.Fatalf("lost bytes: %q -> %q", s, got)
		}
	})
}

func BenchmarkStream(b *testing.B) {
	m := New(0)
	req := provider.Request{Messages: []provider.Message{{Role: provider.RoleSystem, Content: sys}, user("long")}}
	emit := func(provider.Delta) error { return nil }
	for b.Loop() {
		if _, err := m.Stream(context.Background(), req, emit); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzToolCommand: any last message gives either one call of an offered tool
// (a name without spaces or braces) and no text, or a text answer.
func FuzzToolCommand(f *testing.F) {
	for _, s := range []string{`/tool read_file {"path":"a"}`, "/tool", "/tool list_dir", "/tool\u00a0list_dir", "/toolx", " /tool  {} ", "/tool read_file\n{\n}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		req := provider.Request{Tools: fileTools, Messages: []provider.Message{user(msg)}}
		call, ok := ToolCall(req)
		text := Answer(req)
		if !ok {
			if text == "" {
				t.Fatalf("%q: neither a call nor text", msg)
			}
			return
		}
		if text != "" || call.ID != "call_1" || call.Arguments == "" || !offered(fileTools, call.Name) ||
			strings.ContainsAny(call.Name, " \t\n{") {
			t.Fatalf("%q: call %+v, text %q", msg, call, text)
		}
	})
}

// TestToolTokensOfALaterList: the count kept of the last tool list is
// used only for that list again; a list changed in place (a schema's
// bytes, a name), a shorter or another list is counted afresh.
func TestToolTokensOfALaterList(t *testing.T) {
	m := New(0)
	list := func() []provider.Tool {
		return []provider.Tool{
			{Name: "read_file", Description: "Read a file.", Parameters: []byte(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
			{Name: "list_dir", Description: "List a folder.", Parameters: []byte(`{"type":"object"}`)},
		}
	}
	defs := list()
	steps := []struct {
		name   string
		change func()
	}{
		{"first", func() {}},
		{"same list", func() {}},
		{"a schema changed in place", func() { copy(defs[0].Parameters, strings.Repeat("§ 1 ", len(defs[0].Parameters))) }},
		{"an equal copy", func() { defs = list() }},
		{"a name changed in place", func() { defs[1].Name = "list_directory_entries" }},
		{"a description changed", func() { defs[1].Description = "List the entries of a folder, one a line." }},
		{"shorter", func() { defs = defs[:1] }},
		{"none", func() { defs = nil }},
		{"back", func() { defs = list() }},
	}
	for _, s := range steps {
		s.change()
		if got, want := m.toolTokens(defs), toolTokens(defs); got != want {
			t.Fatalf("%s: %d tokens, want %d", s.name, got, want)
		}
	}
	// Concurrent requests with two lists (run with -race).
	a, b := list(), list()[:1]
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defs := a
			if i%2 == 1 {
				defs = b
			}
			for range 100 {
				if got, want := m.toolTokens(defs), toolTokens(defs); got != want {
					t.Errorf("concurrent: %d tokens, want %d", got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}
