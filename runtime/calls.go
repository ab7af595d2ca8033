package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/boundary"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tools"
	"github.com/mirror-gateway/mirror/runtime/tools/pgroup"
)

// Recovery actions for a call a crash interrupted.
const (
	Repeat = "repeat"
	Skip   = "skip"
)

// ToolResult is what one tool call gave.
type ToolResult = tools.Result

// SkippedResult is what the model reads for an interrupted call that was not
// repeated.
const SkippedResult = "This call was interrupted (the gateway stopped while it ran) and was not repeated."

// settle runs (Repeat) or skips a call a crash interrupted, or runs a call
// that had not started; it returns the result and its row's seq.
func (e *Engine) settle(ctx context.Context, in *TurnInput, call provider.ToolCall) (ToolResult, uint64, error) {
	switch in.Settle[call.ID] {
	case Skip:
		res := ToolResult{Content: SkippedResult, Full: SkippedResult, IsError: true}
		seq, err := in.Host.CallFinished(call, res)
		return res, seq, err
	case Repeat:
		return e.runCall(ctx, in, call) // journaled already: no second tool.call
	default:
		if err := in.Host.CallStarted(call); err != nil {
			return ToolResult{}, 0, err
		}
		return e.runCall(ctx, in, call)
	}
}

// runCall runs a journaled call and journals its result, returning the
// result and its row's seq.
func (e *Engine) runCall(ctx context.Context, in *TurnInput, call provider.ToolCall) (ToolResult, uint64, error) {
	res, err := e.callResult(ctx, in, call)
	if err != nil {
		return res, 0, err
	}
	seq, err := in.Host.CallFinished(call, res)
	return res, seq, err
}

// callResult checks a journaled call against its schema and policy, asks
// the person when the policy says so, and runs it.
func (e *Engine) callResult(ctx context.Context, in *TurnInput, call provider.ToolCall) (ToolResult, error) {
	var res ToolResult
	switch call.Name {
	case boundary.ToolHandoffUpdate:
		return e.handoffUpdate(in.Host, call), nil
	case boundary.ToolTaskList:
		return e.taskList(call), nil
	case boundary.ToolRecallHistory, boundary.ToolHandoffHistory, boundary.ToolToolOutput, boundary.ToolGlobalSearch, boundary.ToolRecallMemory:
		res, err := in.Host.Lookup(ctx, call)
		if err != nil {
			res = ToolResult{Content: err.Error(), Full: err.Error(), IsError: true}
		}
		return res, nil
	}
	if e.tools == nil {
		return ToolResult{Content: "Not run: no tool " + call.Name + " is offered here.", IsError: true}, nil
	}
	meta := tools.CallMeta{Chat: in.Chat, Turn: in.Turn, CallID: call.ID, Send: sendMeta(in.Host, call)}
	if j, ok := in.Host.(ProcessJournal); ok {
		meta.Process = func(g pgroup.Group) error { return j.CallProcess(call, g) }
	}
	if p, ok := in.Host.(ProgressReporter); ok {
		meta.Progress = func(msg string) { p.CallProgress(call, msg) }
	}
	if j, ok := in.Host.(LedgerJournal); ok {
		meta.Journal = j.LedgerJournal()
	}
	fail := func(msg string) ToolResult { return ToolResult{Content: msg, Full: msg, IsError: true} }
	if srv, _, ok := strings.Cut(call.Name, config.MCPSeparator); ok && in.Servers != nil && !slices.Contains(in.Servers, srv) {
		// Not offered in this chat (/mcp): refused like a tool that is not there.
		return fail(fmt.Sprintf("Not run: the MCP server %s is not offered in this chat; do the task without it or ask the person to turn it on (/mcp on %s).", srv, srv)), nil
	}
	if err := e.tools.Check(call); err != nil {
		return fail(err.Error()), nil
	}
	pol := e.tools.Policy(call.Name)
	if p, ok := rolePolicy(in.Policies, call.Name); ok && pol != tools.Deny {
		if p == tools.Deny {
			return fail(fmt.Sprintf("Not run: the tool %s is not allowed for the person who asked (people.policies in runtime.yaml); do the task without it.", call.Name)), nil
		}
		pol = p
	}
	switch pol {
	case tools.Allow:
		res = e.tools.Run(ctx, call, meta)
	case tools.Ask:
		if c, ok := in.Host.(ChatAllowance); ok && c.AllowedInChat(call.Name) {
			res = e.tools.Run(ctx, call, meta) // "Allow for this chat": asked once for every call
			break
		}
		ok, err := in.Host.Approve(ctx, call, e.tools.Propose(call))
		switch {
		case err != nil && ctx.Err() != nil:
			res = fail("Not run: the turn was stopped while waiting for permission.")
		case err != nil:
			return res, err
		case !ok:
			res = fail("Not run: the person denied this call.")
		default:
			res = e.tools.Run(ctx, call, meta)
		}
	default:
		res = fail(fmt.Sprintf("Not run: the tool %s is not allowed here (policy deny).", call.Name))
	}
	return res, nil
}

// handoffUpdate answers the assistant's handoff_update: the record changes
// only when the arguments are valid, and is stored before the answer.
func (e *Engine) handoffUpdate(rec Record, call provider.ToolCall) ToolResult {
	next, _ := rec.Handoff()
	if err := boundary.ApplyUpdate(&next, json.RawMessage(call.Arguments)); err != nil {
		return ToolResult{Content: err.Error(), Full: err.Error(), IsError: true}
	}
	if _, err := rec.HandoffUpdated(next, false, true); err != nil {
		return ToolResult{Content: "The record could not be stored: " + err.Error(), IsError: true}
	}
	const ok = "The handoff is up to date."
	return ToolResult{Content: ok, Full: ok}
}

// openCalls returns the calls of the last assistant message that the history
// gives no result for.
func openCalls(h []provider.Message) []provider.ToolCall {
	for i := len(h) - 1; i >= 0; i-- {
		m := h[i]
		if m.Role == provider.RoleUser {
			return nil
		}
		if m.Role != provider.RoleAssistant || len(m.ToolCalls) == 0 {
			continue
		}
		done := map[string]bool{}
		for _, r := range h[i+1:] {
			if r.Role == provider.RoleTool {
				done[r.ToolCallID] = true
			}
		}
		var open []provider.ToolCall
		for _, c := range m.ToolCalls {
			if !done[c.ID] {
				open = append(open, c)
			}
		}
		return open
	}
	return nil
}

func toolMessage(call provider.ToolCall, r ToolResult) provider.Message {
	return provider.Message{Role: provider.RoleTool, ToolCallID: call.ID, Content: r.Content}
}

// ProcessJournal is a Host that journals the process group a call's command
// runs in: durably, before the command starts, so that after a crash the
// next start can stop a command still running and say so in the recovery.
type ProcessJournal interface {
	CallProcess(call provider.ToolCall, g pgroup.Group) error
}

// LedgerJournal is a Host that may keep the file-change ledger's rows of
// its chat in the chat's record (cluster mode: they reach every node's
// ledger with it). LedgerJournal returns the function that stores one
// (tools.CallMeta.Journal), or nil when the ledger commits its own rows.
type LedgerJournal interface {
	LedgerJournal() func(tools.LedgerRow) error
}

// ChatAllowance is a Host whose chat may allow a tool for every call of
// its turns ("Allow for this chat"): a call its policy would ask about runs
// without asking. It never lifts a deny, of tools.policies or of the role
// of the person who asked (people.policies): those calls are refused before
// the allowance is consulted.
type ChatAllowance interface {
	AllowedInChat(tool string) bool
}

// ProgressReporter is a Host that shows what a running call reports of its
// progress (an MCP server's progress notifications). CallProgress must not
// block the call: it is told, not asked.
type ProgressReporter interface {
	CallProgress(call provider.ToolCall, message string)
}

// ToolLoopError ends a turn whose model kept making the same failing call;
// the tool-loop breaker it tripped shows on the Monitor.
type ToolLoopError struct{ Tool string }

func (e *ToolLoopError) Error() string {
	return fmt.Sprintf("paused: the same %s call kept failing in this turn; look at the tool's error, then tell the assistant how to go on", e.Tool)
}

// RolePolicy is the policy a role's overlay (people.policies) gives the
// tool called name, and whether it names one: for the chats to refuse
// allowing in a chat a tool the person's role denies.
func RolePolicy(pols map[string]string, name string) (tools.Policy, bool) {
	return rolePolicy(pols, name)
}

// rolePolicy is the policy the turn's role gives the tool called name: by
// its name, else by the first pattern (path.Match, such as github__*) in
// sorted order that matches it.
func rolePolicy(pols map[string]string, name string) (tools.Policy, bool) {
	if p, ok := pols[name]; ok {
		return tools.Policy(p), true
	}
	keys := make([]string, 0, len(pols))
	for k := range pols {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if ok, _ := path.Match(k, name); ok {
			return tools.Policy(pols[k]), true
		}
	}
	return "", false
}
