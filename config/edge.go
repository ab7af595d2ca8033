package config

import (
	"fmt"
	"net/netip"
	"strings"
)

// Proxies returns auth.trusted_proxies as address ranges; a plain address is
// a range of one. A validated Config never returns an error.
func (a Auth) Proxies() ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(a.TrustedProxies))
	for _, s := range a.TrustedProxies {
		p, err := parseProxy(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func parseProxy(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// edges checks the keys that bound what a client may hold or send: the
// trusted proxies, the message rate and queue cap, the socket and body
// timeouts and the login throttle.
func (v *validator) edges() {
	for i, s := range v.c.Auth.TrustedProxies {
		if _, err := parseProxy(s); err != nil {
			v.fail(fmt.Sprintf("auth.trusted_proxies[%d]", i), "want an IP address or a CIDR range such as 10.0.0.1 or 10.0.0.0/8, not %s", show(s))
		}
	}
	l := v.c.Limits
	positive := []struct {
		field string
		n     int
	}{
		{"limits.messages_per_minute", l.MessagesPerMinute},
		{"limits.pending_per_chat", l.PendingPerChat},
		{"limits.unauthenticated_sockets", l.UnauthenticatedSockets},
		{"limits.failed_logins_per_minute", l.FailedLoginsPerMinute},
	}
	for _, p := range positive {
		if p.n <= 0 {
			v.fail(p.field, "must be above 0")
		}
	}
	if l.AuthTimeout <= 0 {
		v.fail("limits.auth_timeout", "must be above 0, such as 10s")
	}
	if l.BodyTimeout <= 0 {
		v.fail("limits.body_timeout", "must be above 0, such as 15s")
	}
}
