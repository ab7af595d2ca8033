package config

import (
	"fmt"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strings"
	"time"
)

// MCP configures the Model Context Protocol tool servers whose tools join
// the built-in ones (runtime/tools/mcp runs them).
type MCP struct {
	Servers []MCPServer `yaml:"servers"`
}

// MCPServer is one MCP server: either Command (stdio: a child process
// Mirror starts and supervises) or URL (streamable HTTP).
type MCPServer struct {
	// Name prefixes its tools as the model sees them: NAME__TOOL.
	Name string `yaml:"name"`
	// Command is the program to run (looked up in PATH), Args its
	// arguments, Cwd its working folder (relative to this file's folder;
	// "" for that folder).
	Command string   `yaml:"command"`
	Args    []string `yaml:"args"`
	Cwd     string   `yaml:"cwd"`
	// Env maps a variable the server sees to the variable of Mirror's own
	// environment it is read from, so secrets stay out of this file. The
	// server gets PATH, HOME, LANG and these, nothing else.
	Env map[string]string `yaml:"env"`
	// URL is the streamable HTTP endpoint; Headers map a header name to the
	// environment variable holding its whole value ("Bearer ...").
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	// Timeout bounds one tool call and the start (0: DefaultMCPTimeout).
	Timeout time.Duration `yaml:"timeout"`
}

// DefaultMCPTimeout bounds one MCP tool call when a server names none.
const DefaultMCPTimeout = 2 * time.Minute

// MCPSeparator joins a server's name and its tool's: github__create_issue.
const MCPSeparator = "__"

// Stdio reports whether the server is a child process (else HTTP).
func (s MCPServer) Stdio() bool { return s.Command != "" }

// CallTimeout is Timeout, or DefaultMCPTimeout when unset.
func (s MCPServer) CallTimeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return DefaultMCPTimeout
}

// SecretNames are the environment variables this server's env and headers
// read: their values are the secrets never logged or recorded.
func (s MCPServer) SecretNames() []string {
	var out []string
	for _, v := range s.Env {
		out = append(out, v)
	}
	for _, v := range s.Headers {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// PolicyPattern is one tools.policies key that names MCP tools: an exact
// SERVER__TOOL or a pattern with * (github__*, *__delete_*).
type PolicyPattern struct {
	Pattern string
	Policy  string
}

// Match reports whether name (SERVER__TOOL) matches the pattern.
func (p PolicyPattern) Match(name string) bool {
	ok, err := path.Match(p.Pattern, name)
	return err == nil && ok
}

// MCPPolicy is the policy of the MCP tool name under patterns: an exact key
// wins, then the longest matching pattern (the most specific); patterns of
// equal length that disagree give the strictest. No match gives ask.
func MCPPolicy(patterns []PolicyPattern, name string) string {
	best, bestLen := "", -1
	for _, p := range patterns {
		if p.Pattern == name {
			return p.Policy
		}
		if !p.Match(name) {
			continue
		}
		switch n := len(p.Pattern); {
		case n > bestLen:
			best, bestLen = p.Policy, n
		case n == bestLen && strictness(p.Policy) > strictness(best):
			best = p.Policy
		}
	}
	if best == "" {
		return PolicyAsk
	}
	return best
}

func strictness(p string) int {
	switch p {
	case PolicyDeny:
		return 2
	case PolicyAsk:
		return 1
	}
	return 0
}

// mcpPolicyKey reports whether a tools.policies key names MCP tools.
func mcpPolicyKey(k string) bool { return strings.Contains(k, MCPSeparator) }

func (v *validator) mcp() {
	seen := map[string]int{}
	for i, s := range v.c.MCP.Servers {
		at := fmt.Sprintf("mcp.servers[%d]", i)
		if v.name(at+".name", s.Name) {
			switch {
			case strings.Contains(s.Name, MCPSeparator) || strings.Contains(s.Name, "."):
				v.fail(at+".name", "want a name without \"__\" or '.': it prefixes the server's tools as NAME__TOOL")
			default:
				if first, dup := seen[s.Name]; dup {
					v.fail(at+".name", "%s is the name of mcp.servers[%d] already", show(s.Name), first)
				}
				seen[s.Name] = i
			}
		}
		switch {
		case s.Command == "" && s.URL == "":
			v.fail(at, "want command (a program run over stdio) or url (a streamable HTTP endpoint)")
		case s.Command != "" && s.URL != "":
			v.fail(at+".url", "give command or url, not both")
		case s.Command != "":
			if strings.ContainsRune(s.Command, 0) || strings.TrimSpace(s.Command) != s.Command {
				v.fail(at+".command", "want a program name or path, without NUL or surrounding spaces")
			}
			for j, a := range s.Args {
				if strings.ContainsRune(a, 0) {
					v.fail(fmt.Sprintf("%s.args[%d]", at, j), "contains a NUL byte")
				}
			}
			if strings.ContainsRune(s.Cwd, 0) {
				v.fail(at+".cwd", "contains a NUL byte")
			}
			if len(s.Headers) > 0 {
				v.fail(at+".headers", "headers are for url servers; a command server takes env")
			}
		default:
			if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				v.fail(at+".url", "want an http or https URL such as https://mcp.example.com/mcp")
			} else if u.User != nil {
				v.fail(at+".url", "credentials in the URL are refused: put them in an environment variable and name it in headers")
			}
			if len(s.Args) > 0 || s.Cwd != "" || len(s.Env) > 0 {
				v.fail(at+".url", "args, cwd and env are for command servers; a url server takes headers")
			}
		}
		for _, k := range sortedKeys(s.Env) {
			f := join(at+".env", k)
			if !envRE.MatchString(k) {
				v.fail(at+".env", "want variable names (letters, digits and _) as keys")
				continue
			}
			v.envName(f, s.Env[k], true)
		}
		for _, k := range sortedKeys(s.Headers) {
			f := join(at+".headers", k)
			if k == "" || !validHeader(k) {
				v.fail(at+".headers", "want header names such as Authorization as keys")
				continue
			}
			v.envName(f, s.Headers[k], true)
		}
		if s.Timeout < 0 {
			v.fail(at+".timeout", "must not be negative; leave it out for 2m")
		}
	}
	for _, p := range v.c.Tools.Policies.MCP {
		f := join("tools.policies", p.Pattern)
		switch p.Policy {
		case PolicyAllow, PolicyAsk, PolicyDeny:
		default:
			v.fail(f, "want allow, ask or deny, not %s", show(p.Policy))
		}
		if _, err := path.Match(p.Pattern, ""); err != nil || strings.ContainsAny(p.Pattern, "[]\\?") {
			v.fail(f, "want SERVER__TOOL, where either may use * (such as github__*)")
			continue
		}
		srv, _, _ := strings.Cut(p.Pattern, MCPSeparator)
		if !strings.Contains(srv, "*") {
			if _, ok := seen[srv]; !ok {
				v.fail(f, "no MCP server %s in mcp.servers (servers: %s)", show(srv), list(sortedKeys(seen)))
			}
		}
	}
}

func validHeader(k string) bool {
	for _, r := range k {
		if r <= ' ' || r >= 0x7f || strings.ContainsRune("()<>@,;:\\\"/[]?={}", r) {
			return false
		}
	}
	return http.CanonicalHeaderKey(k) != ""
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
