package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/gateway/telegram"
	bolt "go.etcd.io/bbolt"
)

// hostileName is a Telegram name that, printed raw, would clear the
// screen, retitle the terminal, start a new line and reverse the rest.
const hostileName = "Eve\x1b[2J\x1b]0;owned\x07\u202e\nroot\u009b31m"

// noControls fails when out holds a control or bidi character (other
// than the newline that ends each line).
func noControls(t *testing.T, out string) {
	t.Helper()
	for _, r := range strings.TrimRight(out, "\n") {
		if r != '\n' && (unicode.IsControl(r) || r >= '\u202a' && r <= '\u202e') {
			t.Fatalf("output holds %U: %q", r, out)
		}
	}
	if strings.Count(strings.TrimRight(out, "\n"), "\n") != 0 {
		t.Fatalf("one pairing printed on several lines: %q", out)
	}
}

// TestPairListEscapesNames: `mirror pair list` and `approve` print names
// escaped, whether the gateway answers over HTTP or the database is read
// directly, and whatever the gateway or an older database holds.
func TestPairListEscapesNames(t *testing.T) {
	env := func(k string) string {
		if k == "MIRROR_TOKEN" {
			return "pair-token-0123456789abcdef"
		}
		return ""
	}
	const escaped = `Eve\x1b[2J\x1b]0;owned\a\u202e\nroot\u009b31m`
	p := telegram.Pairing{Code: "ABCD2345", User: 222, Chat: 222, Name: hostileName,
		CreatedAt: time.Now().UTC(), ExpiresAt: time.Now().Add(time.Hour).UTC()}

	t.Run("over HTTP", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if r.Method == http.MethodPost {
				_ = json.NewEncoder(w).Encode(map[string]any{"approved": p})
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"pairings": []telegram.Pairing{p}})
		}))
		defer srv.Close()
		dir := t.TempDir()
		cfgPath := filepath.Join(dir, "runtime.yaml")
		if err := os.WriteFile(cfgPath, []byte("listen: "+strings.TrimPrefix(srv.URL, "http://")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"list"}, {"approve", "ABCD2345"}} {
			code, out := runPair(t, env, append(args, "--config", cfgPath, "--data", filepath.Join(dir, "data"))...)
			if code != 0 || !strings.Contains(out, escaped) {
				t.Fatalf("pair %v: exit %d %q, want the name as %s", args, code, out, escaped)
			}
			noControls(t, out)
		}
	})

	t.Run("in the database", func(t *testing.T) {
		dir := t.TempDir()
		cfgPath := filepath.Join(dir, "runtime.yaml")
		if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf("listen: %s\n", freeAddr(t))), 0o600); err != nil {
			t.Fatal(err)
		}
		data := filepath.Join(dir, "data")
		flags := []string{"--config", cfgPath, "--data", data}
		if code, out := runPair(t, env, append([]string{"list"}, flags...)...); code != 0 {
			t.Fatalf("first list: %d %s", code, out)
		}
		// As a version that stored names raw would have left it.
		db, err := chats.OpenDB(filepath.Join(data, DBFile), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := json.Marshal(p)
		err = db.Update(func(tx *bolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists([]byte("telegram"))
			if err != nil {
				return err
			}
			return bk.Put([]byte("p/"+p.Code), v)
		})
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"list"}, {"approve", "ABCD2345"}} {
			code, out := runPair(t, env, append(args, flags...)...)
			if code != 0 || !strings.Contains(out, escaped) {
				t.Fatalf("pair %v: exit %d %q, want the name as %s", args, code, out, escaped)
			}
			noControls(t, out)
		}
	})
}
