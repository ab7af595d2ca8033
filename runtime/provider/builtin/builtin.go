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
// Attachments of the last user message are described after the quote, one
// line each (see DescribeParts), so the whole attachment path can be
// followed offline.
//
// # Calling tools
//
// The model calls a tool only when told to, so the whole tool path (schema
// check, policy, approval, run, result) can be driven offline and in tests.
// When the last message is from the user and reads
//
//	/tool NAME {json}
//
// (the JSON arguments are optional and default to {}), the answer is exactly
// one call of NAME with those arguments, passed on as written, even when they
// are not valid JSON, so a bad call can be tested too. The call's id is
// "call_" followed by the number of messages in the request, its finish
// reason "tool_calls", and it carries no text. NAME must be one of the tools
// the request offers; otherwise the answer is a short text saying the tool is
// not available and which ones are. For example:
//
//	/tool read_file {"path": "notes/todo.md"}
//	/tool list_dir
//
// When the last message is a tool result, the answer is a short text quoting
// each trailing result ("The tool read_file returned: «…».", whitespace
// collapsed, truncated past 120 characters), so a turn ends after one call.
//
// The answer streams in pieces of a few words with a fixed delay between
// pieces. Usage is counted locally: input is the messages' tokens plus
// tokens.Overhead, output the answer's tokens (a call's name and arguments),
// cached 0.
package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mirror-gateway/mirror/runtime/ids"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tokens"
)

// Model is the built-in model. It is safe for concurrent use; what it
// keeps between requests (the last tool list's count) never changes an
// answer.
type Model struct {
	delay time.Duration
	// tools is the last tool list counted, and its count: a chat offers
	// the same list every turn, and counting its schemas again (each a
	// copy into a string first) was half the model's own work per turn.
	tools atomic.Pointer[toolCount]
}

// toolCount is a tool list and its tokens (toolTokens). The list is a
// copy, its schemas cloned, so a caller that changes its own list in
// place is counted afresh.
type toolCount struct {
	defs []provider.Tool
	n    int
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
	in := inputTokens(req.Messages) + tokens.Overhead(len(req.Messages)) + m.toolTokens(req.Tools)
	if call, ok := ToolCall(req); ok {
		usage := provider.Usage{InputTokens: in, OutputTokens: tokens.Count(call.Name) + tokens.Count(call.Arguments)}
		if err := ctx.Err(); err != nil {
			return provider.Result{Usage: provider.Usage{InputTokens: in}}, err
		}
		return provider.Result{ToolCalls: []provider.ToolCall{call}, Usage: usage, FinishReason: "tool_calls"}, nil
	}
	answer := Answer(req)
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

// Answer is the complete text Stream streams for req; "" when the answer is
// a tool call (see ToolCall).
func Answer(req provider.Request) string {
	if text, ok := toolText(req); ok {
		return text
	}
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
	if parts := lastUserParts(req.Messages); len(parts) > 0 {
		b.WriteString(DescribeParts(parts))
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

// toolCommand is the prefix of a message asking for a tool call.
const toolCommand = "/tool"

// parseTool reads "/tool NAME {json}" from the last message when it is the
// user's. ok is false when it is not a /tool message; name is "" for a bare
// "/tool".
func parseTool(msgs []provider.Message) (name, args string, ok bool) {
	for len(msgs) > 0 && msgs[len(msgs)-1].Role == provider.RoleSystem {
		msgs = msgs[:len(msgs)-1] // the runtime context a turn carries last
	}
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != provider.RoleUser {
		return "", "", false
	}
	s := strings.TrimSpace(msgs[len(msgs)-1].Content)
	rest, found := strings.CutPrefix(s, toolCommand)
	if !found || (rest != "" && !unicode.IsSpace(rune(rest[0]))) {
		return "", "", false // "/toolbox" is not the command
	}
	rest = strings.TrimSpace(rest)
	name, args = rest, ""
	if i := strings.IndexFunc(rest, func(r rune) bool { return unicode.IsSpace(r) || r == '{' }); i >= 0 {
		name, args = rest[:i], strings.TrimSpace(rest[i:])
	}
	if args == "" {
		args = "{}"
	}
	return name, args, true
}

// ToolCall is the one tool call the model answers req with, when the last
// message is "/tool NAME {json}" and req offers NAME.
func ToolCall(req provider.Request) (provider.ToolCall, bool) {
	if req.ToolChoice != "" && offered(req.Tools, req.ToolChoice) {
		return provider.ToolCall{ID: ids.Call(strconv.Itoa(len(req.Messages))), Name: req.ToolChoice, Arguments: forcedArgs(req)}, true
	}
	name, args, ok := parseTool(req.Messages)
	if !ok || !offered(req.Tools, name) {
		return provider.ToolCall{}, false
	}
	return provider.ToolCall{ID: ids.Call(strconv.Itoa(len(req.Messages))), Name: name, Arguments: args}, true
}

func offered(tools []provider.Tool, name string) bool {
	for _, t := range tools {
		if t.Name == name && name != "" {
			return true
		}
	}
	return false
}

// toolText is the text answer of a /tool message that cannot be a call, or
// of a request ending in tool results; ok is false for other requests.
func toolText(req provider.Request) (string, bool) {
	if name, _, ok := parseTool(req.Messages); ok {
		if offered(req.Tools, name) {
			return "", true // answered with a call, no text
		}
		var names []string
		for _, t := range req.Tools {
			names = append(names, t.Name)
		}
		var b strings.Builder
		switch {
		case name == "":
			b.WriteString("Say /tool NAME {json} to make me call a tool, such as /tool list_dir {}.")
		default:
			fmt.Fprintf(&b, "The tool «%s» is not available here.", truncate(name, 60))
		}
		if len(names) == 0 {
			b.WriteString(" No tools are offered in this chat.")
		} else {
			fmt.Fprintf(&b, " Tools I can call: %s.", strings.Join(names, ", "))
		}
		return b.String(), true
	}
	msgs := req.Messages
	first := len(msgs)
	for first > 0 && msgs[first-1].Role == provider.RoleTool {
		first--
	}
	if first == len(msgs) {
		return "", false
	}
	var lines []string
	for _, m := range msgs[first:] {
		quote := truncate(strings.Join(strings.Fields(m.Content), " "), 120)
		if name := callName(msgs[:first], m.ToolCallID); name != "" {
			lines = append(lines, fmt.Sprintf("The tool %s returned: «%s».", name, quote))
		} else {
			lines = append(lines, fmt.Sprintf("A tool returned: «%s».", quote))
		}
	}
	return strings.Join(lines, "\n"), true
}

// callName finds the name of the tool call id among the assistant's calls.
func callName(msgs []provider.Message, id string) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		for _, tc := range msgs[i].ToolCalls {
			if tc.ID == id && id != "" {
				return tc.Name
			}
		}
	}
	return ""
}

// lastUser returns the content of the last user message.
func lastUser(msgs []provider.Message) (string, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == provider.RoleUser {
			return msgs[i].Content, true
		}
	}
	return "", false
}

// lastUserParts returns the attachments of the last user message.
func lastUserParts(msgs []provider.Message) []provider.Part {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == provider.RoleUser {
			return msgs[i].Parts
		}
	}
	return nil
}

// inputTokens sums the messages' stored counts, counting content where no
// count is stored, plus any tool calls and attachments they carry (the
// attachments at seed 000's allowance: the built-in model has no image
// rule of its own).
func inputTokens(msgs []provider.Message) int {
	n := 0
	for _, m := range msgs {
		if m.Tokens > 0 {
			n += m.Tokens
		} else {
			n += tokens.Count(m.Content) + provider.PartsTokens("builtin", m.Parts)
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

// forcedArgs are the arguments of a call the request forces. The built-in
// model cannot reason, so it states what it can see: for handoff_update, the
// conversation's first request as the objective and its last as the next
// action, which keeps a boundary on the built-in model meaningful.
func forcedArgs(req provider.Request) string {
	if req.ToolChoice != "handoff_update" {
		return "{}"
	}
	first, last := "", ""
	for _, m := range req.Messages {
		if m.Role == provider.RoleUser && !strings.HasPrefix(m.Content, "<") {
			if first == "" {
				first = m.Content
			}
			last = m.Content
		}
	}
	b, _ := json.Marshal(map[string]any{
		"objective":   truncate(strings.Join(strings.Fields(first), " "), 200),
		"next_action": truncate(strings.Join(strings.Fields(last), " "), 200),
	})
	return string(b)
}

// toolTokens is what the tool definitions cost, billed with the input as a
// real provider bills them, so that what the gateway learns from the bill
// (its calibration) holds on the built-in model too.
func toolTokens(defs []provider.Tool) int {
	n := 0
	for _, d := range defs {
		n += tokens.Count(d.Name) + tokens.Count(d.Description) + tokens.Count(string(d.Parameters)) + tokens.MessageOverhead
	}
	return n
}

// toolTokens is toolTokens(defs), from the last list's count when defs
// is that list again (names, descriptions and schemas equal).
func (m *Model) toolTokens(defs []provider.Tool) int {
	if len(defs) == 0 {
		return 0
	}
	if c := m.tools.Load(); c != nil && provider.SameTools(c.defs, defs) {
		return c.n
	}
	n := toolTokens(defs)
	m.tools.Store(&toolCount{defs: provider.CloneTools(defs), n: n})
	return n
}
