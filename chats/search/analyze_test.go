package search

import (
	"fmt"
	"strings"
	"testing"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
	"github.com/blevesearch/bleve/v2/registry"
)

// words lists a token stream as term@start-end#position.
func words(ts analysis.TokenStream) string {
	var b strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&b, "%s@%d-%d#%d ", t.Term, t.Start, t.End, t.Position)
	}
	return b.String()
}

var tokenizerCases = []string{
	"", "   ", "Where should the tomatoes go?", "can't won't o'clock 'quoted'", "e.g. i.e. U.S.A. end.",
	"3.14 1,000,000 1;2 1.a a.1 a:b a::b 1:2 ..a a.. a.b.c", "snake_case __init__ _x x_ a_1 1_a _ __",
	"tab\tnew\nline\r\ncarriage", "a-b a/b a+b a@b.com http://example.com/x?y=1#z", "x:y:z 2026-03-04T05:06:07Z",
	"naïve café", "日本語のテキスト", "emoji 👍 here", "mixed ascii and ü", "'a' .a. ,1, ;1;", "a'", "'", "1.", ".1",
	"it’s done — mostly. Next: the “plan”", "a \u0301b c\u0301 d", "x 👍\u200d👍 y", "🇦🇨🇦 flags", "left é\nright\r\né ok",
}

// TestASCIITokenizer: the words of some texts are the Unicode tokenizer's.
func TestASCIITokenizer(t *testing.T) {
	fast, ref := asciiTokenizer{unicode.NewUnicodeTokenizer()}, unicode.NewUnicodeTokenizer()
	for _, text := range tokenizerCases {
		if got, want := words(fast.Tokenize([]byte(text))), words(ref.Tokenize([]byte(text))); got != want {
			t.Errorf("%q:\n got %s\nwant %s", text, got, want)
		}
	}
}

// FuzzASCIITokenizer: whatever the text, the words are the Unicode
// tokenizer's.
func FuzzASCIITokenizer(f *testing.F) {
	for _, text := range tokenizerCases {
		f.Add(text)
	}
	fast, ref := asciiTokenizer{unicode.NewUnicodeTokenizer()}, unicode.NewUnicodeTokenizer()
	f.Fuzz(func(t *testing.T, text string) {
		if got, want := words(fast.Tokenize([]byte(text))), words(ref.Tokenize([]byte(text))); got != want {
			t.Fatalf("%q:\n got %s\nwant %s", text, got, want)
		}
	})
}

// TestAnalyzerIsEnglish: the text field's analyzer finds the terms bleve's
// English analyzer finds (stemmed, lower case, without stop words).
func TestAnalyzerIsEnglish(t *testing.T) {
	cache := registry.NewCache()
	ours, err := cache.AnalyzerNamed(analyzerName)
	if err != nil {
		t.Fatal(err)
	}
	english, err := cache.AnalyzerNamed(en.AnalyzerName)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range append(tokenizerCases, "The gardener's Tomatoes were RUNNING to the rivers' banks") {
		if got, want := words(ours.Analyze([]byte(text))), words(english.Analyze([]byte(text))); got != want {
			t.Errorf("%q:\n got %s\nwant %s", text, got, want)
		}
	}
	if got := words(ours.Analyze([]byte("The Tomatoes"))); got != "tomato@4-12#2 " {
		t.Errorf("The Tomatoes: %s", got)
	}
}
