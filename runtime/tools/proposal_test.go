package tools

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

func TestPropose(t *testing.T) {
	long := strings.Repeat("line\n", ProposalLines+50)
	tests := []struct {
		name  string
		tool  string
		args  string
		check func(t *testing.T, p *Proposal)
	}{
		{"a new file is previewed", "write_file", `{"path":"new/a.txt","content":"hello\nworld\n"}`, func(t *testing.T, p *Proposal) {
			if p.Status != StatusCreated || p.Content != "hello\nworld\n" || p.Added != 2 || p.Diff != "" || p.Omitted != 0 {
				t.Fatalf("%+v", p)
			}
		}},
		{"a long new file is cut with a count", "write_file", fmt.Sprintf(`{"path":"long.txt","content":%q}`, long), func(t *testing.T, p *Proposal) {
			if p.Content != strings.Repeat("line\n", ProposalLines) || p.Omitted != 50 || p.Added != ProposalLines+50 {
				t.Fatalf("%d lines shown, %d omitted", strings.Count(p.Content, "\n"), p.Omitted)
			}
		}},
		{"a rewrite is a diff against the file", "write_file", `{"path":"plan.md","content":"one\n2\nthree\nfour\n"}`, func(t *testing.T, p *Proposal) {
			if p.Status != StatusModified || p.Added != 2 || p.Removed != 1 || p.Content != "" {
				t.Fatalf("%+v", p)
			}
			if want := "@@ -1,3 +1,4 @@\n one\n-two\n+2\n three\n+four\n"; p.Diff != want {
				t.Fatalf("diff\n%s\nwant\n%s", p.Diff, want)
			}
		}},
		{"the same content changes nothing", "write_file", `{"path":"plan.md","content":"one\ntwo\nthree\n"}`, func(t *testing.T, p *Proposal) {
			if p.Status != "unchanged" || p.Diff != "" {
				t.Fatalf("%+v", p)
			}
		}},
		{"an edit is a hunk", "edit_file", `{"path":"plan.md","old":"three","new":"3"}`, func(t *testing.T, p *Proposal) {
			if p.Diff != "@@ -1,3 +1,3 @@\n one\n two\n-three\n+3\n" {
				t.Fatalf("diff\n%s", p.Diff)
			}
		}},
		{"an edit that would fail says why", "edit_file", `{"path":"plan.md","old":"nine","new":"9"}`, func(t *testing.T, p *Proposal) {
			if p.Status != "" || !strings.Contains(p.Error, `"old" was not found`) {
				t.Fatalf("%+v", p)
			}
		}},
		{"an edit of a missing file", "edit_file", `{"path":"nope.md","old":"a","new":"b"}`, func(t *testing.T, p *Proposal) {
			if !strings.Contains(p.Error, "does not exist") {
				t.Fatalf("%+v", p)
			}
		}},
		{"a path out of the workspace", "write_file", `{"path":"../x","content":"a"}`, func(t *testing.T, p *Proposal) {
			if p.Error == "" || p.Status != "" {
				t.Fatalf("%+v", p)
			}
		}},
		{"a secret-looking file shows counts, never text", "write_file", `{"path":".env","content":"KEY=new\n"}`, func(t *testing.T, p *Proposal) {
			if !p.Hidden || p.Diff != "" || p.Content != "" || p.Added != 1 || p.Removed != 1 {
				t.Fatalf("%+v", p)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, text := range map[string]string{"plan.md": "one\ntwo\nthree\n", ".env": "KEY=old-secret\n"} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			r, err := New(Options{Workspace: dir})
			if err != nil {
				t.Fatal(err)
			}
			p := r.Propose(provider.ToolCall{ID: "c", Name: tc.tool, Arguments: tc.args})
			if p == nil {
				t.Fatal("no proposal")
			}
			tc.check(t, p)
			// Proposing changes nothing.
			if got, _ := os.ReadFile(filepath.Join(dir, "plan.md")); string(got) != "one\ntwo\nthree\n" {
				t.Fatalf("plan.md is %q after a proposal", got)
			}
			if _, err := os.Stat(filepath.Join(dir, "new")); err == nil {
				t.Fatal("a proposal made a folder")
			}
		})
	}
	r, err := New(Options{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []provider.ToolCall{{Name: "shell", Arguments: `{"command":"ls"}`}, {Name: "write_file", Arguments: `{"path":1}`}} {
		if p := r.Propose(c); p != nil {
			t.Errorf("%s %s: proposal %+v, want none", c.Name, c.Arguments, p)
		}
	}
}

func TestBoundCutsAtLinesAndBytes(t *testing.T) {
	wide := strings.Repeat("x", 1000) + "\n"
	tests := []struct {
		in      string
		lines   int
		omitted int
	}{
		{"", 0, 0},
		{"a", 1, 0},
		{strings.Repeat(wide, 40), ProposalBytes / len(wide), 40 - ProposalBytes/len(wide)},
		{strings.Repeat("a\n", ProposalLines) + "tail", ProposalLines, 1},
		{strings.Repeat("y", ProposalBytes+10), 0, 1},
	}
	for _, tc := range tests {
		got, omitted := bound(tc.in)
		if lineCount(got) != tc.lines || omitted != tc.omitted || !strings.HasPrefix(tc.in, got) {
			t.Errorf("bound(%d bytes): %d lines, %d omitted; want %d, %d", len(tc.in), lineCount(got), omitted, tc.lines, tc.omitted)
		}
	}
}

// FuzzPropose: whatever the model writes as arguments, and whatever the
// file holds, a proposal never panics, never changes the file, and what it
// shows is either an error or a change, a diff starting at a hunk.
func FuzzPropose(f *testing.F) {
	f.Add("edit_file", `{"path":"f.txt","old":"b","new":"B"}`, "a\nb\nc\n")
	f.Add("write_file", `{"path":"f.txt","content":"x\ny"}`, "a\nb")
	f.Add("write_file", `{"path":"../f","content":""}`, "")
	f.Add("edit_file", `{"path":"f.txt","old":"\n","new":""}`, "\n\n\n")
	f.Fuzz(func(t *testing.T, tool, args, content string) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := New(Options{Workspace: dir})
		if err != nil {
			t.Fatal(err)
		}
		p := r.Propose(provider.ToolCall{Name: tool, Arguments: args})
		if got, _ := os.ReadFile(filepath.Join(dir, "f.txt")); string(got) != content {
			t.Fatalf("a proposal changed the file to %q", got)
		}
		if p == nil {
			return
		}
		if p.Diff != "" && !strings.HasPrefix(p.Diff, "@@") {
			t.Fatalf("diff %q", p.Diff)
		}
		if p.Error != "" && p.Status != "" {
			t.Fatalf("both an error and a status: %+v", p)
		}
	})
}

// BenchmarkPropose: what asking about an edit costs the gateway, on a
// 10 000-line file (an edit of one line) and a rewrite of every 10th line
// of it (write_file).
func BenchmarkPropose(b *testing.B) {
	var lines []string
	for i := range 10000 {
		lines = append(lines, fmt.Sprintf("line %d of the file, with some words to diff", i))
	}
	before := strings.Join(lines, "\n") + "\n"
	for i := 0; i < len(lines); i += 10 {
		lines[i] += " (changed)"
	}
	after := strings.Join(lines, "\n") + "\n"
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "big.txt"), []byte(before), 0o600); err != nil {
		b.Fatal(err)
	}
	r, err := New(Options{Workspace: dir})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		call provider.ToolCall
	}{
		{"edit_one_line", provider.ToolCall{Name: "edit_file", Arguments: `{"path":"big.txt","old":"line 5000 of","new":"LINE 5000 of"}`}},
		{"rewrite_every_10th", provider.ToolCall{Name: "write_file", Arguments: fmt.Sprintf(`{"path":"big.txt","content":%q}`, after)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if p := r.Propose(bc.call); p == nil || p.Status != StatusModified {
					b.Fatalf("%+v", p)
				}
			}
		})
	}
}
