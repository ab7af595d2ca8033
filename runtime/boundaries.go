package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mirror-gateway/mirror/runtime/boundary"
	"github.com/mirror-gateway/mirror/runtime/budget"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tokens"
	"github.com/mirror-gateway/mirror/runtime/view"
)

// Boundary is what a boundary hands the chat to store: the rows it writes
// and archives in one transaction.
type Boundary struct {
	Reason    string // "hard" (the runtime decided) or "assistant" (consolidate)
	Record    string // the handoff record, rendered with the template
	Handoff   boundary.Handoff
	Continued bool
	// Why says why a continue was refused, or why the record is the
	// runtime's own (the assistant did not answer the ask).
	Why string
	// Opening is the message the cleared conversation opens with: the
	// continuity message, or the record with the word that the work ended.
	Opening string
	Notes   []string // memory notes reflect wrote
	// CarryFrom says which of the person's messages go into the fresh
	// conversation exactly as typed: those that entered the conversation
	// at or after this seq (the ones that crossed hard); 0: none.
	CarryFrom uint64
	// Through is the last seq of the record the conversation reached.
	Through uint64
}

// Boundary reasons.
const (
	ReasonHard      = "hard"
	ReasonAssistant = "assistant"
)

// ErrBoundary wraps a boundary that could not happen; the conversation is
// left exactly as it was and the next turn tries again.
var ErrBoundary = errors.New("the boundary could not happen; the conversation is left as it was and the next turn tries again")

// consolidate runs a boundary: record, reflect, archive and clear (one
// transaction, the chat's), then says whether the work continues and with
// what the fresh conversation opens. conv is the conversation being
// closed, without the system prompt. On error nothing was changed.
func (e *Engine) consolidate(ctx context.Context, in *TurnInput, conv []provider.Message, reason string, want *bool, carryFrom, through uint64) (Boundary, []view.Row, error) {
	b := Boundary{Reason: reason, CarryFrom: carryFrom, Through: through}
	var asked bool
	b.Handoff, asked = in.Host.Handoff()
	h := &b.Handoff
	// 1. The record. At hard with no word from the assistant, ask once,
	// with a request it can only answer with handoff_update.
	answered := h.JudgedSeq != 0
	if !answered && reason == ReasonHard && !asked {
		var decided *bool
		var err error
		answered, decided, err = e.askRecord(ctx, in, conv, h)
		if want == nil {
			want = decided // if it answers, its answer stands
		}
		if err != nil && ctx.Err() != nil {
			return b, nil, err
		}
	}
	// Asked at hard now or before, and no word: the handoff kept along the
	// way decides, and the words say which way it went.
	unanswered := reason == ReasonHard && !answered && want == nil
	if unanswered {
		b.Why = boundary.Unanswered(h)
	}
	tmpl, err := boundary.LoadTemplate(e.configDir)
	if err != nil {
		return b, nil, fmt.Errorf("%w: %v", ErrBoundary, err)
	}
	if b.Record, err = tmpl.Render(h); err != nil {
		return b, nil, fmt.Errorf("%w: %v", ErrBoundary, err)
	}
	// 2. Reflect: what the conversation taught goes to memory. It is
	// independent of the record, so a failed reflect does not hold the
	// boundary up; it is said in the boundary row.
	notes, rerr := e.reflect(ctx, in, conv, through)
	if rerr != nil {
		if ctx.Err() != nil {
			return b, nil, rerr
		}
		b.Why = strings.TrimSpace(b.Why + " Reflect failed, so nothing was written to memory: " + rerr.Error())
	}
	b.Notes = notes
	// 3. Continue or stop: the assistant's answer, but never a continue
	// that nothing is owed for.
	cont := boundary.Owed(h)
	if want != nil {
		cont = *want
	}
	if cont && !boundary.Owed(h) {
		cont = false
		b.Why = strings.TrimSpace(b.Why + " " + boundary.NotOwed)
	}
	b.Continued = cont
	budget := 8000
	if m := e.chains[in.Chain]; len(m) > 0 && m[0].ContinuityBudget > 0 {
		budget = m[0].ContinuityBudget
	}
	if cont {
		b.Opening, _, err = boundary.Continuity(tmpl, h, through, budget, tokens.Count)
	} else if unanswered {
		b.Opening, _, err = boundary.Waiting(tmpl, h, through, budget, tokens.Count)
	} else {
		why := ""
		if want != nil && *want {
			why = boundary.NotOwed
		}
		b.Opening, _, err = boundary.Ended(tmpl, h, through, why, budget, tokens.Count)
	}
	if err != nil {
		return b, nil, fmt.Errorf("%w: %v", ErrBoundary, err)
	}
	// 4. Archive and clear, in one transaction of the chat's. If that
	// fails nothing changes: the notes reflect wrote go too.
	fresh, err := in.Host.Boundary(b)
	if err != nil {
		e.dropNotes(notes)
		return b, nil, fmt.Errorf("%w: %v", ErrBoundary, err)
	}
	return b, fresh, nil
}

// dropNotes removes memory notes of a boundary that did not happen.
func (e *Engine) dropNotes(names []string) {
	for _, n := range names {
		if n == filepath.Base(n) && n != "" {
			_ = os.Remove(filepath.Join(e.dataDir, "memory", n))
		}
	}
}

// askRecord is the one forced request for the record. It reports whether
// the assistant answered with a valid handoff_update, which then stands,
// and its consolidate decision when it gave one.
func (e *Engine) askRecord(ctx context.Context, in *TurnInput, conv []provider.Message, h *boundary.Handoff) (bool, *bool, error) {
	chain := e.chains[in.Chain]
	msgs := append([]provider.Message{{Role: provider.RoleSystem, Content: SystemPrompt}}, conv...)
	msgs = append(msgs, boundary.ForcedAskMessage())
	tools := boundary.ForcedAskTools()
	// conv is the view's: trimmed like any request that nears the
	// ceiling, and refused by answer, before it is sent, if it still
	// does not fit. Then the runtime's own record stands.
	req := provider.Request{Messages: e.trim(chain[0], msgs, tools), Tools: tools, ToolChoice: boundary.ToolHandoffUpdate}
	res, _, _, err := e.answer(ctx, chain, req, in.askerFor(PurposeRecord, true), func(string) error { return nil })
	answered := false
	var decided *bool
	if err == nil {
		for _, c := range res.ToolCalls {
			switch c.Name {
			case boundary.ToolHandoffUpdate:
				next := *h
				if boundary.ApplyUpdate(&next, json.RawMessage(c.Arguments)) == nil {
					*h, answered = next, true
				}
			case boundary.ToolConsolidate:
				if d, perr := boundary.ParseConsolidate(json.RawMessage(c.Arguments)); perr == nil {
					decided = &d.Continue
				}
			}
		}
	}
	seq, serr := in.Host.HandoffUpdated(*h, true, answered)
	if serr != nil {
		return answered, decided, serr
	}
	if answered {
		h.JudgedSeq = seq
	}
	return answered, decided, err
}

// reflect is the separate model turn (role reflect) that writes what the
// conversation taught as notes under data_dir/memory, as the chat's
// owner's (in.Owner): recall_memory offers them only in that person's
// chats.
func (e *Engine) reflect(ctx context.Context, in *TurnInput, conv []provider.Message, through uint64) ([]string, error) {
	chain := e.chains[e.roles.Reflect]
	if len(chain) == 0 {
		chain = e.chains[in.Chain]
	}
	docs := make([]boundary.Doc, 0, len(conv))
	toks := make([]int, 0, len(conv))
	for _, m := range conv {
		if m.Role == provider.RoleUser || m.Role == provider.RoleAssistant {
			docs = append(docs, boundary.Doc{Seq: m.Seq, Role: m.Role, Text: m.Content})
			toks = append(toks, m.Tokens)
		}
	}
	res, _, _, err := e.answer(ctx, chain, provider.Request{Messages: e.reflectPrompt(chain[0], docs, toks)}, in.askerFor(PurposeReflect, false), func(string) error { return nil })
	if err != nil {
		return nil, err
	}
	if e.dataDir == "" {
		return nil, nil
	}
	return boundary.WriteNotes(e.dataDir, in.Chat, in.Owner, through, time.Now(), boundary.ParseNotes(res.Text))
}

// trim is the safety net of a boundary's one-off request: msgs (the system
// prompt first) with the oldest tool results, then the oldest whole turns,
// cut until they fit m's ceiling as m's provider bills it, tools offered.
// The turn's requests get the same from phaseAsk; answer refuses what
// still does not fit.
func (e *Engine) trim(m *Model, msgs []provider.Message, tools []provider.Tool) []provider.Message {
	defs, _ := e.defsCount(tools)
	sz := sizer{e: e, m: m, defs: defs}
	sz.budget, _ = budget.New(m.Window, e.contextLimit(m), 0) // validated at load or when chosen
	out, _ := view.SafetyNet(msgs, 0, sz.room(), tokens.For(m.Remote).Count)
	return out
}

// reflectPrompt is reflect's request for docs, fitted to m's ceiling as
// m's provider bills it: when the whole transcript does not fit, the oldest
// rows are left out (they are archived and searchable), and the prompt
// says how many. toks are the docs' stored counts (0: count the text), so a
// long transcript is not counted again. answer refuses the request if even
// the newest row alone does not fit; the boundary then says reflect failed.
func (e *Engine) reflectPrompt(m *Model, docs []boundary.Doc, toks []int) []provider.Message {
	sz := sizer{e: e, m: m}
	sz.budget, _ = budget.New(m.Window, e.contextLimit(m), 0)
	room := sz.room()
	count := tokens.For(m.Remote).Count
	// Each doc costs its text and its heading ("[event N, role]"); the
	// note that replaces dropped ones costs about as much as one heading.
	const heading = 12
	docTokens := func(i int) int {
		if toks[i] > 0 {
			return toks[i] + heading
		}
		return count(docs[i].Text) + heading
	}
	system := boundary.ReflectPrompt(nil)
	fixed := tokens.Overhead(len(system)) + count(system[0].Content) + count(system[1].Content)
	n := fixed
	for i := range docs {
		n += docTokens(i)
	}
	drop := 0
	for drop < len(docs)-1 && n > room-heading {
		n -= docTokens(drop)
		drop++
	}
	if drop > 0 {
		note := boundary.Doc{Role: "note", Text: fmt.Sprintf("The %d oldest rows of the conversation are left out here to fit the request budget; they are archived.", drop)}
		docs = append([]boundary.Doc{note}, docs[drop:]...)
		n += heading + 30
	}
	msgs := boundary.ReflectPrompt(docs)
	msgs[0].Tokens = count(msgs[0].Content)
	msgs[1].Tokens = n - fixed + count(system[1].Content) // the transcript, counted from the rows: answer's estimate reads it
	return msgs
}
