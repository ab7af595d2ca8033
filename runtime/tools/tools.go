// Package tools owns the tools the assistant may call: their registry and
// JSON Schemas, argument checking, the per-tool policy (allow, ask, deny),
// the workspace every path is confined to, the built-in tools (read_file,
// write_file, edit_file, list_dir, shell, send_file), previews of long results, and the
// file-tool change ledger behind /changes and /rewind (bbolt bucket
// "changes"). Tools whose list changes while the gateway runs (the MCP
// servers of runtime/tools/mcp) join as a Source: named SERVER__TOOL, with
// policies by name or pattern (ask when none matches), checked, approved,
// journaled and previewed like the built-ins.
//
// A call goes Check (unknown tool, denied, bad arguments: refused before
// anyone is asked), then, when Policy says ask, the caller's approval, then
// Run. Run never panics and never returns a Go error: every failure is a
// Result with IsError set and a message the model can act on, so a bad call
// costs one round trip, never the turn.
//
// Paths are relative to the workspace. Absolute paths, .. leading out, NUL
// bytes and symlinks whose target is outside are refused; the operations
// themselves go through an os.Root of the workspace, so a symlink swapped in
// after the check is refused too. The shell runs in the workspace with a
// minimal environment and is confined only by that: its policy is ask by
// default for this reason.
package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/ids"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tools/pgroup"
)

// Policy says whether a call of a tool runs.
type Policy string

// The policies, as written in runtime.yaml tools.policies.
const (
	Allow Policy = config.PolicyAllow // runs
	Ask   Policy = config.PolicyAsk   // runs once a person approves it
	Deny  Policy = config.PolicyDeny  // refused; the model is told so
)

// Defaults used where Options leave a value zero.
const (
	DefaultShellTimeout = 2 * time.Minute
	DefaultOutputLimit  = 16000
)

// Errors Check returns, for errors.Is; the message says the rest.
var (
	ErrUnknownTool = errors.New("unknown tool")
	ErrDenied      = errors.New("tool denied by policy")
)

// Options configure a Registry.
type Options struct {
	// Workspace is the folder the tools are confined to; created 0700 when
	// missing. Required.
	Workspace string
	// Policies maps a tool name to its policy. A built-in tool left out
	// gets its default (read_file and list_dir allow, the others ask); a
	// name that is not a tool is an error.
	Policies map[string]Policy
	// ShellTimeout bounds one shell command (0: DefaultShellTimeout).
	ShellTimeout time.Duration
	// OutputLimit is how many characters of a result the model reads
	// before it gets a preview instead (0: DefaultOutputLimit).
	OutputLimit int
	// Private are folders the file tools never read, list into or change,
	// even when the workspace holds them: Mirror's data directory (token,
	// database). A workspace configured around data_dir then still keeps
	// the token out of the model's reach without an approval.
	Private []string
	// Ledger records file changes for /changes and /rewind; nil records
	// nothing (and nothing can be rewound).
	Ledger *Ledger
	// Sources add tools whose list may change (the MCP servers).
	Sources []Source
	// Patterns are the policies of the sources' tools, by exact name or
	// pattern (tools.policies keys with "__"); a tool none matches is Ask.
	Patterns []config.PolicyPattern
}

// OptionsFrom reads Options from the loaded configuration. ledger may be nil.
func OptionsFrom(c *config.Config, ledger *Ledger) Options {
	pol := map[string]Policy{}
	for name, p := range c.Tools.Policies.Map() {
		pol[name] = Policy(p)
	}
	return Options{Workspace: c.WorkspacePath(), Private: []string{c.DataPath()}, Policies: pol, ShellTimeout: c.Tools.ShellTimeout,
		OutputLimit: c.Tools.OutputLimit, Ledger: ledger, Patterns: c.Tools.Policies.MCP}
}

// CallMeta says whose call Run is running: the ledger records each change
// under the chat and turn that made it.
type CallMeta struct {
	Chat   string
	Turn   uint64
	CallID string
	// Process, when set, journals the process group a command of the call
	// runs in, durably, before the command starts; an error stops the call
	// before it runs. After a crash, the group journaled for a call left
	// without a result is stopped if it still runs (pgroup.Reap).
	Process func(g pgroup.Group) error
	// Send delivers a file to the person the call works for (send_file):
	// it stores the bytes and records the delivery before it returns; nil
	// where no person can receive one.
	Send func(ctx context.Context, d Delivery) error
	// Progress, when set, is told what a long call reports while it runs
	// (an MCP server's progress notifications), for the chat to show.
	Progress func(message string)
	// Journal, when set (cluster mode), stores the change ledger's row of
	// a file change instead of the ledger's own commit: in the chat's
	// record, so every node's ledger gets it (ApplyLedgerTx). It returns
	// once the row is durable; an error leaves the file unchanged.
	Journal func(LedgerRow) error
}

// Result is what one call produced.
type Result struct {
	// Content is what the model reads: Full, or when Full is longer than
	// the output limit, its head and tail around a line naming Handle.
	Content string
	// Full is the whole output, for the caller to store (under Handle
	// when one is set).
	Full    string
	IsError bool
	// Handle names the stored Full when Content is a preview; "" otherwise.
	Handle string
	// Parts are attachments the result brings back into the view (an
	// image a checkpoint masked, got back through its handle); the
	// request carries them right after the step's results.
	Parts []provider.Part
}

// Registry holds the tools of one workspace. Safe for concurrent use.
type Registry struct {
	ws           workspace
	policies     map[string]Policy
	shellTimeout time.Duration
	limit        int
	ledger       *Ledger
	mu           *sync.Mutex // serialises file changes (the ledger's own lock when there is one)

	tools map[string]*tool
	order []string

	sources  []Source
	patterns []config.PolicyPattern

	refused atomic.Pointer[string] // see Refuse
}

// tool is one built-in tool. run gets arguments that passed the schema; it
// returns the output, whether the output reports a failure, and an error for
// a call that could not be done at all (its message is what the model reads).
type tool struct {
	name        string
	description string
	schema      *schema
	params      []byte // the schema as JSON, as offered to the model
	defaultPol  Policy
	run         func(ctx context.Context, args []byte, meta CallMeta) (string, bool, error)
}

// New builds the registry of the built-in tools for opt.Workspace, creating
// the workspace when missing.
func New(opt Options) (*Registry, error) {
	ws, err := openWorkspace(opt.Workspace, opt.Private...)
	if err != nil {
		return nil, err
	}
	r := &Registry{ws: ws, policies: map[string]Policy{}, shellTimeout: opt.ShellTimeout, limit: opt.OutputLimit,
		ledger: opt.Ledger, tools: map[string]*tool{}, sources: opt.Sources, patterns: opt.Patterns}
	switch {
	case r.shellTimeout < 0:
		return nil, errors.New("tools: shell timeout must not be negative")
	case r.shellTimeout == 0:
		r.shellTimeout = DefaultShellTimeout
	}
	switch {
	case r.limit < 0:
		return nil, errors.New("tools: output limit must not be negative")
	case r.limit == 0:
		r.limit = DefaultOutputLimit
	}
	if r.ledger != nil {
		r.mu = &r.ledger.mu
	} else {
		r.mu = new(sync.Mutex)
	}
	all := r.fileTools()
	all = append(all, r.shellTool(), r.sendFileTool())
	for _, t := range all {
		t.defaultPol = Ask
		if t.name == "read_file" || t.name == "list_dir" {
			t.defaultPol = Allow
		}
		if t.params, err = json.Marshal(t.schema); err != nil {
			return nil, fmt.Errorf("tools: schema of %s: %w", t.name, err)
		}
		r.tools[t.name] = t
		r.order = append(r.order, t.name)
	}
	for name, p := range opt.Policies {
		if r.tools[name] == nil {
			return nil, fmt.Errorf("tools: policy for %s: %w (tools: %s)", quote(name), ErrUnknownTool, strings.Join(r.names(), ", "))
		}
		switch p {
		case Allow, Ask, Deny:
			r.policies[name] = p
		default:
			return nil, fmt.Errorf("tools: policy for %s: want allow, ask or deny, not %s", name, quote(string(p)))
		}
	}
	return r, nil
}

// Workspace is the real path of the workspace (symlinks resolved), for
// Ledger.Rewind and for showing the operator where tools work.
func (r *Registry) Workspace() string { return r.ws.real }

// Definitions are the tools to offer the model, in a fixed order so the
// request bytes stay the same turn after turn (until a source's list
// changes: see Generation). Denied tools are left out: a model is not
// offered what it may not call.
func (r *Registry) Definitions() []provider.Tool { return r.DefinitionsFor(nil) }

// DefinitionsFor is Definitions with the sources' tools limited to the
// servers keep accepts (nil: all), for a chat that offers only some.
func (r *Registry) DefinitionsFor(keep func(server string) bool) []provider.Tool {
	var out []provider.Tool
	for _, name := range r.order {
		if r.Policy(name) == Deny {
			continue
		}
		t := r.tools[name]
		out = append(out, provider.Tool{Name: t.name, Description: t.description, Parameters: append([]byte(nil), t.params...)})
	}
	return append(out, r.externalDefs(keep)...)
}

// Policy is the policy of the tool called name; Deny for a name that is no tool.
func (r *Registry) Policy(name string) Policy {
	t := r.tools[name]
	if t == nil {
		if e, _ := r.external(name); e != nil {
			return Policy(config.MCPPolicy(r.patterns, name))
		}
		return Deny
	}
	if p, ok := r.policies[name]; ok {
		return p
	}
	return t.defaultPol
}

// Check refuses a call before it is approved or run: an unknown tool
// (ErrUnknownTool), a denied one (ErrDenied), or arguments that do not fit
// the tool's schema (an *ArgError, errors.Is ErrInvalidArguments). Messages
// are written for the model, which reads them as the call's result.
func (r *Registry) Check(call provider.ToolCall) error {
	_, err := r.check(call)
	return err
}

// check is Check returning the normalised arguments of a good call.
func (r *Registry) check(call provider.ToolCall) ([]byte, error) {
	t := r.tools[call.Name]
	if t == nil {
		if e, _ := r.external(call.Name); e != nil {
			if r.Policy(call.Name) == Deny {
				return nil, fmt.Errorf("%s: %w (tools.policies in runtime.yaml); do the task without it or ask the person to allow it", call.Name, ErrDenied)
			}
			return checkExternal(e, call.Arguments)
		}
		return nil, fmt.Errorf("%s: %w; the tools are %s", quote(call.Name), ErrUnknownTool, strings.Join(r.available(), ", "))
	}
	if err := r.refusal(call.Name); err != nil {
		return nil, err
	}
	if r.Policy(call.Name) == Deny {
		return nil, fmt.Errorf("%s: %w (tools.policies.%s in runtime.yaml); do the task without it or ask the person to allow it", call.Name, ErrDenied, call.Name)
	}
	return t.schema.check(call.Name, call.Arguments)
}

// Run checks and runs one call. It does not ask anyone: a call whose Policy
// is Ask must be approved by the caller first. Run never panics; every
// failure, a cancelled ctx included, is a Result with IsError set.
func (r *Registry) Run(ctx context.Context, call provider.ToolCall, meta CallMeta) (res Result) {
	defer func() {
		if p := recover(); p != nil {
			res = r.result(fmt.Sprintf("%s: internal error (%s); the call may not have completed", trim(call.Name, 64), trim(fmt.Sprint(p), 200)), true)
		}
	}()
	args, err := r.check(call)
	if err != nil {
		return r.result(err.Error(), true)
	}
	if err := ctx.Err(); err != nil {
		return r.result(fmt.Sprintf("%s: not run: %v", call.Name, err), true)
	}
	t := r.tools[call.Name]
	if t == nil {
		_, src := r.external(call.Name)
		if src == nil { // its server's list changed since check
			return r.result(fmt.Sprintf("%s: %v; the tools are %s", quote(call.Name), ErrUnknownTool, strings.Join(r.available(), ", ")), true)
		}
		return r.runExternal(ctx, src, call.Name, args, meta)
	}
	out, failed, err := t.run(ctx, args, meta)
	if err != nil {
		return r.result(call.Name+": "+err.Error(), true)
	}
	return r.result(out, failed)
}

func (r *Registry) result(full string, isErr bool) Result {
	content, handle := r.Preview(full)
	return Result{Content: content, Full: full, IsError: isErr, Handle: handle}
}

// Preview is what the model reads of full: full itself when it fits the
// output limit, else its head and tail around a line saying how much was left
// out and the handle the whole is stored under. The handle is derived from
// full, so the same output always gets the same handle and the request bytes
// stay stable.
func (r *Registry) Preview(full string) (content, handle string) {
	return preview(full, r.limit)
}

func preview(full string, limit int) (string, string) {
	total := utf8.RuneCountInString(full)
	if total <= limit {
		return full, ""
	}
	handle := ids.Output(full)
	marker := func(omitted int) string {
		return fmt.Sprintf("\n…[%d more characters; full output stored as handle %s]…\n", omitted, handle)
	}
	budget := max(limit-utf8.RuneCountInString(marker(total)), 0)
	head := budget / 2
	tail := budget - head
	runes := []rune(full)
	return string(runes[:head]) + marker(total-head-tail) + string(runes[total-tail:]), handle
}

func (r *Registry) names() []string {
	out := append([]string(nil), r.order...)
	for _, s := range r.sources {
		for _, t := range s.Tools() {
			out = append(out, t.Name)
		}
	}
	sort.Strings(out)
	return out
}

// available lists the tools not denied, for the unknown-tool message.
func (r *Registry) available() []string {
	var out []string
	for _, n := range r.names() {
		if r.Policy(n) != Deny {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}
