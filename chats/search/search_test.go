package search

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func open(t testing.TB) *Index {
	t.Helper()
	x, err := Open(filepath.Join(t.TempDir(), "search"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

func TestIndexApplySearchDrop(t *testing.T) {
	x := open(t)
	title := "Garden plans"
	if err := x.Apply("c1", &title, []Doc{
		{Message: "m2", Seq: 2, Role: "user", Text: "Where should the **tomatoes** go?", Time: time.Now()},
		{Message: "m5", Seq: 5, Role: "assistant", Text: "Tomatoes like sun. Put them by the south wall."},
	}, 6); err != nil {
		t.Fatal(err)
	}
	other := "Taxes"
	if err := x.Apply("c2", &other, []Doc{{Message: "m2", Seq: 2, Role: "user", Text: "tomato soup recipe"}}, 3); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		q    string
		want []string // chat/message of the hits, any order
	}{
		{"tomatoes", []string{"c1/m2", "c1/m5", "c2/m2"}}, // stemmed: tomato
		{"south wall", []string{"c1/m5"}},
		{"wall south", []string{"c1/m5"}},
		{"sou", []string{"c1/m5", "c2/m2"}}, // a prefix, as one types
		{"garden", []string{"c1/"}},         // the title
		{"nothing-like-this", nil},
	} {
		hits, err := x.Search(tc.q, 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range hits {
			got = append(got, h.Chat+"/"+h.Message)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v, want %v", tc.q, got, tc.want)
		}
	}
	hits, _ := x.Search("wall", 10, nil)
	if len(hits) != 1 || hits[0].Seq != 5 || hits[0].Role != "assistant" || hits[0].Kind != KindMessage {
		t.Fatalf("%+v", hits)
	}
	if i := slices.IndexFunc(hits[0].Snippet, func(p Part) bool { return p.Hit }); i < 0 || hits[0].Snippet[i].Text != "wall" {
		t.Fatalf("snippet %+v", hits[0].Snippet)
	}
	if hits, _ := x.Search("tomatoes", 10, func(c string) bool { return c != "c2" }); slices.ContainsFunc(hits, func(h Hit) bool { return h.Chat == "c2" }) {
		t.Fatal("keep did not drop c2")
	}
	if m, _ := x.Mark("c1"); m != 6 {
		t.Fatalf("mark %d", m)
	}
	if err := x.DropChat("c1"); err != nil {
		t.Fatal(err)
	}
	if hits, _ := x.Search("tomatoes", 10, nil); len(hits) != 1 || hits[0].Chat != "c2" {
		t.Fatalf("after drop: %+v", hits)
	}
	if m, _ := x.Mark("c1"); m != 0 {
		t.Fatalf("mark after drop %d", m)
	}
	if ids, _ := x.Chats(); !slices.Equal(ids, []string{"c2"}) {
		t.Fatalf("chats %v", ids)
	}
	for _, q := range []string{"", " ", strings.Repeat("a", MaxQuery+1), "\xff"} {
		if _, err := x.Search(q, 10, nil); err == nil {
			t.Errorf("query %q accepted", q)
		}
	}
}

func TestSnippet(t *testing.T) {
	long := strings.Repeat("lorem ipsum ", 40) + "NEEDLE here" + strings.Repeat(" dolor sit", 40)
	at := strings.Index(long, "NEEDLE")
	for _, tc := range []struct {
		name  string
		text  string
		spans [][2]int
		want  string // parts joined, hits in []
	}{
		{"short", "find the word", [][2]int{{9, 13}}, "find the [word]"},
		{"two", "a b a", [][2]int{{4, 5}, {0, 1}}, "[a] b [a]"},
		{"lines folded", "one\n\ntwo  three", [][2]int{{5, 8}}, "one [two] three"},
		{"bad spans ignored", "héllo", [][2]int{{2, 3}, {-1, 2}, {0, 99}}, "héllo"},
		{"cut around", long, [][2]int{{at, at + 6}}, "…" + long[at-160/3:at] + "[NEEDLE]" + long[at+6:at-160/3+160] + "…"},
	} {
		var b strings.Builder
		for _, p := range Snippet(tc.text, tc.spans, 160) {
			if p.Hit {
				b.WriteString("[" + p.Text + "]")
			} else {
				b.WriteString(p.Text)
			}
		}
		if got := b.String(); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

// FuzzSnippet: whatever the text and spans, the parts are valid UTF-8, no
// longer than the text allows, and every hit is text the span named.
func FuzzSnippet(f *testing.F) {
	f.Add("find the word", 9, 13, 40)
	f.Add("héllo wörld", 1, 3, 4)
	f.Add(strings.Repeat("x", 500), 250, 251, 10)
	f.Fuzz(func(t *testing.T, text string, a, b, width int) {
		if width < 1 || width > 1000 {
			return
		}
		n := 0
		for _, p := range Snippet(text, [][2]int{{a, b}}, width) {
			if !utf8.ValidString(p.Text) && utf8.ValidString(text) {
				t.Fatalf("invalid UTF-8 part %q", p.Text)
			}
			if p.Hit && strings.TrimSpace(p.Text) != strings.TrimSpace(oneLine(text[a:b])) {
				t.Fatalf("hit %q is not the span %q", p.Text, text[a:b])
			}
			n += len(p.Text)
		}
		if n > len(text)+8 { // "…" at either end
			t.Fatalf("snippet of %d bytes from %d", n, len(text))
		}
	})
}

// benchWords are the benchmarks' vocabulary: common English words and
// a few of the product's, drawn with a skew towards the first.
var benchWords = strings.Fields(`the a of to and in is it you that he was for on are with as I his they be at one have this from or had by
		hot word but what some we can out other were all there when up use your how said an each she which do their time if will way about
		many then them write would like so these her long make thing see him two has look more day could go come did number sound no most
		people my over know water than call first who may down side been now find garden tomato river mountain budget invoice kernel
		compiler server deploy breaker quota token window context boundary archive search index chat model provider gateway`)

// BenchmarkSearch100k: queries over 100,000 stored messages in 1,000
// chats; p50 and p99 of a query's time are reported (ns).
func BenchmarkSearch100k(b *testing.B) {
	x := open(b)
	rng := rand.New(rand.NewPCG(1, 2))
	words := benchWords
	start := time.Now()
	for c := range 1000 {
		chat := fmt.Sprintf("c_%04d", c)
		title := fmt.Sprintf("Chat %d", c)
		docs := make([]Doc, 100)
		for i := range docs {
			n := 8 + rng.IntN(40)
			w := make([]string, n)
			for j := range w {
				// Zipf-like: common words far more often than rare ones.
				w[j] = words[int(float64(len(words))*rng.Float64()*rng.Float64())]
			}
			docs[i] = Doc{Message: fmt.Sprintf("m%d", i+2), Seq: uint64(i + 2), Role: "user", Text: strings.Join(w, " ")}
		}
		docs[rng.IntN(100)].Text += " quetzal"
		if err := x.Apply(chat, &title, docs, 101); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("indexed 100,000 messages in %s", time.Since(start).Round(time.Millisecond))
	for _, q := range []string{"quetzal", "garden tomato", "the", "compiler server deploy", "bound"} {
		b.Run(strings.ReplaceAll(q, " ", "_"), func(b *testing.B) {
			var times []time.Duration
			for b.Loop() {
				t0 := time.Now()
				if _, err := x.Search(q, 50, nil); err != nil {
					b.Fatal(err)
				}
				times = append(times, time.Since(t0))
			}
			sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
			b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(times[len(times)*99/100].Nanoseconds()), "p99-ns")
		})
	}
}

// TestOpenDoesNotWaitForTheIndex (issue 20, item 3): Open returns at once,
// the index is read in the background (bleve reads every chat's mark as it
// opens), and an index that cannot be opened fails its methods, not the
// gateway's start; it is not said to be clean.
func TestOpenDoesNotWaitForTheIndex(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "search")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "index_meta.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	x, err := Open(dir)
	if err != nil {
		t.Fatalf("Open of a damaged index: %v; want the error from its methods", err)
	}
	if _, err := x.Mark("c1"); err == nil {
		t.Error("Mark on an index that did not open: no error")
	}
	if _, err := x.Search("anything", 10, nil); err == nil {
		t.Error("Search on an index that did not open: no error")
	}
	if x.Clean() {
		t.Error("an index that did not open is said to be clean")
	}
	if err := x.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
