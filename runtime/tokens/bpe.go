package tokens

import (
	"math"
	"unicode/utf8"
)

// maxPiece bounds, in bytes, what one byte-pair encoding is given. BPE
// merging is quadratic in the length of what it merges, and text without
// whitespace (one letter repeated, a run of punctuation, a long line of
// CJK, base64) is one pre-token: a 64 KiB message of one letter once took
// seconds to count, 256 KiB minutes. So a pre-token up to maxPiece bytes is
// encoded whole, exactly as tiktoken does; a longer one is cut into pieces
// of at most maxPiece bytes at rune boundaries, each encoded as text of its
// own (pre-tokenized again), which costs at most a token or two at each cut
// (~1% for one repeated letter) and keeps counting linear.
const maxPiece = 512

const noRank = math.MaxUint32

// encoder is one encoding: its ranks and its pre-tokenizer.
type encoder struct {
	t     *table
	split splitter
}

// part is a span of a piece being merged: where it starts, and the rank of
// it merged with the next span (noRank when that is no token).
type part struct{ start, rank uint32 }

// walk counts the tokens of text and, when ids is not nil, appends them.
func (e *encoder) walk(text string, ids *[]int) int {
	n := 0
	for i := 0; i < len(text); {
		j := e.split(text, i)
		n += e.pretoken(text[i:j], ids)
		i = j
	}
	return n
}

func (e *encoder) pretoken(p string, ids *[]int) int {
	if !utf8.ValidString(p) {
		p = fixUTF8(p)
	}
	if len(p) <= maxPiece {
		return e.piece(p, ids)
	}
	n := 0
	for len(p) > 0 {
		cut := len(p)
		if cut > maxPiece {
			cut = maxPiece
			for !utf8.RuneStart(p[cut]) {
				cut--
			}
		}
		n += e.walk(p[:cut], ids)
		p = p[cut:]
	}
	return n
}

// fixUTF8 is s as string([]rune(s)) writes it: every invalid byte becomes
// U+FFFD, as in tiktoken-go.
func fixUTF8(s string) string {
	b := make([]byte, 0, len(s)+8)
	for _, r := range s {
		b = utf8.AppendRune(b, r)
	}
	return string(b)
}

// piece encodes one pre-token of at most maxPiece bytes as tiktoken does:
// the whole of it if it is a token, else byte-pair merged.
func (e *encoder) piece(p string, ids *[]int) int {
	t := e.t
	if r, ok := t.rank(p); ok {
		if ids != nil {
			*ids = append(*ids, int(r))
		}
		return 1
	}
	var buf [64]part // most pieces fit: no allocation
	parts := buf[:0]
	if len(p)+1 > len(buf) {
		parts = make([]part, 0, len(p)+1)
	}
	parts = t.merge(p, parts)
	if ids != nil {
		for k := 0; k+1 < len(parts); k++ {
			r, _ := t.rank(p[parts[k].start:parts[k+1].start])
			*ids = append(*ids, int(r))
		}
	}
	return len(parts) - 1
}

// merge is tiktoken's byte-pair merge (tiktoken-go v0.1.8 bytePairMerge):
// start from single bytes and repeatedly merge the adjacent pair of the
// lowest rank, the leftmost of equals, until no pair is a token. It returns
// the boundaries of the resulting tokens, the last one at len(p).
func (t *table) merge(p string, parts []part) []part {
	n := len(p)
	for i := range n + 1 {
		r := uint32(noRank)
		if i+2 <= n {
			r = t.pairs[uint32(p[i])<<8|uint32(p[i+1])]
		}
		parts = append(parts, part{uint32(i), r})
	}
	// rankOf is the rank of parts[i] through parts[i+skip+1] merged.
	rankOf := func(i, skip int) uint32 {
		if i+skip+2 < len(parts) {
			if v, ok := t.lookup(p[parts[i].start:parts[i+skip+2].start]); ok {
				return v
			}
		}
		return noRank
	}
	for len(parts) > 1 {
		minRank, i := uint32(noRank), -1
		for k := 0; k < len(parts)-1; k++ {
			if parts[k].rank < minRank {
				minRank, i = parts[k].rank, k
			}
		}
		if i < 0 {
			break
		}
		parts[i].rank = rankOf(i, 1)
		if i > 0 {
			parts[i-1].rank = rankOf(i-1, 1)
		}
		parts = append(parts[:i+1], parts[i+2:]...)
	}
	return parts
}
