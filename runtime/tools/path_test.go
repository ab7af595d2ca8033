package tools

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// escapeFixture is a workspace next to a secret folder, with every kind of
// symlink a model might try to leave through.
type escapeFixture struct {
	ws, outside string
}

func newEscapeFixture(t testing.TB) escapeFixture {
	t.Helper()
	base := t.TempDir()
	ws, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(ws, "sub", "deep"), outside} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(outside, "secret.txt"): "outside secret",
		filepath.Join(ws, "sub", "a.txt"):    "inside a",
		filepath.Join(ws, "top.txt"):         "inside top",
	}
	for p, c := range files {
		if err := os.WriteFile(p, []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"out_dir":         outside,                                 // absolute, to a folder outside
		"out_file":        filepath.Join(outside, "secret.txt"),    // absolute, to a file outside
		"rel_out":         "../outside",                            // relative, leading out
		"sub/deep/up":     "../../../outside/secret.txt",           // deep relative, leading out
		"dangling":        "missing.txt",                           // to nothing
		"dangling_out":    filepath.Join(outside, "new.txt"),       // to nothing, outside
		"in_dir":          "sub",                                   // inside: allowed
		"in_abs":          filepath.Join(ws, "top.txt"),            // absolute but inside: allowed
		"loop":            "loop",                                  // to itself
		"sub/back":        "..",                                    // to the workspace: allowed
		"sub/deep/chain":  "../../in_dir/../rel_out",               // chains into an escape
		"sub/deep/inside": "../a.txt",                              // relative, inside: allowed
		"root_link":       "/",                                     // the filesystem root
		"ws_parent":       filepath.Dir(ws),                        // the folder holding the workspace
		"self":            ws,                                      // the workspace itself: allowed
		"proc":            "/proc/self/root",                       // a magic link
		"sub/dotdot_file": filepath.Join("..", "..", "outside"),    // through .. to outside
		"sub/deep/ok_up":  filepath.Join("..", "..", "top.txt"),    // through .. but inside
		"twice":           "out_dir",                               // a link to a link leading out
		"twice_in":        "in_dir",                                // a link to a link inside
		"in_dir_escape":   filepath.Join("sub", "..", "..", "ws2"), // lexically out
	}
	for l, target := range links {
		if err := os.Symlink(target, filepath.Join(ws, l)); err != nil {
			t.Fatal(err)
		}
	}
	return escapeFixture{ws: ws, outside: outside}
}

func TestResolve(t *testing.T) {
	fx := newEscapeFixture(t)
	w, err := openWorkspace(fx.ws)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		in   string
		want string // resolved path; "" means refused with ErrOutside; "!" refused otherwise
	}{
		{"", "."},
		{".", "."},
		{"top.txt", "top.txt"},
		{"./sub//a.txt", "sub/a.txt"},
		{"sub/../top.txt", "top.txt"},
		{"new/file.txt", "new/file.txt"},
		{"in_dir/a.txt", "sub/a.txt"},
		{"in_abs", "top.txt"},
		{"sub/back/top.txt", "top.txt"},
		{"sub/deep/inside", "sub/a.txt"},
		{"sub/deep/ok_up", "top.txt"},
		{"self/top.txt", "top.txt"},
		{"twice_in/a.txt", "sub/a.txt"},
		{"in_dir/new.txt", "sub/new.txt"},

		{"/etc/passwd", ""},
		{filepath.Join(fx.outside, "secret.txt"), ""},
		{"..", ""},
		{"../outside/secret.txt", ""},
		{"sub/../../outside", ""},
		{"a\x00b", ""},
		{`\etc`, ""},
		{"out_dir", ""},
		{"out_dir/secret.txt", ""},
		{"out_dir/new.txt", ""},
		{"out_file", ""},
		{"rel_out/secret.txt", ""},
		{"sub/deep/up", ""},
		{"dangling", ""},
		{"dangling_out", ""},
		{"sub/deep/chain/secret.txt", ""},
		{"root_link/etc/passwd", ""},
		{"ws_parent/outside/secret.txt", ""},
		{"proc/etc/passwd", ""},
		{"sub/dotdot_file/secret.txt", ""},
		{"twice/secret.txt", ""},
		{"in_dir_escape", ""},
		{strings.Repeat("a/", maxPath), ""},

		{"loop", "!"},
		{"top.txt/x", "!"},
	}
	for _, tc := range tests {
		t.Run(strings.ReplaceAll(tc.in, "/", "|"), func(t *testing.T) {
			got, err := w.resolve(tc.in)
			switch tc.want {
			case "":
				if !errors.Is(err, ErrOutside) {
					t.Fatalf("resolve(%q) = %q, %v; want ErrOutside", tc.in, got, err)
				}
			case "!":
				if err == nil {
					t.Fatalf("resolve(%q) = %q; want an error", tc.in, got)
				}
			default:
				if err != nil || got != tc.want {
					t.Fatalf("resolve(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
				}
			}
			if err != nil && !strings.Contains(tc.in, fx.outside) && strings.Contains(err.Error(), fx.outside) {
				t.Errorf("error shows the outside path: %v", err)
			}
		})
	}
}

// Every escape, through every file tool: refused, and nothing outside read
// or changed.
func TestToolsRefuseEscapes(t *testing.T) {
	fx := newEscapeFixture(t)
	r := newTestRegistry(t, fx.ws, nil)
	paths := []string{"/etc/passwd", filepath.Join(fx.outside, "secret.txt"), "../outside/secret.txt", "out_dir/secret.txt",
		"out_dir/new.txt", "out_file", "rel_out/secret.txt", "sub/deep/up", "dangling_out", "sub/deep/chain/secret.txt",
		"root_link/etc/passwd", "twice/secret.txt", "a\x00b", "proc/etc/hostname"}
	for _, p := range paths {
		for _, call := range []struct{ name, args string }{
			{"read_file", jsonArgs("path", p)},
			{"list_dir", jsonArgs("path", p)},
			{"write_file", jsonArgs("path", p, "content", "pwned")},
			{"edit_file", jsonArgs("path", p, "old", "outside", "new", "pwned")},
		} {
			res := run(t, r, call.name, call.args)
			if !res.IsError || strings.Contains(res.Content, "outside secret") {
				t.Errorf("%s %q: not refused: %+v", call.name, p, res)
			}
		}
	}
	entries, err := os.ReadDir(fx.outside)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("outside folder now holds %d entries", len(entries))
	}
	if b, _ := os.ReadFile(filepath.Join(fx.outside, "secret.txt")); string(b) != "outside secret" {
		t.Errorf("outside file changed: %q", b)
	}
}

// FuzzResolve: whatever the path, resolve never panics, what it returns is
// inside the workspace with no symlink in it, and write_file never creates
// or changes anything outside.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"", ".", "a", "../x", "/x", "out_dir/x", "in_dir/../../x", "sub/deep/chain/x", "a\x00", "sub/back/out_dir/y",
		"root_link/tmp/x", "in_dir/./../rel_out/z", "self/self/top.txt", "…/ü", "sub//deep///ok_up"} {
		f.Add(s)
	}
	fx := newEscapeFixture(f)
	w, err := openWorkspace(fx.ws)
	if err != nil {
		f.Fatal(err)
	}
	r := newTestRegistry(f, fx.ws, nil)
	f.Fuzz(func(t *testing.T, p string) {
		got, err := w.resolve(p)
		if err == nil {
			full := filepath.Join(w.real, filepath.FromSlash(got))
			if !w.contains(full) {
				t.Fatalf("resolve(%q) = %q: outside", p, got)
			}
			if real, err := filepath.EvalSymlinks(full); err == nil && real != full {
				t.Fatalf("resolve(%q) = %q still goes through a symlink to %q", p, got, real)
			}
		}
		_ = r.Run(t.Context(), callOf("write_file", jsonArgs("path", p, "content", "x")), CallMeta{Chat: "c"})
		entries, err := os.ReadDir(fx.outside)
		if err != nil || len(entries) != 1 {
			t.Fatalf("write_file %q wrote outside (%d entries, %v)", p, len(entries), err)
		}
		if b, _ := os.ReadFile(filepath.Join(fx.outside, "secret.txt")); string(b) != "outside secret" {
			t.Fatalf("write_file %q changed the outside file", p)
		}
	})
}
