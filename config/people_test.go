package config

import (
	"strings"
	"testing"
)

// TestPeopleSettings: people.policies and people.tokens_per_day are read,
// and a bad one is refused with its line and field.
func TestPeopleSettings(t *testing.T) {
	c, err := Parse([]byte("people:\n  policies:\n    member: {shell: deny, write_file: ask, \"github__*\": deny}\n  tokens_per_day: 5000\n"), "runtime.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.People.Policies["member"]["shell"] != "deny" || c.People.TokensPerDay != 5000 {
		t.Fatalf("%+v", c.People)
	}
	for _, tc := range []struct{ src, want string }{
		{"people:\n  policies:\n    admin: {shell: deny}\n", "runtime.yaml:3: people.policies.admin: a role is owner or member"},
		{"people:\n  policies:\n    member:\n      shell: maybe\n", "runtime.yaml:4: people.policies.member.shell: want allow, ask or deny"},
		{"people:\n  policies:\n    member:\n      \"[x\": deny\n", "people.policies.member.[x: a tool name or a pattern"},
		{"people:\n  tokens_per_day: -1\n", "runtime.yaml:2: people.tokens_per_day: must be 0"},
		{"people:\n  token_per_day: 5\n", "token_per_day"},
	} {
		_, err := Parse([]byte(tc.src), "runtime.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.src, err, tc.want)
		}
	}
}
