package tokens

import (
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// Why this file exists: tiktoken-go byte-pair encodes each pre-token (a
// match of the encoding's split pattern) in time quadratic in its length,
// and text without whitespace — one letter repeated, a run of punctuation,
// a long line of CJK — is one pre-token. A 64 KiB message of one letter
// took seconds to count, 256 KiB minutes. So no pre-token longer than
// maxPiece bytes reaches the encoder whole: it is cut into pieces of at most
// maxPiece bytes, each encoded on its own. Everything else is encoded
// exactly as tiktoken does, since it is cut only where tiktoken's own split
// pattern cuts and where cutting provably changes nothing.

// maxPiece bounds, in bytes, what one byte-pair encoding is given. A
// pre-token up to this length is encoded whole, as tiktoken does; a longer
// one is cut, which costs at most a token or two at each cut (~1% for one
// repeated letter, which o200k encodes 8 letters a token) and keeps the
// encoder's quadratic step to maxPiece² per maxPiece bytes: linear overall.
const maxPiece = 512

// chunkBytes is about how much text at a time is handed to tiktoken on the
// slow path, where pre-tokens are found here first: large enough that the
// per-call cost of tiktoken-go is spread, small enough to stay in cache.
const chunkBytes = 4 << 10

// splitPatterns are the encodings' pre-tokenizer patterns, exactly as
// tiktoken-go v0.1.8 compiles them (encoding.go); the golden tests fail
// should they ever disagree.
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

func compileSplit(encoding string) (*regexp2.Regexp, error) {
	return regexp2.Compile(splitPatterns[encoding], regexp2.None)
}

// encode hands emit the token ids of text, in order. Runs of text in which
// no pre-token can be longer than maxPiece go to tiktoken whole, so
// ordinary text costs what it always did; only a stretch with no proven
// pre-token boundary for more than maxPiece bytes takes the slow path.
//
// Positions are those of utf8.DecodeRuneInString, so every cut falls where
// tiktoken-go's own []rune conversion would decode the same runes (invalid
// bytes included, as U+FFFD).
func (c *Counter) encode(text string, emit func([]int)) {
	from := 0 // start of the text not yet encoded
	mark := 0 // the last boundary no pre-token crosses
	prev := rune(-1)
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case prev >= 0 && hardBoundary(prev, r):
			mark = i
			if mark-from >= chunkBytes {
				// Smaller calls keep tiktoken-go's per-call buffers (the
				// text as runes, the ids) small: less to allocate and
				// collect, the same ids.
				emit(c.enc.EncodeOrdinary(text[from:mark]))
				from = mark
			}
		case i+size-mark > maxPiece:
			// A stretch longer than maxPiece without a proven boundary:
			// find where it ends and count it piece by piece.
			end, last := i+size, r
			for end < len(text) {
				r2, s2 := utf8.DecodeRuneInString(text[end:])
				if hardBoundary(last, r2) {
					break
				}
				end, last = end+s2, r2
			}
			if mark > from {
				emit(c.enc.EncodeOrdinary(text[from:mark]))
			}
			c.slow(text[mark:end], emit)
			from, mark, prev, i = end, end, last, end
			continue
		}
		prev, i = r, i+size
	}
	if from < len(text) {
		emit(c.enc.EncodeOrdinary(text[from:]))
	}
}

// slow encodes s, a stretch that both begins and ends where no pre-token
// crosses (or at the text's ends), after finding its pre-tokens with the
// encoding's own pattern: pre-tokens up to maxPiece bytes are encoded
// exactly, in chunks cut only at lookahead-safe pre-token boundaries;
// longer ones are cut into pieces of at most maxPiece bytes.
func (c *Counter) slow(s string, emit func([]int)) {
	runes := []rune(s)
	from := 0       // start of the pending chunk (rune index)
	safe := 0       // the last safe boundary at or after from
	var after []int // starts of the pre-tokens after safe, each a boundary that is not safe
	pending := 0    // bytes from..the current pre-token
	chunk := func(a, b int) {
		if a < b {
			emit(c.enc.EncodeOrdinary(string(runes[a:b])))
		}
	}
	m, _ := c.split.FindRunesMatch(runes)
	for ; m != nil; m, _ = c.split.FindNextMatch(m) {
		a, b := m.Index, m.Index+m.Length
		if a == from || safeCut(runes[a-1], runes[a]) {
			safe, after = a, after[:0]
		} else {
			after = append(after, a)
		}
		n := runesBytes(runes[a:b])
		if n <= maxPiece {
			if pending >= chunkBytes && safe == a {
				chunk(from, a)
				from, pending = a, 0
			}
			pending += n
			continue
		}
		// An overlong pre-token. What precedes it is encoded exactly: up
		// to the last safe boundary as one chunk, then pre-token by
		// pre-token (a pre-token encoded alone is encoded as in context).
		chunk(from, safe)
		for k, p := range after {
			if k == 0 {
				chunk(safe, p)
			} else {
				chunk(after[k-1], p)
			}
		}
		for a < b {
			cut, size := a, 0
			for cut < b && size+utf8.RuneLen(fixRune(runes[cut])) <= maxPiece {
				size += utf8.RuneLen(fixRune(runes[cut]))
				cut++
			}
			if cut == a { // cannot happen (a rune is at most 4 bytes), but never loop
				cut = a + 1
			}
			chunk(a, cut)
			a = cut
		}
		from, safe, after, pending = b, b, after[:0], 0
	}
	chunk(from, len(runes))
}

// safeCut reports whether text may be cut between prev and next and each
// side encoded alone with the same pre-tokens, given that a pre-token
// starts at next. The patterns look right only through (?!\S) after \s+,
// so the cut is safe when prev is not whitespace (no \s+ ends there) or
// next is (the lookahead says the same as at the end of the text).
func safeCut(prev, next rune) bool {
	return !unicode.IsSpace(prev) || unicode.IsSpace(next)
}

// hardBoundary reports whether no pre-token of o200k_base or cl100k_base
// can contain both a and the b right after it, and the cut between them
// is lookahead-safe. It needs no regular expression, so ordinary text is
// checked at the cost of a byte scan. The rules follow from the patterns:
// a pre-token holding a number holds only numbers; letter pre-tokens hold
// letters (and, in o200k, marks and a trailing 's-type contraction) after
// one optional leading non-letter; a space only ever leads a pre-token or
// sits in a whitespace one; punctuation pre-tokens may end in \r, \n or /.
func hardBoundary(a, b rune) bool {
	ca := classOf(a)
	if ca&hard == 0 {
		return false // a may be whitespace, a control or format character
	}
	cb := classOf(b)
	switch {
	case b == ' ':
		return true
	case ca&number != cb&number:
		return true
	case ca&(letter|number) != 0 && unicode.IsSpace(b):
		return true
	case ca&letter != 0 && cb&punct != 0 && b != '\'':
		return true
	}
	return false
}

const (
	letter = 1 << iota // \p{L}
	number             // \p{N}
	punct              // \p{P} or \p{S}
	mark               // \p{M}
	hard   = letter | number | punct | mark
)

func classOf(r rune) int {
	if r < utf8.RuneSelf {
		return int(asciiClass[r])
	}
	switch {
	case unicode.IsLetter(r):
		return letter
	case unicode.IsNumber(r):
		return number
	case unicode.IsPunct(r), unicode.IsSymbol(r):
		return punct
	case unicode.IsMark(r):
		return mark
	}
	return 0
}

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for r := range rune(utf8.RuneSelf) {
		switch {
		case unicode.IsLetter(r):
			t[r] = letter
		case unicode.IsNumber(r):
			t[r] = number
		case unicode.IsPunct(r), unicode.IsSymbol(r):
			t[r] = punct
		}
	}
	return t
}()

// fixRune is r as string([]rune) writes it: invalid runes become U+FFFD.
func fixRune(r rune) rune {
	if !utf8.ValidRune(r) {
		return utf8.RuneError
	}
	return r
}

func runesBytes(rs []rune) int {
	n := 0
	for _, r := range rs {
		n += utf8.RuneLen(fixRune(r))
	}
	return n
}
