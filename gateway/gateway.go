// Package gateway is the HTTP side of Mirror: routes, authentication and the
// browser client; the only package that knows transports (WebSocket here,
// Telegram in its own sub-package).
package gateway

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/chats/people"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/gateway/limit"
	"github.com/mirror-gateway/mirror/gateway/web"
	"github.com/mirror-gateway/mirror/gateway/ws"
	"github.com/mirror-gateway/mirror/monitor"
)

// Options configure a Server.
type Options struct {
	Config *config.Config
	Chats  *chats.Service
	Token  string
	// Addr is the address actually listened on (host:port), for the Origin check.
	Addr string
	// Routes are more handlers by pattern (such as Telegram's); Private ones
	// need the token, the others guard themselves (a webhook's secret).
	Routes []Route
	Log    *slog.Logger
	// Sends is limits.messages_per_minute per person, shared with the
	// Telegram bot (limit.Messages); nil: the WebSocket keeps its own.
	Sends *limit.Keyed[string]
	// Monitor serves /api/breakers, the /monitor dashboard's feed and the
	// breaker series of /metrics; nil answers 503 there.
	Monitor *monitor.Monitor
	// Metrics serves /metrics; nil answers 503.
	Metrics *monitor.Metrics
	// Quotas returns what /api/quotas shows (the runtime's []quota.Status);
	// nil answers 503 there.
	Quotas func() any
	// MCP returns what /api/mcp shows: the MCP servers, their state and
	// tool counts (runtime/tools/mcp Status); nil answers 503.
	MCP func() any
	// DataDir is the data dir, where /api/memory reads the memory notes
	// boundaries wrote; "" lists none.
	DataDir string
	// Models serves /api/models (request budgets, context limits); nil
	// answers 503 there.
	Models ModelSettings
	// People are who may use the gateway (chats/people); nil: the access
	// token is the one person, an owner who sees everything.
	People *people.Registry
	// Replay writes what `mirror replay CHAT` prints, for
	// /api/chats/{id}/replay; nil answers 503 there.
	Replay func(w io.Writer, chat string) error
	// Now is the clock of the per-person message rate
	// (limits.messages_per_minute); nil is time.Now.
	Now func() time.Time
}

// Route is one more handler a transport brings.
type Route struct {
	Pattern string
	Handler http.Handler
	Private bool
	// Owner routes answer only owners (403 to members): they manage the
	// whole gateway (pairing, the database).
	Owner bool
}

// HTTP server limits that fit streaming: headers must arrive within
// ReadHeaderTimeout, an idle keep-alive connection is closed after
// IdleTimeout, and each write of a response must go through within
// WriteStall (a stream that keeps flowing, a WebSocket or the monitor feed,
// is never cut for its length). Bodies are bounded by limits.body_timeout.
const (
	ReadHeaderTimeout = 10 * time.Second
	IdleTimeout       = time.Minute
	WriteStall        = time.Minute
	MaxHeaderBytes    = 64 << 10
	// loginBodyTimeout bounds reading the login form, which is tiny.
	loginBodyTimeout = 5 * time.Second
	// maxLoginClients is how many client addresses the login throttle
	// remembers.
	maxLoginClients = 4096
)

// Server serves every HTTP route of the gateway.
type Server struct {
	opt  Options
	auth checker
	hub  *ws.Hub
	mux  *router
	log  *slog.Logger
	mon  *monitorSide
	// proxies are auth.trusted_proxies.
	proxies []netip.Prefix
	// logins counts failed logins per client address.
	logins *limit.Keyed[netip.Prefix]
	// writeStall is WriteStall (tests shorten it).
	writeStall time.Duration
	// limits are limits.* with the edge bounds filled (see edgeLimits).
	limits config.Limits
	// unsubscribe stops the breaker events to sockets.
	unsubscribe func()
	// blobCache keeps found attachment references (blobs.go).
	blobCache blobCache
}

// edgeLimits fills the edge bounds a Config built in code may leave at
// zero with their defaults: a zero body timeout would refuse every body, a
// zero login rate would never refill.
func edgeLimits(l config.Limits) config.Limits {
	d := config.Default().Limits
	if l.BodyTimeout <= 0 {
		l.BodyTimeout = d.BodyTimeout
	}
	if l.FailedLoginsPerMinute <= 0 {
		l.FailedLoginsPerMinute = d.FailedLoginsPerMinute
	}
	if l.AuthTimeout <= 0 {
		l.AuthTimeout = d.AuthTimeout
	}
	if l.UnauthenticatedSockets <= 0 {
		l.UnauthenticatedSockets = d.UnauthenticatedSockets
	}
	return l
}

// router is the ServeMux that remembers its patterns, so tests can try
// every route, present and future (the forged-request test does).
type router struct {
	*http.ServeMux
	patterns []string
}

// Handle registers h for pattern.
func (m *router) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, h)
}

// HandleFunc registers f for pattern.
func (m *router) HandleFunc(pattern string, f func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(f))
}

// New builds the server and its routes.
func New(opt Options) *Server {
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	l := edgeLimits(opt.Config.Limits)
	s := &Server{limits: l, opt: opt, auth: checker{token: []byte(opt.Token), people: opt.People}, mux: &router{ServeMux: http.NewServeMux()}, log: opt.Log,
		logins: limit.New[netip.Prefix](l.FailedLoginsPerMinute, l.FailedLoginsPerMinute, maxLoginClients), writeStall: WriteStall}
	proxies, err := opt.Config.Auth.Proxies()
	if err != nil { // Validate refuses these; a Config built in code may not have been
		opt.Log.Error("auth.trusted_proxies ignored", "err", err)
	}
	s.proxies = proxies
	s.hub = ws.New(ws.Options{
		Chats:              opt.Chats,
		Authenticate:       func(r *http.Request) (ws.Who, bool) { t, _ := presented(r); return s.auth.who(t) },
		CheckHello:         s.auth.who,
		CheckOrigin:        s.originAllowed,
		Buffer:             l.SocketBuffer,
		AuthTimeout:        l.AuthTimeout,
		MaxUnauthenticated: l.UnauthenticatedSockets,
		MessagesPerMinute:  l.MessagesPerMinute,
		Now:                opt.Now,
		Sends:              opt.Sends,
		Log:                opt.Log,
	})
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	s.mux.HandleFunc("GET /login", s.loginPage)
	s.mux.HandleFunc("POST /login", s.login)
	s.mux.HandleFunc("POST /logout", s.logout)
	// The app shell and its scripts need the token like every page but the
	// login form, which is self-contained (inline style and icon) so it
	// renders without them: nothing of the client is served to a stranger.
	s.mux.Handle("GET /static/", s.need(http.StripPrefix("/static/", web.StaticHandler())))
	s.mux.HandleFunc("GET /{$}", s.index)
	s.mux.Handle("GET /api/chats", s.need(http.HandlerFunc(s.apiChats)))
	s.mux.Handle("GET /ws", s.wsAuth(s.hub))
	s.monitorRoutes()
	s.contextRoutes()
	s.costRoutes()
	s.modelRoutes()
	s.settingsRoutes()
	s.uploadRoutes()
	s.blobRoutes()
	s.manageRoutes()
	s.peopleRoutes()
	for _, rt := range opt.Routes {
		h := rt.Handler
		if rt.Owner {
			h = s.ownerOnly(h)
		}
		if rt.Private || rt.Owner {
			h = s.need(h)
		}
		s.mux.Handle(rt.Pattern, h)
	}
	if opt.Monitor != nil {
		// Breaker transitions reach every browser as a breaker event.
		s.unsubscribe = opt.Monitor.Subscribe(func(b monitor.BreakerView) {
			s.hub.Broadcast(map[string]any{"type": "breaker", "breaker": b})
		})
	}
	return s
}

// Handler returns the root handler. Before any route it refuses a forged
// cross-site request (see forged) with 403, and bounds the request body's
// read and each write of the answer (see bound).
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		if s.forged(r) {
			s.log.Warn("cross-site request refused", "method", r.Method, "path", r.URL.Path, "origin", r.Header.Get("Origin"),
				"sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "forbidden: a request that changes something and carries the login cookie must come from Mirror's own page; scripts send Authorization: Bearer TOKEN"})
			return
		}
		w, r = s.bound(w, r)
		s.mux.ServeHTTP(w, r)
	})
}

// HTTPServer returns the http.Server to serve Handler with: limits on
// headers, idle connections and header size. It sets no ReadTimeout or
// WriteTimeout, which would cut WebSockets and the monitor feed: Handler
// bounds bodies and each write instead.
func (s *Server) HTTPServer(errorLog *log.Logger) *http.Server {
	return &http.Server{Handler: s.Handler(), ReadHeaderTimeout: ReadHeaderTimeout, IdleTimeout: IdleTimeout,
		MaxHeaderBytes: MaxHeaderBytes, ErrorLog: errorLog}
}

// bound gives a request with a body limits.body_timeout to arrive (a
// slow-drip body is cut off rather than holding the connection), lifted once
// the body is read so an answer that streams is not cut; and it gives each
// write of the answer WriteStall to go through.
func (s *Server) bound(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request) {
	rc := http.NewResponseController(w)
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		if rc.SetReadDeadline(time.Now().Add(s.limits.BodyTimeout)) == nil {
			r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		}
	}
	// The connection may carry the last request's deadline: start clean.
	_ = rc.SetWriteDeadline(time.Time{})
	return &stallWriter{ResponseWriter: w, rc: rc, stall: s.writeStall}, r
}

// deadlineBody lifts the body's read deadline when the body has been read:
// net/http then reads ahead to notice a client that goes away, and an
// expired deadline there would cancel the request.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// stallWriter moves the connection's write deadline WriteStall ahead of
// each write and flush: a client that stops reading is cut off, one that
// keeps reading a long stream is not.
type stallWriter struct {
	http.ResponseWriter
	rc    *http.ResponseController
	stall time.Duration
}

// WriteHeader sends the status; net/http writes it with the first flush.
func (w *stallWriter) WriteHeader(code int) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.stall))
	w.ResponseWriter.WriteHeader(code)
}

func (w *stallWriter) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.stall))
	return w.ResponseWriter.Write(p)
}

// FlushError is what http.ResponseController.Flush calls.
func (w *stallWriter) FlushError() error {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.stall))
	return w.rc.Flush()
}

// Flush implements http.Flusher.
func (w *stallWriter) Flush() { _ = w.FlushError() }

// Hijack hands the connection over (a WebSocket), which then keeps its
// own deadlines.
func (w *stallWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) { return w.rc.Hijack() }

// Unwrap lets http.ResponseController reach the real writer.
func (w *stallWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Warm does now what the first page load would do first: it compresses
// the static files (call it in the background once listening).
func (s *Server) Warm() { web.Warm() }

// Close closes every WebSocket and live monitor feed and waits for them.
func (s *Server) Close() {
	if s.unsubscribe != nil {
		s.unsubscribe()
	}
	s.closeMonitorFeeds()
	s.hub.Close()
}

// Sockets returns how many WebSockets are open.
func (s *Server) Sockets() int { return s.hub.Count() }

func (s *Server) authorized(r *http.Request) bool {
	t, _ := presented(r)
	return s.auth.ok(t)
}

// need refuses a request without the token with 401.
func (s *Server) need(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, _ := presented(r)
		p, ok := s.auth.person(t)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mirror"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized: send Authorization: Bearer TOKEN (see `mirror token`)"})
			return
		}
		h.ServeHTTP(w, withPerson(r, p))
	})
}

// wsAuth lets an upgrade through with a right token or none (the hello frame
// may still bring one); a wrong token is refused here with 401.
func (s *Server) wsAuth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t, carried := presented(r); carried && !s.auth.ok(t) {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		// A browser without the cookie sees the login form, with the 401
		// scripts expect.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write(web.LoginPage())
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	web.WritePage(w, r, "index.html")
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(web.LoginPage())
}

// login checks the token of the login form and sets the cookie. The form
// is read within 4 KiB and loginBodyTimeout; an address that sent
// limits.failed_logins_per_minute wrong tokens is answered 429 until its
// budget refills, before its token is even looked at. Failures are logged
// with the address, never with what was typed.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	from := s.client(r)
	if wait := s.logins.Wait(from); wait > 0 {
		s.log.Debug("login throttled", "remote", from.String(), "retry_in", wait)
		secs := int((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		loginPage(w, http.StatusTooManyRequests, fmt.Sprintf("Too many wrong tokens from your address. Try again in %d s.", secs))
		return
	}
	timeout := min(loginBodyTimeout, s.limits.BodyTimeout)
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	if err := r.ParseForm(); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			s.log.Warn("login form not sent in time", "remote", from.String(), "timeout", timeout)
			w.Header().Set("Connection", "close")
			http.Error(w, "the form took too long to arrive", http.StatusRequestTimeout)
			return
		}
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	t := strings.TrimSpace(r.PostForm.Get("token"))
	if !s.auth.ok(t) {
		s.logins.Take(from)
		s.log.Warn("login with a wrong token", "remote", from.String())
		loginPage(w, http.StatusUnauthorized, "That token is not right. Run `mirror token` to see it.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: t, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: s.scheme(r) == "https", MaxAge: int((90 * 24 * time.Hour).Seconds())})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func loginPage(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(web.LoginPageWithError(msg))
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: s.scheme(r) == "https", MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

func (s *Server) apiChats(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Has("limit") || q.Has("after") {
		// A page, read from the index by last update (see docs/protocol.md).
		limit := 0
		if v := q.Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": "limit must be a whole number, 0 or more"})
				return
			}
			limit = n
		}
		page, err := s.scope(r).ListPage(r.Context(), q.Get("after"), limit)
		switch {
		case errors.Is(err, chats.ErrBadInput):
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		case err != nil:
			s.log.Error("list chats", "err", err)
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "could not list chats"})
			return
		}
		if page.Chats == nil {
			page.Chats = []chats.Chat{}
		}
		writeJSON(w, http.StatusOK, page)
		return
	}
	list, err := s.scope(r).List(r.Context())
	if err != nil {
		s.log.Error("list chats", "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "could not list chats"})
		return
	}
	if list == nil {
		list = []chats.Chat{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"chats": list})
}

// originAllowed admits a WebSocket upgrade without Origin (not a browser)
// or from Mirror's own origin (see ownOrigin). When listening on every
// interface, the browser's own host is admitted: the token still guards the
// socket.
func (s *Server) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	return origin == "" || s.ownOrigin(r, origin)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
