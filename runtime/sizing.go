package runtime

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/boundary"
	"github.com/mirror-gateway/mirror/runtime/budget"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tokens"
	"github.com/mirror-gateway/mirror/runtime/tools"
	"github.com/mirror-gateway/mirror/runtime/view"
)

// ContextInfo is how full a chat's conversation is, as a turn starts: the
// numbers of the Context line the assistant reads, and of the request
// budget the browser's usage ring draws.
type ContextInfo struct {
	Used        int  `json:"used"`   // the conversation's tokens, without the fixed prompt and tools
	Window      int  `json:"window"` // the model's context window
	Soft        int  `json:"soft"`
	Hard        int  `json:"hard"`
	SoftReached bool `json:"soft_reached"`
	HardReached bool `json:"hard_reached"`
	// Request is the whole request's size against Ceiling; NextCheckpoint
	// is the size at which the view is re-planned.
	Request        int    `json:"request,omitempty"`
	Ceiling        int    `json:"ceiling,omitempty"`
	NextCheckpoint int    `json:"next_checkpoint,omitempty"`
	Model          string `json:"model,omitempty"`
	// Line is the Context line exactly as the assistant read it.
	Line string `json:"line,omitempty"`
}

// offered is the tools a turn offers: none without a chat to journal
// them, else the workspace tools (the MCP servers' among them) and the
// conversation's own (answered by the turn and its chat: they read and
// write the chat's record).
func (e *Engine) offered(withHost bool) []provider.Tool {
	defs, _ := e.offer(withHost, nil)
	return defs
}

// offeredIn is what in's turn offers: its chat may leave MCP servers out,
// and its owner's role may deny tools (in.Withhold).
func (e *Engine) offeredIn(in *TurnInput) []provider.Tool {
	defs, _ := e.offerIn(in)
	return defs
}

// offerIn is offer for in's turn: with its chat's MCP servers, without
// the tools its owner's role denies.
func (e *Engine) offerIn(in *TurnInput) ([]provider.Tool, []string) {
	return e.offerFor(in.Host != nil, in.Servers, in.Withhold)
}

// Warm does ahead what every chat's first turn would otherwise do first:
// it makes the offered tool list and counts its definitions (about half a
// millisecond of the first turn after start). The gateway calls it in the
// background once it listens; a turn meanwhile waits on the same locks and
// finds the work done or does it itself.
func (e *Engine) Warm() {
	defs, _ := e.offer(true, nil)
	e.defsCount(defs)
}

// forgetter is a provider that keeps something of past requests it can let
// go of (the OpenAI adapter's encodings).
type forgetter interface{ Forget() }

// Forget tells each model's provider to let go of what it keeps of past
// requests. The gateway calls it once it has gone quiet, when it sheds its
// idle chats, so their memory goes back too.
func (e *Engine) Forget() {
	for _, m := range e.models {
		if f, ok := m.Provider.(forgetter); ok {
			f.Forget()
		}
	}
}

// offer is offered with the MCP tools limited to servers (nil: all), and
// the names of what it offers. The lists are made again only when the
// registry's Generation says a server's tools changed, so the request
// bytes (and the slices, which defsCount knows by identity) stay the same
// until then.
func (e *Engine) offer(withHost bool, servers []string) ([]provider.Tool, []string) {
	return e.offerFor(withHost, servers, nil)
}

// offerFor is offer without the tools pols deny (by name or pattern, as
// rolePolicy reads them). Each distinct set is made once per Generation,
// so a chat's list is the same slice, and the same bytes, turn after turn.
func (e *Engine) offerFor(withHost bool, servers []string, pols map[string]string) ([]provider.Tool, []string) {
	if !withHost {
		return nil, nil
	}
	e.offerMu.Lock()
	defer e.offerMu.Unlock()
	var gen uint64
	if e.tools != nil {
		gen = e.tools.Generation()
	}
	if !e.offerSet || gen != e.offerGen {
		e.offerSet, e.offerGen = true, gen
		e.offeredDefs, e.roster, e.offerSome = nil, nil, nil
		if e.tools != nil {
			e.offeredDefs = e.tools.Definitions()
		}
		e.offeredDefs = append(e.offeredDefs, boundary.Tools()...)
		e.offeredDefs = append(e.offeredDefs, boundary.ToolOutputTool, boundary.GlobalSearchTool)
		if e.dataDir != "" { // memory is kept: the chat's person's notes can be searched
			e.offeredDefs = append(e.offeredDefs, boundary.RecallMemoryTool)
		}
		for _, t := range e.offeredDefs {
			e.roster = append(e.roster, t.Name)
		}
	}
	denies := denyKey(pols)
	if servers == nil && denies == "" {
		return e.offeredDefs, e.roster
	}
	key := strings.Join(servers, "\x00")
	if servers == nil {
		key = "\x01all" // not a list of server names
	}
	key += "\x02" + denies
	if o, ok := e.offerSome[key]; ok {
		return o.defs, o.roster
	}
	var o offering
	for _, t := range e.offeredDefs {
		if srv, _, ok := strings.Cut(t.Name, config.MCPSeparator); ok && servers != nil && !slices.Contains(servers, srv) {
			continue
		}
		if p, ok := rolePolicy(pols, t.Name); ok && p == tools.Deny && !builtinTool(t.Name) {
			continue
		}
		o.defs = append(o.defs, t)
		o.roster = append(o.roster, t.Name)
	}
	if e.offerSome == nil || len(e.offerSome) >= 64 {
		e.offerSome = map[string]offering{}
	}
	e.offerSome[key] = o
	return o.defs, o.roster
}

// denyKey keys the offering pols decide: "" when they deny nothing, else
// every policy sorted (an allow by name can undo a denying pattern, so the
// denials alone would not tell two sets apart).
func denyKey(pols map[string]string) string {
	var out []string
	deny := false
	for k, v := range pols {
		deny = deny || tools.Policy(v) == tools.Deny
		out = append(out, k+"="+v)
	}
	if !deny {
		return ""
	}
	sort.Strings(out)
	return strings.Join(out, "\x00")
}

// builtinTool reports whether name is one of the runtime's own tools
// (handoff, recall, memory): they read and write only the chat's own
// record and the person's own notes, and no role policy withholds them.
func builtinTool(name string) bool {
	for _, t := range boundary.Tools() {
		if t.Name == name {
			return true
		}
	}
	return name == boundary.ToolToolOutput || name == boundary.ToolGlobalSearch || name == boundary.ToolRecallMemory
}

// offering is the tools of chats that offer only some MCP servers, or
// whose owner's role denies some.
type offering struct {
	defs   []provider.Tool
	roster []string
}

// ToolsInfo is how much of a model's window the tool definitions take: a
// fixed part of every request, which the conversation's limits leave out
// but the request ceiling includes.
type ToolsInfo struct {
	Tools  int `json:"tools"`     // definitions offered
	MCP    int `json:"mcp_tools"` // of them, from MCP servers
	Tokens int `json:"tokens"`    // their JSON as the wire carries it
	Window int `json:"window"`
}

// Line says it in a sentence, for /status.
func (i ToolsInfo) Line() string {
	share := 0.0
	if i.Window > 0 {
		share = 100 * float64(i.Tokens) / float64(i.Window)
	}
	return fmt.Sprintf("Tools: %d definitions (%d from MCP servers) take %d tokens, %.1f%% of the %d-token window, in every request.", i.Tools, i.MCP, i.Tokens, share, i.Window)
}

// Tools is ToolsInfo for a chat on chain that offers servers (nil: all).
func (e *Engine) Tools(chain string, servers []string) ToolsInfo {
	defs, _ := e.offer(true, servers)
	n, _ := e.defsCount(defs)
	info := ToolsInfo{Tools: len(defs), MCP: mcpCount(defs), Tokens: n}
	if m := e.chains[chain]; len(m) > 0 {
		info.Window = m[0].Window
	}
	return info
}

// sizer measures a conversation against the first model of its chain: the
// model that answers when nothing fails, and whose window the limits are
// shares of.
type sizer struct {
	e      *Engine
	m      *Model
	count  func(string) int // the model family's encoding
	limits boundary.Limits
	budget budget.Budget
	defs   int // the tool definitions
	fixed  int // the system prompt and tool definitions
	// basis is what the turn's requests carry besides the rows: a
	// measurement speaks for the view only when it was taken with the same.
	basis view.Basis
}

func (e *Engine) sizer(m *Model, defs []provider.Tool) sizer {
	n, print := e.defsCount(defs)
	s := sizer{e: e, m: m, defs: n, count: countFor(m.Remote),
		basis: view.Basis{Model: m.Name, Prompt: promptPrint, Tools: print}}
	s.fixed = s.count(SystemPrompt) + s.defs
	s.budget, _ = budget.New(m.Window, e.contextLimit(m), 0) // validated at load or when chosen
	maxAnswer := e.outputCap(m)                              // what each request asks for
	// The effective hard is never above the checkpoint mark, both counted
	// in tokens of the conversation: when hard's share of a large window
	// is past the mark, the boundary does not wait for a conversation the
	// view would have to re-plan anyway. The fixed part is not taken off
	// the mark: the checkpoint is what acts on a request whose fixed part
	// is large (a long tool roster), since a boundary cannot shrink it;
	// taking it off put hard exactly where the whole request reaches the
	// mark, so the boundary, read as the turn starts with the new message
	// counted, always came first and cleared a short conversation.
	soft, hard := e.ratios(m)
	s.limits = boundary.NewLimits(m.Window, soft, hard, maxAnswer, s.budget.Mark)
	return s
}

// counters are the count funcs of the encodings, one func value each,
// made once: a view memo keeps what it built only for the same counter
// (view.Input.Count), which a method value made per turn never was.
var counters sync.Map // *tokens.Counter → func(string) int

// countFor is the count func of the encoding remote (a provider's model
// name) is counted with, the same func value every time.
func countFor(remote string) func(string) int {
	c := tokens.For(remote)
	if f, ok := counters.Load(c); ok {
		return f.(func(string) int)
	}
	f, _ := counters.LoadOrStore(c, c.Count)
	return f.(func(string) int)
}

// readRows assesses a conversation's stored rows as its next request
// carries them: after the latest /clear, and with the rows the checkpoint
// in force evicted counted as its cards (masking and folding are not
// subtracted: the count stays on the safe side).
func (s sizer) readRows(rows []view.Row, cp *view.Checkpoint) boundary.Reading {
	for i := len(rows) - 1; i >= 0; i-- {
		if rows[i].Kind == view.KindClear {
			rows = rows[i+1:]
			break
		}
	}
	n, kept := 0, 0
	if cp != nil {
		n += cp.HeadTokens
	}
	for i := range rows {
		if cp != nil && rows[i].Seq <= cp.Evicted && !rows[i].Pinned {
			continue
		}
		n += s.rowTokens(&rows[i])
		kept++
	}
	n += tokens.Overhead(kept)
	return s.limits.Assess(s.correct(n), s.fixed)
}

// correct is a local count as m's provider is expected to bill it: the
// calibration learned from its bills, margin included.
func (s sizer) correct(n int) int {
	if s.e.cal == nil {
		return n
	}
	return s.e.cal.Correct(s.m.Name, n)
}

// room is the ceiling as a local count of the request's messages (the
// tool definitions taken off): what the safety net trims to, so that the
// request it leaves, corrected, fits the ceiling.
func (s sizer) room() int {
	c := s.budget.Ceiling
	if s.e.cal != nil {
		c = s.e.cal.Allow(s.m.Name, c)
	}
	return c - s.defs
}

// rowTokens is a row's tokens as the first model's request carries it:
// its stored count (or a count of its text), plus its attachments sized by
// that model's provider rule, which the stored count never includes (the
// same row costs differently per provider), as the view sizes them.
//
// The usual row (a stored count, no attachments) is answered first: the
// opening reading sums every row of the conversation each turn, and a call
// copying the sizer per row was most of it.
func (s *sizer) rowTokens(r *view.Row) int {
	if r.Tokens > 0 && len(r.Parts) == 0 {
		return r.Tokens
	}
	return s.textTokens(r) + provider.PartsTokens(s.m.ProvKind, r.Parts)
}

func (s *sizer) textTokens(r *view.Row) int {
	if r.Tokens > 0 {
		return r.Tokens
	}
	n := s.count(r.Text)
	for _, c := range r.ToolCalls {
		n += s.count(c.Name) + s.count(c.Arguments)
	}
	for _, sec := range r.Sections {
		n += s.count(sec.Text)
	}
	return n
}

// read assesses msgs (without the system prompt) with the calibrated
// estimate.
func (s sizer) read(msgs []provider.Message) boundary.Reading {
	n := tokens.Overhead(len(msgs))
	for i := range msgs {
		if t := msgs[i].Tokens; t > 0 { // the usual message: its stored count
			n += t
			continue
		}
		n += s.messageTokens(&msgs[i])
	}
	return s.limits.Assess(s.correct(n), s.fixed)
}

func (s *sizer) messageTokens(m *provider.Message) int {
	if m.Tokens > 0 {
		return m.Tokens
	}
	n := s.count(m.Content)
	for _, c := range m.ToolCalls {
		n += s.count(c.Name) + s.count(c.Arguments)
	}
	return n
}

func info(r boundary.Reading, model string) ContextInfo {
	return ContextInfo{Used: r.Used, Window: r.Window, Soft: r.Soft, Hard: r.Hard, SoftReached: r.SoftReached,
		HardReached: r.HardReached, Model: model, Line: boundary.ContextLine(r)}
}

// estimate is req's input tokens as counted locally: each message's stored
// count (or a count of its content, tool calls and attachments), the
// formatting overhead, and the tool definitions.
func (e *Engine) estimate(req provider.Request, kind string) int {
	n := tokens.Overhead(len(req.Messages))
	for _, m := range req.Messages {
		if m.Tokens > 0 {
			n += m.Tokens
			continue
		}
		n += tokens.Count(m.Content) + provider.PartsTokens(kind, m.Parts)
		for _, c := range m.ToolCalls {
			n += tokens.Count(c.Name) + tokens.Count(c.Arguments)
		}
	}
	defs, _ := e.defsCount(req.Tools)
	return n + defs
}

// promptPrint is the fingerprint of SystemPrompt, for view.Basis.
var promptPrint = fingerprint(SystemPrompt)

// fingerprint is a short stable digest of text, to tell whether two
// requests carried the same fixed part without keeping it.
func fingerprint(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// defsCount is the tokens of the tool definitions' JSON and their
// fingerprint. A turn offers the same list (the same slice: see offer)
// until a server's list changes, so each offered list is counted once;
// another list (the forced ask's two tools) is counted each time, never
// mistaken for one.
func (e *Engine) defsCount(defs []provider.Tool) (int, string) {
	if len(defs) == 0 {
		return 0, ""
	}
	key := &defs[0]
	e.defsMu.Lock()
	defer e.defsMu.Unlock()
	if c, ok := e.defsCache[key]; ok && len(c.defs) == len(defs) {
		return c.n, c.print
	}
	if !e.isOffered(defs) {
		return countDefs(defs)
	}
	n, print := countDefs(defs)
	if e.defsCache == nil || len(e.defsCache) >= 64 { // lists of old generations go
		e.defsCache = map[*provider.Tool]counted{}
	}
	// The entry holds the slice, so its array cannot be freed and its
	// address reused by another list while the entry stands.
	e.defsCache[key] = counted{defs: defs, n: n, print: print}
	return n, print
}

// counted is an offered tool list, its tokens and its fingerprint.
type counted struct {
	defs  []provider.Tool
	n     int
	print string
}

// isOffered reports whether defs is one of the lists offer made (the very
// slice, not an equal one).
func (e *Engine) isOffered(defs []provider.Tool) bool {
	e.offerMu.Lock()
	defer e.offerMu.Unlock()
	same := func(l []provider.Tool) bool { return len(l) == len(defs) && len(l) > 0 && &l[0] == &defs[0] }
	if same(e.offeredDefs) {
		return true
	}
	for _, o := range e.offerSome {
		if same(o.defs) {
			return true
		}
	}
	return false
}

// countDefs counts defs as the wire carries them: the schema as JSON, not
// as the base64 that marshalling its []byte would give.
func countDefs(defs []provider.Tool) (int, string) {
	n := 0
	parts := make([]string, 0, 3*len(defs))
	for _, d := range defs {
		n += tokens.Count(d.Name) + tokens.Count(d.Description) + tokens.Count(string(d.Parameters)) + tokens.MessageOverhead
		parts = append(parts, d.Name, d.Description, string(d.Parameters))
	}
	return n, fingerprint(parts...)
}
