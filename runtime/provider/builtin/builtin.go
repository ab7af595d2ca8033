// Package builtin is Mirror's offline built-in model: a deterministic
// provider.Provider that needs no network and no key, so a fresh install can
// be demonstrated (and tested and benchmarked) end to end.
//
// It answers by reflecting the request: it quotes the last user message
// (whitespace collapsed, truncated past 120 characters) with its word and
// character counts, says how many messages and tokens the conversation holds
// (Message.Tokens where set, else counted with tiktoken o200k_base), and ends
// with a hint to point runtime.yaml at a real OpenAI-compatible endpoint.
//
// Keywords in the last user message (whole words, any case) add demo sections,
// in this order:
//
//   - "markdown": a small Markdown sample with a heading, a list and a fenced
//     code block, to check rendering in each transport;
//   - "long": several paragraphs, to exercise long streams, scrolling and stop.
//
// The answer streams in pieces of a few words with a fixed delay between
// pieces. Usage is counted locally: input is the messages' tokens plus
// tokens.Overhead, output the answer's tokens, cached 0. The model never
// calls tools, even when some are offered.
package builtin

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tokens"
)

// Model is the built-in model. It is stateless and safe for concurrent use.
type Model struct {
	delay time.Duration
}

// New returns the built-in model pausing delay between streamed pieces;
// 0 streams without pausing (and without timers), for tests and benchmarks.
func New(delay time.Duration) *Model { return &Model{delay: max(delay, 0)} }

// wordsPerPiece is how many words one streamed piece carries: small enough
// that the stream visibly flows, large enough not to flood the transports.
const wordsPerPiece = 3

// Stream streams the deterministic answer to req. On cancellation it returns
// ctx.Err() with the text streamed so far; if emit fails, it returns that
// error with the text emit had accepted before.
func (m *Model) Stream(ctx context.Context, req provider.Request, emit func(provider.Delta) error) (provider.Result, error) {
	answer := Answer(req)
	in := inputTokens(req.Messages) + tokens.Overhead(len(req.Messages))
	var (
		sent  strings.Builder
		timer *time.Timer
	)
	result := func() provider.Result {
		return provider.Result{Text: sent.String(), Usage: provider.Usage{InputTokens: in, OutputTokens: tokens.Count(sent.String())}}
	}
	for i, p := range pieces(answer, wordsPerPiece) {
		if err := ctx.Err(); err != nil {
			return result(), err
		}
		if i > 0 && m.delay > 0 {
			if timer == nil {
				timer = time.NewTimer(m.delay)
				defer timer.Stop()
			} else {
				timer.Reset(m.delay)
			}
			select {
			case <-timer.C:
			case <-ctx.Done():
				return result(), ctx.Err()
			}
		}
		if err := emit(provider.Delta{Text: p}); err != nil {
			return result(), err
		}
		sent.WriteString(p)
	}
	res := result()
	res.FinishReason = "stop"
	return res, nil
}

// Answer is the complete text Stream streams for req.
func Answer(req provider.Request) string {
	var b strings.Builder
	b.WriteString("Hello! I'm Mirror's built-in model. I run offline and simply reflect what I receive.\n\n")

	last, found := lastUser(req.Messages)
	if found {
		quote := strings.Join(strings.Fields(last), " ")
		fmt.Fprintf(&b, "You said: «%s» (%s, %s).\n\n", truncate(quote, 120),
			plural(len(strings.Fields(last)), "word"), plural(utf8.RuneCountInString(last), "character"))
	} else {
		b.WriteString("I did not find a message from you in this request.\n\n")
	}

	fmt.Fprintf(&b, "This conversation has %s%s and about %s.\n\n",
		plural(len(req.Messages), "message"), roles(req.Messages), plural(inputTokens(req.Messages), "token"))

	kw := keywords(last)
	if kw["markdown"] {
		b.WriteString(markdownSample)
	}
	if kw["long"] {
		b.WriteString(longSample)
	}
	b.WriteString("Tip: point runtime.yaml at an OpenAI-compatible endpoint (OpenAI, Ollama, llama.cpp, vLLM) to make me a real assistant.")
	if !kw["markdown"] && !kw["long"] {
		b.WriteString(" Say \"markdown\" or \"long\" for a demo answer.")
	}
	return b.String()
}

const markdownSample = "Here is a small **Markdown** sample:\n\n" +
	"### A list\n\n" +
	"- one *emphasised* item\n" +
	"- a `code span`\n" +
	"- a [link](https://example.com)\n\n" +
	"### A code block\n\n" +
	"```go\n" +
	"func greet(name string) string {\n" +
	"\treturn \"Hello, \" + name + \"!\"\n" +
	"}\n" +
	"```\n\n"

const longSample = "Here is a longer answer, so you can watch a reply stream, scroll and stop it.\n\n" +
	"Mirror keeps every chat's record on disk, one row at a time, and never rewrites a row. " +
	"When you send a message it is stored before it is acknowledged, so a crash at any instant loses nothing you were told was received. " +
	"Messages you send while I am still answering wait in a queue, and you can edit or delete them until I pick them up.\n\n" +
	"Long conversations are kept inside the model's budget without losing the thread. " +
	"Old tool output is masked first, long answers are folded next, and only then are the oldest whole turns replaced by short epoch cards. " +
	"The request the model sees stays byte for byte the same from turn to turn until the next checkpoint, which keeps the provider's prompt cache warm.\n\n" +
	"Tokens are counted locally with tiktoken, once per message, and corrected with what the provider actually billed. " +
	"A request that cannot fit is refused before it is sent, with its size, the limit and what to do about it.\n\n" +
	"When a provider keeps failing, a breaker opens and the next model of the chain answers instead; the Monitor shows the operator what failed, when, and why.\n\n"

// lastUser returns the content of the last user message.
func lastUser(msgs []provider.Message) (string, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == provider.RoleUser {
			return msgs[i].Content, true
		}
	}
	return "", false
}

// inputTokens sums the messages' stored counts, counting content where no
// count is stored, plus any tool calls they carry.
func inputTokens(msgs []provider.Message) int {
	n := 0
	for _, m := range msgs {
		if m.Tokens > 0 {
			n += m.Tokens
		} else {
			n += tokens.Count(m.Content)
		}
		for _, tc := range m.ToolCalls {
			n += tokens.Count(tc.Name) + tokens.Count(tc.Arguments)
		}
	}
	return n
}

// roles describes the messages by role, in a fixed order, as a
// parenthesised suffix ("" when there are none).
func roles(msgs []provider.Message) string {
	var sys, user, asst, tool int
	for _, m := range msgs {
		switch m.Role {
		case provider.RoleSystem:
			sys++
		case provider.RoleUser:
			user++
		case provider.RoleAssistant:
			asst++
		case provider.RoleTool:
			tool++
		}
	}
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{{sys, "system"}, {user, "from you"}, {asst, "from me"}, {tool, "tool result"}} {
		switch {
		case p.n == 0:
		case p.what == "tool result":
			parts = append(parts, plural(p.n, p.what))
		default:
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// keywords returns the lower-cased whole words of s.
func keywords(s string) map[string]bool {
	words := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	set := make(map[string]bool, len(words))
	for _, w := range words {
		set[w] = true
	}
	return set
}

// truncate shortens s to at most limit runes, preferring a word boundary,
// and marks the cut with an ellipsis.
func truncate(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	r := []rune(s)[:limit-1]
	cut := string(r)
	if i := strings.LastIndexByte(cut, ' '); i > len(cut)/2 {
		cut = cut[:i]
	}
	return cut + "…"
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// pieces splits s into streamed pieces of up to words words each, every piece
// keeping its trailing whitespace, and ending early after a line break so
// lines arrive whole. The pieces concatenate back to s exactly.
func pieces(s string, words int) []string {
	var out []string
	start, n := 0, 0
	i := 0
	for i < len(s) {
		// one word: non-space runes, then the spaces after it
		for i < len(s) && !isSpace(s[i]) {
			i++
		}
		newline := false
		for i < len(s) && isSpace(s[i]) {
			newline = newline || s[i] == '\n'
			i++
		}
		n++
		if n == words || newline || i == len(s) {
			out = append(out, s[start:i])
			start, n = i, 0
		}
	}
	return out
}

// isSpace reports ASCII whitespace; multi-byte runes are never split because
// their bytes are all >= 0x80.
func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }
