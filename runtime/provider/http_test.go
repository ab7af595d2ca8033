package provider

import (
	"errors"
	"net"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	key := "AIzaSyD-0123456789abcdefghijklmnopqrstu"
	for in, want := range map[string]string{
		"bad key " + key + " here":                        "bad key [redacted] here",
		"Incorrect API key provided: sk-abc.":             "Incorrect API key provided: sk-[redacted].",
		"key sk-proj-AbC_12-**xyz here":                   "key sk-[redacted] here",
		"anthropic sk-ant-api03-AbC_12 bad":               "anthropic sk-ant-[redacted] bad",
		"other google key AIzaSyAAAAAAAAAAAAAAAAAA":       "other google key AIza[redacted]",
		"Authorization: Bearer abc.def-ghi==":             "Authorization: Bearer [redacted]",
		"x-api-key: abcdefgh12345":                        "x-api-key: [redacted]",
		"GET /v1beta/models/x?alt=sse&key=abc123":         "GET /v1beta/models/x?alt=sse&key=[redacted]",
		"task-list and desk-top stay":                     "task-list and desk-top stay",
		"API key not valid. Please pass a valid API key.": "API key not valid. Please pass a valid API key.",
	} {
		if got := Redact(in, key); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Redact("x marks the spot", "x"); got != "x marks the spot" {
		t.Errorf("placeholder key redacted: %q", got)
	}
}

func TestNetworkError(t *testing.T) {
	cause := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	err := NetworkError("p", "secret-key-123", cause, "")
	var op *net.OpError
	if ClassOf(err) != ClassNetwork || !errors.As(err, &op) {
		t.Fatalf("err %v: class %s, cause reachable %v", err, ClassOf(err), errors.As(err, &op))
	}
	leaky := errors.New("dial http://host/secret-key-123: refused")
	err = NetworkError("p", "secret-key-123", leaky, "")
	if strings.Contains(err.Error(), "secret-key-123") || errors.Is(err, leaky) {
		t.Fatalf("a cause holding the key must not survive: %v", err)
	}
}

func TestSnippet(t *testing.T) {
	long := strings.Repeat("é", 400)
	s := Snippet([]byte(long), "")
	if !strings.HasSuffix(s, "…") || len(s) > 310 || strings.ContainsRune(s, '\uFFFD') {
		t.Fatalf("snippet %q", s)
	}
	if Snippet([]byte("  a\n\tb  "), "") != "a b" {
		t.Fatal("whitespace not folded")
	}
}

// TestSnippetRedactsBeforeCutting: a key straddling the snippet's cut is
// redacted whole, so none of its head survives.
func TestSnippetRedactsBeforeCutting(t *testing.T) {
	key := "Zq9Xw8Vu7Ts6Rp5On4Ml3Kj2Ih1Gf0EdCbAzYxWv"
	for i := 250; i <= 310; i++ {
		raw := strings.Repeat("e", i) + key + strings.Repeat(" tail", 20)
		if s := Snippet([]byte(raw), key); strings.Contains(s, key[:4]) {
			t.Fatalf("key at %d: snippet %q", i, s)
		}
	}
}

func TestReadCapped(t *testing.T) {
	key := "Zq9Xw8Vu7Ts6Rp5On4Ml3Kj2Ih1Gf0EdCbAzYxWv"
	for _, tt := range []struct {
		body string
		n    int64
		want string
	}{
		{"short body", 100, "short body"},
		{"exactly", 7, "exactly"},
		{"cut here and more", 8, "cut here"},
		{"body " + key, 5 + 10, "body "},                    // key cut after 10 bytes: the head goes too
		{"body " + key, 5 + int64(len(key)), "body " + key}, // whole, for Redact to find
		{"body Zq9 other", 8, "body "},                      // a tail that could begin the key
	} {
		got, err := ReadCapped(strings.NewReader(tt.body), tt.n, key)
		if err != nil || string(got) != tt.want {
			t.Errorf("ReadCapped(%q, %d) = %q, %v; want %q", tt.body, tt.n, got, err, tt.want)
		}
	}
}
