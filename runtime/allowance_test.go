package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tools"
)

// allowing is a journal whose chat allows some tools for every call.
type allowing struct {
	*journal
	allowed map[string]bool
}

func (a *allowing) AllowedInChat(tool string) bool { return a.allowed[tool] }

// An approval of edit_file is asked with the diff the edit would make, and
// a chat that allowed the tool is not asked at all, while a tool the
// person's role denies stays refused whatever the chat allowed.
func TestApprovalsCarryTheChangeAndTheChatAllowance(t *testing.T) {
	tests := []struct {
		name     string
		allowed  map[string]bool
		policies map[string]string
		asked    int
		ran      bool
	}{
		{"asked with the diff", nil, nil, 1, true},
		{"allowed for the chat", map[string]bool{"edit_file": true}, nil, 0, true},
		{"another tool allowed", map[string]bool{"shell": true}, nil, 1, true},
		{"the role denies it", map[string]bool{"edit_file": true}, map[string]string{"edit_file": "deny"}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "plan.md"), []byte("one\ntwo\nthree\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			reg, err := tools.New(tools.Options{Workspace: dir})
			if err != nil {
				t.Fatal(err)
			}
			f := &windowed{window: 128000, reply: func(r *wireReq) (string, []provider.ToolCall) {
				for _, m := range r.Messages {
					if m.Role == "tool" {
						return "done", nil
					}
				}
				return "", []provider.ToolCall{{ID: "e1", Name: "edit_file", Arguments: `{"path":"plan.md","old":"two\n","new":"TWO\n"}`}}
			}}
			e := windowEngine(t, f, reg)
			h := &allowing{journal: &journal{}, allowed: tc.allowed}
			if _, err := e.Run(t.Context(), TurnInput{Chat: "c1", Turn: 1, Chain: "default", Host: h, Policies: tc.policies,
				History: []provider.Message{{Role: "user", Content: "edit it"}}}, func(string) error { return nil }); err != nil {
				t.Fatal(err)
			}
			if len(h.proposals) != tc.asked {
				t.Fatalf("asked %d times, want %d", len(h.proposals), tc.asked)
			}
			if tc.asked > 0 {
				p := h.proposals[0]
				if p == nil || p.Status != tools.StatusModified || p.Added != 1 || p.Removed != 1 ||
					!strings.Contains(p.Diff, "-two\n+TWO\n") || !strings.HasPrefix(p.Diff, "@@ -1,3 +1,3 @@") {
					t.Fatalf("proposal %+v", p)
				}
			}
			got, _ := os.ReadFile(filepath.Join(dir, "plan.md"))
			if ran := string(got) == "one\nTWO\nthree\n"; ran != tc.ran {
				t.Fatalf("file %q: ran %v, want %v", got, ran, tc.ran)
			}
		})
	}
}
