package tokens

import (
	"sync"
	"testing"

	"github.com/dlclark/regexp2"
	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// The reference: tiktoken-go with its offline tables, which the package
// used before it carried its own compact tables. It is linked into the
// tests only; the golden and fuzz tests compare every count against it.

// splitPatterns are the encodings' pre-tokenizer patterns, exactly as
// tiktoken-go v0.1.8 compiles them (encoding.go); split.go matches them
// by hand and FuzzPretokens compares the two.
var splitPatterns = map[string]string{
	O200kBase: `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?` +
		`|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?` +
		`|\p{N}{1,3}` +
		`| ?[^\s\p{L}\p{N}]+[\r\n/]*` +
		`|\s*[\r\n]+` +
		`|\s+(?!\S)` +
		`|\s+`,
	CL100kBase: `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
}

type reference struct {
	enc   *tiktoken.Tiktoken
	split *regexp2.Regexp
}

var (
	refOnce sync.Once
	refs    map[string]reference
	refErr  error
)

func init() {
	// Set before any GetEncoding: without it tiktoken-go downloads.
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
}

func ref(t testing.TB, c *Counter) reference {
	t.Helper()
	refOnce.Do(func() {
		refs = map[string]reference{}
		for _, name := range []string{O200kBase, CL100kBase} {
			enc, err := tiktoken.GetEncoding(name)
			if err != nil {
				refErr = err
				return
			}
			re, err := regexp2.Compile(splitPatterns[name], regexp2.None)
			if err != nil {
				refErr = err
				return
			}
			refs[name] = reference{enc, re}
		}
	})
	if refErr != nil {
		t.Fatal(refErr)
	}
	return refs[c.name]
}

// exact is tiktoken-go's own answer.
func exact(t testing.TB, c *Counter, s string) []int { return ref(t, c).enc.EncodeOrdinary(s) }

// pretokens splits s with the encoding's regular expression, as runes.
func pretokens(t testing.TB, c *Counter, s string) [][]rune {
	t.Helper()
	runes := []rune(s)
	var out [][]rune
	re := ref(t, c).split
	m, err := re.FindRunesMatch(runes)
	for ; m != nil && err == nil; m, err = re.FindNextMatch(m) {
		out = append(out, runes[m.Index:m.Index+m.Length])
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTablesMatchLoader: the embedded tables hold exactly the loader's
// ranks (go generate ./runtime/tokens writes them; a stale or damaged
// file fails here), and every token looks up to its rank.
func TestTablesMatchLoader(t *testing.T) {
	for _, c := range counters {
		ranks, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(c.name + ".tiktoken")
		if err != nil {
			t.Fatal(err)
		}
		tb := loaded(t, c).enc.t
		if int(tb.n) != len(ranks) {
			t.Fatalf("%s: %d tokens, the loader has %d", c.name, tb.n, len(ranks))
		}
		for tok, want := range ranks {
			if got, ok := tb.rank(tok); !ok || int(got) != want {
				t.Fatalf("%s: %q: rank %d %v, want %d", c.name, tok, got, ok, want)
			}
			if tb.token(uint32(want)) != tok {
				t.Fatalf("%s: token of rank %d is %q, want %q", c.name, want, tb.token(uint32(want)), tok)
			}
		}
		for _, s := range []string{"", "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00", "no such token, surely"} {
			if _, ok := tb.lookup(s); ok && s != "" {
				t.Errorf("%s: %q looks up as a token", c.name, s)
			}
		}
	}
}
