package chats

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestCommandTable: every command of the table is dispatched by Command
// (none answers "unknown command"), the table is well formed, and an
// unknown command's error names every command it has.
func TestCommandTable(t *testing.T) {
	e := newToolEnv(t)
	c := e.chat()
	bg := context.Background()
	seen := map[string]bool{}
	for _, cmd := range Commands() {
		t.Run(cmd.Name, func(t *testing.T) {
			if !strings.HasPrefix(cmd.Name, "/") || strings.ContainsAny(cmd.Name, " \t\n") || cmd.Help == "" || cmd.run == nil || seen[cmd.Name] {
				t.Fatalf("malformed or repeated entry %+v", cmd)
			}
			seen[cmd.Name] = true
			if got, ok := LookupCommand(cmd.Name); !ok || got.Name != cmd.Name {
				t.Fatalf("LookupCommand(%s) = %+v, %v", cmd.Name, got, ok)
			}
			// As typed, with a trailing argument where it takes one: the
			// answer may be an error (no such message, nothing running),
			// never that the command is unknown.
			text := cmd.Name
			if cmd.Args != "" {
				text += " 1"
			}
			_, err := e.svc.Command(bg, c.ID, text, Origin{})
			if err != nil && strings.Contains(err.Error(), "unknown command") {
				t.Fatalf("%s is in the table but not dispatched: %v", text, err)
			}
		})
	}
	_, err := e.svc.Command(bg, c.ID, "/no-such-command", Origin{})
	if !errors.Is(err, ErrBadInput) {
		t.Fatalf("unknown command: %v", err)
	}
	for _, cmd := range Commands() {
		if !strings.Contains(err.Error(), cmd.Usage()) {
			t.Errorf("the unknown-command error %q does not name %s", err, cmd.Usage())
		}
	}
	if _, ok := LookupCommand("/no-such-command"); ok {
		t.Error("LookupCommand found a command not in the table")
	}
	// Commands hands out a copy: the table cannot be changed from outside.
	cs := Commands()
	cs[0].Name = "/changed"
	if Commands()[0].Name == "/changed" {
		t.Error("Commands returned the table itself")
	}
}
