package tools

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/provider"
)

// Source is a set of tools beyond the built-ins whose list may change while
// the gateway runs: the MCP servers (runtime/tools/mcp). Its tools go
// through the same Check, policy, approval, journal and preview as the
// built-ins; only the running is the Source's.
type Source interface {
	// Tools lists the tools offered now. Names are SERVER__TOOL
	// (config.MCPSeparator), so they never collide with a built-in.
	Tools() []External
	// Generation changes whenever the list Tools returns changes, so a
	// caller may keep what it built from the list until then.
	Generation() uint64
	// Call runs one call whose arguments passed Check. Like a built-in's
	// run, it returns the output, whether the output reports a failure,
	// and an error for a call that could not be made at all (its message
	// is what the model reads).
	Call(ctx context.Context, name string, args []byte, meta CallMeta) (string, bool, error)
}

// External is one tool of a Source.
type External struct {
	Name        string
	Description string
	// Parameters is the tool's input JSON Schema, offered as it is.
	Parameters []byte
	// Server is the Source's own grouping (the MCP server), which a chat
	// may offer or leave out as a whole.
	Server string
	// Check validates arguments (a JSON object) against Parameters; the
	// problems it returns are what the model reads. nil accepts any object.
	Check func(args []byte) []string
}

// external finds the tool name of a source: its tool and the source, or
// nil when no source has it.
func (r *Registry) external(name string) (*External, Source) {
	if !strings.Contains(name, config.MCPSeparator) {
		return nil, nil
	}
	for _, s := range r.sources {
		for _, t := range s.Tools() {
			if t.Name == name {
				return &t, s
			}
		}
	}
	return nil, nil
}

// Generation changes whenever Definitions may give another list: a source's
// tools changed. Built-ins never change after New.
func (r *Registry) Generation() uint64 {
	var g uint64
	for _, s := range r.sources {
		g += s.Generation()
	}
	return g
}

// externalDefs are the sources' tools not denied, sorted by name so the
// request bytes stay the same until a list changes. keep, when not nil,
// picks the servers offered.
func (r *Registry) externalDefs(keep func(server string) bool) []provider.Tool {
	var ext []External
	for _, s := range r.sources {
		for _, t := range s.Tools() {
			// The policy straight from the patterns: r.Policy would look
			// the tool up again, for every tool of every source.
			if Policy(config.MCPPolicy(r.patterns, t.Name)) == Deny || (keep != nil && !keep(t.Server)) {
				continue
			}
			ext = append(ext, t)
		}
	}
	sort.Slice(ext, func(i, j int) bool { return ext[i].Name < ext[j].Name })
	out := make([]provider.Tool, 0, len(ext))
	for _, t := range ext {
		out = append(out, provider.Tool{Name: t.Name, Description: t.Description, Parameters: append([]byte(nil), t.Parameters...)})
	}
	return out
}

// checkExternal checks a call of a source's tool: a JSON object (the same
// size and syntax rules as the built-ins'), then the tool's own schema.
func checkExternal(t *External, raw string) ([]byte, error) {
	if strings.TrimSpace(raw) == "" {
		raw = "{}"
	}
	if _, problems := (&schema{Type: "object"}).problems(raw); len(problems) > 0 {
		return nil, &ArgError{Tool: t.Name, Problems: problems}
	}
	if t.Check != nil {
		if problems := t.Check([]byte(raw)); len(problems) > 0 {
			return nil, &ArgError{Tool: t.Name, Problems: problems}
		}
	}
	return []byte(raw), nil
}

// runExternal runs a checked call of a source's tool.
func (r *Registry) runExternal(ctx context.Context, s Source, name string, args []byte, meta CallMeta) Result {
	out, failed, err := s.Call(ctx, name, args, meta)
	if err != nil {
		return r.result(fmt.Sprintf("%s: %v", name, err), true)
	}
	return r.result(out, failed)
}
