package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// pairWait bounds every wait of the pairing tests.
const pairWait = 30 * time.Second

// botAPI is a small fake of the Telegram Bot API on 127.0.0.1: getMe, a
// getUpdates long poll fed by push, and sendMessage recorded per chat.
type botAPI struct {
	srv *httptest.Server

	mu      sync.Mutex
	changed chan struct{}
	updates []string
	sent    map[string][]string // chat_id → texts
	nextID  int
}

func newBotAPI(t *testing.T) *botAPI {
	f := &botAPI{changed: make(chan struct{}), sent: map[string][]string{}, nextID: 100}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *botAPI) serve(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	w.Header().Set("Content-Type", "application/json")
	switch path.Base(r.URL.Path) {
	case "getMe":
		fmt.Fprint(w, `{"ok":true,"result":{"id":42,"is_bot":true,"first_name":"Fake","username":"fake_bot"}}`)
	case "getUpdates":
		offset, _ := strconv.Atoi(r.Form.Get("offset"))
		for {
			f.mu.Lock()
			var out []string
			for i, u := range f.updates {
				if i+1 >= offset {
					out = append(out, u)
				}
			}
			ch := f.changed
			f.mu.Unlock()
			if len(out) > 0 {
				fmt.Fprintf(w, `{"ok":true,"result":[%s]}`, strings.Join(out, ","))
				return
			}
			select {
			case <-ch:
			case <-r.Context().Done():
				return
			}
		}
	case "sendMessage":
		f.mu.Lock()
		f.nextID++
		chat := r.Form.Get("chat_id")
		f.sent[chat] = append(f.sent[chat], r.Form.Get("text"))
		close(f.changed)
		f.changed = make(chan struct{})
		id := f.nextID
		f.mu.Unlock()
		fmt.Fprintf(w, `{"ok":true,"result":{"message_id":%d,"date":1,"chat":{"id":%s,"type":"private"},"text":"x"}}`, id, chat)
	case "editMessageText":
		// A streamed reply grows by edits: its later text counts as sent.
		f.mu.Lock()
		chat := r.Form.Get("chat_id")
		f.sent[chat] = append(f.sent[chat], r.Form.Get("text"))
		close(f.changed)
		f.changed = make(chan struct{})
		f.mu.Unlock()
		fmt.Fprint(w, `{"ok":true,"result":true}`)
	case "sendChatAction", "answerCallbackQuery":
		fmt.Fprint(w, `{"ok":true,"result":true}`)
	default:
		w.WriteHeader(404)
		fmt.Fprint(w, `{"ok":false,"error_code":404,"description":"Not Found: method not found"}`)
	}
}

// push queues a private text message from user (update ids count from 1).
func (f *botAPI) push(user int64, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.updates) + 1
	f.updates = append(f.updates, fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"from":{"id":%d,"is_bot":false,"first_name":"U%d"},"chat":{"id":%d,"type":"private"},"date":1,"text":%q}}`,
		n, n, user, user, user, text))
	close(f.changed)
	f.changed = make(chan struct{})
}

// waitSent waits until chat was sent a text matching re and returns the match.
func (f *botAPI) waitSent(t *testing.T, chat int64, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.After(pairWait)
	for {
		f.mu.Lock()
		for _, s := range f.sent[strconv.FormatInt(chat, 10)] {
			if m := re.FindStringSubmatch(s); m != nil {
				f.mu.Unlock()
				return m
			}
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("chat %d was never sent %s", chat, re)
		}
	}
}

var pairCodeRE = regexp.MustCompile(`pairing code is ([A-Z0-9]{8})`)

// servePair runs `mirror serve` in this process with Telegram on the fake,
// listening on the address the config names (as `mirror pair` reads it).
// stop ends it and waits.
func servePair(t *testing.T, cfgPath, data string) (stop func()) {
	t.Helper()
	getenv := func(k string) string {
		switch k {
		case "MIRROR_TOKEN":
			return "pair-token-0123456789abcdef"
		case "TELEGRAM_BOT_TOKEN":
			return "4242:PAIR-secret"
		}
		return ""
	}
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		err := serve(ctx, []string{"--config", cfgPath, "--data", data}, pw, logs, getenv)
		pw.Close()
		done <- err
	}()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(pr).ReadString('\n')
		line <- s
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case s := <-line:
		if !strings.HasPrefix(s, "mirror: listening on") {
			cancel()
			t.Fatalf("first line %q; log %s", s, logs)
		}
	case <-time.After(pairWait):
		cancel()
		t.Fatalf("no listening line; log %s", logs)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(pairWait):
			t.Errorf("serve did not stop")
		}
		if strings.Contains(logs.String(), "PAIR-secret") {
			t.Errorf("the bot token is in the log")
		}
	}
	t.Cleanup(stop)
	return stop
}

// runPair runs `mirror pair ARGS` as the command line does.
func runPair(t *testing.T, env func(string) string, args ...string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"pair"}, args...), &out, &errb, env)
	return code, out.String() + errb.String()
}

// TestPairOverHTTPAndInTheDatabase: with a gateway running, `mirror pair`
// lists and approves over its HTTP API (the gateway holds the database);
// with none running, it opens the database itself.
func TestPairOverHTTPAndInTheDatabase(t *testing.T) {
	dir := t.TempDir()
	api := newBotAPI(t)
	cfgPath := filepath.Join(dir, "runtime.yaml")
	yaml := fmt.Sprintf("listen: %s\nproviders: [{name: builtin, kind: builtin, delay: 0s}]\ntelegram:\n  enabled: true\n  api_endpoint: %s/bot%%s/%%s\n",
		freeAddr(t), api.srv.URL)
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

	stop := servePair(t, cfgPath, data)
	api.push(222, "let me in")
	code222 := api.waitSent(t, 222, pairCodeRE)[1]
	// Over HTTP: the gateway holds the database lock, so only HTTP works.
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"list"}, 0, code222 + "  user 222  U222"},
		{[]string{"approve", "NOPE2345"}, 1, "no such pairing code"},
		{[]string{"approve", strings.ToLower(code222)}, 0, "approved: Telegram user 222"},
		{[]string{"approve", code222}, 1, "no such pairing code"},
		{[]string{"list"}, 0, "no pairing codes are waiting"},
	} {
		if code, out := runPair(t, env, append(tc.args, flags...)...); code != tc.code || !strings.Contains(out, tc.want) {
			t.Fatalf("pair %v over HTTP: exit %d %q; want %d %q", tc.args, code, out, tc.code, tc.want)
		}
	}
	api.waitSent(t, 222, regexp.MustCompile(`You have access now`))
	api.push(333, "me too")
	code333 := api.waitSent(t, 333, pairCodeRE)[1]
	stop()

	// No gateway: the database directly.
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"list"}, 0, code333 + "  user 333  U333"},
		{[]string{"approve", code333}, 0, "approved: Telegram user 333"},
		{[]string{"list"}, 0, "no pairing codes are waiting"},
		{[]string{"approve", code333}, 1, "no such pairing code"},
	} {
		if code, out := runPair(t, env, append(tc.args, flags...)...); code != tc.code || !strings.Contains(out, tc.want) {
			t.Fatalf("pair %v in the database: exit %d %q; want %d %q", tc.args, code, out, tc.code, tc.want)
		}
	}

	// The approval written to the database holds at the next start: user
	// 333 is answered, not sent a code.
	servePair(t, cfgPath, data)
	api.push(333, "hello again")
	api.waitSent(t, 333, regexp.MustCompile(`You said`))
}

// TestPairOverHTTPErrors: what a gateway answers that is not a pairing list
// is explained, not shown as an empty list.
func TestPairOverHTTPErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"wrong token", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "unauthorized", 401) },
			"refused the access token"},
		{"no Telegram", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) },
			"does not run Telegram"},
		{"server error", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(500)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "disk full"})
		}, "pair list: disk full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var auth string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				auth = r.Header.Get("Authorization")
				tc.handler(w, r)
			}))
			defer srv.Close()
			dir := t.TempDir()
			cfgPath := filepath.Join(dir, "runtime.yaml")
			if err := os.WriteFile(cfgPath, []byte("listen: "+strings.TrimPrefix(srv.URL, "http://")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			env := func(k string) string {
				if k == "MIRROR_TOKEN" {
					return "pair-token-0123456789abcdef"
				}
				return ""
			}
			code, out := runPair(t, env, "list", "--config", cfgPath, "--data", filepath.Join(dir, "data"))
			if code != 1 || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d %q, want 1 %q", code, out, tc.want)
			}
			if auth != "Bearer pair-token-0123456789abcdef" {
				t.Fatalf("Authorization %q", auth)
			}
		})
	}
}
