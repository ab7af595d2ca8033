package provider

import (
	"net/http"
	"strings"
	"testing"
)

func TestRequestID(t *testing.T) {
	const key = "sk-live-0123456789abcdef"
	for _, c := range []struct {
		name string
		h    http.Header
		want string
	}{
		{"openai", http.Header{"X-Request-Id": {"req_abc123"}}, "req_abc123"},
		{"anthropic", http.Header{"Request-Id": {"req_011CSHoEeqs5C35K2UUqR7Fy"}}, "req_011CSHoEeqs5C35K2UUqR7Fy"},
		{"both: x-request-id first", http.Header{"X-Request-Id": {"a"}, "Request-Id": {"b"}}, "a"},
		{"none", http.Header{}, ""},
		{"blank", http.Header{"X-Request-Id": {"   "}}, ""},
		{"spaces and controls go", http.Header{"X-Request-Id": {" id with\tspaces\x01 "}}, "idwithspaces"},
		{"the key is redacted", http.Header{"X-Request-Id": {"id-" + key}}, "id-[redacted]"},
		{"a key broken up is whole when redacted", http.Header{"X-Request-Id": {"s k-live-0123456789\x01abcdef"}}, "[redacted]"},
		{"cut at 128", http.Header{"X-Request-Id": {strings.Repeat("x", 300)}}, strings.Repeat("x", 128)},
	} {
		if got := RequestID(c.h, key); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func FuzzCleanID(f *testing.F) {
	const key = "sk-live-0123456789abcdef"
	for _, s := range []string{"req_1", "", " a b ", "id-" + key, "s k" + key[2:], strings.Repeat("y", 120) + key, "é\x00\xff", strings.Repeat("k", 200)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := CleanID(s, key)
		if len(got) > maxRequestID || strings.Contains(got, key) || strings.Contains(got, key[:len(key)-1]) {
			t.Fatalf("CleanID(%q) = %q", s, got)
		}
		for i := 0; i < len(got); i++ {
			if got[i] <= ' ' || got[i] >= 0x7f {
				t.Fatalf("CleanID(%q) = %q: byte %d is not printable", s, got, i)
			}
		}
	})
}
