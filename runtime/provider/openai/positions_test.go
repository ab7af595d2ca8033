package openai

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
)

// caller is one caller's conversation as it goes on: one array, extended
// and changed in place between requests (the runtime's view only extends
// it; the edits are there to catch a cache that trusts the caller's
// array), under a conversation name other callers may share.
type caller struct {
	rng  *rand.Rand
	conv string
	msgs []provider.Message
	n    int // for texts never sent before
}

// Texts that repeat (at other positions, in other conversations), some of
// the same length, some that JSON escapes.
var vocabulary = []string{"", "hi", "ho", "a <b> & \"c\"", "naïve café 😀", "\u2028 line sep", "ok\n\x00\x1f done", strings.Repeat("long answer, ", 40)}

func (c *caller) text() string {
	if c.rng.IntN(2) == 0 {
		return vocabulary[c.rng.IntN(len(vocabulary))]
	}
	c.n++
	return fmt.Sprintf("%s message %d of %s", vocabulary[c.rng.IntN(len(vocabulary))], c.n, c.conv)
}

func (c *caller) message() provider.Message {
	switch c.rng.IntN(8) {
	case 0:
		m := provider.Message{Role: provider.RoleAssistant, Content: c.text()}
		for j := range 1 + c.rng.IntN(2) {
			args := []string{"", " ", `{"cmd":"ls"}`, `{"q":"` + c.text() + `"}`}[c.rng.IntN(4)]
			m.ToolCalls = append(m.ToolCalls, provider.ToolCall{ID: "call_" + strconv.Itoa(j), Name: "shell", Arguments: args})
		}
		return m
	case 1:
		return provider.Message{Role: provider.RoleTool, ToolCallID: "call_" + strconv.Itoa(c.rng.IntN(2)), Content: c.text()}
	case 2:
		return provider.Message{Role: provider.RoleUser, Content: c.text(), Parts: []provider.Part{providertest.ImagePart("a.png", 8, 8)}}
	case 3:
		return provider.Message{Role: provider.RoleUser, Content: c.text()}
	}
	return provider.Message{Role: []string{provider.RoleUser, provider.RoleAssistant}[c.rng.IntN(2)], Content: c.text(), Tokens: c.rng.IntN(50), Seq: uint64(c.n)}
}

// step changes the conversation as a caller may between two requests.
func (c *caller) step() {
	n := len(c.msgs)
	switch op := c.rng.IntN(10); {
	case n < 2 || op < 3: // the next turn: a few messages more
		for range 1 + c.rng.IntN(3) {
			c.msgs = append(c.msgs, c.message())
		}
	case op == 3: // a message replaced in place
		c.msgs[c.rng.IntN(n)] = c.message()
	case op == 4: // the same text again, in other memory, or another of its length
		m := &c.msgs[c.rng.IntN(n)]
		if b := []byte(m.Content); len(b) > 0 && c.rng.IntN(2) == 0 {
			b[c.rng.IntN(len(b))] ^= 1
			m.Content = string(b)
		} else {
			m.Content = strings.Clone(m.Content)
		}
	case op == 5: // the caller's tool calls changed in place after they were sent
		if m := c.msgs[c.rng.IntN(n)]; len(m.ToolCalls) > 0 {
			tc := &m.ToolCalls[c.rng.IntN(len(m.ToolCalls))]
			switch v := strconv.Itoa(c.rng.IntN(9)); c.rng.IntN(3) {
			case 0:
				tc.Arguments = `{"changed":` + v + `}`
			case 1:
				tc.ID = "call_" + v
			default:
				tc.Name = "tool_" + v
			}
		} else {
			c.msgs[c.rng.IntN(n)].ToolCallID = "call_9"
		}
	case op == 6: // a role, the attachments or the tool calls changed in place
		m := &c.msgs[c.rng.IntN(n)]
		switch c.rng.IntN(4) {
		case 0: // a message with attachments then fails, alike
			m.Role = []string{provider.RoleUser, provider.RoleAssistant, provider.RoleSystem}[c.rng.IntN(3)]
		case 1:
			if m.Parts == nil && m.Role == provider.RoleUser {
				m.Parts = []provider.Part{providertest.ImagePart("b.png", 4, 4)}
			} else {
				m.Parts = nil
			}
		case 2:
			m.ToolCalls = append(m.ToolCalls, provider.ToolCall{ID: "call_x", Name: "shell", Arguments: "{}"})
		default:
			m.ToolCalls = m.ToolCalls[:len(m.ToolCalls)/2]
		}
	case op == 7: // a checkpoint: the system prompt, a summary, the last exchange
		c.msgs = append([]provider.Message{c.msgs[0], {Role: provider.RoleUser, Content: "[summary] " + c.text()}}, c.msgs[n-2:]...)
	case op == 8: // cut back
		c.msgs = c.msgs[:1+c.rng.IntN(n-1)]
	default: // another conversation altogether under the same name
		c.msgs = []provider.Message{{Role: provider.RoleSystem, Content: c.text()}}
	}
}

// checkPositions checks what the cache keeps by position: every entry's
// encoding is its message's fresh encoding, the sizes add up, nothing is
// kept past an array's length, and the bounds hold.
func checkPositions(t *testing.T, c *encCache) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	p := &c.convs
	total, n := 0, 0
	for st := p.head; st != nil; st = st.next {
		n++
		if p.byName[st.name] != st || (st.next != nil && st.next.prev != st) {
			t.Fatalf("conversation %q: the list and the map disagree", st.name)
		}
		size := cap(st.ents) * entrySize
		for i, e := range st.ents {
			size += kept(e)
			if e.enc == nil {
				continue
			}
			b, err := provider.MarshalWire(must(wireMessageOf(i, e.m, false, "")))
			if err != nil || !bytes.Equal(b, e.enc) {
				t.Fatalf("conversation %q position %d: kept %s, its message encodes as %s (%v)", st.name, i, e.enc, b, err)
			}
		}
		for _, e := range st.ents[len(st.ents):cap(st.ents)] {
			if e.enc != nil || e.m.Content != "" || e.m.ToolCalls != nil {
				t.Fatalf("conversation %q keeps an entry past its length", st.name)
			}
		}
		if size != st.size {
			t.Fatalf("conversation %q: size %d, counted %d", st.name, st.size, size)
		}
		total += size
	}
	if n != len(p.byName) || total != p.size {
		t.Fatalf("%d conversations listed of %d, %d bytes of %d", n, len(p.byName), total, p.size)
	}
	if p.size > p.maxBytes || len(p.byName) > p.maxConvs {
		t.Fatalf("%d conversations of %d bytes kept; the bounds are %d and %d", len(p.byName), p.size, p.maxConvs, p.maxBytes)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Whatever callers do between their requests, and however many send at
// once under the same conversation or others, the request sent is the
// fresh encoding's bytes (or the same error), with the positions' bounds
// roomy or tight enough to evict all the time.
func TestPositionsEncodeAsFresh(t *testing.T) {
	for _, tc := range []struct {
		name               string
		maxBytes, maxConvs int
	}{
		{"roomy", convBytes, maxConvs},
		{"few conversations", convBytes, 2},
		{"few bytes", 4 << 10, maxConvs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := newEncCache()
			cache.convs.maxBytes, cache.convs.maxConvs = tc.maxBytes, tc.maxConvs
			convs := []string{"a", "a", "a", "b", "c", "d", ""}
			var wg sync.WaitGroup
			errs := make(chan error, len(convs))
			for g, conv := range convs {
				wg.Go(func() {
					c := &caller{rng: rand.New(rand.NewPCG(uint64(g), 20)), conv: conv,
						msgs: []provider.Message{{Role: provider.RoleSystem, Content: "You are Mirror."}}}
					for i := range 400 {
						c.step()
						req := provider.Request{Model: []string{"gpt-4o", "gpt-5"}[i%2], Messages: c.msgs, Conversation: conv, MaxTokens: i % 3}
						official := i%3 == 0
						want, err := encodeRequest(req, official)
						got, err2 := encodeRequestWith(req, official, cache)
						if fmt.Sprint(err) != fmt.Sprint(err2) || !bytes.Equal(got, want) {
							errs <- fmt.Errorf("caller %d request %d: %v / %v\n got %s\nwant %s", g, i, err2, err, got, want)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			checkPositions(t, cache)
			if cache.posHits == 0 {
				t.Fatal("nothing was found by position")
			}
		})
	}
}

// A request that names its conversation keys (hashes) only the messages
// its last request did not have where they are now: the new ones, all of
// them after a checkpoint; the same texts in other memory are found by
// position too. Without a conversation every message is keyed.
func TestPositionsKeyOnlyWhatIsNew(t *testing.T) {
	for _, tc := range []struct {
		name   string
		conv   string
		copies bool // each request's texts are copies of the last's
	}{
		{"conversation", "chat-1", false},
		{"conversation, texts copied", "chat-1", true},
		{"none", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := newEncCache()
			prev := 0
			for i, req := range conversationRequests(35) {
				req.Conversation = tc.conv
				if tc.copies {
					for j := range req.Messages {
						req.Messages[j].Content = strings.Clone(req.Messages[j].Content)
					}
				}
				keyed := cache.keyed
				got, err := encodeRequestWith(req, false, cache)
				if want, err2 := encodeRequest(req, false); err != nil || err2 != nil || !bytes.Equal(got, want) {
					t.Fatalf("turn %d: %v %v\n got %s\nwant %s", i, err, err2, got, want)
				}
				want := len(req.Messages) - prev // the new messages
				switch {
				case i == 0 || tc.conv == "":
					want = len(req.Messages)
				case i%10 == 0: // a checkpoint: all but the system prompt moved
					want = len(req.Messages) - 1
				}
				if d := cache.keyed - keyed; d != want {
					t.Fatalf("turn %d: %d of %d messages keyed, want %d", i, d, len(req.Messages), want)
				}
				prev = len(req.Messages)
			}
			checkPositions(t, cache)
		})
	}
}

// Positions are kept for the conversations used last, within the bounds:
// the least recently used goes first, one larger than the bound alone is
// not kept, and a conversation that comes back after it went is encoded
// right (keyed whole again).
func TestPositionsBounded(t *testing.T) {
	cache := newEncCache()
	cache.convs.maxBytes, cache.convs.maxConvs = 64<<10, 2
	send := func(conv string, msgs ...string) int {
		t.Helper()
		req := provider.Request{Model: "m", Conversation: conv}
		for _, s := range msgs {
			req.Messages = append(req.Messages, provider.Message{Role: provider.RoleUser, Content: s})
		}
		keyed := cache.keyed
		got, err := encodeRequestWith(req, false, cache)
		if want, _ := encodeRequest(req, false); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %v\n got %.300s\nwant %.300s", conv, err, got, want)
		}
		checkPositions(t, cache)
		return cache.keyed - keyed
	}
	has := func(want ...string) {
		t.Helper()
		var got []string
		for st := cache.convs.head; st != nil; st = st.next {
			got = append(got, st.name)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("conversations kept %v, want %v", got, want)
		}
	}
	send("a", "a1")
	send("b", "b1")
	send("a", "a1", "a2")
	has("a", "b")
	send("c", "c1") // b was used least recently
	has("c", "a")
	if n := send("b", "b1", "b2"); n != 2 {
		t.Fatalf("b came back: %d messages keyed, want 2", n)
	}
	has("b", "c")
	big := strings.Repeat("x", 40<<10)
	send("d", big, big+"y") // over the bound alone: not kept, nor anything else
	has()
	if n := send("d", big, big+"y"); n != 2 {
		t.Fatalf("a conversation over the bound: %d keyed, want 2", n)
	}
	if n := send("b", "b1", "b2"); n != 2 {
		t.Fatalf("b came back: %d messages keyed, want 2", n)
	}
	if n := send("b", "b1", "b2", "b3"); n != 1 {
		t.Fatalf("b went on: %d messages keyed, want 1", n)
	}
	if n := send("b", "b1"); n != 0 {
		t.Fatalf("b cut back: %d messages keyed, want 0", n)
	}
	has("b")
}

// BenchmarkEncodeTurn is one turn's request encoding late in a chat of
// history messages (of the external benchmark's sizes): the history
// already sent, then this turn's question and answer, new texts, and
// every few turns the history cut back to where it was, so that it stays
// about its size. conv=false keys every message by content, as requests
// without a conversation are; conv=true finds the history by position.
func BenchmarkEncodeTurn(b *testing.B) {
	for _, history := range []int{10, 100, 1000} {
		msgs := []provider.Message{{Role: provider.RoleSystem, Content: "You are Mirror."}}
		for i := 1; i < history; i++ {
			if i%2 == 1 {
				msgs = append(msgs, provider.Message{Role: provider.RoleUser, Content: fmt.Sprintf("question %d: hello from a benchmark, how are you today?", i)})
			} else {
				msgs = append(msgs, provider.Message{Role: provider.RoleAssistant, Content: strings.Repeat(fmt.Sprintf("answer %d with words. ", i), 20)})
			}
		}
		turns := max(1, history/10)
		answer := strings.Repeat("Mirror answers this benchmark with a steady stream of ordinary words. ", 6)
		for _, conv := range []bool{false, true} {
			b.Run(fmt.Sprintf("history=%d/conv=%v", history, conv), func(b *testing.B) {
				cache := newEncCache()
				req := provider.Request{Model: "gpt-4o"}
				if conv {
					req.Conversation = "chat"
				}
				hist := append(make([]provider.Message, 0, history+2*turns), msgs...)
				if _, err := encodeRequestWith(provider.Request{Model: "gpt-4o", Messages: hist, Conversation: req.Conversation}, false, cache); err != nil {
					b.Fatal(err)
				}
				body := new(bytes.Buffer)
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if i%turns == 0 {
						hist = hist[:history]
					}
					n := strconv.Itoa(i)
					hist = append(hist,
						provider.Message{Role: provider.RoleUser, Content: "hello from a benchmark, how are you today? " + n},
						provider.Message{Role: provider.RoleAssistant, Content: n + answer})
					req.Messages = hist
					body.Reset()
					if _, err := encodeRequestInto(body, req, false, cache); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestForgetLetsGo: Forget leaves nothing of past requests (no encoding,
// no conversation), and the next request encodes as a fresh one would,
// its whole history keyed again.
func TestForgetLetsGo(t *testing.T) {
	c := New(Config{Name: "fake", BaseURL: "http://127.0.0.1:1"})
	reqs := conversationRequests(6)
	for _, req := range reqs[:5] {
		req.Conversation = "chat-1"
		if _, err := encodeRequestWith(req, false, c.enc); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.enc.cur) == 0 || len(c.enc.convs.byName) == 0 {
		t.Fatal("nothing kept before Forget")
	}
	c.Forget()
	if len(c.enc.cur)+len(c.enc.old) != 0 || c.enc.size != 0 || len(c.enc.convs.byName) != 0 || c.enc.convs.size != 0 ||
		c.enc.convs.head != nil || c.enc.convs.tail != nil {
		t.Fatalf("kept after Forget: %d encodings (%d bytes), %d conversations (%d bytes)",
			len(c.enc.cur)+len(c.enc.old), c.enc.size, len(c.enc.convs.byName), c.enc.convs.size)
	}
	req := reqs[5]
	req.Conversation = "chat-1"
	keyed := c.enc.keyed
	got, err := encodeRequestWith(req, false, c.enc)
	if want, err2 := encodeRequest(req, false); err != nil || err2 != nil || !bytes.Equal(got, want) {
		t.Fatalf("after Forget: %v %v\n got %s\nwant %s", err, err2, got, want)
	}
	if d := c.enc.keyed - keyed; d != len(req.Messages) {
		t.Fatalf("after Forget %d of %d messages keyed; want all", d, len(req.Messages))
	}
	checkPositions(t, c.enc)
}
