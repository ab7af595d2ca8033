package search

import (
	"fmt"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/token/porter"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
	"github.com/blevesearch/bleve/v2/registry"
)

// The text field's analyzer is bleve's English one ("en": the Unicode word
// tokenizer, then possessives, lower case, stop words, Porter's stemmer)
// with a tokenizer that splits ASCII text itself: the Unicode word
// segmenter (UAX #29, a large state machine) was a fifth of the index's
// CPU, and the messages are mostly ASCII. asciiTokenizer finds the words
// the Unicode tokenizer finds in ASCII text (FuzzASCIITokenizer compares
// the two) and hands it any other text whole.
const (
	analyzerName  = "mirror_en"
	tokenizerName = "mirror_unicode"
)

func init() {
	if err := registry.RegisterTokenizer(tokenizerName, func(map[string]any, *registry.Cache) (analysis.Tokenizer, error) {
		return asciiTokenizer{unicode.NewUnicodeTokenizer()}, nil
	}); err != nil {
		panic(err)
	}
	if err := registry.RegisterAnalyzer(analyzerName, func(_ map[string]any, cache *registry.Cache) (analysis.Analyzer, error) {
		tok, err := cache.TokenizerNamed(tokenizerName)
		if err != nil {
			return nil, err
		}
		ascii, ok := tok.(asciiTokenizer)
		if !ok {
			return nil, fmt.Errorf("tokenizer %s is a %T", tokenizerName, tok)
		}
		a := &enAnalyzer{DefaultAnalyzer: &analysis.DefaultAnalyzer{Tokenizer: tok}, tokenizer: ascii}
		for _, name := range []string{en.PossessiveName, lowercase.Name, en.StopName, porter.Name} {
			f, err := cache.TokenFilterNamed(name)
			if err != nil {
				return nil, err
			}
			a.TokenFilters = append(a.TokenFilters, f)
		}
		a.stemmer = a.TokenFilters[len(a.TokenFilters)-1]
		if a.stop, err = cache.TokenMapNamed(en.StopName); err != nil {
			return nil, err
		}
		return a, nil
	}); err != nil {
		panic(err)
	}
}

// asciiTokenizer is the Unicode word tokenizer, faster on ASCII text.
type asciiTokenizer struct{ unicode analysis.Tokenizer }

// Character classes of ASCII in the word-boundary rules of UAX #29.
const (
	cOther     = iota
	cLetter    // ALetter
	cDigit     // Numeric
	cUnder     // ExtendNumLet: _
	cMidLetter // MidLetter: ':'
	cMidBoth   // MidNumLet and Single_Quote: '.', '\''
	cMidNum    // MidNum: ',', ';'
)

var asciiClass = func() (t [128]uint8) {
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = cLetter, cLetter
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = cDigit
	}
	t['_'], t[':'], t['.'], t['\''], t[','], t[';'] = cUnder, cMidLetter, cMidBoth, cMidBoth, cMidNum, cMidNum
	return t
}()

// Tokenize returns the words of input, as the Unicode tokenizer does.
func (t asciiTokenizer) Tokenize(input []byte) analysis.TokenStream {
	if !utf8.Valid(input) {
		// The Unicode tokenizer stops at the first invalid byte, and finds
		// no words after it. (Messages are valid: they come from JSON.)
		return t.unicode.Tokenize(input)
	}
	var rv analysis.TokenStream
	var pool []analysis.Token // tokens to fill, allocated a batch at a time
	t.words(input, func(term []byte, start, end, pos int, typ analysis.TokenType) {
		if len(pool) == 0 {
			pool = make([]analysis.Token, max(8, (len(input)-start)/6))
		}
		tok := &pool[0]
		pool = pool[1:]
		*tok = analysis.Token{Term: term, Start: start, End: end, Position: pos, Type: typ}
		rv = append(rv, tok)
	})
	return rv
}

// words calls word with each word of input (valid UTF-8), in order, as
// Tokenize returns them: term is input[start:end] and pos counts from 1.
// The parts of input around a non-ASCII character, from the white space
// before it to the white space after it, go to the Unicode tokenizer; the
// rest is split here (asciiWords). No rule of UAX #29 looks across an
// ASCII space or newline followed by an ASCII character, so the words on
// either side of one are found alike whether the text is cut there or not.
func (t asciiTokenizer) words(input []byte, word func(term []byte, start, end, pos int, typ analysis.TokenType)) {
	pos := 1
	from, cut := 0, 0 // from: where the text not split yet starts; cut: the last place it may be cut
	for i := 0; i < len(input); i++ {
		c := input[i]
		if c < 0x80 {
			if i > 0 && isSpace(input[i-1]) {
				cut = i
			}
			continue
		}
		pos = asciiWords(input, from, cut, pos, word)
		end := i + 1
		for end < len(input) && !(input[end] < 0x80 && isSpace(input[end-1])) {
			end++
		}
		for _, tok := range t.unicode.Tokenize(input[cut:end]) {
			word(input[cut+tok.Start:cut+tok.End], cut+tok.Start, cut+tok.End, pos, tok.Type)
			pos++
		}
		from, cut, i = end, end, end-1
	}
	asciiWords(input, from, len(input), pos, word)
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// asciiWords calls word with the words of input[from:to], ASCII text, the
// first at position pos: runs of letters, digits and _, joined across one
// ':' between letters, one ',' or ';' between digits, one '.' or
// apostrophe between letters or between digits (WB5 to WB13b). It returns
// the next position.
func asciiWords(input []byte, from, to, pos int, word func(term []byte, start, end, pos int, typ analysis.TokenType)) int {
	for i := from; i < to; {
		cl := asciiClass[input[i]]
		if cl != cLetter && cl != cDigit && cl != cUnder {
			i++
			continue
		}
		start, prev, digits := i, cl, cl == cDigit
		for i++; i < to; i++ {
			c := asciiClass[input[i]]
			if c == cLetter || c == cDigit || c == cUnder {
				prev, digits = c, digits && c == cDigit
				continue
			}
			if i+1 == to {
				break
			}
			next := asciiClass[input[i+1]]
			join := false
			switch c {
			case cMidLetter:
				join = prev == cLetter && next == cLetter
			case cMidBoth:
				join = (prev == cLetter && next == cLetter) || (prev == cDigit && next == cDigit)
			case cMidNum:
				join = prev == cDigit && next == cDigit
			}
			if !join {
				break
			}
			i++ // the middle character; the next one is taken as the loop goes on
			prev, digits = next, digits && next == cDigit
		}
		typ := analysis.AlphaNumeric
		if digits {
			typ = analysis.Numeric
		}
		word(input[start:i], start, i, pos, typ)
		pos++
	}
	return pos
}
