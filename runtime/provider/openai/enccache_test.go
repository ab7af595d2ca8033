package openai

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
)

// conversationRequests is a conversation's requests turn by turn, as the
// view sends them: each the last plus the new messages, with tool calls
// and text that JSON escapes, and at every tenth turn a checkpoint that
// replaces what came before by a summary (so the prefix changes).
func conversationRequests(turns int) []provider.Request {
	sys := provider.Message{Role: provider.RoleSystem, Content: "You are Mirror. <rules> & \"quotes\"\n\ttabs \u2028 line sep"}
	tools := []provider.Tool{{Name: "shell", Description: "runs <cmd>", Parameters: []byte(`{"type":"object","properties":{"cmd":{"type":"string"}}}`)}}
	msgs := []provider.Message{sys}
	var out []provider.Request
	for i := range turns {
		if i > 0 && i%10 == 0 {
			// A checkpoint: the view starts again from a summary and the
			// last exchange.
			tail := msgs[len(msgs)-2:]
			msgs = append([]provider.Message{sys, {Role: provider.RoleUser, Content: fmt.Sprintf("[summary of turns up to %d: naïve café 😀]", i)}}, tail...)
		}
		msgs = append(msgs, provider.Message{Role: provider.RoleUser, Content: fmt.Sprintf("question %d: what is <b>%d</b> & why?", i, i*i)})
		req := provider.Request{Model: "gpt-4o", Messages: append([]provider.Message(nil), msgs...), Tools: tools, MaxTokens: 1000 * (i % 3)}
		if i%7 == 3 {
			req.ToolChoice = "shell"
		}
		out = append(out, req)
		if i%4 == 1 {
			id := fmt.Sprintf("call_%d", i)
			args := fmt.Sprintf(`{"cmd":"echo %d > /tmp/x"}`, i)
			if i%8 == 1 {
				args = " " // sent as {}
			}
			msgs = append(msgs,
				provider.Message{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: id, Name: "shell", Arguments: args}}},
				provider.Message{Role: provider.RoleTool, ToolCallID: id, Content: "ok\n\x00\x1f done"})
		}
		msgs = append(msgs, provider.Message{Role: provider.RoleAssistant, Content: strings.Repeat(fmt.Sprintf("answer %d, ", i), 20)})
	}
	return out
}

// The request a client sends with its cache of encoded messages is byte
// for byte the fresh encoding, over a conversation with checkpoints, on
// OpenAI's API and elsewhere; after the first turn the messages before
// the new ones come from the cache, except right after a checkpoint.
func TestCachedEncodingEqualsFresh(t *testing.T) {
	for _, official := range []bool{false, true} {
		cache := newEncCache()
		prev := 0
		for i, req := range conversationRequests(35) {
			want, err := encodeRequest(req, official)
			if err != nil {
				t.Fatal(err)
			}
			hits := cache.hits
			got, err := encodeRequestWith(req, official, cache)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("turn %d (official %v): cached encoding differs\n got %s\nwant %s", i, official, got, want)
			}
			// Everything the last request sent is found (all but the
			// system prompt after a checkpoint).
			if i > 0 && i%10 != 0 && cache.hits-hits < prev {
				t.Fatalf("turn %d: %d of %d messages from the cache, the last request had %d", i, cache.hits-hits, len(req.Messages), prev)
			}
			prev = len(req.Messages)
		}
	}
}

// Messages with attachments are encoded afresh every time (their encoding
// depends on the model and the endpoint); a caller changing a message's
// tool calls after sending it does not change what the cache gives for
// the original; a cache pushed past its bound still gives the same bytes.
func TestCachedEncodingEdges(t *testing.T) {
	cache := newEncCache()
	img := provider.Message{Role: provider.RoleUser, Content: "see", Parts: []provider.Part{providertest.ImagePart("a.png", 8, 8)}}
	calls := []provider.ToolCall{{ID: "c1", Name: "shell", Arguments: `{"cmd":"ls"}`}}
	call := provider.Message{Role: provider.RoleAssistant, ToolCalls: calls}
	req := provider.Request{Model: "gpt-4o", Messages: []provider.Message{img, call}}
	for range 2 {
		got, err := encodeRequestWith(req, true, cache)
		want, err2 := encodeRequest(req, true)
		if err != nil || err2 != nil || !bytes.Equal(got, want) {
			t.Fatalf("%v %v\n got %s\nwant %s", err, err2, got, want)
		}
	}
	if _, ok := cache.cur[cache.key(img)]; ok {
		t.Fatal("a message with attachments was cached")
	}
	calls[0].Arguments = `{"cmd":"rm"}` // the caller reuses its slice
	changed := provider.Request{Model: "gpt-4o", Messages: []provider.Message{{Role: provider.RoleAssistant, ToolCalls: calls}}}
	got, _ := encodeRequestWith(changed, true, cache)
	want, _ := encodeRequest(changed, true)
	if !bytes.Equal(got, want) {
		t.Fatalf("after the caller's change\n got %s\nwant %s", got, want)
	}
	// Tool lists: the same list again comes from the cache; a changed
	// schema (the caller's bytes, changed in place), an added tool and
	// parameters that are not JSON give what a fresh encoding gives.
	params := []byte(` {"type":"object","properties":{"q":{"type":"string","description":"<q> & more"}}} `)
	tools := []provider.Tool{{Name: "search", Description: "finds <things>", Parameters: params}, {Name: "none"}}
	for i := range 5 {
		switch i {
		case 2:
			copy(params[len(params)-5:], `"}}} `) // same length, other bytes
			params[len(params)-8] = 'x'
		case 3:
			tools = append(tools, provider.Tool{Name: "added", Parameters: []byte(`{"type":"object"}`)})
		case 4:
			tools = append(tools, provider.Tool{Name: "broken", Parameters: []byte(`{"type":`)})
		}
		r := provider.Request{Model: "m", Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}, Tools: tools, ToolChoice: "search", MaxTokens: 5}
		got, err := encodeRequestWith(r, false, cache)
		want, err2 := encodeRequest(r, false)
		if fmt.Sprint(err) != fmt.Sprint(err2) || !bytes.Equal(got, want) {
			t.Fatalf("tools %d: %v / %v\n got %s\nwant %s", i, err, err2, got, want)
		}
	}
	// Past the bound: generations turn over, bytes stay right.
	big := strings.Repeat("x", 64<<10)
	for i := range 300 {
		r := provider.Request{Model: "m", Messages: []provider.Message{{Role: provider.RoleUser, Content: fmt.Sprint(i, big)}, {Role: provider.RoleUser, Content: "0" + big}}}
		got, _ := encodeRequestWith(r, false, cache)
		want, _ := encodeRequest(r, false)
		if !bytes.Equal(got, want) {
			t.Fatalf("request %d differs", i)
		}
	}
	if cache.size > encCacheBytes/2 {
		t.Fatalf("the cache holds %d bytes", cache.size)
	}
}

// Whatever the messages hold, the cached encoding (a second time, from the
// cache) is the fresh one.
func FuzzCachedEncoding(f *testing.F) {
	f.Add("system <x>", "user & \"q\"", "call", `{"a":1}`, "tool\u2028out", "gpt-5")
	f.Add("", "", "", " ", "\x00", "")
	f.Fuzz(func(t *testing.T, sys, user, callID, args, toolOut, model string) {
		req := provider.Request{Model: model, Messages: []provider.Message{
			{Role: provider.RoleSystem, Content: sys},
			{Role: provider.RoleUser, Content: user},
			{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: callID, Name: "shell", Arguments: args}}},
			{Role: provider.RoleTool, ToolCallID: callID, Content: toolOut},
		}, MaxTokens: len(user)}
		want, err := encodeRequest(req, false)
		cache := newEncCache()
		for range 2 {
			got, err2 := encodeRequestWith(req, false, cache)
			if (err == nil) != (err2 == nil) || !bytes.Equal(got, want) {
				t.Fatalf("%v %v\n got %q\nwant %q", err, err2, got, want)
			}
		}
	})
}

// BenchmarkEncodeRequest encodes the requests of a 40-turn conversation
// (with a checkpoint every 10 turns), turn after turn, afresh and with the
// client's cache.
func BenchmarkEncodeRequest(b *testing.B) {
	reqs := conversationRequests(40)
	for _, cached := range []bool{false, true} {
		b.Run(fmt.Sprintf("cached=%v", cached), func(b *testing.B) {
			var cache *encCache
			if cached {
				cache = newEncCache()
			}
			b.ReportAllocs()
			for b.Loop() {
				for _, r := range reqs {
					if _, err := encodeRequestWith(r, false, cache); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// longRequest is a request as the external benchmark's chats send it late
// in their run: 200 messages of about 400 characters and a dozen tools.
func longRequest() provider.Request {
	msgs := []provider.Message{{Role: provider.RoleSystem, Content: "You are Mirror."}}
	for i := range 100 {
		msgs = append(msgs,
			provider.Message{Role: provider.RoleUser, Content: fmt.Sprintf("question %d: tell me more", i)},
			provider.Message{Role: provider.RoleAssistant, Content: strings.Repeat(fmt.Sprintf("answer %d with words. ", i), 20)})
	}
	var tools []provider.Tool
	for i := range 12 {
		tools = append(tools, provider.Tool{Name: fmt.Sprintf("tool_%d", i), Description: strings.Repeat("does a thing well. ", 10),
			Parameters: []byte(`{"type":"object","properties":{"path":{"type":"string","description":"where"},"limit":{"type":"integer"}},"required":["path"]}`)})
	}
	return provider.Request{Model: "gpt-4o", Messages: msgs, Tools: tools}
}

// BenchmarkEncodeLongRequest is one late request of a long chat, its
// messages and tools all in the cache: what a turn pays to key, find and
// copy its history.
func BenchmarkEncodeLongRequest(b *testing.B) {
	req := longRequest()
	cache := newEncCache()
	if _, err := encodeRequestWith(req, false, cache); err != nil {
		b.Fatal(err)
	}
	// The view is read from the store each turn: equal strings, not the
	// same ones.
	fresh := func() provider.Request {
		r := req
		r.Messages = make([]provider.Message, len(req.Messages))
		for i, m := range req.Messages {
			m.Content = strings.Clone(m.Content)
			r.Messages[i] = m
		}
		return r
	}
	reqs := []provider.Request{fresh(), fresh()}
	b.ReportAllocs()
	var n int
	for b.Loop() {
		body, err := encodeRequestWith(reqs[n%2], false, cache)
		if err != nil {
			b.Fatal(err)
		}
		n++
		b.SetBytes(int64(len(body)))
	}
}

// A cached request is built in one buffer of its size: the tools written
// after the messages grew it again, a second copy of the whole history
// each turn.
func TestCachedRequestIsOneBuffer(t *testing.T) {
	req := longRequest()
	cache := newEncCache()
	for i := range 2 {
		body, err := encodeRequestWith(req, false, cache)
		if err != nil {
			t.Fatal(err)
		}
		fresh, _ := encodeRequest(req, false)
		if !bytes.Equal(body, fresh) {
			t.Fatalf("request %d differs from the fresh encoding", i)
		}
		// The allocator rounds a size up by at most an eighth.
		if limit := len(body) + len(body)/8 + 4096; cap(body) > limit {
			t.Fatalf("request %d: %d bytes in a buffer of %d; want at most %d", i, len(body), cap(body), limit)
		}
	}
}

// TestRequestFramesKept: a request's frame (everything but its messages
// and tools) is encoded once per model, answer cap, tool choice and
// endpoint, and every request built on a kept frame is byte for byte the
// fresh encoding.
func TestRequestFramesKept(t *testing.T) {
	msgs := []provider.Message{{Role: provider.RoleUser, Content: "hello"}}
	tools := []provider.Tool{{Name: "read_file", Description: "Read a file.", Parameters: []byte(`{"type":"object"}`)}}
	type shape struct {
		model, choice string
		max           int
		official      bool
	}
	shapes := []shape{
		{"gpt-4o", "", 0, false}, {"gpt-4o", "", 1024, false}, {"gpt-4o", "", 1024, true}, {"gpt-4o", "list_dir", 1024, false},
		{"o3-mini", "", 1024, true}, {"gpt-4o", "read_file", 1024, false},
		{`a "quoted" <model> \ é`, "", 7, false}, {"", "", 0, false},
	}
	cache := newEncCache()
	for round := range 3 {
		for i, sh := range shapes {
			req := provider.Request{Model: sh.model, Messages: msgs, MaxTokens: sh.max, ToolChoice: sh.choice}
			if round == 1 {
				req.Tools = tools
			}
			want, err := encodeRequest(req, sh.official)
			if err != nil {
				t.Fatal(err)
			}
			got, err := encodeRequestWith(req, sh.official, cache)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("round %d, shape %d: got %s\nwant %s", round, i, got, want)
			}
		}
	}
	// Each shape is a frame of its own, encoded once.
	if want := len(shapes); cache.frameMisses != want {
		t.Fatalf("%d frames encoded for %d shapes over three rounds, want %d", cache.frameMisses, len(shapes), want)
	}
}
