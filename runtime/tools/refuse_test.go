package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// TestRefuse: while Refuse holds, built-in tools fail with its reason and
// touch nothing; cleared, they run again.
func TestRefuse(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := New(Options{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]string{"path": "a.txt"})
	call := provider.ToolCall{ID: "c1", Name: "read_file", Arguments: string(args)}
	tests := []struct {
		reason  string
		wantErr bool
		want    string
	}{
		{"the workspace is not shared with node n2", true, "read_file: refused on this node: the workspace is not shared with node n2"},
		{"", false, "hello"},
	}
	for _, tt := range tests {
		r.Refuse(tt.reason)
		res := r.Run(context.Background(), call, CallMeta{Chat: "c"})
		if res.IsError != tt.wantErr || !strings.Contains(res.Full, tt.want) {
			t.Fatalf("reason %q: got %+v, want error=%v containing %q", tt.reason, res, tt.wantErr, tt.want)
		}
	}
}
