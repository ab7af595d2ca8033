package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPrivateFoldersStayOut: a workspace configured around Mirror's data
// directory still keeps the file tools out of it (token, database), by
// any path: plain, through .., through a symlink; a workspace that is the
// data directory itself refuses everything.
func TestPrivateFoldersStayOut(t *testing.T) {
	ws := t.TempDir()
	data := filepath.Join(ws, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{filepath.Join(data, "token"): "secret-token", filepath.Join(ws, "notes.txt"): "hello"} {
		if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("data/token", filepath.Join(ws, "tok")); err != nil {
		t.Fatal(err)
	}
	r, err := New(Options{Workspace: ws, Private: []string{data}, ShellTimeout: 20 * time.Second,
		Policies: map[string]Policy{"write_file": Allow, "edit_file": Allow}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ tool, args string }{
		{"read_file", jsonArgs("path", "data/token")},
		{"read_file", jsonArgs("path", "./data/../data/token")},
		{"read_file", jsonArgs("path", "tok")},
		{"list_dir", jsonArgs("path", "data")},
		{"write_file", jsonArgs("path", "data/token", "content", "x")},
		{"write_file", jsonArgs("path", "data/new.txt", "content", "x")},
	} {
		res := run(t, r, tc.tool, tc.args)
		if !res.IsError || !strings.Contains(res.Content, "data directory") || strings.Contains(res.Content, "secret-token") {
			t.Errorf("%s %s: %+v", tc.tool, tc.args, res)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(data, "token")); string(b) != "secret-token" {
		t.Fatalf("the token was changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(data, "new.txt")); err == nil {
		t.Fatal("a file was written into the data directory")
	}
	if res := run(t, r, "read_file", jsonArgs("path", "notes.txt")); res.IsError || !strings.Contains(res.Content, "hello") {
		t.Fatalf("the rest of the workspace: %+v", res)
	}

	same, err := New(Options{Workspace: data, Private: []string{data}})
	if err != nil {
		t.Fatal(err)
	}
	if res := run(t, same, "list_dir", jsonArgs("path", ".")); !res.IsError {
		t.Fatalf("a workspace that is the data directory listed it: %+v", res)
	}
}
