package tools

import "fmt"

// Refuse makes every built-in tool (files, shell, send_file) fail with
// reason, or run again when reason is "": a cluster node whose workspace
// is not the one the other nodes see must not split a chat's files across
// machines. MCP tools, which run elsewhere, are not affected. Safe to call
// while calls run.
func (r *Registry) Refuse(reason string) {
	r.refused.Store(&reason)
}

// Refused is the reason set by Refuse ("" when the tools run).
func (r *Registry) Refused() string {
	if p := r.refused.Load(); p != nil {
		return *p
	}
	return ""
}

// refusal is the error of a built-in call while Refuse holds.
func (r *Registry) refusal(name string) error {
	if why := r.Refused(); why != "" {
		return fmt.Errorf("%s: refused on this node: %s", name, why)
	}
	return nil
}
