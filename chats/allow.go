package chats

import (
	"context"
	"fmt"
	"slices"

	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/ids"
	"github.com/mirror-gateway/mirror/runtime/tools"
)

// "Allow for this chat": an approval answered so also allows its tool for
// every later call of the chat. The allowance is the chat's (meta
// AllowedTools, written with a tool.allowed row of the record), read by
// the runtime before it asks (runtime.ChatAllowance), and revoked the same
// way. It lifts only an ask: a tool tools.policies or the asker's role
// denies is refused before the allowance is read, and a person whose own
// role denies the tool cannot allow it for the chat.

// AllowedInChat is runtime.ChatAllowance: whether the chat allowed tool.
func (h *host) AllowedInChat(tool string) bool {
	var ok bool
	_ = h.a.exec(func() error {
		ok = slices.Contains(h.a.meta.AllowedTools, tool)
		return nil
	})
	return ok
}

// allowForChat adds the tool w asks about to the chat's allowed tools
// (with its tool.allowed row), on the actor's goroutine; the caller
// resolves w and flushes.
func (a *actor) allowForChat(w *waiting, o Origin) error {
	if p, ok := runtime.RolePolicy(a.s.turnPolicies(a.id, a.answerers(o)), w.Tool); ok && p == tools.Deny {
		return fmt.Errorf("%w: %s is denied for your role (people.policies in runtime.yaml), so it cannot be allowed for the chat", ErrBadInput, w.Tool)
	}
	w.ForChat = true
	if slices.Contains(a.meta.AllowedTools, w.Tool) {
		return nil
	}
	a.meta.AllowedTools = append(a.meta.AllowedTools, w.Tool)
	slices.Sort(a.meta.AllowedTools)
	a.b.dirty = true
	a.append(&ToolAllowed{Tool: w.Tool, Allowed: true, Approval: w.ID}, o)
	return nil
}

// answerers is whose role bounds an answer: the person's, or (nil) the
// chat creator's when the gateway answers for nobody in particular.
func (a *actor) answerers(o Origin) []string {
	if o.By == "" {
		return nil
	}
	return []string{o.By}
}

// AllowForChat allows the call an approval asks about, and its tool for
// every later call of the chat ("Allow for this chat"), from any transport.
func (s *Service) AllowForChat(ctx context.Context, id string, o Origin) error {
	chat, ok := ids.ParseApproval(id)
	if !ok {
		return fmt.Errorf("approval %q: %w", id, ErrNotFound)
	}
	if s.routed(ctx, chat) {
		return routeErr(ctx, s, chat, opFrame{Op: opApprove, ID: id, Allow: true, ForChat: true}, o)
	}
	return s.do(ctx, chat, func(a *actor) error { return a.answerApproval(id, true, true, o) })
}

// RevokeTool takes tool off the chat's allowed tools: its next call is
// asked about again. Revoking a tool the chat does not allow changes
// nothing and is no error.
func (s *Service) RevokeTool(ctx context.Context, chat, tool string, o Origin) (Chat, error) {
	if s.routed(ctx, chat) {
		return routeOp[Chat](ctx, s, chat, opFrame{Op: opRevokeTool, Tool: tool}, o)
	}
	return doValue(ctx, s, chat, func(a *actor) (Chat, error) {
		if err := a.usable(); err != nil {
			return Chat{}, err
		}
		if i := slices.Index(a.meta.AllowedTools, tool); i >= 0 {
			a.meta.AllowedTools = slices.Delete(a.meta.AllowedTools, i, i+1)
			if len(a.meta.AllowedTools) == 0 {
				a.meta.AllowedTools = nil
			}
			a.b.dirty = true
			a.append(&ToolAllowed{Tool: tool, Allowed: false}, o)
			if err := a.flush(); err != nil {
				return Chat{}, err
			}
		}
		return a.info(), nil
	})
}
