package tools

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// send_file streams a workspace file to the caller's Send with its media
// type, name and caption; a path the file tools may not read (outside,
// through a symlink out, private, a folder, empty) is refused before
// anything is sent, as is a call where no one can receive a file. Its
// policy is ask by default.
func TestSendFile(t *testing.T) {
	ws, data, out := t.TempDir(), t.TempDir(), t.TempDir()
	write := func(p, s string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(ws, "out", "report.json"), "{\"a\": 1}\n")
	write(filepath.Join(ws, "notes"), "plain words, no extension")
	write(filepath.Join(ws, "empty.txt"), "")
	write(filepath.Join(out, "secret.txt"), "secret")
	write(filepath.Join(data, "token"), "tok")
	if err := os.Symlink(filepath.Join(out, "secret.txt"), filepath.Join(ws, "link.txt")); err != nil {
		t.Fatal(err)
	}
	r, err := New(Options{Workspace: ws, Private: []string{filepath.Join(ws, "private")}, Policies: map[string]Policy{SendFile: Allow}})
	if err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(ws, "private", "db"), "x")
	if def, _ := New(Options{Workspace: ws}); def.Policy(SendFile) != Ask {
		t.Errorf("default policy %s, want ask", def.Policy(SendFile))
	}
	for _, tc := range []struct {
		name, args string
		send       bool
		want       string // in the result
		got        string // what Send received: type name caption body
	}{
		{"json", `{"path":"out/report.json","caption":" the numbers "}`, true, "Sent report.json (application/json, 9 bytes)", "application/json report.json the numbers {\"a\": 1}\n"},
		{"sniffed", `{"path":"notes"}`, true, "Sent notes (text/plain", "text/plain notes  plain words, no extension"},
		{"outside", `{"path":"../x"}`, true, "leads out of the workspace", ""},
		{"symlink out", `{"path":"link.txt"}`, true, "link.txt", ""},
		{"private", `{"path":"private/db"}`, true, "private", ""},
		{"folder", `{"path":"out"}`, true, "is a folder", ""},
		{"empty", `{"path":"empty.txt"}`, true, "is empty", ""},
		{"no recipient", `{"path":"out/report.json"}`, false, ErrNoRecipient.Error(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			meta := CallMeta{}
			if tc.send {
				meta.Send = func(_ context.Context, d Delivery) error {
					b, err := io.ReadAll(d.Body)
					got = d.MediaType + " " + d.Name + " " + d.Caption + " " + string(b)
					return err
				}
			}
			res := r.Run(context.Background(), provider.ToolCall{ID: "c", Name: SendFile, Arguments: tc.args}, meta)
			if !strings.Contains(res.Content, tc.want) || res.IsError != (tc.got == "") {
				t.Fatalf("result %+v, want %q", res, tc.want)
			}
			if got != tc.got {
				t.Fatalf("sent %q, want %q", got, tc.got)
			}
		})
	}
}
