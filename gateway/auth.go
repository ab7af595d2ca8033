package gateway

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"

	"github.com/mirror-gateway/mirror/chats/people"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/config/datadir"
)

// TokenFile is the name of the access token file inside the data dir.
const TokenFile = "token"

// CookieName is the cookie POST /login sets.
const CookieName = "mirror_token"

// LoadToken returns the access token: the value of the variable auth.token_env
// names when it is set, else the token kept in dataDir/token, created (0600)
// on first use.
func LoadToken(cfg *config.Config, dataDir string, getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if cfg.Auth.TokenEnv != "" {
		if t := strings.TrimSpace(getenv(cfg.Auth.TokenEnv)); t != "" {
			if len(t) < 16 {
				return "", fmt.Errorf("auth: the token in $%s is shorter than 16 characters; use a longer one", cfg.Auth.TokenEnv)
			}
			return t, nil
		}
	}
	b, err := datadir.ReadFile(dataDir, TokenFile)
	if err == nil {
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	t := base64.RawURLEncoding.EncodeToString(raw[:])
	if err := datadir.WriteFile(dataDir, TokenFile, []byte(t+"\n")); err != nil {
		return "", fmt.Errorf("keep the access token: %w", err)
	}
	return t, nil
}

// checker compares presented tokens with the real one in constant time,
// and, with a people registry, finds the person a token speaks for (the
// access token is the first owner's).
type checker struct {
	token  []byte
	people *people.Registry
}

// person returns who a token speaks for. Without a registry the access
// token is the one person, an owner.
func (c checker) person(t string) (people.Person, bool) {
	if t == "" {
		return people.Person{}, false
	}
	if c.people != nil {
		return c.people.ByToken(t)
	}
	if subtle.ConstantTimeCompare([]byte(t), c.token) == 1 {
		return people.Person{Name: "owner", Role: people.RoleOwner, First: true}, true
	}
	return people.Person{}, false
}

func (c checker) ok(t string) bool {
	_, ok := c.person(t)
	return ok
}

// principal returns who a right token speaks for, as per-principal limits
// (the message rate) key it: the person's id, or without a registry a
// short hash, so the token itself is never a map key or a log field. ""
// and false for a wrong token.
func (c checker) principal(t string) (string, bool) {
	p, ok := c.person(t)
	if !ok {
		return "", false
	}
	return principalOf(p, t), true
}

// principalOf keys per-person limits.
func principalOf(p people.Person, t string) string {
	if p.ID != "" {
		return "person:" + p.ID
	}
	sum := sha256.Sum256([]byte(t))
	return "token:" + hex.EncodeToString(sum[:6])
}

// presented returns the token a request carries and whether it carried one.
func presented(r *http.Request) (string, bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		t, found := strings.CutPrefix(h, "Bearer ")
		if !found {
			return "", true // an Authorization header of another scheme is a wrong one
		}
		return strings.TrimSpace(t), true
	}
	if ck, err := r.Cookie(CookieName); err == nil {
		return ck.Value, true
	}
	return "", false
}

// safeMethod reports the methods that must not change state, which a page
// of any origin may make a browser send with the cookie (links, images).
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// forged reports whether r is a request another site could have made the
// browser send: one that may change state (not GET, HEAD or OPTIONS), that
// the mirror_token cookie authenticates (no Authorization header, which
// no other origin can make a browser add), and that does not come from
// Mirror's own origin: its Origin is neither the gateway's nor in
// auth.allowed_origins, or, without Origin (or with the opaque "null"),
// Sec-Fetch-Site is not same-origin. SameSite=Strict alone does not stop it: another port, or a
// sibling subdomain, is the same site. Handler checks it before any route,
// so it covers every present and future one.
func (s *Server) forged(r *http.Request) bool {
	if safeMethod(r.Method) || r.Header.Get("Authorization") != "" {
		return false
	}
	if ck, err := r.Cookie(CookieName); err != nil || !s.auth.ok(ck.Value) {
		return false // not authenticated by the cookie: the route's own check decides
	}
	// "null" is what a browser sends for a page whose origin it will not
	// tell: a sandboxed frame elsewhere, but also Mirror's own forms, since
	// its pages say Referrer-Policy: no-referrer. Sec-Fetch-Site, which no
	// page can set, then tells them apart.
	if origin := r.Header.Get("Origin"); origin != "" && origin != "null" {
		return !s.ownOrigin(r, origin)
	}
	return r.Header.Get("Sec-Fetch-Site") != "same-origin"
}

// ownOrigin reports whether a browser Origin is Mirror's own: listed in
// auth.allowed_origins, the scheme and host the request was addressed to,
// or the listen address (localhost spelled any way when it is loopback).
// When listening on every interface, the request's own host is the
// gateway's. "null" (a sandboxed or file page) is never.
func (s *Server) ownOrigin(r *http.Request, origin string) bool {
	for _, o := range s.opt.Config.Auth.AllowedOrigins {
		if strings.EqualFold(strings.TrimRight(o, "/"), origin) {
			return true
		}
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") {
		return false
	}
	oh, op := u.Hostname(), portOf(u.Scheme, u.Port())
	// The host the browser addressed (it sets Host itself): a page served
	// by this gateway has exactly this origin. A page of another host that
	// resolves here gets no cookie, since cookies follow the host name.
	if rh, rp := splitHost(r.Host); u.Scheme == s.scheme(r) && rh != "" && strings.EqualFold(rh, oh) && portOf(u.Scheme, rp) == op {
		return true
	}
	lh, lp, err := net.SplitHostPort(s.opt.Addr)
	if err != nil || op != lp {
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

// splitHost splits a Host header into host and port ("" when absent),
// without brackets around an IPv6 address.
func splitHost(hostport string) (host, port string) {
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		return h, p
	}
	return strings.Trim(hostport, "[]"), ""
}

// portOf is port, or the scheme's default when it is empty.
func portOf(scheme, port string) string {
	if port != "" {
		return port
	}
	if scheme == "https" {
		return "443"
	}
	return "80"
}

func isLoopback(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// peer is the address the connection came from.
func peer(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// trusted reports whether a is one of auth.trusted_proxies.
func (s *Server) trusted(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	for _, p := range s.proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// scheme is "https" when r came over TLS, or from a trusted proxy whose
// X-Forwarded-Proto says https; else "http". Anyone else's header is
// ignored: a client could claim anything.
func (s *Server) scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	if s.trusted(peer(r)) {
		proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
		if strings.EqualFold(strings.TrimSpace(proto), "https") {
			return "https"
		}
	}
	return "http"
}

// client is the address a request is from, for counting failed logins:
// the peer, or behind trusted proxies the nearest address X-Forwarded-For
// names that is not one of them (the entries further left could be made up
// by the client). IPv6 clients count per /64, which one host usually holds.
func (s *Server) client(r *http.Request) netip.Prefix {
	a := peer(r)
	if s.trusted(a) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			h, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				break
			}
			a = h.Unmap()
			if !s.trusted(a) {
				break
			}
		}
	}
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p
	}
	p, _ := a.Prefix(a.BitLen())
	return p
}
