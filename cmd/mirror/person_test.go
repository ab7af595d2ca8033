package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runPerson runs `mirror person ARGS` as the command line does.
func runPerson(t *testing.T, env func(string) string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"person"}, args...), &out, &errb, env)
	return code, out.String(), errb.String()
}

// lastLine is the last line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestPersonOverHTTPAndInTheDatabase: with a gateway running, `mirror
// person` adds, lists, links and revokes over its HTTP API with the access
// token (the first owner's); the token `add` prints (alone on the last
// line) opens the gateway as that person, and stops working once revoked.
// With no gateway, the database is changed directly, and the next gateway
// honours it.
func TestPersonOverHTTPAndInTheDatabase(t *testing.T) {
	dir := t.TempDir()
	api := newBotAPI(t)
	cfgPath := filepath.Join(dir, "runtime.yaml")
	addr := freeAddr(t)
	yaml := fmt.Sprintf("listen: %s\nproviders: [{name: builtin, kind: builtin, delay: 0s}]\ntelegram:\n  enabled: true\n  api_endpoint: %s/bot%%s/%%s\n",
		addr, api.srv.URL)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	env := func(k string) string {
		if k == "MIRROR_TOKEN" {
			return "pair-token-0123456789abcdef"
		}
		return ""
	}
	flags := []string{"--config", cfgPath, "--data", data}
	chatsAs := func(tok string) int {
		req, _ := http.NewRequest("GET", "http://"+addr+"/api/chats", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	stop := servePair(t, cfgPath, data)
	code, out, errs := runPerson(t, env, append([]string{"add", "alice"}, flags...)...)
	if code != 0 || !strings.Contains(out, "added alice (member)") {
		t.Fatalf("add: %d %q %q", code, out, errs)
	}
	aliceTok := lastLine(out)
	if len(aliceTok) < 32 || chatsAs(aliceTok) != 200 {
		t.Fatalf("alice's token %q does not open the gateway", aliceTok)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"add", "alice"}, 1, "exists"},
		{[]string{"add", "bad name"}, 1, "letters, digits"},
		{[]string{"add", "root", "--role", "admin"}, 1, "owner or member"},
		{[]string{"link", "alice", "222"}, 0, "alice  member  tokens 1  telegram [222]"},
		{[]string{"link", "nobody", "222"}, 1, "no such person"},
		{[]string{"link", "alice", "x"}, 2, "not a Telegram user id"},
		{[]string{"list"}, 0, "owner  owner  tokens 0  telegram []  (the access token)\nalice  member  tokens 1  telegram [222]"},
		{[]string{"revoke", "owner"}, 1, "cannot be revoked"},
		{[]string{"revoke", "alice"}, 0, "revoked"},
		{[]string{"frobnicate"}, 2, "unknown subcommand"},
	} {
		code, out, errs := runPerson(t, env, append(tc.args, flags...)...)
		if code != tc.code || !strings.Contains(out+errs, tc.want) {
			t.Fatalf("person %v over HTTP: exit %d %q %q; want %d %q", tc.args, code, out, errs, tc.code, tc.want)
		}
	}
	if got := chatsAs(aliceTok); got != http.StatusUnauthorized {
		t.Fatalf("a revoked token answered %d", got)
	}
	stop()

	// No gateway: the database directly.
	code, out, errs = runPerson(t, env, append([]string{"add", "bob", "--role", "owner"}, flags...)...)
	if code != 0 || !strings.Contains(out, "added bob (owner)") {
		t.Fatalf("add in the database: %d %q %q", code, out, errs)
	}
	bobTok := lastLine(out)
	if code, out, _ := runPerson(t, env, append([]string{"list"}, flags...)...); code != 0 || !strings.Contains(out, "bob  owner  tokens 1") || !strings.Contains(out, "alice  member  tokens 0  telegram []  revoked") {
		t.Fatalf("list in the database: %d %q", code, out)
	}
	servePair(t, cfgPath, data)
	if got := chatsAs(bobTok); got != 200 {
		t.Fatalf("bob's token, added without a gateway, answered %d", got)
	}
}
