package config

import (
	"net/netip"
	"strings"
	"testing"
)

func TestEdgeKeys(t *testing.T) {
	good := "auth:\n  trusted_proxies: [127.0.0.1, \"10.0.0.0/8\", \"::1\"]\nlimits:\n  messages_per_minute: 5\n  pending_per_chat: 3\n  auth_timeout: 2s\n  unauthenticated_sockets: 4\n  body_timeout: 1s\n  failed_logins_per_minute: 2\n"
	c, err := Parse([]byte(good), "")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := c.Auth.Proxies()
	if err != nil || len(ps) != 3 || !ps[0].Contains(netip.MustParseAddr("127.0.0.1")) || ps[0].Contains(netip.MustParseAddr("127.0.0.2")) ||
		!ps[1].Contains(netip.MustParseAddr("10.9.8.7")) || !ps[2].Contains(netip.MustParseAddr("::1")) {
		t.Fatalf("proxies %v %v", ps, err)
	}
	if l := c.Limits; l.MessagesPerMinute != 5 || l.PendingPerChat != 3 || l.AuthTimeout.Seconds() != 2 || l.UnauthenticatedSockets != 4 ||
		l.BodyTimeout.Seconds() != 1 || l.FailedLoginsPerMinute != 2 {
		t.Fatalf("limits %+v", l)
	}
	bad := []struct{ src, want string }{
		{"auth:\n  trusted_proxies: [proxy.example.com]\n", "runtime.yaml:2: auth.trusted_proxies[0]: want an IP address or a CIDR range such as 10.0.0.1 or 10.0.0.0/8, not \"proxy.example.com\""},
		{"auth:\n  trusted_proxies:\n    - 10.0.0.1\n    - 10.0.0.0/33\n", "runtime.yaml:4: auth.trusted_proxies[1]: want an IP address or a CIDR range ..."},
		{"limits:\n  messages_per_minute: 0\n", "runtime.yaml:2: limits.messages_per_minute: must be above 0"},
		{"limits:\n  pending_per_chat: -1\n", "runtime.yaml:2: limits.pending_per_chat: must be above 0"},
		{"limits:\n  unauthenticated_sockets: 0\n", "runtime.yaml:2: limits.unauthenticated_sockets: must be above 0"},
		{"limits:\n  failed_logins_per_minute: 0\n", "runtime.yaml:2: limits.failed_logins_per_minute: must be above 0"},
		{"limits:\n  auth_timeout: 0s\n", "runtime.yaml:2: limits.auth_timeout: must be above 0, such as 10s"},
		{"limits:\n  body_timeout: -1s\n", "runtime.yaml:2: limits.body_timeout: must be above 0, such as 15s"},
	}
	for _, tc := range bad {
		_, err := Parse([]byte(tc.src), "")
		if err == nil {
			t.Errorf("accepted %q", tc.src)
			continue
		}
		first, _, _ := strings.Cut(err.Error(), "\n")
		if want, ok := strings.CutSuffix(tc.want, "..."); ok && !strings.HasPrefix(first, want) || !ok && first != tc.want {
			t.Errorf("%q:\n got %s\nwant %s", tc.src, first, tc.want)
		}
	}
}
