package runtime

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/mirror-gateway/mirror/runtime/boundary"
	"github.com/mirror-gateway/mirror/runtime/budget"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tokens"
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
// them, else the workspace tools and the conversation's own (answered by
// the turn and its chat: they read and write the chat's record).
func (e *Engine) offered(withHost bool) []provider.Tool {
	if !withHost {
		return nil
	}
	// Tools are set before the first turn, so the list is made once.
	e.offeredOnce.Do(func() {
		if e.tools != nil {
			e.offeredDefs = e.tools.Definitions()
		}
		e.offeredDefs = append(e.offeredDefs, boundary.Tools()...)
		e.offeredDefs = append(e.offeredDefs, boundary.ToolOutputTool, boundary.GlobalSearchTool)
		for _, t := range e.offeredDefs {
			e.roster = append(e.roster, t.Name)
		}
	})
	return e.offeredDefs
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
	s := sizer{e: e, m: m, defs: n, count: tokens.For(m.Remote).Count,
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
func (s sizer) rowTokens(r *view.Row) int {
	return s.textTokens(r) + provider.PartsTokens(s.m.ProvKind, r.Parts)
}

func (s sizer) textTokens(r *view.Row) int {
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
	for _, m := range msgs {
		n += s.messageTokens(m)
	}
	return s.limits.Assess(s.correct(n), s.fixed)
}

func (s sizer) messageTokens(m provider.Message) int {
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
// fingerprint. A turn offers the same definitions every time, so that list
// is counted once per Engine; another list (the forced ask's two tools) is
// counted each time, never mistaken for it.
func (e *Engine) defsCount(defs []provider.Tool) (int, string) {
	if len(defs) == 0 {
		return 0, ""
	}
	if len(defs) != len(e.offeredDefs) || &defs[0] != &e.offeredDefs[0] {
		return countDefs(defs)
	}
	e.defsOnce.Do(func() { e.defsTokens, e.defsPrint = countDefs(defs) })
	return e.defsTokens, e.defsPrint
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
