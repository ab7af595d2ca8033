package runtime

import (
	"context"
	"errors"
	"strconv"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/boundary"
	"github.com/mirror-gateway/mirror/runtime/hooks"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tokens"
	"github.com/mirror-gateway/mirror/runtime/view"
)

// ContextKey is the runtime-context section carrying the Context line.
const ContextKey = "context"

// sessionStartKey carries what SessionStart hooks said after a checkpoint.
const sessionStartKey = "session-start"

// systemLead is what every chat request opens with, ahead of the view: the
// view builds its request behind it (view.Input.Lead). Never changed.
var systemLead = []provider.Message{{Role: provider.RoleSystem, Content: SystemPrompt}}

func (e *Engine) viewInput(in *TurnInput, sz sizer, rows []view.Row, ci ContextInfo, extra string) view.Input {
	sections := []view.Section{{Key: ContextKey, Text: ci.Line}}
	sections = append(sections, tasksSection(rows)...)
	if extra != "" {
		sections = append(sections, view.Section{Key: sessionStartKey, Text: extra})
	}
	_, roster := e.offerIn(in)
	vin := view.Input{Rows: rows, Checkpoint: in.Checkpoint, Budget: sz.budget, Overhead: sz.fixed, Measured: in.Measured,
		Basis: sz.basis, Signals: in.Signals, Context: sections, Roster: roster, Count: sz.count, Provider: sz.m.ProvKind, Memo: in.ViewMemo,
		Lead: systemLead}
	// A chat with a memo hands its rows append-only (TurnInput.ViewMemo):
	// the memo then reads only the rows it has not read. Not when the
	// runtime's own rows are built (a transcript put in a copy, a settled
	// call or a stored context appended): they may sit where the
	// caller's next rows will.
	vin.AppendOnly = in.ViewMemo != nil && len(rows) > 0 && len(rows) <= len(in.Rows) && &rows[0] == &in.Rows[0]
	if e.cal != nil {
		vin.Correct = e.cal
	}
	return vin
}

// materialize builds the turn's view on the turn's goroutine: SessionStart
// hooks after a checkpoint, PreCompact before a planned checkpoint is
// stored (a block skips it), PostCompact after; then it stores the
// checkpoint and the runtime context before anything is sent. withContext
// is false on a rerun, whose context is stored already.
func (e *Engine) materialize(ctx context.Context, rec Record, in *TurnInput, m *Model, sz sizer, rows []view.Row, ci ContextInfo, withContext bool) (view.View, error) {
	session := hooks.Session{SessionID: in.Chat}
	extra := ""
	if withContext && in.SessionStart && e.hooks.Configured(config.HookSessionStart) {
		text, err := e.hooks.SessionStart(ctx, hooks.SessionStartInput{Session: session, Source: hooks.SourceCompact})
		if err != nil {
			e.logHook("SessionStart", err)
			hookDiagnostic(rec, "SessionStart", OutcomeError, DiagError(err))
		}
		extra = text
	}
	vin := e.viewInput(in, sz, rows, ci, extra)
	if !withContext {
		vin.Context = nil
	}
	v, err := view.Materialize(vin)
	if err != nil {
		return v, err
	}
	trigger := hooks.Auto
	if in.Signals.Compact {
		trigger = hooks.Manual
	}
	if v.Checkpoint != nil && e.hooks.Configured(config.HookPreCompact) {
		dec, herr := e.hooks.PreCompact(ctx, hooks.PreCompactInput{Session: session, Trigger: trigger, CustomInstructions: in.Signals.Instructions})
		if herr != nil {
			e.logHook("PreCompact", herr)
			hookDiagnostic(rec, "PreCompact", OutcomeError, DiagError(herr))
		}
		if dec.Block {
			hookDiagnostic(rec, "PreCompact", OutcomeBlocked, dec.Reason)
			// A block skips the checkpoint: the view goes as it is, unless
			// it cannot fit at all, when the view must plan one anyway.
			vin.Signals, vin.Measured = view.Signals{}, view.Measurement{}
			if v, err = view.Materialize(vin); err != nil {
				return v, err
			}
		}
	}
	if rec != nil {
		// The context first: storing it takes up the signals this view
		// answered; the checkpoint after it asks the next turn to run the
		// SessionStart hooks.
		if withContext {
			ci.Request, ci.Ceiling, ci.NextCheckpoint = v.Size, sz.budget.Ceiling, sz.budget.Mark
			if err := rec.Context(ci, v.Context, v.ContextTokens); err != nil {
				return v, err
			}
		}
		if v.Checkpoint != nil {
			if err := rec.Checkpoint(v.Checkpoint); err != nil {
				return v, err
			}
			in.Checkpoint, in.Signals = v.Checkpoint, view.Signals{}
			if e.hooks.Configured(config.HookPostCompact) {
				if herr := e.hooks.PostCompact(ctx, hooks.PostCompactInput{Session: session, Trigger: trigger}); herr != nil {
					e.logHook("PostCompact", herr)
					hookDiagnostic(rec, "PostCompact", OutcomeError, DiagError(herr))
				}
			}
		}
	}
	return v, nil
}

// closing is a conversation a boundary is about to close (rows, oldest
// first), as the view shows it to the chain's first model with the forced
// ask still to come as the active turn: the checkpoint in force applied,
// and one planned when it does not fit the ceiling, never stored (the
// boundary archives these rows). The boundary's requests read it, so a
// message too large for its own turn, or rows a checkpoint evicted, do not
// come back whole. When admission refuses, the view is still what it
// built: the boundary's requests trim it with the safety net, and answer
// refuses what still does not fit.
func (e *Engine) closing(in *TurnInput, sz sizer, rows []view.Row) []provider.Message {
	next := uint64(1)
	if n := len(rows); n > 0 {
		next = rows[n-1].Seq + 1
	}
	ask := boundary.ForcedAskMessage()
	all := append(rows[:len(rows):len(rows)], view.Row{Seq: next, Kind: view.KindUser, Origin: view.OriginWake, Text: ask.Content})
	askDefs, _ := e.defsCount(boundary.ForcedAskTools())
	vin := view.Input{Rows: all, Checkpoint: in.Checkpoint, Budget: sz.budget, Overhead: sz.count(SystemPrompt) + askDefs,
		Basis: sz.basis, Count: sz.count, Provider: sz.m.ProvKind}
	if e.cal != nil {
		vin.Correct = e.cal
	}
	v, _ := view.Materialize(vin)
	if n := len(v.Messages); n > 0 && v.Messages[n-1].Content == ask.Content {
		return v.Messages[:n-1]
	}
	return sz.messagesOf(rows) // the ask alone did not fit: answer refuses it
}

// fitsAlone is the view's preflight of messages a boundary would carry
// into a fresh conversation (picked, the turn's own): when they, with the
// system prompt and tools, cannot fit the ceiling by themselves, no
// boundary helps, and the turn fails with the budget error before the
// boundary sends anything.
func (e *Engine) fitsAlone(in *TurnInput, sz sizer, picked []view.Row) error {
	vin := e.viewInput(in, sz, picked, ContextInfo{}, "")
	vin.Checkpoint, vin.Measured, vin.Signals, vin.Context = nil, view.Measurement{}, view.Signals{}, nil
	vin.Memo, vin.Lead = nil, nil // other rows than the chat's view: they would only push its out
	_, err := view.Materialize(vin)
	var be *view.BudgetError
	if errors.As(err, &be) && be.Stage == "preflight" {
		return err
	}
	return nil
}

// logNet records that one oversized turn had to be pruned to fit; the
// turn's finish says so too, and the next turn checkpoints.
func (e *Engine) logNet(chat string, net view.Net) {
	if e.log != nil {
		e.log.Warn("request pruned to fit its budget", "chat", chat, "results_cleared", net.Cleared, "messages_trimmed", net.Trimmed)
	}
}

func (e *Engine) logHook(event string, err error) {
	if e.log != nil {
		e.log.Warn("hook failed", "event", event, "err", err)
	}
}

// rows is the turn's conversation as stored rows; a caller without a
// record hands History, numbered here.
func (in *TurnInput) rows() []view.Row {
	if in.Rows != nil {
		return in.Rows
	}
	rows := make([]view.Row, 0, len(in.History))
	for i, m := range in.History {
		r := view.Row{Seq: uint64(i + 1), Text: m.Content, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, Tokens: m.Tokens}
		switch m.Role {
		case provider.RoleAssistant:
			r.Kind = view.KindAssistant
		case provider.RoleTool:
			r.Kind = view.KindTool
		case provider.RoleSystem:
			r.Kind = view.KindContext
			r.Sections = []view.Section{{Key: "note-" + strconv.Itoa(i), Text: m.Content}}
		default:
			r.Kind = view.KindUser
		}
		rows = append(rows, r)
	}
	return rows
}

// messagesOf is rows as plain messages, for the requests that read a
// conversation outside its view (the forced ask, reflect, the rows a
// boundary leaves). A user row keeps its attachments, counted as rowTokens
// counts them: an image sent without text is the image, never an empty
// message.
func (s sizer) messagesOf(rows []view.Row) []provider.Message {
	out := make([]provider.Message, 0, len(rows))
	for i, r := range rows {
		switch r.Kind {
		case view.KindUser:
			toks := r.Tokens
			if len(r.Parts) > 0 {
				toks = s.rowTokens(&rows[i])
			}
			out = append(out, provider.Message{Role: provider.RoleUser, Content: r.Text, Parts: r.Parts, Tokens: toks, Seq: r.Seq})
		case view.KindAssistant:
			out = append(out, provider.Message{Role: provider.RoleAssistant, Content: r.Text, ToolCalls: r.ToolCalls, Tokens: r.Tokens, Seq: r.Seq})
		case view.KindTool:
			out = append(out, provider.Message{Role: provider.RoleTool, Content: r.Text, ToolCallID: r.ToolCallID, Tokens: r.Tokens, Seq: r.Seq})
		}
	}
	return out
}

// openingRow is the row a cleared conversation opens with, at seq.
func openingRow(text string, seq uint64) view.Row {
	return view.Row{Seq: seq, Kind: view.KindUser, Origin: view.OriginWake, Text: text, Tokens: tokens.Count(text)}
}

// withStored is rows with the runtime context v stored appended, as the
// record now holds it.
func withStored(rows []view.Row, v view.View, seq uint64) []view.Row {
	if v.Context == nil {
		return rows
	}
	return append(rows, view.Row{Seq: seq, Kind: view.KindContext, Sections: v.Context, Tokens: v.ContextTokens})
}

// openAtEnd reports whether the rows end with an assistant step whose calls
// are not all answered: a resumed turn settles them before its view.
func openAtEnd(rows []view.Row) bool {
	answered := 0
	for i := len(rows) - 1; i >= 0; i-- {
		switch rows[i].Kind {
		case view.KindTool:
			answered++
		case view.KindAssistant:
			return len(rows[i].ToolCalls) > answered
		case view.KindUser:
			return false
		}
	}
	return false
}
