package gateway

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/gateway/ws"
)

// TestSlowBodyIsCutOff: a body sent a byte at a time (slowloris) is cut off
// once limits.body_timeout has passed, long before it would have arrived:
// the login form, and any other route with a body.
func TestSlowBodyIsCutOff(t *testing.T) {
	const bodyTimeout = 300 * time.Millisecond
	e := newEdge(t, edgeOpts{mutate: func(c *config.Config) { c.Limits.BodyTimeout = bodyTimeout }})
	tests := []struct {
		name, head string
		want       []int
	}{
		{"login", "POST /login HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\n", []int{http.StatusRequestTimeout}},
		{"a setting", "PUT /api/models/default/compaction HTTP/1.1\r\nAuthorization: Bearer " + testToken + "\r\nContent-Type: application/json\r\n", []int{http.StatusBadRequest}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", e.http.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			const length = 1000 // at a byte every 50 ms: 50 s to arrive whole
			if _, err := fmt.Fprintf(conn, "%sHost: %s\r\nContent-Length: %d\r\n\r\ntoken=", tc.head, e.http.Listener.Addr(), length); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			stop := make(chan struct{})
			dripped := make(chan int, 1)
			go func() { // the attacker's drip, until the server answers
				tick := time.NewTicker(50 * time.Millisecond)
				defer tick.Stop()
				n := 0
				defer func() { dripped <- n }()
				for n < length-6 {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					if _, err := conn.Write([]byte("a")); err != nil {
						return
					}
					n++
				}
			}()
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			close(stop)
			took := time.Since(start)
			n := <-dripped
			if err != nil {
				t.Fatalf("no answer after %v (%d bytes dripped): %v", took, n, err)
			}
			resp.Body.Close()
			if !containsInt(tc.want, resp.StatusCode) {
				t.Fatalf("status %d, want %v", resp.StatusCode, tc.want)
			}
			// Cut at the body timeout, not after the whole body: far less
			// than the 50 s it would take.
			if took > 5*time.Second || n >= length-6 {
				t.Fatalf("cut after %v and %d bytes; the bound is %v", took, n, bodyTimeout)
			}
		})
	}
	if logs := e.logs.String(); !strings.Contains(logs, "login form not sent in time") || strings.Contains(logs, "token=") {
		t.Fatalf("log:\n%s", logs)
	}
}

func containsInt(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// TestFailedLoginsThrottled: after limits.failed_logins_per_minute wrong
// tokens an address gets 429 with Retry-After, even with the right token,
// while another client (named by a trusted proxy) still logs in. Failures
// are logged with the address, never with what was typed.
func TestFailedLoginsThrottled(t *testing.T) {
	e := newEdge(t, edgeOpts{mutate: func(c *config.Config) {
		c.Limits.FailedLoginsPerMinute = 3
		c.Auth.TrustedProxies = []string{"127.0.0.1"}
	}})
	login := func(token, forwardedFor string) (int, http.Header) {
		t.Helper()
		req, _ := http.NewRequest("POST", e.http.URL+"/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if forwardedFor != "" {
			req.Header.Set("X-Forwarded-For", forwardedFor)
		}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	for i := range 3 {
		if code, _ := login(fmt.Sprintf("guess-SECRET-%d", i), ""); code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d", i, code)
		}
	}
	for _, token := range []string{"guess-SECRET-3", testToken} {
		code, h := login(token, "")
		secs, _ := strconv.Atoi(h.Get("Retry-After"))
		if code != http.StatusTooManyRequests || secs < 1 || secs > 20 {
			t.Fatalf("throttled login with %q: %d, Retry-After %q", token, code, h.Get("Retry-After"))
		}
	}
	if code, _ := login(testToken, "203.0.113.5"); code != http.StatusSeeOther {
		t.Fatalf("another client behind the proxy: %d", code)
	}
	logs := e.logs.String()
	if strings.Count(logs, "login with a wrong token") != 3 || !strings.Contains(logs, "remote=127.0.0.1/32") {
		t.Fatalf("failures not logged with the address:\n%s", logs)
	}
	if strings.Contains(logs, "SECRET") || strings.Contains(logs, testToken) {
		t.Fatalf("the log holds a typed token:\n%s", logs)
	}
}

// TestSocketMustAuthenticateInTime: a socket that sends nothing is closed
// with 4401 after limits.auth_timeout; one that said hello in time stays.
func TestSocketMustAuthenticateInTime(t *testing.T) {
	e := newEdge(t, edgeOpts{mutate: func(c *config.Config) { c.Limits.AuthTimeout = 2 * time.Second }})
	good, _, err := e.dial(nil)
	if err != nil {
		t.Fatal(err)
	}
	good.send(map[string]any{"type": "hello", "token": testToken})
	good.expect("welcome")
	silent, _, err := e.dial(nil) // opened after good's hello: times out after it would have
	if err != nil {
		t.Fatal(err)
	}
	if code, reason := closeOf(t, silent); code != ws.CloseUnauthorized || !strings.Contains(reason, "in time") {
		t.Fatalf("silent socket closed with %d %q, want 4401 for the timeout", code, reason)
	}
	good.send(map[string]any{"type": "chat.create", "title": "still here", "req": "c"})
	if c := good.expect("chat.created"); c["req"] != "c" {
		t.Fatalf("%v", c)
	}
	if n := e.srv.hub.Unauthenticated(); n != 0 {
		t.Fatalf("%d sockets still counted unauthenticated", n)
	}
}

// closeOf waits, bounded, for the socket's close and returns its code and
// reason.
func closeOf(t *testing.T, cl *client) (int, string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m, ok := <-cl.in:
			if !ok {
				return -1, ""
			}
			if m["type"] == "_closed" {
				if ce, ok := m["err"].(*websocket.CloseError); ok {
					return ce.Code, ce.Text
				}
				return -1, fmt.Sprint(m["err"])
			}
		case <-deadline:
			t.Fatal("socket did not close")
		}
	}
}

// TestUnauthenticatedSocketsCapped: past limits.unauthenticated_sockets the
// upgrade is refused with 503; sockets with the token are not counted, and
// one that authenticates makes room.
func TestUnauthenticatedSocketsCapped(t *testing.T) {
	e := newEdge(t, edgeOpts{mutate: func(c *config.Config) { c.Limits.UnauthenticatedSockets = 3 }})
	var waiting []*client
	for range 3 {
		cl, _, err := e.dial(nil)
		if err != nil {
			t.Fatal(err)
		}
		waiting = append(waiting, cl)
	}
	_, resp, err := e.dial(nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("fourth unauthenticated upgrade: err %v resp %v", err, resp)
	}
	if _, _, err := e.dial(bearer()); err != nil {
		t.Fatalf("an upgrade with the token is not capped: %v", err)
	}
	waiting[0].send(map[string]any{"type": "hello", "token": testToken})
	waiting[0].expect("welcome")
	if _, _, err := e.dial(nil); err != nil {
		t.Fatalf("after one authenticated: %v", err)
	}
	if n := e.srv.hub.Unauthenticated(); n != 3 {
		t.Fatalf("counted %d unauthenticated, want 3", n)
	}
}

// TestMessageRateLimited: past limits.messages_per_minute, message.send is
// answered error rate_limited with retry_after_ms, on every socket of the
// same token, and nothing is stored.
func TestMessageRateLimited(t *testing.T) {
	e := newEdge(t, edgeOpts{telegram: true, mutate: func(c *config.Config) {
		c.Limits.MessagesPerMinute = 3
		c.Telegram.AllowedUsers = []int64{77}
	}})
	cl := e.connect()
	cl.send(map[string]any{"type": "chat.create"})
	chat := cl.expect("chat.created")["chat"].(map[string]any)["id"].(string)
	for i := range 3 {
		cl.send(map[string]any{"type": "message.send", "chat": chat, "text": fmt.Sprint("m", i), "client_id": fmt.Sprint("k", i), "req": fmt.Sprint(i)})
		cl.expect("message.accepted")
	}
	other := e.connect()
	for _, c := range []*client{cl, other} {
		c.send(map[string]any{"type": "message.send", "chat": chat, "text": "one more", "client_id": "k-more", "req": "over"})
		er := c.expect("error")
		ms, _ := er["retry_after_ms"].(float64)
		if er["code"] != "rate_limited" || er["req"] != "over" || er["chat"] != chat || ms <= 0 || ms > 20000 || !strings.Contains(er["message"].(string), "3 a minute") {
			t.Fatalf("over the rate: %v", er)
		}
	}
	list, err := e.svc.List(t.Context())
	if err != nil || len(list) != 1 {
		t.Fatal(list, err)
	}
	// Other frames are not counted.
	cl.send(map[string]any{"type": "chat.create", "req": "c"})
	cl.expect("chat.created")

	// A Telegram user has the same rate, and is told in plain text.
	for i := range 4 {
		e.update(fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"from":{"id":77,"is_bot":false,"first_name":"Owner"},"chat":{"id":77,"type":"private"},"date":1700000000,"text":"telegram %d"}}`, 500+i, i+1, i))
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case text := <-e.sent:
			if strings.HasPrefix(text, "Not sent: too many messages (at most 3 a minute)") {
				return
			}
		case <-deadline:
			t.Fatal("Telegram was not told to slow down")
		}
	}
}

// TestQueueCapTooLarge: past limits.pending_per_chat, message.send is
// answered error too_large over the WebSocket, and Telegram says so in
// plain text instead of handling the update again.
func TestQueueCapTooLarge(t *testing.T) {
	model := newHeldModel(t)
	e := newEdge(t, edgeOpts{model: model, telegram: true, mutate: func(c *config.Config) {
		c.Limits.PendingPerChat = 2
		c.Telegram.AllowedUsers = []int64{77}
	}})
	cl := e.connect()
	cl.send(map[string]any{"type": "chat.create"})
	chat := cl.expect("chat.created")["chat"].(map[string]any)["id"].(string)
	cl.send(map[string]any{"type": "message.send", "chat": chat, "text": "a question", "client_id": "q"})
	cl.expect("message.accepted")
	model.next(t) // picked up and held
	for i := range 2 {
		cl.send(map[string]any{"type": "message.send", "chat": chat, "text": fmt.Sprint("waits ", i), "client_id": fmt.Sprint("w", i)})
		cl.expect("message.accepted")
	}
	cl.send(map[string]any{"type": "message.send", "chat": chat, "text": "no room", "client_id": "full", "req": "f"})
	if er := cl.expect("error"); er["code"] != "too_large" || er["req"] != "f" || !strings.Contains(er["message"].(string), "2 messages already wait") {
		t.Fatalf("past the queue cap: %v", er)
	}

	// Telegram: the same refusal, as text.
	msg := func(id int, text string) string {
		return fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"from":{"id":77,"is_bot":false,"first_name":"Owner"},"chat":{"id":77,"type":"private"},"date":1700000000,"text":%q}}`, 1000+id, id, text)
	}
	e.update(msg(1, "a telegram question"))
	model.next(t)
	e.update(msg(2, "waits 0"))
	e.update(msg(3, "waits 1"))
	e.update(msg(4, "no room"))
	deadline := time.After(10 * time.Second)
	for {
		select {
		case text := <-e.sent:
			if strings.HasPrefix(text, "Not sent: too large") {
				model.release <- struct{}{}
				model.release <- struct{}{}
				return
			}
		case <-deadline:
			t.Fatal("Telegram was not told the queue is full")
		}
	}
}

// TestHTTPServerLimits: the server `mirror serve` runs bounds headers, idle
// connections and header size, and sets no whole-request read or write
// timeout, which would cut WebSockets and the monitor's stream.
func TestHTTPServerLimits(t *testing.T) {
	hs := bare(t, "127.0.0.1:8765", nil).HTTPServer(nil)
	if hs.ReadHeaderTimeout <= 0 || hs.IdleTimeout <= 0 || hs.MaxHeaderBytes <= 0 || hs.ReadTimeout != 0 || hs.WriteTimeout != 0 || hs.Handler == nil {
		t.Fatalf("%+v", hs)
	}
}

// TestStalledReaderCutOff: an answer whose client stops reading fails once
// a write has waited WriteStall, instead of holding the handler forever;
// writes that keep going through are never cut.
func TestStalledReaderCutOff(t *testing.T) {
	s := bare(t, "127.0.0.1:8765", nil)
	s.writeStall = 300 * time.Millisecond
	failed := make(chan error, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w, _ = s.bound(w, r)
		chunk := make([]byte, 64<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				failed <- err
				return
			}
		}
	}))
	srv.Start()
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n") // and never read
	select {
	case err := <-failed:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("write failed with %v, want the deadline", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the handler still writes to a client that stopped reading")
	}
}
