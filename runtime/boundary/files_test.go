package boundary

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config/datadir"
)

func dataDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

func perm(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestWriteHandoff(t *testing.T) {
	data := dataDir(t)
	if _, err := ReadHandoff(data, "c_1"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadHandoff before any write = %v", err)
	}
	for _, text := range []string{"# Handoff\none\n", "# Handoff\ntwo, longer\n"} {
		if err := WriteHandoff(data, "c_1", text); err != nil {
			t.Fatal(err)
		}
		if got, err := ReadHandoff(data, "c_1"); err != nil || got != text {
			t.Errorf("ReadHandoff = %q, %v; want %q", got, err, text)
		}
	}
	dir := filepath.Join(data, WorkstreamsDir, "c_1")
	if m := perm(t, filepath.Join(data, WorkstreamsDir)); m != 0o700 {
		t.Errorf("workstreams mode %04o", m)
	}
	if m := perm(t, dir); m != 0o700 {
		t.Errorf("chat dir mode %04o", m)
	}
	if m := perm(t, filepath.Join(dir, HandoffName)); m != 0o600 {
		t.Errorf("handoff.md mode %04o", m)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
}

func TestWriteHandoffRefuses(t *testing.T) {
	tests := []struct {
		name   string
		chat   string
		setup  func(t *testing.T, data string)
		unsafe bool
	}{
		{"dots", "..", nil, false},
		{"separator", "a/b", nil, false},
		{"dot inside", "c_1.md", nil, false},
		{"empty", "", nil, false},
		{"backslash", `a\b`, nil, false},
		{"too long", strings.Repeat("c", 129), nil, false},
		{"linked chat dir", "c_1", func(t *testing.T, data string) {
			os.Mkdir(filepath.Join(data, WorkstreamsDir), 0o700)
			if err := os.Symlink(t.TempDir(), filepath.Join(data, WorkstreamsDir, "c_1")); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"linked workstreams", "c_1", func(t *testing.T, data string) {
			if err := os.Symlink(t.TempDir(), filepath.Join(data, WorkstreamsDir)); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"linked file", "c_1", func(t *testing.T, data string) {
			os.MkdirAll(filepath.Join(data, WorkstreamsDir, "c_1"), 0o700)
			target := filepath.Join(t.TempDir(), "elsewhere")
			os.WriteFile(target, []byte("keep"), 0o600)
			if err := os.Symlink(target, filepath.Join(data, WorkstreamsDir, "c_1", HandoffName)); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"open chat dir", "c_1", func(t *testing.T, data string) {
			os.MkdirAll(filepath.Join(data, WorkstreamsDir, "c_1"), 0o700)
			os.Chmod(filepath.Join(data, WorkstreamsDir, "c_1"), 0o755)
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := dataDir(t)
			if tc.setup != nil {
				tc.setup(t, data)
			}
			err := WriteHandoff(data, tc.chat, "x")
			if err == nil {
				t.Fatal("accepted")
			}
			if errors.Is(err, datadir.ErrUnsafe) != tc.unsafe {
				t.Errorf("ErrUnsafe %v, want %v: %v", !tc.unsafe, tc.unsafe, err)
			}
		})
	}
}

func TestWriteNotes(t *testing.T) {
	data := dataDir(t)
	at := time.Date(2025, 3, 4, 23, 30, 0, 0, time.FixedZone("x", -2*3600)) // 2025-03-05 UTC
	notes := []Note{
		{Title: "Deploys go through the staging box", Body: "The operator deploys with `make ship` from staging."},
		{Title: "Deploys go through the staging box!", Body: "Same title, another note."},
		{Title: "Ünïcode — only", Body: "x"},
		{Title: "日本語", Body: "y"},
	}
	names, err := WriteNotes(data, "c_9", "", 120, at, notes)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"2025-03-05-c_9-deploys-go-through-the-staging-box.md",
		"2025-03-05-c_9-deploys-go-through-the-staging-box-2.md",
		"2025-03-05-c_9-n-code-only.md",
		"2025-03-05-c_9-note.md",
	}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("names = %q\nwant %q", names, want)
	}
	// Never over an existing note: the same again gets new suffixes.
	again, err := WriteNotes(data, "c_9", "", 130, at, notes[:1])
	if err != nil || len(again) != 1 || again[0] != "2025-03-05-c_9-deploys-go-through-the-staging-box-3.md" {
		t.Errorf("again = %q, %v", again, err)
	}
	dir := filepath.Join(data, MemoryDir)
	got, err := os.ReadFile(filepath.Join(dir, want[0]))
	if err != nil {
		t.Fatal(err)
	}
	wantText := "# Deploys go through the staging box\n\nThe operator deploys with `make ship` from staging.\n\n---\nFrom chat c_9, the boundary at event 120, 2025-03-05.\n"
	if string(got) != wantText {
		t.Errorf("note:\n%s\nwant:\n%s", got, wantText)
	}
	if m := perm(t, filepath.Join(dir, want[0])); m != 0o600 {
		t.Errorf("note mode %04o", m)
	}
	if m := perm(t, dir); m != 0o700 {
		t.Errorf("memory mode %04o", m)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 5 {
		t.Errorf("temp files left behind: %v", entries)
	}
	if _, err := WriteNotes(data, "../x", "", 1, at, notes); err == nil {
		t.Error("bad chat id accepted")
	}
	if names, err := WriteNotes(data, "c_9", "", 1, at, nil); err != nil || names != nil {
		t.Errorf("no notes: %q, %v", names, err)
	}
}

func TestSlug(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Hello, World", "hello-world"},
		{"  --a--b--  ", "a-b"},
		{"", "note"},
		{"!!!", "note"},
		{strings.Repeat("abc ", 30), "abc-abc-abc-abc-abc-abc-abc-abc-abc-abc-abc-abc"},
		{"../../etc/passwd", "etc-passwd"},
	}
	for _, tc := range tests {
		if got := Slug(tc.in); got != tc.want || len(got) > 48 {
			t.Errorf("Slug(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
