package tools

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/provider"
)

func newTestRegistry(t testing.TB, ws string, ledger *Ledger) *Registry {
	t.Helper()
	r, err := New(Options{Workspace: ws, Ledger: ledger, ShellTimeout: 20 * time.Second,
		Policies: map[string]Policy{"write_file": Allow, "edit_file": Allow, "shell": Allow}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// jsonArgs builds an arguments object from key, value pairs; values that are
// not strings are written as JSON.
func jsonArgs(kv ...any) string {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func callOf(name, args string) provider.ToolCall {
	return provider.ToolCall{ID: "call_1", Name: name, Arguments: args}
}

func run(t testing.TB, r *Registry, name, args string) Result {
	t.Helper()
	return r.Run(context.Background(), callOf(name, args), CallMeta{Chat: "chat", Turn: 1, CallID: "call_1"})
}

func TestNew(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "workspace")
	r, err := New(Options{Workspace: dir})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("workspace not created 0700: %v %v", fi, err)
	}
	if r.shellTimeout != DefaultShellTimeout || r.limit != DefaultOutputLimit {
		t.Errorf("defaults: %v %d", r.shellTimeout, r.limit)
	}
	bad := []struct {
		name string
		opt  Options
		want string
	}{
		{"no workspace", Options{}, "tools: no workspace given"},
		{"unknown tool", Options{Workspace: dir, Policies: map[string]Policy{"rm": Allow}}, `tools: policy for "rm": unknown tool (tools: edit_file, list_dir, read_file, send_file, shell, write_file)`},
		{"bad policy", Options{Workspace: dir, Policies: map[string]Policy{"shell": "maybe"}}, `tools: policy for shell: want allow, ask or deny, not "maybe"`},
		{"negative timeout", Options{Workspace: dir, ShellTimeout: -1}, "tools: shell timeout must not be negative"},
		{"workspace is a file", Options{Workspace: "/dev/null"}, "tools: create workspace: mkdir /dev/null: not a directory"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.opt); err == nil || err.Error() != tc.want {
				t.Errorf("New = %v, want %s", err, tc.want)
			}
		})
	}
}

func TestOptionsFrom(t *testing.T) {
	c := config.Default()
	c.Dir = t.TempDir()
	c.Tools.Policies.Shell = config.PolicyDeny
	opt := OptionsFrom(c, nil)
	if opt.Workspace != filepath.Join(c.Dir, "workspace") || opt.ShellTimeout != 2*time.Minute || opt.OutputLimit != 16000 {
		t.Errorf("OptionsFrom = %+v", opt)
	}
	r, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Policy{"read_file": Allow, "list_dir": Allow, "write_file": Ask, "edit_file": Ask, "shell": Deny, "nope": Deny}
	for name, p := range want {
		if got := r.Policy(name); got != p {
			t.Errorf("Policy(%s) = %s, want %s", name, got, p)
		}
	}
}

func TestDefinitions(t *testing.T) {
	r, err := New(Options{Workspace: t.TempDir(), Policies: map[string]Policy{"shell": Deny}})
	if err != nil {
		t.Fatal(err)
	}
	defs := r.Definitions()
	var names []string
	for _, d := range defs {
		names = append(names, d.Name)
		var s map[string]any
		if err := json.Unmarshal(d.Parameters, &s); err != nil || s["type"] != "object" || s["additionalProperties"] != false {
			t.Errorf("%s: schema %s (%v)", d.Name, d.Parameters, err)
		}
		if d.Description == "" {
			t.Errorf("%s: no description", d.Name)
		}
	}
	// Fixed order; the denied shell is not offered.
	if got := strings.Join(names, ","); got != "read_file,list_dir,write_file,edit_file,send_file" {
		t.Errorf("definitions %s", got)
	}
	// Callers may not change the registry's schema through the slice.
	defs[0].Parameters[0] = 'X'
	if r.Definitions()[0].Parameters[0] != '{' {
		t.Error("Definitions shares its bytes")
	}
}

func TestCheckAndRunRefusals(t *testing.T) {
	r, err := New(Options{Workspace: t.TempDir(), Policies: map[string]Policy{"shell": Deny}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, tool, args string
		is               error
		want             string
	}{
		{"unknown", "rm_rf", `{}`, ErrUnknownTool, `"rm_rf": unknown tool; the tools are edit_file, list_dir, read_file, send_file, write_file`},
		{"denied", "shell", `{"command":"id"}`, ErrDenied, "shell: tool denied by policy (tools.policies.shell in runtime.yaml); do the task without it or ask the person to allow it"},
		{"missing argument", "write_file", `{"content":"x"}`, ErrInvalidArguments, `write_file: argument "path" is required`},
		{"bad json", "read_file", `{"path":`, ErrInvalidArguments, "read_file: the arguments are not valid JSON: it ends too early"},
		{"unknown argument", "list_dir", `{"dir":"x"}`, ErrInvalidArguments, `list_dir: unknown argument "dir" (arguments: path)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := r.Check(callOf(tc.tool, tc.args))
			if !errors.Is(err, tc.is) || err.Error() != tc.want {
				t.Errorf("Check = %v, want %s", err, tc.want)
			}
			res := run(t, r, tc.tool, tc.args)
			if !res.IsError || res.Content != tc.want || res.Full != tc.want {
				t.Errorf("Run = %+v", res)
			}
		})
	}
	// Good arguments pass Check whatever the policy says about asking.
	if err := r.Check(callOf("write_file", `{"path":"a","content":""}`)); err != nil {
		t.Errorf("Check(good) = %v", err)
	}
}

func TestRunRecoversPanics(t *testing.T) {
	r := newTestRegistry(t, t.TempDir(), nil)
	r.tools["boom"] = &tool{name: "boom", schema: object(nil, nil), defaultPol: Allow,
		run: func(context.Context, []byte, CallMeta) (string, bool, error) { panic("kaboom") }}
	res := run(t, r, "boom", "")
	if !res.IsError || res.Content != "boom: internal error (kaboom); the call may not have completed" {
		t.Errorf("Run = %+v", res)
	}
}

func TestRunCancelled(t *testing.T) {
	r := newTestRegistry(t, t.TempDir(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := r.Run(ctx, callOf("write_file", `{"path":"a","content":"x"}`), CallMeta{Chat: "c"})
	if !res.IsError || !strings.Contains(res.Content, "not run: context canceled") {
		t.Errorf("Run = %+v", res)
	}
	if _, err := os.Stat(filepath.Join(r.Workspace(), "a")); !errors.Is(err, os.ErrNotExist) {
		t.Error("a cancelled call ran")
	}
}

func TestFileTools(t *testing.T) {
	ws := t.TempDir()
	r := newTestRegistry(t, ws, nil)
	must := func(name, args, want string) {
		t.Helper()
		res := run(t, r, name, args)
		if res.IsError || res.Content != want {
			t.Fatalf("%s %s = %+v, want %q", name, args, res, want)
		}
	}
	fail := func(name, args, want string) {
		t.Helper()
		res := run(t, r, name, args)
		if !res.IsError || res.Content != want {
			t.Fatalf("%s %s = %+v, want error %q", name, args, res, want)
		}
	}
	must("list_dir", `{}`, "(empty folder)")
	must("write_file", jsonArgs("path", "notes/todo.md", "content", "one\ntwo\nthree\ntwo\n"), "wrote 18 bytes to notes/todo.md (created)")
	fi, err := os.Stat(filepath.Join(ws, "notes", "todo.md"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v %v", fi.Mode(), err)
	}
	if di, _ := os.Stat(filepath.Join(ws, "notes")); di.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v", di.Mode())
	}
	must("read_file", `{"path":"notes/todo.md"}`, "one\ntwo\nthree\ntwo\n")
	must("read_file", `{"path":"notes/todo.md","offset":2,"limit":2}`, "two\nthree\n…[lines 2-3 of 4; use offset and limit to read more]")
	must("read_file", `{"path":"notes/todo.md","offset":4.0}`, "two\n…[lines 4-4 of 4; use offset and limit to read more]")
	must("read_file", `{"path":"notes/todo.md","limit":100}`, "one\ntwo\nthree\ntwo\n")
	fail("read_file", `{"path":"notes/todo.md","offset":9}`, `read_file: offset 9 is past the end: "notes/todo.md" has 4 lines`)
	fail("read_file", `{"path":"nope.txt"}`, `read_file: "nope.txt": no such file or directory`)
	fail("read_file", `{"path":"notes"}`, `read_file: "notes" is a folder; use list_dir to see what it holds`)

	fail("edit_file", jsonArgs("path", "notes/todo.md", "old", "two", "new", "2"), `edit_file: "old" matches 2 times in "notes/todo.md"; it must match exactly once: include surrounding lines to make it unique`)
	fail("edit_file", jsonArgs("path", "notes/todo.md", "old", "four", "new", "4"), `edit_file: "old" was not found in "notes/todo.md"; it must match exactly, whitespace and line breaks included (read_file shows the current text)`)
	fail("edit_file", jsonArgs("path", "notes/todo.md", "old", "x", "new", "x"), `edit_file: "old" and "new" are the same; nothing would change`)
	fail("edit_file", jsonArgs("path", "new.md", "old", "x", "new", "y"), `edit_file: "new.md" does not exist; use write_file to create it`)
	fail("edit_file", jsonArgs("path", "notes/todo.md", "old", "", "new", "y"), `edit_file: argument "old" must not be empty`)
	must("edit_file", jsonArgs("path", "notes/todo.md", "old", "three\ntwo", "new", "3\n2"), "replaced 1 occurrence in notes/todo.md at line 3")
	must("read_file", `{"path":"notes/todo.md"}`, "one\ntwo\n3\n2\n")
	must("write_file", jsonArgs("path", "notes/todo.md", "content", "one\ntwo\n3\n2\n"), "wrote 12 bytes to notes/todo.md (unchanged)")
	fail("write_file", jsonArgs("path", "notes", "content", "x"), `write_file: "notes" is a folder; use list_dir to see what it holds`)
	fail("write_file", jsonArgs("path", ".", "content", "x"), `write_file: "." is the workspace folder itself; name a file in it`)
	fail("write_file", jsonArgs("path", "notes/todo.md/x", "content", "x"), `write_file: path "notes/todo.md/x": "notes/todo.md" is not a directory`)

	if err := os.WriteFile(filepath.Join(ws, "bin.dat"), []byte{0x7f, 'E', 'L', 'F', 0, 1}, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "big.txt"), []byte(strings.Repeat("a", maxRead+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "empty"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("notes", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	fail("read_file", `{"path":"bin.dat"}`, `read_file: "bin.dat" looks binary (6 bytes); read_file reads text only`)
	fail("read_file", `{"path":"big.txt"}`, `read_file: "big.txt" is 1048577 bytes; read_file reads at most 1 MiB; use shell (head, sed -n, grep) to read parts of it`)
	must("read_file", `{"path":"empty"}`, "(empty file)")
	must("list_dir", `{"path":""}`, "big.txt\nbin.dat\nempty\nlink@\nnotes/")
	must("list_dir", `{"path":"link"}`, "todo.md")
	fail("list_dir", `{"path":"empty"}`, `list_dir: "empty" is a file, not a folder; use read_file to read it`)
	// Writing through a symlink inside the workspace changes its target.
	must("write_file", jsonArgs("path", "link/todo.md", "content", "via link"), "wrote 8 bytes to link/todo.md (modified)")
	must("read_file", `{"path":"notes/todo.md"}`, "via link")
}

func TestPreview(t *testing.T) {
	tests := []struct {
		name  string
		full  string
		limit int
	}{
		{"ascii", strings.Repeat("abcdefghij", 300), 1000},
		{"runes", strings.Repeat("żółw ", 1000), 700},
		{"tiny limit", strings.Repeat("x", 200), 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			content, handle := preview(tc.full, tc.limit)
			if handle == "" || !strings.HasPrefix(handle, "out_") || len(handle) != 20 {
				t.Fatalf("handle %q", handle)
			}
			if !utf8.ValidString(content) {
				t.Fatal("preview cut a rune")
			}
			if n := utf8.RuneCountInString(content); n > tc.limit && tc.limit > 100 {
				t.Errorf("preview is %d characters, limit %d", n, tc.limit)
			}
			head, rest, ok := strings.Cut(content, "\n…[")
			if !ok {
				t.Fatalf("no marker in %q", content)
			}
			marker, tail, _ := strings.Cut(rest, "]…\n")
			if !strings.HasPrefix(tc.full, head) || !strings.HasSuffix(tc.full, tail) {
				t.Error("head or tail is not the output's")
			}
			omitted := utf8.RuneCountInString(tc.full) - utf8.RuneCountInString(head) - utf8.RuneCountInString(tail)
			if want := jsonNum(omitted) + " more characters; full output stored as handle " + handle; marker != want {
				t.Errorf("marker %q, want %q", marker, want)
			}
			if c2, h2 := preview(tc.full, tc.limit); c2 != content || h2 != handle {
				t.Error("preview is not deterministic")
			}
		})
	}
	if c, h := preview("short", 10); c != "short" || h != "" {
		t.Errorf("short output previewed: %q %q", c, h)
	}
	// Through Run: Full is whole, Content the preview, Handle set.
	ws := t.TempDir()
	r, err := New(Options{Workspace: ws, OutputLimit: 600})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("line of text\n", 200)
	if err := os.WriteFile(filepath.Join(ws, "big.txt"), []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	res := run(t, r, "read_file", `{"path":"big.txt"}`)
	wantContent, wantHandle := r.Preview(big)
	if res.IsError || res.Full != big || res.Content != wantContent || res.Handle != wantHandle || wantHandle == "" {
		t.Errorf("Run = content %d chars, full %d chars, handle %q", len(res.Content), len(res.Full), res.Handle)
	}
}

func jsonNum(n int) string { b, _ := json.Marshal(n); return string(b) }
