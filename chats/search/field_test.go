package search

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/registry"
	index "github.com/blevesearch/bleve_index_api"
)

// freqsOf lists an analysis's length and terms: each with its frequency
// and locations (position@start-end), in order.
func freqsOf(n int, tfs index.TokenFrequencies) string {
	var terms []string
	for key, tf := range tfs {
		s := strconv.Quote(key) + "=" + strconv.Quote(string(tf.Term)) + "x" + strconv.Itoa(tf.Frequency()) + "["
		for _, l := range tf.Locations {
			s += strconv.Itoa(l.Position) + "@" + strconv.Itoa(l.Start) + "-" + strconv.Itoa(l.End) + " " + l.Field + strconv.Itoa(len(l.ArrayPositions)) + ","
		}
		terms = append(terms, s+"]")
	}
	slices.Sort(terms)
	return strconv.Itoa(n) + ": " + strings.Join(terms, " ")
}

// bleveFrequencies is what bleve's TextField finds in text with analyzer
// a: its Analyze, on a copy as it makes of a stored value.
func bleveFrequencies(a analysis.Analyzer, text string, o index.FieldIndexingOptions) string {
	tokens := a.Analyze([]byte(text))
	return freqsOf(len(tokens), analysis.TokenFrequency(tokens, nil, o))
}

func testAnalyzer(t testing.TB) *enAnalyzer {
	t.Helper()
	a, err := registry.NewCache().AnalyzerNamed(analyzerName)
	if err != nil {
		t.Fatal(err)
	}
	return a.(*enAnalyzer)
}

var frequencyCases = append([]string{
	"The gardener's Tomatoes were RUNNING to the rivers' banks; the gardener RUNS, runs and ran.",
	"A's b'S it's IT'S 's x's's don't O'Neil's", "the the the and of", "Running running RUNNING runner runs",
	strings.Repeat("Supercalifragilisticexpialidociously", 3) + " " + strings.Repeat("z", 100) + "ing",
	"Café's CAFÉS naïve’s Ünïcode words’ and ＩＴ'S wide", "tomatoes — “quoted” and ’possessive’s", "\xffbroken after",
	"ok \xff broken in the middle", "Mirror answers this benchmark with a steady stream of ordinary words. ",
}, tokenizerCases...)

// TestFrequenciesAsBleve: a text field's terms, their frequencies and
// locations are those bleve's TextField finds with the same analyzer,
// with term vectors and without, the stems cached or not.
func TestFrequenciesAsBleve(t *testing.T) {
	a := testAnalyzer(t)
	for _, o := range []index.FieldIndexingOptions{optText, index.IndexField} {
		for round := range 2 { // the second finds the stems in the cache
			for _, text := range frequencyCases {
				n, tfs := a.frequencies([]byte(text), o)
				if got, want := freqsOf(n, tfs), bleveFrequencies(a, text, o); got != want {
					t.Errorf("%s, round %d, %q:\n got %s\nwant %s", o, round, text, got, want)
				}
			}
		}
	}
}

// FuzzFrequencies: whatever the text, the terms, frequencies and locations
// are bleve's, and the text is left as it was.
func FuzzFrequencies(f *testing.F) {
	for _, text := range frequencyCases {
		f.Add(text)
	}
	a := testAnalyzer(f)
	f.Fuzz(func(t *testing.T, text string) {
		in := []byte(text)
		n, tfs := a.frequencies(in, optText)
		if got, want := freqsOf(n, tfs), bleveFrequencies(a, text, optText); got != want {
			t.Fatalf("%q:\n got %s\nwant %s", text, got, want)
		}
		if string(in) != text {
			t.Fatalf("the text changed: %q, was %q", in, text)
		}
	})
}

// TestStemsCachedUnderContention: with far more words than the stems'
// cache holds, analysed at once by several goroutines (as bleve's
// analysis workers do), each word's stem is its own: a slot taken by
// another word is not taken for this one's.
func TestStemsCachedUnderContention(t *testing.T) {
	a := testAnalyzer(t)
	suffixes := []string{"", "s", "ing", "ed", "ies", "ational", "ness", "ly", "'s"}
	var texts []string
	for i := range 400 {
		var w []string
		for j := range 30 {
			n := i*30 + j
			w = append(w, "w"+strconv.FormatInt(int64(n)*7919, 36)+suffixes[n%len(suffixes)])
		}
		texts = append(texts, strings.Join(w, " "))
	}
	want := make([]string, len(texts))
	for i, text := range texts {
		want[i] = bleveFrequencies(a, text, optText)
	}
	errs := make(chan string, 4)
	for g := range 4 {
		go func() {
			for round := range 2 {
				for i := range texts {
					i := (i + g*97) % len(texts)
					if got := freqsOf(a.frequencies([]byte(texts[i]), optText)); got != want[i] {
						errs <- "round " + strconv.Itoa(round) + ", " + texts[i] + ":\n got " + got + "\nwant " + want[i]
						return
					}
				}
			}
			errs <- ""
		}()
	}
	for range 4 {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
}
