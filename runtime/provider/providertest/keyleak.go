// Package providertest holds what the adapters' tests share: the bodies a
// server that echoes the API key sends, and the check that no part of the
// key reaches an error. Only tests import it.
package providertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// Key is an API key shaped like none of the providers' (no "sk-", no
// "AIza"), so that only redaction of the configured key itself can hide
// it. Every 4 characters of it hold an upper-case letter followed by a
// lower-case one and a digit, which no Filler text, status or class name
// in an error contains, so Leak finds only the key.
const Key = "Kx7Qm2Zr9Tb4Wn8Yc3Hd6Jf1Lg5Pv0Rs8Ne2Ua4"

// Filler is the text around the key: long enough that the key sits before,
// across and after the 300-character cut of provider.Snippet.
var Filler = strings.Repeat("the upstream server could not handle this request; ", 9)

// MinLeak is the shortest piece of the key that counts as a leak.
const MinLeak = 4

// Leak returns the longest piece of key, at least MinLeak long, that text
// contains, or "" when there is none.
func Leak(text, key string) string {
	for n := len(key); n >= MinLeak; n-- {
		for i := 0; i+n <= len(key); i++ {
			if strings.Contains(text, key[i:i+n]) {
				return key[i : i+n]
			}
		}
	}
	return ""
}

// WithKeyAt is Filler with key inserted at byte offset i (0..len(Filler)).
func WithKeyAt(key string, i int) string { return Filler[:i] + key + Filler[i:] }

// AtReadLimit is an error body in which key straddles the limit of what
// the adapters read of an error (provider.MaxErrorBody), cut after its
// first head bytes, behind whitespace that Snippet folds away, so the
// head would lead the message.
func AtReadLimit(key string, head int) string {
	return strings.Repeat(" ", provider.MaxErrorBody-head) + key + " trailing text"
}

// Shape is one way a server sends text back where an adapter turns it into
// an error: an HTTP status, whether the body is an event stream, and the
// body built around the text.
type Shape struct {
	Name   string
	Status int
	SSE    bool
	Body   func(text string) string
}

// Echo serves the answer of the case under test; the adapter's own fake
// server calls Handle.
type Echo struct {
	mu     sync.Mutex
	status int
	sse    bool
	body   string
}

// Handle writes the current answer.
func (e *Echo) Handle(w http.ResponseWriter, _ *http.Request) {
	e.mu.Lock()
	status, sse, body := e.status, e.sse, e.body
	e.mu.Unlock()
	if sse {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status)
	io.WriteString(w, body)
}

func (e *Echo) set(s Shape, body string) {
	e.mu.Lock()
	e.status, e.sse, e.body = s.Status, s.SSE, body
	e.mu.Unlock()
}

// CheckNoKeyLeak sends, for each shape, Key at every offset of Filler,
// and Key cut by the error read limit, and fails when any MinLeak
// characters of it reach the error call returns (whose text is what a
// turn's failure event stores and sends to every client). call makes one
// request with Key configured against the fake serving e.
func CheckNoKeyLeak(t *testing.T, e *Echo, shapes []Shape, call func() error) {
	t.Helper()
	try := func(s Shape, body, what string) {
		t.Helper()
		e.set(s, body)
		err := call()
		if err == nil {
			t.Fatalf("%s, %s: no error", s.Name, what)
		}
		if leak := Leak(err.Error(), Key); leak != "" {
			t.Fatalf("%s, %s: %q of the key in the error: %v", s.Name, what, leak, err)
		}
		var pe *provider.Error
		if errors.As(err, &pe) {
			if leak := Leak(pe.Code+" "+pe.Message, Key); leak != "" {
				t.Fatalf("%s, %s: %q of the key in the error's fields", s.Name, what, leak)
			}
		}
	}
	for _, s := range shapes {
		// Without the key, the text must show no "leak": else Leak
		// would find the filler, not the key.
		e.set(s, s.Body(Filler))
		if err := call(); err == nil || Leak(err.Error(), Key) != "" {
			t.Fatalf("%s: the filler alone gives %v", s.Name, err)
		}
		for i := 0; i <= len(Filler); i++ {
			try(s, s.Body(WithKeyAt(Key, i)), fmt.Sprintf("key at offset %d", i))
		}
	}
	plain := Shape{Name: "read limit", Status: http.StatusInternalServerError,
		Body: func(string) string { return "" }}
	for head := 1; head < len(Key); head++ {
		try(plain, AtReadLimit(Key, head), fmt.Sprintf("%d bytes of the key before the limit", head))
	}
}

// Quote is s as a JSON string.
func Quote(s string) string {
	b, _ := json.Marshal(s) // a string always encodes
	return string(b)
}
