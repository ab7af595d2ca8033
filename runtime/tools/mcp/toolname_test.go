package mcp

import (
	"regexp"
	"strings"
	"testing"
)

// TestValidToolName holds validToolName to the rule it replaced, the
// regexp ^[A-Za-z0-9_-]{1,64}$, around its length bound and over every
// byte.
func TestValidToolName(t *testing.T) {
	rule := regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	var names []string
	for n := 0; n <= 66; n++ {
		names = append(names, strings.Repeat("a", n), strings.Repeat("Z9_-", n)[:n])
	}
	for c := 0; c < 256; c++ {
		names = append(names, string([]byte{byte(c)}), "srv__"+string([]byte{byte(c)})+"tool")
	}
	names = append(names, "é", "srv__tool.x", "srv tool", "srv__tööl")
	for _, name := range names {
		if got, want := validToolName(name), rule.MatchString(name); got != want {
			t.Errorf("validToolName(%q) = %v, the rule says %v", name, got, want)
		}
	}
}
