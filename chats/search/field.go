package search

import (
	"hash/maphash"
	"reflect"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/document"
	index "github.com/blevesearch/bleve_index_api"
)

// The text field of a document is analysed in one pass over its words
// (textField.Analyze): bleve's TextField makes a token per word, runs the
// whole stream through each filter in turn (the stemmer converting every
// term to runes and back), then counts the terms into a map of
// frequencies, a handful of allocations per word; that was a third of
// the index's CPU and most of its garbage under load. The terms, their
// frequencies and their locations are those of bleve's TextField with the
// same analyzer (TestFrequenciesAsBleve and FuzzFrequencies compare the two).

// enAnalyzer is the text field's analyzer (mirror_en): bleve's analyzer
// for the queries, and frequencies for the documents.
type enAnalyzer struct {
	*analysis.DefaultAnalyzer
	tokenizer asciiTokenizer
	stop      analysis.TokenMap    // the stop words' filter's
	stemmer   analysis.TokenFilter // the last filter
}

// textField is a document's field analysed by enAnalyzer. It stands for
// bleve's document.TextField (same name, value, options and terms).
type textField struct {
	name     string
	value    []byte
	options  index.FieldIndexingOptions
	analyzer *enAnalyzer
	length   int
	freqs    index.TokenFrequencies
	size     int
}

var _ document.Field = (*textField)(nil)

func (f *textField) Name() string                                     { return f.name }
func (f *textField) ArrayPositions() []uint64                         { return nil }
func (f *textField) Options() index.FieldIndexingOptions              { return f.options }
func (f *textField) Value() []byte                                    { return f.value }
func (f *textField) Text() string                                     { return string(f.value) }
func (f *textField) NumPlainTextBytes() uint64                        { return uint64(len(f.value)) }
func (f *textField) EncodedFieldType() byte                           { return 't' }
func (f *textField) AnalyzedLength() int                              { return f.length }
func (f *textField) AnalyzedTokenFrequencies() index.TokenFrequencies { return f.freqs }

// Size is about the memory the field holds, as bleve counts it (for its
// statistics only).
func (f *textField) Size() int { return f.size }

var (
	sizeTextField     = int(reflect.TypeFor[textField]().Size())
	sizeKeyField      = int(reflect.TypeFor[keyField]().Size())
	sizeStoredField   = int(reflect.TypeFor[storedField]().Size())
	sizeTokenFreq     = int(reflect.TypeFor[index.TokenFreq]().Size())
	sizeTokenLocation = int(reflect.TypeFor[index.TokenLocation]().Size())
)

// Analyze finds the field's terms, their frequencies and, with term
// vectors, their locations.
func (f *textField) Analyze() {
	f.length, f.freqs = f.analyzer.frequencies(f.value, f.options)
	f.size = sizeTextField + len(f.name) + len(f.value) + len(f.freqs)*(16+8+sizeTokenFreq)
	if f.options.IncludeTermVectors() {
		f.size += f.length * (8 + sizeTokenLocation)
	}
}

// scratch is what an analysis uses and leaves, for the next one.
type scratch struct {
	index map[string]int32 // a term's place in terms
	terms []termCount
	occs  []occurrence
}

// termCount is a term found and how often.
type termCount struct {
	key   string
	term  []byte
	count int
}

// docFields are a document's fields, allocated together, and the bytes of
// their values (buf).
type docFields struct {
	chat, kind      keyField
	msg, role, time storedField
	body            textField
	list            [8]document.Field // the document's, and bleve's _id field
	buf             []byte
}

func newDocFields(size int) *docFields {
	return &docFields{buf: make([]byte, 0, size)}
}

// bytes is s in buf.
func (f *docFields) bytes(s string) []byte {
	at := len(f.buf)
	f.buf = append(f.buf, s...)
	return f.buf[at:len(f.buf):len(f.buf)]
}

// key is field k, named name, of value v.
func (f *docFields) key(k *keyField, name, v string) *keyField {
	*k = keyField{name: name, key: v, value: f.bytes(v)}
	return k
}

// stored is field s, named name, of value v.
func (f *docFields) stored(s *storedField, name string, v []byte) *storedField {
	*s = storedField{name: name, value: v}
	return s
}

// text is the text field, of value v, analysed by x's analyzer.
func (f *docFields) text(x *Index, v string) *textField {
	f.body = textField{name: fieldText, value: f.bytes(v), options: optText, analyzer: x.text}
	return &f.body
}

// keyField is a field found by its whole value, never shown (optKey): its
// one term is its value, as bleve's TextField without an analyzer has it.
type keyField struct {
	name  string
	key   string // the value
	value []byte
	tf    index.TokenFreq
	freqs index.TokenFrequencies
}

var _ document.Field = (*keyField)(nil)

func (f *keyField) Name() string                                     { return f.name }
func (f *keyField) ArrayPositions() []uint64                         { return nil }
func (f *keyField) Options() index.FieldIndexingOptions              { return optKey }
func (f *keyField) Value() []byte                                    { return f.value }
func (f *keyField) Text() string                                     { return f.key }
func (f *keyField) NumPlainTextBytes() uint64                        { return uint64(len(f.value)) }
func (f *keyField) EncodedFieldType() byte                           { return 't' }
func (f *keyField) AnalyzedLength() int                              { return 1 }
func (f *keyField) AnalyzedTokenFrequencies() index.TokenFrequencies { return f.freqs }
func (f *keyField) Size() int                                        { return sizeKeyField + len(f.name) + len(f.value) }

// Analyze makes the field's one term (no term vectors in optKey).
func (f *keyField) Analyze() {
	f.tf = index.TokenFreq{Term: f.value}
	f.tf.SetFrequency(1)
	f.freqs = index.TokenFrequencies{f.key: &f.tf}
}

// storedField is a field shown, never searched (optStored).
type storedField struct {
	name  string
	value []byte
}

var _ document.Field = (*storedField)(nil)

func (f *storedField) Name() string                                     { return f.name }
func (f *storedField) ArrayPositions() []uint64                         { return nil }
func (f *storedField) Options() index.FieldIndexingOptions              { return optStored }
func (f *storedField) Value() []byte                                    { return f.value }
func (f *storedField) Text() string                                     { return string(f.value) }
func (f *storedField) NumPlainTextBytes() uint64                        { return uint64(len(f.value)) }
func (f *storedField) EncodedFieldType() byte                           { return 't' }
func (f *storedField) Analyze()                                         {}
func (f *storedField) AnalyzedLength() int                              { return 0 }
func (f *storedField) AnalyzedTokenFrequencies() index.TokenFrequencies { return nil }
func (f *storedField) Size() int                                        { return sizeStoredField + len(f.name) + len(f.value) }

// occurrence is a term (its place in terms) found at a place in the text.
type occurrence struct {
	term            int32
	start, end, pos int
}

var scratches = sync.Pool{New: func() any { return &scratch{index: map[string]int32{}} }}

// frequencies analyses input as bleve's TextField does with this analyzer
// (its Analyze, then analysis.TokenFrequency): the number of terms and
// each term's frequency and locations (with term vectors). Each word goes
// through the filters as it is found: possessive, lower case, stop words
// and the stemmer, which in ASCII are done here (the stems kept in a
// cache); a word with other characters goes through bleve's filters. The
// terms are counted first, so what is returned is allocated at its size.
func (a *enAnalyzer) frequencies(input []byte, options index.FieldIndexingOptions) (int, index.TokenFrequencies) {
	if !utf8.Valid(input) || options.SkipFreqNorm() {
		// Cases that do not come: as bleve does it (the filters change
		// the terms in place, and the terms are slices of what they are
		// given).
		tokens := a.Analyze(append([]byte(nil), input...))
		return len(tokens), analysis.TokenFrequency(tokens, nil, options)
	}
	sc := scratches.Get().(*scratch)
	var buf [64]byte
	a.tokenizer.words(input, func(word []byte, start, end, pos int, _ analysis.TokenType) {
		key, term, ok := a.term(word, buf[:0])
		if !ok {
			return // a stop word
		}
		i, seen := sc.index[key]
		if !seen {
			i = int32(len(sc.terms))
			sc.index[key] = i
			sc.terms = append(sc.terms, termCount{key: key, term: term})
		}
		sc.terms[i].count++
		sc.occs = append(sc.occs, occurrence{term: i, start: start, end: end, pos: pos})
	})
	n := len(sc.occs)
	tfs := make([]index.TokenFreq, len(sc.terms))
	freqs := make(index.TokenFrequencies, len(sc.terms))
	for i, t := range sc.terms {
		tfs[i].Term = t.term
		tfs[i].SetFrequency(t.count)
		freqs[t.key] = &tfs[i]
	}
	if options.IncludeTermVectors() && n > 0 {
		// Each term's locations, in the order found, are a part of one
		// list, as long as its frequency.
		locs := make([]index.TokenLocation, n)
		ptrs := make([]*index.TokenLocation, n)
		next := 0
		for i := range tfs {
			c := sc.terms[i].count
			tfs[i].Locations = ptrs[next : next : next+c]
			next += c
		}
		for i, o := range sc.occs {
			locs[i] = index.TokenLocation{Start: o.start, End: o.end, Position: o.pos}
			tf := &tfs[o.term]
			tf.Locations = append(tf.Locations, &locs[i])
		}
	}
	if len(sc.terms) <= 4096 { // a huge text's scratch is not kept
		clear(sc.index)
		clear(sc.terms)
		sc.terms, sc.occs = sc.terms[:0], sc.occs[:0]
		scratches.Put(sc)
	}
	return n, freqs
}

// term is word after the filters: the key of its frequency and its bytes;
// ok is false for a stop word. buf is room for the word in lower case.
func (a *enAnalyzer) term(word, buf []byte) (key string, term []byte, ok bool) {
	ascii := true
	for _, c := range word {
		if c >= 0x80 {
			ascii = false
			break
		}
	}
	if !ascii {
		tok := &analysis.Token{Term: append([]byte(nil), word...), Type: analysis.AlphaNumeric}
		ts := analysis.TokenStream{tok}
		for _, f := range a.TokenFilters {
			ts = f.Filter(ts)
		}
		if len(ts) == 0 {
			return "", nil, false
		}
		return string(ts[0].Term), ts[0].Term, true
	}
	// Possessive: a final 's or 'S goes.
	if n := len(word); n >= 2 && (word[n-1] == 's' || word[n-1] == 'S') && word[n-2] == '\'' {
		word = word[:n-2]
	}
	lower := buf
	for _, c := range word {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower = append(lower, c)
	}
	if a.stop[string(lower)] {
		return "", nil, false
	}
	s := a.stem(lower)
	return s.stem, s.term, true
}

// stemmed is a word (lower case, ASCII) and its stem, as a string and as
// bytes (shared by every document that has the word: read, never written).
type stemmed struct {
	word, stem string
	term       []byte
}

// stems caches the stems of the words seen lately: a word's slot is its
// hash's, and a word found in another's slot takes it. Chat text repeats
// its words, and stemming is most of a filter chain's work.
var (
	stems    [4096]atomic.Pointer[stemmed]
	stemSeed = maphash.MakeSeed()
)

// stem is the stem of word (lower case, ASCII) by the analyzer's last
// filter, Porter's stemmer.
func (a *enAnalyzer) stem(word []byte) *stemmed {
	slot := &stems[maphash.Bytes(stemSeed, word)%uint64(len(stems))]
	if s := slot.Load(); s != nil && s.word == string(word) {
		return s
	}
	tok := &analysis.Token{Term: append([]byte(nil), word...), Type: analysis.AlphaNumeric}
	ts := a.stemmer.Filter(analysis.TokenStream{tok})
	s := &stemmed{word: string(word), stem: string(ts[0].Term), term: ts[0].Term}
	slot.Store(s)
	return s
}
