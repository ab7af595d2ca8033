package config

import (
	"strings"
	"testing"
	"time"
)

func TestMCPServers(t *testing.T) {
	src := `mcp:
  servers:
    - name: github
      command: github-mcp-server
      args: [stdio, --read-only]
      env: {GITHUB_PERSONAL_ACCESS_TOKEN: GITHUB_TOKEN}
      cwd: tools
      timeout: 30s
    - name: search
      url: https://mcp.example.com/mcp
      headers: {Authorization: SEARCH_AUTH}
tools:
  policies:
    shell: deny
    github__*: ask
    github__get_me: allow
    "*__delete_*": deny
`
	c, err := Parse([]byte(src), "")
	if err != nil {
		t.Fatal(err)
	}
	s := c.MCP.Servers
	if len(s) != 2 || !s[0].Stdio() || s[1].Stdio() || s[0].Args[1] != "--read-only" || s[0].CallTimeout() != 30*time.Second ||
		s[1].CallTimeout() != DefaultMCPTimeout || s[1].Headers["Authorization"] != "SEARCH_AUTH" {
		t.Fatalf("servers = %+v", s)
	}
	if got := strings.Join(s[0].SecretNames(), ","); got != "GITHUB_TOKEN" {
		t.Errorf("SecretNames = %s", got)
	}
	if c.Tools.Policies.Shell != PolicyDeny || c.Tools.Policies.ReadFile != PolicyAllow {
		t.Errorf("built-in policies = %+v", c.Tools.Policies)
	}
	pats := c.Tools.Policies.MCP
	for _, tc := range []struct{ name, want string }{
		{"github__get_me", PolicyAllow},      // exact beats the pattern
		{"github__create_issue", PolicyAsk},  // the pattern
		{"github__delete_repo", PolicyDeny},  // longer pattern wins
		{"search__query", PolicyAsk},         // nothing matches: ask
		{"search__delete_index", PolicyDeny}, // a pattern over every server
	} {
		if got := MCPPolicy(pats, tc.name); got != tc.want {
			t.Errorf("MCPPolicy(%s) = %s, want %s", tc.name, got, tc.want)
		}
	}
	// Equal length, different verdicts: the strictest.
	if got := MCPPolicy([]PolicyPattern{{"a__x*", PolicyAllow}, {"a__*y", PolicyDeny}}, "a__xy"); got != PolicyDeny {
		t.Errorf("tie = %s, want deny", got)
	}
}

func TestMCPErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"neither", "mcp:\n  servers:\n    - name: a\n", "runtime.yaml:3: mcp.servers[0]: want command (a program run over stdio) or url (a streamable HTTP endpoint)"},
		{"both", "mcp:\n  servers:\n    - name: a\n      command: x\n      url: http://127.0.0.1/\n", "runtime.yaml:5: mcp.servers[0].url: give command or url, not both"},
		{"no name", "mcp:\n  servers:\n    - command: x\n", "runtime.yaml:3: mcp.servers[0].name: required"},
		{"separator in name", "mcp:\n  servers:\n    - name: a__b\n      command: x\n", "runtime.yaml:3: mcp.servers[0].name: want a name without \"__\" or '.': it prefixes the server's tools as NAME__TOOL"},
		{"twice", "mcp:\n  servers:\n    - {name: a, command: x}\n    - {name: a, command: y}\n", "runtime.yaml:4: mcp.servers[1].name: \"a\" is the name of mcp.servers[0] already"},
		{"bad url", "mcp:\n  servers:\n    - name: a\n      url: ftp://x\n", "runtime.yaml:4: mcp.servers[0].url: want an http or https URL such as https://mcp.example.com/mcp"},
		{"user in url", "mcp:\n  servers:\n    - name: a\n      url: https://u:p@x/mcp\n", "runtime.yaml:4: mcp.servers[0].url: credentials in the URL are refused: put them in an environment variable and name it in headers"},
		{"secret in env", "mcp:\n  servers:\n    - name: a\n      command: x\n      env:\n        TOKEN: ghp_abcdefghijklmnop\n", "runtime.yaml:6: mcp.servers[0].env.TOKEN: want the name of an environment variable, such as OPENAI_API_KEY (letters, digits and _); name the environment variable, not the secret"},
		{"secret in header", "mcp:\n  servers:\n    - name: a\n      url: http://127.0.0.1:1/mcp\n      headers:\n        Authorization: Bearer abc\n", "runtime.yaml:6: mcp.servers[0].headers.Authorization: want the name of an environment variable, such as OPENAI_API_KEY (letters, digits and _); name the environment variable, not the secret"},
		{"headers on command", "mcp:\n  servers:\n    - name: a\n      command: x\n      headers: {X: Y}\n", "runtime.yaml:5: mcp.servers[0].headers: headers are for url servers; a command server takes env"},
		{"env on url", "mcp:\n  servers:\n    - name: a\n      url: http://127.0.0.1:1/mcp\n      env: {X: Y}\n", "runtime.yaml:4: mcp.servers[0].url: args, cwd and env are for command servers; a url server takes headers"},
		{"negative timeout", "mcp:\n  servers:\n    - name: a\n      command: x\n      timeout: -1s\n", "runtime.yaml:5: mcp.servers[0].timeout: must not be negative; leave it out for 2m"},
		{"policy for no server", "mcp:\n  servers:\n    - {name: a, command: x}\ntools:\n  policies:\n    b__*: allow\n", "runtime.yaml:6: tools.policies.\"b__*\": no MCP server \"b\" in mcp.servers (servers: a)"},
		{"bad policy", "mcp:\n  servers:\n    - {name: a, command: x}\ntools:\n  policies:\n    a__*: maybe\n", "runtime.yaml:6: tools.policies.\"a__*\": want allow, ask or deny, not \"maybe\""},
		{"bad pattern", "mcp:\n  servers:\n    - {name: a, command: x}\ntools:\n  policies:\n    a__[x: allow\n", "runtime.yaml:6: tools.policies.\"a__[x\": want SERVER__TOOL, where either may use * (such as github__*)"},
		{"unknown key", "mcp:\n  servers:\n    - {name: a, command: x, tools: [y]}\n", "runtime.yaml:3: mcp.servers[0].tools: unknown key; known keys here: ..."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), "")
			if err == nil {
				t.Fatal("no error")
			}
			first := strings.SplitN(err.Error(), "\n", 2)[0]
			if want, ok := strings.CutSuffix(tc.want, "..."); ok {
				if !strings.HasPrefix(first, want) {
					t.Errorf("error:\n got %s\nwant %s...", first, want)
				}
			} else if first != tc.want {
				t.Errorf("error:\n got %s\nwant %s", first, tc.want)
			}
			if strings.Contains(err.Error(), "ghp_") || strings.Contains(err.Error(), "Bearer") {
				t.Errorf("error echoes a secret: %v", err)
			}
		})
	}
}

func FuzzMCPPolicy(f *testing.F) {
	f.Add("github__*", "github__x")
	f.Add("*__delete_*", "a__delete_b")
	f.Fuzz(func(t *testing.T, pattern, name string) {
		got := MCPPolicy([]PolicyPattern{{pattern, PolicyAllow}}, name)
		if got != PolicyAllow && got != PolicyAsk {
			t.Fatalf("MCPPolicy = %q", got)
		}
	})
}
