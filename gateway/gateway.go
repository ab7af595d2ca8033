// Package gateway is the HTTP side of Mirror: routes, authentication and the
// browser client; the only package that knows transports (WebSocket here,
// Telegram in its own sub-package).
package gateway

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
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
	// Monitor serves /api/breakers, the /monitor dashboard's feed and the
	// breaker series of /metrics; nil answers 503 there.
	Monitor *monitor.Monitor
	// Metrics serves /metrics; nil answers 503.
	Metrics *monitor.Metrics
	// Quotas returns what /api/quotas shows (the runtime's []quota.Status);
	// nil answers 503 there.
	Quotas func() any
	// DataDir is the data dir, where /api/memory reads the memory notes
	// boundaries wrote; "" lists none.
	DataDir string
	// Models serves /api/models (request budgets, context limits); nil
	// answers 503 there.
	Models ModelSettings
	// Replay writes what `mirror replay CHAT` prints, for
	// /api/chats/{id}/replay; nil answers 503 there.
	Replay func(w io.Writer, chat string) error
}

// Route is one more handler a transport brings.
type Route struct {
	Pattern string
	Handler http.Handler
	Private bool
}

// Server serves every HTTP route of the gateway.
type Server struct {
	opt  Options
	auth checker
	hub  *ws.Hub
	mux  *http.ServeMux
	log  *slog.Logger
	mon  *monitorSide
	// unsubscribe stops the breaker events to sockets.
	unsubscribe func()
}

// New builds the server and its routes.
func New(opt Options) *Server {
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	s := &Server{opt: opt, auth: checker{token: []byte(opt.Token)}, mux: http.NewServeMux(), log: opt.Log}
	s.hub = ws.New(ws.Options{
		Chats:       opt.Chats,
		Authorized:  func(r *http.Request) bool { t, _ := presented(r); return s.auth.ok(t) },
		CheckToken:  s.auth.ok,
		CheckOrigin: s.originAllowed,
		Buffer:      opt.Config.Limits.SocketBuffer,
		Log:         opt.Log,
	})
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	s.mux.HandleFunc("GET /login", s.loginPage)
	s.mux.HandleFunc("POST /login", s.login)
	s.mux.HandleFunc("POST /logout", s.logout)
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(web.Static())))
	s.mux.HandleFunc("GET /{$}", s.index)
	s.mux.Handle("GET /api/chats", s.need(http.HandlerFunc(s.apiChats)))
	s.mux.Handle("GET /ws", s.wsAuth(s.hub))
	s.monitorRoutes()
	s.contextRoutes()
	s.modelRoutes()
	for _, rt := range opt.Routes {
		h := rt.Handler
		if rt.Private {
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

// Handler returns the root handler.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		s.mux.ServeHTTP(w, r)
	})
}

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
		if !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mirror"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized: send Authorization: Bearer TOKEN (see `mirror token`)"})
			return
		}
		h.ServeHTTP(w, r)
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
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(web.Index())
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(web.LoginPage())
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	t := strings.TrimSpace(r.PostForm.Get("token"))
	if !s.auth.ok(t) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write(web.LoginPageWithError("That token is not right. Run `mirror token` to see it."))
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: t, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int((90 * 24 * time.Hour).Seconds())})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

func (s *Server) apiChats(w http.ResponseWriter, r *http.Request) {
	list, err := s.opt.Chats.List(r.Context())
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

// originAllowed admits requests without Origin (not a browser), the listen
// address itself (with localhost spelled any way when it is loopback), and
// auth.allowed_origins. When listening on every interface, the browser's own
// host is admitted: the token still guards the socket.
func (s *Server) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	for _, o := range s.opt.Config.Auth.AllowedOrigins {
		if strings.EqualFold(strings.TrimRight(o, "/"), origin) {
			return true
		}
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	lh, lp, err := net.SplitHostPort(s.opt.Addr)
	if err != nil {
		return false
	}
	oh, op := u.Hostname(), u.Port()
	if op == "" {
		op = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if op != lp {
		return false
	}
	if strings.EqualFold(oh, lh) || (isLoopback(lh) && isLoopback(oh)) {
		return true
	}
	if ip := net.ParseIP(lh); ip != nil && ip.IsUnspecified() {
		rh, _, err := net.SplitHostPort(r.Host)
		return err == nil && strings.EqualFold(rh, oh)
	}
	return false
}

func isLoopback(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
