package provider

import (
	"fmt"
	"strings"
	"testing"
	"unicode"
)

// TestRedactFastPath: Redact's shortcut for text without a secret gives
// what the patterns give, on text with and without secrets, near misses
// and the Unicode folds the case-insensitive patterns accept.
func TestRedactFastPath(t *testing.T) {
	const key = "sk-proj-0123456789abcdef"
	cases := []string{
		"", "gpt-4o-mini-2024-07-18", "req_0123456789abcdef", "plain words of an error",
		"ümlaut and 漢字 and emoji 🎉", "sk-", "ask-me", "risk-free", "sk-ab", "xsk-abcdef",
		"AIza", "AIzaSyA-0123456789abcdefghij", "aiza0123456789abcdef",
		"bearer", "Bearer abc.def", "BEARER  tok", "bear", "bearers", "b",
		"key", "KEY=abc", "api_key: 0123456789", "x-api-key: abcdefgh1234", "x-goog-api-key=abcdefghij",
		"?key=secret&x=1", "&key=v", "monkey business", "keyboard", "ke", "k",
		"api_\u212Aey: 0123456789abc", "x-api-\u212AEY= abcdefghijkl", "\u212A", "\u212Ae", "\u00e2\u0084",
		"Bearer\u00a0tok", "ſk-abcdef", "the key is " + key, key, key[:len(key)-1],
		"0123456789abcdef", "proj-0123456789abcdef",
	}
	for _, s := range cases {
		for _, k := range []string{"", "none", key, "0123456789abcdef"} {
			if got, want := Redact(s, k), redactAll(s, k); got != want {
				t.Errorf("Redact(%q, %q) = %q, the patterns give %q", s, k, got, want)
			}
		}
	}
}

// TestSecretWordFolds pins mayHoldSecret's premise: of the letters of the
// words it looks for case-insensitively, only "k" has a fold outside
// ASCII, the Kelvin sign.
func TestSecretWordFolds(t *testing.T) {
	for _, c := range "bearerkeyxapigo" {
		for f := unicode.SimpleFold(c); f != c; f = unicode.SimpleFold(f) {
			if f < 0x80 {
				continue
			}
			if c != 'k' || f != '\u212A' {
				t.Errorf("%q folds to %U, which mayHoldSecret does not look for", c, f)
			}
		}
	}
}

// TestRedactCleanTextAllocatesNothing: text without a secret costs no
// copy, in Redact or in CleanID.
func TestRedactCleanTextAllocatesNothing(t *testing.T) {
	const key = "sk-proj-0123456789abcdef"
	text := strings.Repeat("a reply about the weather, nothing secret. ", 8)
	var sink string
	if n := testing.AllocsPerRun(100, func() { sink = Redact(text, key) }); n != 0 {
		t.Errorf("Redact of clean text: %v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { sink = CleanID("gpt-4o-2024-08-06", key) }); n != 0 {
		t.Errorf("CleanID of a clean id: %v allocations", n)
	}
	_ = sink
	// An id that needs the filter still gets it.
	if got := CleanID("gpt 4o\n", key); got != "gpt4o" {
		t.Errorf("CleanID filtered to %q", got)
	}
	if got := CleanID("id-"+key, key); got != "id-[redacted]" {
		t.Errorf("CleanID redacted to %q", got)
	}
}

// BenchmarkRedact redacts text without a secret, as most is: a model
// name and a search snippet; "patterns" is without the fast path.
func BenchmarkRedact(b *testing.B) {
	const key = "sk-proj-0123456789abcdef"
	snippet := strings.Repeat("a reply about the weather, nothing secret. ", 7)
	for _, f := range []struct {
		name   string
		redact func(s, key string) string
	}{{"fast", Redact}, {"patterns", redactAll}} {
		for _, s := range []string{"gpt-4o-2024-08-06", snippet} {
			b.Run(fmt.Sprintf("%s/%d", f.name, len(s)), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					f.redact(s, key)
				}
			})
		}
	}
}
