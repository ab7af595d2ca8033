package gateway

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
)

// bare is a Server with no chats behind it, for checks that never reach a
// route's work.
func bare(t testing.TB, listen string, mutate func(*config.Config)) *Server {
	t.Helper()
	cfg := config.Default()
	if mutate != nil {
		mutate(cfg)
	}
	s := New(Options{Config: cfg, Token: testToken, Addr: listen})
	t.Cleanup(s.Close)
	return s
}

func TestForgedTable(t *testing.T) {
	cookie := "Cookie"
	tests := []struct {
		name     string
		listen   string
		allowed  []string
		proxies  []string
		method   string
		host     string // Host header; "" is the listen address
		remote   string // peer; "" is 192.0.2.1:1234
		header   map[string]string
		wantDeny bool
	}{
		{name: "GET with cookie from another origin", method: "GET", header: map[string]string{cookie: "x", "Origin": "http://127.0.0.1:9999"}},
		{name: "HEAD", method: "HEAD", header: map[string]string{cookie: "x", "Origin": "http://127.0.0.1:9999"}},
		{name: "OPTIONS", method: "OPTIONS", header: map[string]string{cookie: "x", "Origin": "http://evil.example"}},
		{name: "POST own origin", method: "POST", header: map[string]string{cookie: "x", "Origin": "http://127.0.0.1:8765"}},
		{name: "POST localhost for loopback", method: "POST", header: map[string]string{cookie: "x", "Origin": "http://localhost:8765"}},
		{name: "POST another port", method: "POST", header: map[string]string{cookie: "x", "Origin": "http://127.0.0.1:9999"}, wantDeny: true},
		{name: "POST another host", method: "POST", header: map[string]string{cookie: "x", "Origin": "http://evil.example:8765"}, wantDeny: true},
		{name: "POST null origin", method: "POST", header: map[string]string{cookie: "x", "Origin": "null"}, wantDeny: true},
		{name: "null origin, same-origin (the gateway's own form under no-referrer)", method: "POST", header: map[string]string{cookie: "x", "Origin": "null", "Sec-Fetch-Site": "same-origin"}},
		{name: "null origin, cross-site (a sandboxed frame)", method: "POST", header: map[string]string{cookie: "x", "Origin": "null", "Sec-Fetch-Site": "cross-site"}, wantDeny: true},
		{name: "null origin, same-site", method: "POST", header: map[string]string{cookie: "x", "Origin": "null", "Sec-Fetch-Site": "same-site"}, wantDeny: true},
		{name: "POST origin with a path", method: "POST", header: map[string]string{cookie: "x", "Origin": "http://127.0.0.1:8765/x"}, wantDeny: true},
		{name: "PUT another port", method: "PUT", header: map[string]string{cookie: "x", "Origin": "http://127.0.0.1:9999"}, wantDeny: true},
		{name: "DELETE another port", method: "DELETE", header: map[string]string{cookie: "x", "Origin": "http://127.0.0.1:9999"}, wantDeny: true},
		{name: "PATCH another port", method: "PATCH", header: map[string]string{cookie: "x", "Origin": "http://127.0.0.1:9999"}, wantDeny: true},
		{name: "no Origin, same-origin fetch", method: "POST", header: map[string]string{cookie: "x", "Sec-Fetch-Site": "same-origin"}},
		{name: "no Origin, same-site", method: "POST", header: map[string]string{cookie: "x", "Sec-Fetch-Site": "same-site"}, wantDeny: true},
		{name: "no Origin, cross-site", method: "POST", header: map[string]string{cookie: "x", "Sec-Fetch-Site": "cross-site"}, wantDeny: true},
		{name: "no Origin, none", method: "POST", header: map[string]string{cookie: "x", "Sec-Fetch-Site": "none"}, wantDeny: true},
		{name: "neither Origin nor Sec-Fetch-Site", method: "POST", header: map[string]string{cookie: "x"}, wantDeny: true},
		{name: "bearer is not the cookie's business", method: "POST", header: map[string]string{cookie: "x", "Authorization": "Bearer t", "Origin": "http://evil.example"}},
		{name: "no cookie: the route decides", method: "POST", header: map[string]string{"Origin": "http://evil.example"}},
		{name: "a wrong cookie: the route decides (401)", method: "POST", header: map[string]string{cookie: "wrong", "Origin": "http://evil.example"}},
		{name: "allowed origin", allowed: []string{"https://chat.example.com"}, method: "POST", header: map[string]string{cookie: "x", "Origin": "https://chat.example.com"}},
		{name: "allowed origin's look-alike", allowed: []string{"https://chat.example.com"}, method: "POST", header: map[string]string{cookie: "x", "Origin": "https://chat.example.com.evil.io"}, wantDeny: true},
		{name: "every interface: the host addressed", listen: "0.0.0.0:8765", host: "192.168.1.5:8765", method: "POST", header: map[string]string{cookie: "x", "Origin": "http://192.168.1.5:8765"}},
		{name: "every interface: another host", listen: "0.0.0.0:8765", host: "192.168.1.5:8765", method: "POST", header: map[string]string{cookie: "x", "Origin": "http://192.168.1.6:8765"}, wantDeny: true},
		{name: "host addressed, default port", host: "mirror.lan", method: "POST", header: map[string]string{cookie: "x", "Origin": "http://mirror.lan"}},
		{name: "host addressed, other port", host: "mirror.lan", method: "POST", header: map[string]string{cookie: "x", "Origin": "http://mirror.lan:81"}, wantDeny: true},
		{name: "trusted proxy says https", proxies: []string{"10.0.0.0/8"}, remote: "10.1.2.3:555", host: "chat.example.com", method: "POST",
			header: map[string]string{cookie: "x", "Origin": "https://chat.example.com", "X-Forwarded-Proto": "https"}},
		{name: "untrusted peer says https", proxies: []string{"10.0.0.0/8"}, host: "chat.example.com", method: "POST",
			header: map[string]string{cookie: "x", "Origin": "https://chat.example.com", "X-Forwarded-Proto": "https"}, wantDeny: true},
		{name: "trusted proxy, plain http to an https origin", proxies: []string{"10.0.0.0/8"}, remote: "10.1.2.3:555", host: "chat.example.com", method: "POST",
			header: map[string]string{cookie: "x", "Origin": "https://chat.example.com"}, wantDeny: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			listen := tc.listen
			if listen == "" {
				listen = "127.0.0.1:8765"
			}
			s := bare(t, listen, func(c *config.Config) {
				c.Auth.AllowedOrigins, c.Auth.TrustedProxies = tc.allowed, tc.proxies
			})
			r := httptest.NewRequest(tc.method, "http://"+listen+"/api/anything", nil)
			r.Host = listen
			if tc.host != "" {
				r.Host = tc.host
			}
			r.RemoteAddr = "192.0.2.1:1234"
			if tc.remote != "" {
				r.RemoteAddr = tc.remote
			}
			for k, v := range tc.header {
				if k == "Cookie" {
					if v == "x" {
						v = testToken // the right token: the cookie authenticates
					}
					v = CookieName + "=" + v
				}
				r.Header.Set(k, v)
			}
			if got := s.forged(r); got != tc.wantDeny {
				t.Fatalf("forged = %v, want %v", got, tc.wantDeny)
			}
			// The root handler is where it is enforced.
			w := httptest.NewRecorder()
			s.Handler().ServeHTTP(w, r)
			if denied := w.Code == http.StatusForbidden; denied != tc.wantDeny {
				t.Fatalf("Handler answered %d", w.Code)
			}
		})
	}
}

func TestSecureCookie(t *testing.T) {
	tests := []struct {
		name   string
		tls    bool
		remote string
		proto  string
		secure bool
	}{
		{name: "plain http", remote: "192.0.2.1:1"},
		{name: "TLS", tls: true, remote: "192.0.2.1:1", secure: true},
		{name: "trusted proxy says https", remote: "127.0.0.1:1", proto: "https", secure: true},
		{name: "trusted proxy says https, first of a list", remote: "[::1]:1", proto: "https, http", secure: true},
		{name: "trusted proxy says http", remote: "127.0.0.1:1", proto: "http"},
		{name: "anyone else says https", remote: "192.0.2.1:1", proto: "https"},
	}
	s := bare(t, "127.0.0.1:8765", func(c *config.Config) { c.Auth.TrustedProxies = []string{"127.0.0.1", "::1"} })
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/login", "/logout"} {
				r := httptest.NewRequest("POST", "http://127.0.0.1:8765"+path, strings.NewReader(url.Values{"token": {testToken}}.Encode()))
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				r.RemoteAddr = tc.remote
				if tc.tls {
					r.TLS = &tls.ConnectionState{}
				}
				if tc.proto != "" {
					r.Header.Set("X-Forwarded-Proto", tc.proto)
				}
				w := httptest.NewRecorder()
				s.Handler().ServeHTTP(w, r)
				cs := w.Result().Cookies()
				if w.Code != http.StatusSeeOther || len(cs) != 1 || cs[0].Secure != tc.secure || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode {
					t.Fatalf("%s: %d %+v, want Secure %v", path, w.Code, cs, tc.secure)
				}
			}
		})
	}
}

func TestClientAddress(t *testing.T) {
	s := bare(t, "127.0.0.1:8765", func(c *config.Config) { c.Auth.TrustedProxies = []string{"10.0.0.0/8", "127.0.0.1"} })
	tests := []struct {
		remote, xff, want string
	}{
		{"192.0.2.7:1", "", "192.0.2.7/32"},
		{"192.0.2.7:1", "203.0.113.9", "192.0.2.7/32"}, // an untrusted peer's header is ignored
		{"10.0.0.1:1", "203.0.113.9", "203.0.113.9/32"},
		{"10.0.0.1:1", "1.2.3.4, 203.0.113.9, 10.0.0.2", "203.0.113.9/32"}, // the left may be made up
		{"127.0.0.1:1", "2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"[2001:db8::1]:1", "", "2001:db8::/64"},
	}
	for _, tc := range tests {
		r := httptest.NewRequest("POST", "/login", nil)
		r.RemoteAddr = tc.remote
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got := s.client(r); got != netip.MustParsePrefix(tc.want) {
			t.Errorf("%s via %q: %s, want %s", tc.remote, tc.xff, got, tc.want)
		}
	}
}

// attempt is one state-changing request a test makes.
type attempt struct {
	Method, Pattern, Path, Body, Type string
}

var wildcard = regexp.MustCompile(`\{([a-zA-Z_]+)(\.\.\.)?\}`)

// stateChanging lists a request for every route of the router that accepts
// a method other than GET, HEAD and OPTIONS, with its wildcards filled from
// values and a subtree route (one ending in /) replaced by the path subtrees
// gives. A route nobody told the test how to reach fails it, so a new
// route is tried as soon as it is added.
func stateChanging(t *testing.T, patterns []string, values, subtrees map[string]string, bodies map[string][2]string) []attempt {
	t.Helper()
	var out []attempt
	for _, p := range patterns {
		method, path, found := strings.Cut(p, " ")
		if !found {
			method, path = "POST", p // a pattern without a method takes them all
		}
		if safeMethod(method) {
			continue
		}
		if strings.HasSuffix(path, "/") {
			sub, ok := subtrees[p]
			if !ok {
				t.Fatalf("route %q: add the state-changing path under it to the test's subtrees", p)
			}
			path = sub
		}
		path = wildcard.ReplaceAllStringFunc(path, func(w string) string {
			name := wildcard.FindStringSubmatch(w)[1]
			v, ok := values[name]
			if !ok {
				t.Fatalf("route %q: add a value for {%s} to the test", p, name)
			}
			return v
		})
		b := bodies[p]
		out = append(out, attempt{Method: method, Pattern: p, Path: path, Body: b[0], Type: b[1]})
	}
	// Logging out ends the session the rest need: last.
	slices.SortStableFunc(out, func(a, b attempt) int {
		return boolInt(a.Path == "/logout") - boolInt(b.Path == "/logout")
	})
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestBrowserCrossSiteRequestsRefused: a page served from another port of
// the same host, in a real browser holding the login cookie, sends a form
// and a credentialed fetch to every state-changing route; the gateway
// answers each with 403 and nothing changes (the pairing is not approved,
// the model's limits stay, the session stays). The same requests from the
// gateway's own page work.
func TestBrowserCrossSiteRequestsRefused(t *testing.T) {
	e := newEdge(t, edgeOpts{telegram: true})
	code := e.strangerWrites(4242)
	chat, err := e.svc.Create(t.Context(), "target", "", chats.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	form := "application/x-www-form-urlencoded"
	todo := stateChanging(t, e.srv.mux.patterns,
		map[string]string{"code": code, "id": chat.ID, "name": "default", "rest": "provider:nope/reset"},
		map[string]string{"/api/telegram/": "/api/telegram/pairing/" + code + "/approve"},
		map[string][2]string{
			"POST /login":                          {url.Values{"token": {testToken}}.Encode(), form},
			"PUT /api/models/{name}/compaction":    {`{"soft_ratio":0.1,"hard_ratio":0.2}`, "application/json"},
			"PUT /api/models/{name}/context_limit": {`{"context_limit":"auto"}`, "application/json"},
			"POST /telegram/webhook":               {`{"update_id":1}`, "application/json"},
		})
	for _, want := range []string{"/logout", "/login", "/api/telegram/pairing/" + code + "/approve", "/api/models/default/compaction"} {
		if !slices.ContainsFunc(todo, func(a attempt) bool { return a.Path == want }) {
			t.Fatalf("the router's state-changing routes %+v lack %s", todo, want)
		}
	}
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>a page elsewhere</title><body><script>
window.attack = async (target, list) => {
  for (const [i, a] of list.entries()) {
    // A plain HTML form, as the issue's attacker sent: forms can only POST.
    const frame = document.createElement('iframe'); frame.name = 'f' + i; document.body.append(frame);
    const f = document.createElement('form'); f.method = 'POST'; f.action = target + a.Path; f.target = frame.name;
    f.enctype = a.Type === 'application/json' ? 'text/plain' : 'application/x-www-form-urlencoded';
    for (const [k, v] of new URLSearchParams(a.Type === 'application/x-www-form-urlencoded' ? a.Body : '')) {
      const inp = document.createElement('input'); inp.name = k; inp.value = v; f.append(inp);
    }
    document.body.append(f); f.submit();
    // And a credentialed fetch with the route's own method (a PUT is
    // stopped by the browser's preflight; a POST goes out no-cors).
    const simple = a.Method === 'POST';
    try {
      await fetch(target + a.Path, {method: a.Method, credentials: 'include', mode: simple ? 'no-cors' : 'cors',
        headers: simple ? {'Content-Type': 'text/plain'} : {'Content-Type': a.Type || 'text/plain'}, body: a.Body || 'x'});
    } catch (e) {}
  }
  // A sandboxed frame has an opaque origin: its form goes out with
  // Origin: null, like the gateway's own forms, but not same-origin.
  const sb = document.createElement('iframe');
  sb.setAttribute('sandbox', 'allow-forms allow-scripts');
  const approve = list.find(a => a.Path.includes('/approve'));
  sb.srcdoc = '<form method="POST" action="' + target + approve.Path + '"></form><script>document.forms[0].submit()<' + '/script>';
  document.body.append(sb);
  return true;
};
</script></body>`)
	}))
	t.Cleanup(attacker.Close)
	if strings.TrimPrefix(attacker.URL, "http://127.0.0.1:") == strings.TrimPrefix(e.http.URL, "http://127.0.0.1:") {
		t.Fatal("the attacker must be on another port")
	}

	ctx := browser(t)
	do(t, ctx, chromedp.Navigate(e.http.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), testToken),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS("#chat-list")))
	before := modelsJSON(e)

	mark := e.seen.len()
	list, _ := json.Marshal(todo)
	do(t, ctx, chromedp.Navigate(attacker.URL+"/"))
	jsAwait[bool](t, ctx, fmt.Sprintf(`window.attack(%q, %s)`, e.http.URL, list))
	// Every route was reached with the cookie, and refused.
	e.seen.waitFor(t, mark, "a refused form post to every route", func(got []seen) bool {
		for _, a := range todo {
			if !slices.ContainsFunc(got, func(s seen) bool { return s.Method == "POST" && s.Path == a.Path && s.Cookie }) {
				return false
			}
		}
		return true
	})
	e.seen.waitFor(t, mark, "the sandboxed frame's form", func(got []seen) bool {
		return slices.ContainsFunc(got, func(s seen) bool { return s.Origin == "null" && strings.HasSuffix(s.Path, "/approve") })
	})
	e.seen.waitFor(t, mark, "the fetches", func(got []seen) bool {
		for _, a := range todo {
			if a.Method == "POST" && len(slices.DeleteFunc(slices.Clone(got), func(s seen) bool { return s.Path != a.Path || s.Method != "POST" })) < 2 {
				return false
			}
		}
		return true
	})
	for _, s := range e.seen.since(mark) {
		if s.Method == "GET" || !slices.ContainsFunc(todo, func(a attempt) bool { return a.Path == s.Path }) {
			continue // the gateway page's own socket, closing as the browser leaves it
		}
		if s.Method == "OPTIONS" {
			if s.Cookie {
				t.Errorf("a preflight carried the cookie: %+v", s)
			}
			continue // the browser's preflight of a PUT; the PUT itself is never sent
		}
		if s.Origin == "null" {
			// The sandboxed frame: Chromium withholds the SameSite cookie
			// from an opaque origin; were it sent, Sec-Fetch-Site
			// (cross-site) would refuse it here.
			if s.Status != http.StatusForbidden && s.Status != http.StatusUnauthorized {
				t.Errorf("sandboxed %s %s: status %d", s.Method, s.Path, s.Status)
			}
			continue
		}
		if !s.Cookie || s.Status != http.StatusForbidden || s.Origin != attacker.URL {
			t.Errorf("cross-site %s %s: status %d, cookie %v, origin %q; want 403 with the cookie from %s", s.Method, s.Path, s.Status, s.Cookie, s.Origin, attacker.URL)
		}
	}
	if ps := e.pairings(); len(ps) != 1 || ps[0].Code != code {
		t.Fatalf("the pairing changed: %+v", ps)
	}
	if after := modelsJSON(e); after != before {
		t.Fatalf("the model settings changed:\n%s\n%s", before, after)
	}

	// The gateway's own login form, sent while logged in: Chromium sends
	// Origin: null (the page says Referrer-Policy: no-referrer) with
	// Sec-Fetch-Site: same-origin, and it works.
	mark = e.seen.len()
	do(t, ctx, chromedp.Navigate(e.http.URL+"/login"), chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), testToken),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS("#chat-list")))
	relogin := e.seen.waitFor(t, mark, "the login form", func(got []seen) bool {
		return slices.ContainsFunc(got, func(s seen) bool { return s.Method == "POST" && s.Path == "/login" })
	})
	if i := slices.IndexFunc(relogin, func(s seen) bool { return s.Method == "POST" }); relogin[i].Status != http.StatusSeeOther || !relogin[i].Cookie {
		t.Fatalf("own login form while logged in: %+v", relogin[i])
	}

	// From the gateway's own page, the same requests do their work.
	do(t, ctx, chromedp.Navigate(e.http.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#chat-list")))
	mark = e.seen.len()
	statuses := jsAwait[[]int](t, ctx, fmt.Sprintf(`(async (list) => {
  const out = [];
  for (const a of list) {
    const r = await fetch(a.Path, {method: a.Method, credentials: 'same-origin', redirect: 'manual',
      headers: a.Type ? {'Content-Type': a.Type} : {}, body: a.Body || ''});
    out.push(r.status);
  }
  return out;
})(%s)`, list))
	got := e.seen.since(mark)
	for _, a := range todo {
		i := slices.IndexFunc(got, func(s seen) bool { return s.Method == a.Method && s.Path == a.Path })
		if i < 0 {
			t.Fatalf("own page: %s %s never reached the server (browser statuses %v)", a.Method, a.Path, statuses)
		}
		if s := got[i]; s.Status == http.StatusForbidden || !s.Cookie || s.Origin != e.http.URL {
			t.Errorf("own page: %s %s answered %d (cookie %v, origin %q)", a.Method, a.Path, s.Status, s.Cookie, s.Origin)
		}
	}
	if ps := e.pairings(); len(ps) != 0 {
		t.Fatalf("own page: the pairing was not approved: %+v", ps)
	}
	if after := modelsJSON(e); after == before || !strings.Contains(after, `"soft_ratio":0.1`) {
		t.Fatalf("own page: the compaction was not set: %s", after)
	}
	// Logged out: the cookie is gone.
	if n := jsAwait[int](t, ctx, `(async () => (await fetch('/api/chats')).status)()`); n != http.StatusUnauthorized {
		t.Fatalf("after logout /api/chats answers %d", n)
	}
}

func modelsJSON(e *edge) string {
	e.t.Helper()
	code, body := e.do("GET", "/api/models", bearer(), "")
	if code != 200 {
		e.t.Fatalf("models: %d %s", code, body)
	}
	return body
}

// jsAwait evaluates expr in the page and waits for the promise it returns.
func jsAwait[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// FuzzForged drives the cross-site check and the client address with
// arbitrary headers: it never panics, never concerns a safe method or a
// request without the right cookie, always admits the gateway's own origin,
// and names a client address in a valid range.
func FuzzForged(f *testing.F) {
	f.Add("POST", "http://127.0.0.1:8765", "127.0.0.1:8765", "same-origin", "10.0.0.1:5", "1.2.3.4, 10.0.0.2", "https")
	f.Add("PUT", "null", "[::1]:8765", "", "[::1]:9", "", "")
	f.Add("POST", "http://[::1", "evil:80", "cross-site", "garbage", ",,,", "https,http")
	f.Add("DELETE", "https://chat.example.com:443/", "chat.example.com", "none", "10.1.1.1:1", "2001:db8::1", "HTTPS")
	s := bare(f, "127.0.0.1:8765", func(c *config.Config) {
		c.Auth.AllowedOrigins = []string{"https://chat.example.com"}
		c.Auth.TrustedProxies = []string{"10.0.0.0/8", "::1"}
	})
	f.Fuzz(func(t *testing.T, method, origin, host, site, remote, xff, proto string) {
		r, err := http.NewRequest("GET", "http://127.0.0.1:8765/api/x", nil)
		if err != nil {
			t.Skip()
		}
		r.Method, r.Host, r.RemoteAddr = method, host, remote
		r.Header.Set("Origin", origin)
		r.Header.Set("Sec-Fetch-Site", site)
		r.Header.Set("X-Forwarded-For", xff)
		r.Header.Set("X-Forwarded-Proto", proto)
		r.Header.Set("Cookie", CookieName+"="+testToken)
		forged := s.forged(r)
		if safeMethod(method) && forged {
			t.Fatalf("a %s request was refused", method)
		}
		if (origin == "" || origin == "null") && site == "same-origin" && forged {
			t.Fatal("same-origin without Origin refused")
		}
		own := r.Clone(r.Context())
		own.Header.Set("Origin", "http://127.0.0.1:8765")
		if s.forged(own) {
			t.Fatal("the gateway's own origin refused")
		}
		r.Header.Del("Cookie")
		if s.forged(r) {
			t.Fatal("a request without the cookie refused here")
		}
		_ = s.client(r)
		if sc := s.scheme(r); sc != "http" && sc != "https" {
			t.Fatalf("scheme %q", sc)
		}
	})
}
