package tokens

import (
	"unicode"
	"unicode/utf8"
)

// Pre-tokenizing: tiktoken first splits text into pre-tokens with a regular
// expression per encoding, then byte-pair encodes each pre-token alone. The
// two patterns (o200k_base's and cl100k_base's, as tiktoken-go v0.1.8
// compiles them with regexp2; the test file keeps them) are matched here by
// hand: one forward pass over the text, no []rune copy, no allocation, and
// every backtracking step of the regular expression resolved in closed form
// (FuzzPretokens compares both on random text).
//
// Positions are those of utf8.DecodeRuneInString, so an invalid byte is one
// U+FFFD, as in tiktoken-go's own []rune conversion.

// Character classes the patterns use.
const (
	cL    = 1 << iota // \p{L}
	cN                // \p{N}
	cS                // \s (unicode.IsSpace)
	cCRLF             // \r or \n
	cU                // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	cW                // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
	cP                // [^\r\n\p{L}\p{N}]: the optional leading character
	cQ                // [^\s\p{L}\p{N}]: punctuation, symbols, controls
)

func classOf(r rune) uint8 {
	if r < utf8.RuneSelf {
		return asciiClass[r]
	}
	return classSlow(r)
}

func classSlow(r rune) uint8 {
	var c uint8
	switch {
	case unicode.IsLetter(r):
		switch {
		case unicode.IsLower(r):
			c = cL | cW
		case unicode.IsUpper(r), unicode.IsTitle(r):
			c = cL | cU
		default: // Lm, Lo
			c = cL | cU | cW
		}
	case unicode.IsNumber(r):
		c = cN
	case unicode.IsSpace(r):
		c = cS
		if r == '\r' || r == '\n' {
			c |= cCRLF
		}
	case unicode.IsMark(r):
		c = cU | cW
	}
	if c&(cCRLF|cL|cN) == 0 {
		c |= cP
	}
	if c&(cS|cL|cN) == 0 {
		c |= cQ
	}
	return c
}

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for r := range rune(utf8.RuneSelf) {
		t[r] = classSlow(r)
	}
	return t
}()

// at is the rune at i, its class and its size.
func at(s string, i int) (uint8, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return classSlow(r), n
}

// splitter returns the end of the pre-token that starts at i < len(s).
type splitter func(s string, i int) int

// splitO200k matches
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}
//	| ?[^\s\p{L}\p{N}]+[\r\n/]*
//	|\s*[\r\n]+
//	|\s+(?!\S)
//	|\s+
func splitO200k(s string, i int) int {
	c0, n0 := at(s, i)
	if c0&cP != 0 {
		if e := upperLower(s, i+n0); e >= 0 {
			return e
		}
	}
	if e := upperLower(s, i); e >= 0 {
		return e
	}
	if c0&cP != 0 {
		if e := upperThenLower(s, i+n0); e >= 0 {
			return e
		}
	}
	if e := upperThenLower(s, i); e >= 0 {
		return e
	}
	return common(s, i, c0, n0, true)
}

// splitCL100k matches
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitCL100k(s string, i int) int {
	if e := contraction(s, i); e > i {
		return e
	}
	c0, n0 := at(s, i)
	if c0&cP != 0 {
		if e := run(s, i+n0, cL); e > i+n0 {
			return e
		}
	}
	if e := run(s, i, cL); e > i {
		return e
	}
	return common(s, i, c0, n0, false)
}

// common matches the alternatives both patterns end with: \p{N}{1,3},
// then ` ?[^\s\p{L}\p{N}]+` followed by [\r\n/]* (o200k, slash true) or
// [\r\n]*, then \s*[\r\n]+, \s+(?!\S), \s+. Something always matches: a
// character that is no letter, number or space is a [^\s\p{L}\p{N}].
func common(s string, i int, c0 uint8, n0 int, slash bool) int {
	if c0&cN != 0 {
		e := i + n0
		for k := 1; k < 3 && e < len(s); k++ {
			c, n := at(s, e)
			if c&cN == 0 {
				break
			}
			e += n
		}
		return e
	}
	j := i
	if s[i] == ' ' {
		j++
	}
	if e := run(s, j, cQ); e > j {
		for e < len(s) && (s[e] == '\r' || s[e] == '\n' || slash && s[e] == '/') {
			e++
		}
		return e
	}
	// Whitespace: find the run's end, its last \r or \n and its last rune.
	e, lastNL, last := i, -1, i
	for e < len(s) {
		c, n := at(s, e)
		if c&cS == 0 {
			break
		}
		if c&cCRLF != 0 {
			lastNL = e + n
		}
		last, e = e, e+n
	}
	switch {
	case e == i: // cannot happen (see above), but never return an empty match
		return i + n0
	case lastNL >= 0: // \s*[\r\n]+ backtracks to the last line break
		return lastNL
	case e == len(s) || last == i: // \s+(?!\S) at the end, or \s+
		return e
	default: // \s+(?!\S) gives the last space to the next pre-token
		return last
	}
}

// upperLower matches [U]*[W]+ and a contraction from j, or returns -1. The
// classes overlap (Lm, Lo, M), so [U]* backtracks to the last position
// where a [W] follows: the end of the [U] run if a [W] is there, else the
// last [W] inside the run.
func upperLower(s string, j int) int {
	p, lastW := j, -1
	for p < len(s) {
		c, n := at(s, p)
		if c&cU == 0 {
			if c&cW != 0 {
				lastW = p
			}
			break
		}
		if c&cW != 0 {
			lastW = p
		}
		p += n
	}
	if lastW < 0 {
		return -1
	}
	return contraction(s, run(s, lastW, cW))
}

// upperThenLower matches [U]+[W]* and a contraction from j, or returns -1.
func upperThenLower(s string, j int) int {
	p := run(s, j, cU)
	if p == j {
		return -1
	}
	return contraction(s, run(s, p, cW))
}

// run is the end of the run of characters of class c from j.
func run(s string, j int, c uint8) int {
	for j < len(s) {
		k, n := at(s, j)
		if k&c == 0 {
			break
		}
		j += n
	}
	return j
}

// contraction is the end of (?i:'s|'t|'re|'ve|'m|'ll|'d) at e, or e.
// Case-insensitive as regexp2 is: the text's rune lowered.
func contraction(s string, e int) int {
	if e >= len(s) || s[e] != '\'' {
		return e
	}
	r, n := utf8.DecodeRuneInString(s[e+1:])
	switch unicode.ToLower(r) {
	case 's', 't', 'm', 'd':
		return e + 1 + n
	case 'r', 'v':
		if r2, n2 := utf8.DecodeRuneInString(s[e+1+n:]); unicode.ToLower(r2) == 'e' {
			return e + 1 + n + n2
		}
	case 'l':
		if r2, n2 := utf8.DecodeRuneInString(s[e+1+n:]); unicode.ToLower(r2) == 'l' {
			return e + 1 + n + n2
		}
	}
	return e
}
