package provider

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// This file holds what every HTTP adapter needs the same way: the default
// client, key redaction, message snippets and transport errors.

// DefaultHeaderTimeout bounds the wait for response headers when an adapter
// is given no timeout. It is long because a server may answer only after
// reading the whole prompt (or loading the model).
const DefaultHeaderTimeout = 3 * time.Minute

// NewHTTPClient returns the client adapters use when none is configured:
// bounded dial, TLS handshake and response-header waits (headerTimeout, or
// DefaultHeaderTimeout when <= 0), the environment's proxy, and no overall
// timeout, since a stream may last minutes.
func NewHTTPClient(headerTimeout time.Duration) *http.Client {
	if headerTimeout <= 0 {
		headerTimeout = DefaultHeaderTimeout
	}
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialBodyConn(&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}),
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: headerTimeout,
		ExpectContinueTimeout: time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   MaxIdleConnsPerHost,
		ReadBufferSize:        ReadBufferSize,
		WriteBufferSize:       WriteBufferSize,
	}}
}

// ReadBufferSize is a connection's read buffer: a streamed answer of a
// few hundred words (about 6 KiB of events with their chunk framing) is
// then read in one system call where it has arrived, not two of net/http's
// default 4 KiB.
const ReadBufferSize = 8 << 10

// WriteBufferSize is a connection's write buffer. It holds only a
// request's head (a few hundred bytes): the body goes from its own bytes
// (bodyConn), so the default 4 KiB would sit mostly unused.
const WriteBufferSize = 2 << 10

// MaxIdleConnsPerHost is how many idle connections to one model server
// are kept for reuse. Many chats stream at once over HTTP/1.1 (local and
// self-hosted servers): with fewer kept than streams, each turn past the
// bound closed its connection and the next dialled a new one (a connect,
// a close, two goroutines and 8 KiB of buffers per turn). Idle ones
// still close after IdleConnTimeout.
const MaxIdleConnsPerHost = 256

// minKeyRedact is the shortest key redacted verbatim: shorter "keys" are
// placeholders local servers ignore ("x", "none"), and replacing them
// everywhere would garble messages.
const minKeyRedact = 6

// keyPatterns match key-shaped text of the providers Mirror speaks to, so a
// key is redacted even when a server echoes someone else's or a masked one.
var keyPatterns = []struct {
	re   *regexp.Regexp
	with string
}{
	// OpenAI ("sk-proj-…", also echoed masked as "sk-proj-****abcd") and
	// Anthropic ("sk-ant-api03-…") keys.
	{regexp.MustCompile(`\bsk-(ant-)?[A-Za-z0-9_*\-]{2,}`), "sk-${1}[redacted]"},
	// Google API keys: "AIza" and 35 more characters.
	{regexp.MustCompile(`\bAIza[0-9A-Za-z_\-]{10,}`), "AIza[redacted]"},
	{regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9._~+/\-]+=*`), "Bearer [redacted]"},
	// A key echoed as a header or parameter: "x-api-key: …", "?key=…".
	{regexp.MustCompile(`(?i)\b((?:x-api-key|x-goog-api-key|api[_-]?key)\s*[:=]\s*)[A-Za-z0-9._~+/\-]{8,}`), "${1}[redacted]"},
	{regexp.MustCompile(`([?&]key=)[^&\s"']+`), "${1}[redacted]"},
}

// Redact removes key, and anything shaped like a provider key, from text
// that may be shown or logged.
func Redact(s, key string) string {
	// Most text redacted (model names, request ids, search snippets) holds
	// nothing to redact, and each pattern's replace copied it even so.
	if !mayHoldSecret(s, key) {
		return s
	}
	return redactAll(s, key)
}

// redactAll is Redact without its fast path.
func redactAll(s, key string) string {
	if len(key) >= minKeyRedact {
		s = strings.ReplaceAll(s, key, "[redacted]")
	}
	for _, p := range keyPatterns {
		s = p.re.ReplaceAllString(s, p.with)
	}
	return s
}

// mayHoldSecret reports whether Redact could change s: whether s holds
// key or a word every key pattern needs ("sk-", "AIza", "bearer" or "key",
// the last two in any case). The case-insensitive patterns fold with
// Unicode's rules, under which the Kelvin sign (U+212A) is a "k"; no other
// letter of "bearer" or "key" has a non-ASCII fold (TestSecretWordFolds).
func mayHoldSecret(s, key string) bool {
	if len(key) >= minKeyRedact && strings.Contains(s, key) {
		return true
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case 's':
			if strings.HasPrefix(s[i+1:], "k-") {
				return true
			}
		case 'A':
			if strings.HasPrefix(s[i+1:], "Iza") {
				return true
			}
		case 'b', 'B':
			if i+6 <= len(s) && asciiFold(s[i+1:i+6], "earer") {
				return true
			}
		case 'k', 'K':
			if i+3 <= len(s) && asciiFold(s[i+1:i+3], "ey") {
				return true
			}
		case 0xE2: // the Kelvin sign is E2 84 AA
			if i+5 <= len(s) && s[i+1] == 0x84 && s[i+2] == 0xAA && asciiFold(s[i+3:i+5], "ey") {
				return true
			}
		}
	}
	return false
}

// asciiFold reports whether s is lower, a word of lowercase ASCII letters,
// in any ASCII case.
func asciiFold(s, lower string) bool {
	for i := 0; i < len(lower); i++ {
		if s[i]|0x20 != lower[i] {
			return false
		}
	}
	return true
}

// Snippet is a short, valid UTF-8, one-line excerpt of raw for messages,
// with key and key-shaped text redacted. The whole of raw is redacted
// before it is cut: cut first, a key straddling the cut would lose its
// tail, no longer match, and its head would reach the message.
func Snippet(raw []byte, key string) string {
	return Excerpt(strings.ToValidUTF8(string(raw), "\uFFFD"), key)
}

// maxExcerpt bounds an Excerpt, in bytes (before the "…" that marks a cut).
const maxExcerpt = 300

// Excerpt is s as an error message, a log line or a diagnostic keeps it:
// key and key-shaped text redacted (before the cut, see Snippet), white
// space folded to one line, at most 300 bytes cut on a rune boundary.
func Excerpt(s, key string) string {
	s = strings.Join(strings.Fields(Redact(s, key)), " ")
	if len(s) > maxExcerpt {
		cut := maxExcerpt
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// ReadCapped reads r up to n bytes. When r held more, the cut may have
// fallen inside key, and what precedes the cut is a key prefix that
// redaction cannot recognise, so a tail of the result that could begin key
// is dropped too.
func ReadCapped(r io.Reader, n int64, key string) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(r, n+1))
	if int64(len(raw)) <= n {
		return raw, err
	}
	raw = raw[:n]
	return raw[:len(raw)-keyHeadAtEnd(raw, key)], err
}

// keyHeadAtEnd is the length of the longest tail of raw that is a proper
// prefix of key (0 for a key too short to redact).
func keyHeadAtEnd(raw []byte, key string) int {
	if len(key) < minKeyRedact {
		return 0
	}
	for k := min(len(key)-1, len(raw)); k > 0; k-- {
		if bytes.HasSuffix(raw, []byte(key[:k])) {
			return k
		}
	}
	return 0
}

// NetworkError maps a failure to reach a provider or to read its stream
// into ClassNetwork. The cause stays reachable with errors.Is/As (timeouts,
// net errors) unless its text held the key, in which case only the redacted
// text survives.
func NetworkError(name, key string, err error, prefix string) error {
	text := err.Error()
	red := Redact(text, key)
	pe := &Error{Provider: name, Class: ClassNetwork, Message: prefix + red}
	if red != text {
		return pe
	}
	return &causeError{pe: pe, cause: err}
}

// causeError is a provider error that also wraps its transport cause.
type causeError struct {
	pe    *Error
	cause error
}

func (e *causeError) Error() string   { return e.pe.Error() }
func (e *causeError) Unwrap() []error { return []error{e.pe, e.cause} }
