package tokens

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

var counters = []*Counter{o200k, cl100k}

// sample is n, or under the race detector (which slows the encoder about
// tenfold) the smaller race.
func sample(n, race int) int {
	if raceEnabled {
		return race
	}
	return n
}

func loaded(t testing.TB, c *Counter) *Counter {
	t.Helper()
	if err := c.Load(); err != nil {
		t.Fatal(err)
	}
	return c
}

// model is what Count promises, computed the slow, obvious way: every
// pre-token encoded alone (which tiktoken does too), and one longer than
// maxPiece bytes cut greedily into pieces of at most maxPiece bytes.
func model(t testing.TB, c *Counter, s string) int { return len(modelIDs(t, c, s)) }

// modelIDs is the ids model counts.
func modelIDs(t testing.TB, c *Counter, s string) []int {
	t.Helper()
	var ids []int
	for _, p := range pretokens(t, c, s) {
		for len(p) > 0 {
			cut, size := 0, 0
			for cut < len(p) && size+utf8.RuneLen(fixRune(p[cut])) <= maxPiece {
				size += utf8.RuneLen(fixRune(p[cut]))
				cut++
			}
			ids = append(ids, exact(t, c, string(p[:cut]))...)
			p = p[cut:]
		}
	}
	return ids
}

func corpus(t testing.TB) map[string]string {
	t.Helper()
	files, err := filepath.Glob("testdata/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	texts := map[string]string{}
	var all strings.Builder
	for _, f := range files {
		if fi, err := os.Stat(f); err != nil || fi.IsDir() {
			continue // testdata/fuzz, the fuzzers' corpus
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts[filepath.Base(f)] = string(b)
		all.Write(b)
	}
	texts["all"] = all.String()
	// Long stretches without whitespace whose pre-tokens are all short:
	// they take the slow path, which must still be exact.
	texts["minified"] = strings.Repeat(`{"id":12345,"name":"Ünïcode","tags":["a","b"],"ok":true,"v":-1.5e3},`, 60)
	texts["url"] = "see https://example.com/" + strings.Repeat("path_segment/another-Piece.html?query=value&x=%20%2F&", 60) + " there"
	texts["dashes"] = strings.Repeat("-=", 200) + "\n" + strings.Repeat("─", 100)
	texts["cjk-line"] = strings.Repeat("镜子是一个小型网关，", 100)
	return texts
}

// TestExactOnOrdinaryText, the golden test: on ordinary text, where no
// pre-token is longer than maxPiece, Count and Encode are exactly
// tiktoken's, on each text of the corpus, on it repeated, and at every
// length the text is cut to (so every kind of cut point is tried).
func TestExactOnOrdinaryText(t *testing.T) {
	for name, text := range corpus(t) {
		for _, c := range counters {
			loaded(t, c)
			t.Run(c.name+"/"+name, func(t *testing.T) {
				for _, s := range []string{text, strings.Repeat(text+"\n", 1+sample(12<<10, 3<<10)/len(text))} {
					longest := 0
					for _, p := range pretokens(t, c, s) {
						longest = max(longest, len(string(p)))
					}
					if longest > maxPiece {
						t.Fatalf("corpus text has a pre-token of %d bytes", longest)
					}
					want := exact(t, c, s)
					if got := c.Encode(s); !slices.Equal(got, want) {
						t.Fatalf("Encode differs from tiktoken (%d ids, want %d)", len(got), len(want))
					}
					if got := c.Count(s); got != len(want) {
						t.Fatalf("Count = %d, tiktoken %d", got, len(want))
					}
				}
				for i := 0; i < min(len(text), sample(len(text), 1500)); i += 1 + i/40 + sample(0, 12) { // every cut early on, sparser later
					if !utf8.RuneStart(text[i]) {
						continue
					}
					if got, want := c.count(text[:i]), len(exact(t, c, text[:i])); got != want {
						t.Fatalf("count of the first %d bytes = %d, tiktoken %d", i, got, want)
					}
				}
			})
		}
	}
}

// alphabet is the characters that decide where pre-tokens start and end:
// letters of each case and script, numbers, the apostrophe of
// contractions, punctuation and symbols (/ ends o200k's), each kind of
// whitespace, marks, format and control characters, invalid UTF-8.
var alphabet = []string{
	"a", "b", "s", "t", "Z", "é", "ß", "ǅ", "ʰ", "字", "か", "я", "Я", "ا",
	"7", "0", "٣", "½", "Ⅻ",
	"'", "’", "!", ".", "/", "-", "_", "\"", "{", "😀", "€", "©",
	" ", " ", " ", "\t", "\n", "\r", "\r\n", "\v", "\f", "\u00a0", "\u2003", "\u2028", "\u0085",
	"\u0301", "\u0308", "\u200d", "\u200b", "\ufeff", "\x00", "\x7f", "\xff", "\xe5\xad",
}

func randomText(rng *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		if rng.IntN(12) == 0 { // now and then, a run of one character
			b.WriteString(strings.Repeat(alphabet[rng.IntN(len(alphabet))], 1+rng.IntN(8)))
			continue
		}
		b.WriteString(alphabet[rng.IntN(len(alphabet))])
	}
	return b.String()
}

// TestPretokens compares the hand-written pre-tokenizers with the
// regular expressions they stand for, on random text over the alphabet
// that decides where pre-tokens start and end.
func TestPretokens(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 3))
	for _, c := range counters {
		loaded(t, c)
		for range sample(5000, 500) {
			s := randomText(rng, 1+rng.IntN(40))
			comparePretokens(t, c, s)
			if got, want := c.count(s), len(exact(t, c, s)); got != want {
				t.Fatalf("%s: %q: count %d, tiktoken %d", c.name, s, got, want)
			}
		}
	}
}

func comparePretokens(t *testing.T, c *Counter, s string) {
	t.Helper()
	var want []string
	for _, p := range pretokens(t, c, s) {
		want = append(want, string(p))
	}
	var got []string
	for i := 0; i < len(s); {
		j := c.enc.split(s, i)
		if j <= i || j > len(s) {
			t.Fatalf("%s: %q: split at %d returned %d", c.name, s, i, j)
		}
		got = append(got, fixUTF8(s[i:j]))
		i = j
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %q:\n got  %q\n want %q", c.name, s, got, want)
	}
}

// FuzzPretokens: the hand-written pre-tokenizers split any text as the
// regular expressions do.
func FuzzPretokens(f *testing.F) {
	for _, s := range corpus(f) {
		f.Add(s[:min(len(s), 2000)])
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		f.Add(randomText(rng, 30))
	}
	for _, c := range counters {
		loaded(f, c)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 4<<10 {
			return
		}
		for _, c := range counters {
			comparePretokens(t, c, s)
		}
	})
}

// TestOverlongPretokens: text with overlong pre-tokens among ordinary
// ones is counted exactly as the model says (ordinary pre-tokens exact,
// overlong ones cut), whatever precedes and follows them.
func TestOverlongPretokens(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 7))
	for _, c := range counters {
		loaded(t, c)
		for i := range sample(120, 30) {
			run := strings.Repeat(alphabet[rng.IntN(len(alphabet))], maxPiece/2+rng.IntN(3*maxPiece))
			s := randomText(rng, rng.IntN(30)) + run + randomText(rng, rng.IntN(30))
			if i%3 == 0 {
				s += run + randomText(rng, rng.IntN(10))
			}
			if got, want := c.count(s), model(t, c, s); got != want {
				t.Fatalf("%s: %q…: count %d, model %d", c.name, s[:min(len(s), 80)], got, want)
			}
			if got := c.Encode(s); len(got) != c.count(s) {
				t.Fatalf("%s: Encode gives %d ids, Count %d", c.name, len(got), c.count(s))
			}
		}
	}
}

// degenerate is text made of overlong pre-tokens, in the shapes that
// arrive in practice.
func degenerate(n int, seed uint64) map[string]string {
	rng := rand.New(rand.NewPCG(seed, 1))
	pick := func(alpha string) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alpha[rng.IntN(len(alpha))]
		}
		return string(b)
	}
	rep := func(s string) string { return strings.Repeat(s, n/len(s)) }
	url := "https://example.com/download?token="
	return map[string]string{
		"letter":     rep("a"),
		"upper":      rep("A"),
		"cyrillic":   rep("я"),
		"han":        rep("字"),
		"emoji":      rep("😀"),
		"digits":     rep("7"),
		"spaces":     rep(" "),
		"newlines":   rep("\n"),
		"dashes":     rep("-"),
		"pair":       rep("ab"),
		"base64":     pick("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"),
		"hex":        pick("0123456789abcdef"),
		"lowercase":  pick("abcdefghijklmnopqrstuvwxyz"),
		"url":        url + pick("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")[len(url):],
		"text-lines": rep("word\n"),
	}
}

// TestUnbrokenText is the golden test of long unbroken text (random
// base64, hex, one letter, a long URL, ...): the ids are exactly
// tiktoken's for every pre-token up to maxPiece bytes and for every piece
// of a longer one.
func TestUnbrokenText(t *testing.T) {
	for name, s := range degenerate(sample(6<<10, 2<<10), 21) {
		for _, c := range counters {
			loaded(t, c)
			if got, want := c.Encode(s), modelIDs(t, c, s); !slices.Equal(got, want) {
				t.Errorf("%s/%s: %d ids differ from the model's %d", c.name, name, len(got), len(want))
			}
		}
	}
}

// TestDegenerateNearExact bounds the error where the count is not exact:
// within 3% (or 2 tokens) of tiktoken's own count, at a length where
// tiktoken's quadratic count still finishes quickly.
func TestDegenerateNearExact(t *testing.T) {
	for name, s := range degenerate(3<<10, 5) {
		for _, c := range counters {
			loaded(t, c)
			got, want := c.Count(s), len(exact(t, c, s))
			if d := max(got-want, want-got); d > 2 && float64(d) > 0.03*float64(want) {
				t.Errorf("%s/%s: count %d, tiktoken %d", c.name, name, got, want)
			}
		}
	}
}

// TestHugeUnbrokenText counts long text made of overlong pre-tokens.
// Before the bound each 64 KiB input took seconds (one letter: 10–21 s)
// and 256 KiB minutes, so this test times out without it. Each count stays
// close to the sum of the counts of the text's two halves, a check that
// needs no quadratic reference.
func TestHugeUnbrokenText(t *testing.T) {
	inputs := degenerate(sample(64<<10, 16<<10), 9)
	inputs["256KiB-letter"] = strings.Repeat("a", 256<<10) // the message size limit
	for name, s := range inputs {
		for _, c := range counters {
			loaded(t, c)
			n := c.Count(s)
			if n <= 0 || n > len(s) {
				t.Errorf("%s/%s: count %d for %d bytes", c.name, name, n, len(s))
			}
			h := len(s) / 2
			for !utf8.RuneStart(s[h]) {
				h--
			}
			halves := c.Count(s[:h]) + c.Count(s[h:])
			if d := max(n-halves, halves-n); float64(d) > 0.01*float64(n)+2 {
				t.Errorf("%s/%s: count %d, as two halves %d", c.name, name, n, halves)
			}
		}
	}
}

func FuzzCount(f *testing.F) {
	for _, s := range corpus(f) {
		f.Add(s[:min(len(s), 2000)])
	}
	for _, s := range degenerate(1500, 3) {
		f.Add(s)
	}
	f.Add("x   " + strings.Repeat("!", 700) + " \n" + strings.Repeat("a", 600) + "'s")
	f.Add("a\t\n" + strings.Repeat("1", 900))
	for _, c := range counters {
		loaded(f, c)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 8<<10 {
			return
		}
		for _, c := range counters {
			ids := c.Encode(s)
			if n := c.Count(s); n != len(ids) {
				t.Fatalf("%s: Count %d, Encode %d ids", c.name, n, len(ids))
			}
			if want := model(t, c, s); len(ids) != want {
				t.Fatalf("%s: %d ids, model %d", c.name, len(ids), want)
			}
		}
	})
}

// benchText is 256 KiB (the message size limit) of the named input.
// fixRune is r as string([]rune) writes it: invalid runes become U+FFFD.
func fixRune(r rune) rune {
	if !utf8.ValidRune(r) {
		return utf8.RuneError
	}
	return r
}

func benchText(b testing.TB, name string) string {
	const size = 256 << 10
	switch name {
	case "prose":
		p, err := os.ReadFile("testdata/prose.txt")
		if err != nil {
			b.Fatal(err)
		}
		s := strings.Repeat(string(p), size/len(p)+1)[:size]
		return s
	case "one-letter":
		return strings.Repeat("a", size)
	case "base64":
		return degenerate(size, 11)["base64"]
	}
	panic(fmt.Sprint("no bench text ", name))
}
