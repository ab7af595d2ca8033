package boundary

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// Doc is one archived row of a conversation, as it is indexed: its seq in
// the chat's record, its role, and its text (a message, a tool result).
type Doc struct {
	Seq  uint64 `json:"seq"`
	Role string `json:"role"`
	Text string `json:"text"`
}

// Index is the search index of one archived conversation, built at its
// boundary and stored next to the archived rows in the same transaction.
// It carries the texts, so a search needs nothing else to show a snippet.
// An Index is immutable once built and safe for concurrent searches.
type Index struct {
	Boundary uint64 // which boundary archived it (the caller's numbering)
	docs     []Doc
	lens     []int // terms per doc
	total    int   // terms in all docs
	postings map[string][]posting
}

type posting struct {
	doc int // index into docs
	tf  int // times the term occurs in it
}

// BuildIndex indexes the docs archived at boundary.
func BuildIndex(boundary uint64, docs []Doc) *Index {
	ix := &Index{Boundary: boundary, docs: docs, lens: make([]int, len(docs)), postings: map[string][]posting{}}
	for i, d := range docs {
		counts := map[string]int{}
		forTerms(d.Text, func(term string, _, _ int) {
			counts[term]++
			ix.lens[i]++
		})
		ix.total += ix.lens[i]
		for term, tf := range counts {
			ix.postings[term] = append(ix.postings[term], posting{doc: i, tf: tf})
		}
	}
	// Postings were appended in doc order, so they are sorted already.
	return ix
}

// Len is the number of docs indexed.
func (ix *Index) Len() int { return len(ix.docs) }

// Hit is one search result.
type Hit struct {
	Boundary uint64  `json:"boundary"` // the archive it came from
	Seq      uint64  `json:"seq"`      // the row's seq in the chat's record
	Role     string  `json:"role"`
	Score    float64 `json:"score"`
	Snippet  string  `json:"snippet"` // one line around the first match, secrets redacted
}

// BM25 parameters, the usual ones.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// Search ranks the docs of indexes against query with BM25 and returns the
// best k (k ≤ 0: none). Document frequencies and the average length are
// taken over all the indexes given, so scores compare across archives. Ties
// go to the newer boundary, then the later row.
func Search(query string, indexes []*Index, k int) []Hit {
	terms := Terms(query)
	if len(terms) == 0 || k <= 0 {
		return nil
	}
	var n, total int
	df := make(map[string]int, len(terms))
	for _, ix := range indexes {
		if ix == nil {
			continue
		}
		n += len(ix.docs)
		total += ix.total
		for _, t := range terms {
			df[t] += len(ix.postings[t])
		}
	}
	if n == 0 || total == 0 {
		return nil
	}
	avg := float64(total) / float64(n)
	type key struct {
		ix  *Index
		doc int
	}
	scores := map[key]float64{}
	for _, t := range terms {
		if df[t] == 0 {
			continue
		}
		idf := math.Log(1 + (float64(n)-float64(df[t])+0.5)/(float64(df[t])+0.5))
		for _, ix := range indexes {
			if ix == nil {
				continue
			}
			for _, p := range ix.postings[t] {
				tf := float64(p.tf)
				norm := bm25K1 * (1 - bm25B + bm25B*float64(ix.lens[p.doc])/avg)
				scores[key{ix, p.doc}] += idf * tf * (bm25K1 + 1) / (tf + norm)
			}
		}
	}
	hits := make([]Hit, 0, len(scores))
	refs := make(map[int]key, len(scores))
	for kk, s := range scores {
		d := kk.ix.docs[kk.doc]
		refs[len(hits)] = kk
		hits = append(hits, Hit{Boundary: kk.ix.Boundary, Seq: d.Seq, Role: d.Role, Score: s, Snippet: ""})
	}
	order := make([]int, len(hits))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool {
		x, y := hits[order[a]], hits[order[b]]
		if x.Score != y.Score {
			return x.Score > y.Score
		}
		if x.Boundary != y.Boundary {
			return x.Boundary > y.Boundary
		}
		return x.Seq > y.Seq
	})
	if len(order) > k {
		order = order[:k]
	}
	want := map[string]bool{}
	for _, t := range terms {
		want[t] = true
	}
	out := make([]Hit, len(order))
	for i, o := range order {
		kk := refs[o]
		out[i] = hits[o]
		out[i].Snippet = snippet(kk.ix.docs[kk.doc].Text, want)
	}
	return out
}

// FormatHits is the recall_history result the model reads.
func FormatHits(query string, hits []Hit) string {
	if len(hits) == 0 {
		return fmt.Sprintf("Nothing archived matches %s.", quote(query))
	}
	var b strings.Builder
	if len(hits) == 1 {
		fmt.Fprintf(&b, "1 archived message matches %s:\n", quote(query))
	} else {
		fmt.Fprintf(&b, "%d archived messages match %s, best first:\n", len(hits), quote(query))
	}
	for _, h := range hits {
		fmt.Fprintf(&b, "- boundary %d, event %d (%s): %s\n", h.Boundary, h.Seq, h.Role, h.Snippet)
	}
	return b.String()
}

// snippet is one line of text around the first term in want.
func snippet(text string, want map[string]bool) string {
	const before, after = 60, 160
	start, end := 0, 0
	found := false
	forTerms(text, func(term string, s, e int) {
		if !found && want[term] {
			start, end, found = s, e, true
		}
	})
	lo, hi := start, end
	for n := 0; lo > 0 && n < before; n++ {
		_, size := utf8.DecodeLastRuneInString(text[:lo])
		lo -= size
	}
	for n := 0; hi < len(text) && n < after; n++ {
		_, size := utf8.DecodeRuneInString(text[hi:])
		hi += size
	}
	s := strings.Join(strings.Fields(strings.ToValidUTF8(text[lo:hi], "�")), " ")
	if lo > 0 {
		s = "…" + s
	}
	if hi < len(text) {
		s += "…"
	}
	return provider.Redact(s, "")
}

// Terms are the search terms of s, as indexed: lowercased runs of letters
// and digits in any script, without a few common English words; each
// Han, Hiragana or Katakana character is a term of its own, since those
// scripts do not separate words with spaces. Duplicates are removed, in
// order of first appearance.
func Terms(s string) []string {
	var out []string
	seen := map[string]bool{}
	forTerms(s, func(t string, _, _ int) {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	})
	return out
}

// maxTerm bounds a term: a longer run (a hash, base64) is cut, not dropped.
const maxTerm = 64

// forTerms calls fn with each term of s and its byte span.
func forTerms(s string, fn func(term string, start, end int)) {
	var b strings.Builder
	start, runes := -1, 0
	flush := func(end int) {
		if start >= 0 {
			if t := b.String(); !stopwords[t] {
				fn(t, start, end)
			}
		}
		b.Reset()
		start, runes = -1, 0
	}
	for i, r := range s {
		switch {
		case isIdeograph(r):
			flush(i)
			fn(string(unicode.ToLower(r)), i, i+utf8.RuneLen(r))
		case unicode.IsLetter(r) || unicode.IsNumber(r) || (start >= 0 && unicode.Is(unicode.Mn, r)):
			if start < 0 {
				start = i
			}
			if runes < maxTerm {
				b.WriteRune(unicode.ToLower(r))
				runes++
			}
		default:
			flush(i)
		}
	}
	flush(len(s))
}

func isIdeograph(r rune) bool {
	return r >= 0x2E80 && (unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r))
}

// stopwords are words too common to say anything about a message.
var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an and are as at be but by can did do does for from had has have he her
		his i if in into is it its me my no not of on or our she so than that the their them then there these
		they this to was we were what when where which who why will with would you your`) {
		m[w] = true
	}
	return m
}()

// The binary form of an Index, version 1, all integers uvarints:
//
//	"MBX1" boundary ndocs {seq role text length}* nterms {term npostings {docdelta tf}*}*
//
// with strings as a length and bytes, and terms in sorted order so the same
// index always has the same bytes.
const indexMagic = "MBX1"

// MarshalBinary encodes the index for the store.
func (ix *Index) MarshalBinary() ([]byte, error) {
	b := []byte(indexMagic)
	b = binary.AppendUvarint(b, ix.Boundary)
	b = binary.AppendUvarint(b, uint64(len(ix.docs)))
	for i, d := range ix.docs {
		b = binary.AppendUvarint(b, d.Seq)
		b = appendString(b, d.Role)
		b = appendString(b, d.Text)
		b = binary.AppendUvarint(b, uint64(ix.lens[i]))
	}
	terms := make([]string, 0, len(ix.postings))
	for t := range ix.postings {
		terms = append(terms, t)
	}
	sort.Strings(terms)
	b = binary.AppendUvarint(b, uint64(len(terms)))
	for _, t := range terms {
		b = appendString(b, t)
		ps := ix.postings[t]
		b = binary.AppendUvarint(b, uint64(len(ps)))
		prev := 0
		for _, p := range ps {
			b = binary.AppendUvarint(b, uint64(p.doc-prev))
			b = binary.AppendUvarint(b, uint64(p.tf))
			prev = p.doc
		}
	}
	return b, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// ErrCorruptIndex is returned for bytes that are not an index this version wrote.
var ErrCorruptIndex = errors.New("boundary: corrupt search index")

// UnmarshalBinary decodes what MarshalBinary wrote, checking every length
// and reference, so stored bytes that were damaged give ErrCorruptIndex,
// never a panic or a huge allocation.
func (ix *Index) UnmarshalBinary(data []byte) error {
	r := reader{b: data}
	if !strings.HasPrefix(string(data), indexMagic) {
		return fmt.Errorf("%w: not version 1", ErrCorruptIndex)
	}
	r.b = r.b[len(indexMagic):]
	out := Index{Boundary: r.uvarint(), postings: map[string][]posting{}}
	// Each doc takes at least 4 bytes, each term and posting at least 2:
	// a count beyond what the bytes can hold is damage.
	ndocs := r.count(4)
	out.docs = make([]Doc, ndocs)
	out.lens = make([]int, ndocs)
	for i := range out.docs {
		out.docs[i] = Doc{Seq: r.uvarint(), Role: r.str(), Text: r.str()}
		out.lens[i] = int(r.bounded(math.MaxInt32))
		out.total += out.lens[i]
	}
	nterms := r.count(2)
	for range nterms {
		t := r.str()
		np := r.count(2)
		if r.err != nil {
			break
		}
		if _, dup := out.postings[t]; dup || np == 0 {
			r.fail("term repeated or empty")
			break
		}
		ps := make([]posting, np)
		doc := 0
		for j := range ps {
			d := r.bounded(uint64(ndocs))
			tf := r.bounded(math.MaxInt32)
			if j > 0 && d == 0 || tf == 0 {
				r.fail("bad posting")
			}
			doc += int(d)
			if doc >= ndocs {
				r.fail("posting past the docs")
			}
			if r.err != nil {
				break
			}
			ps[j] = posting{doc: doc, tf: int(tf)}
		}
		out.postings[t] = ps
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return r.err
	}
	*ix = out
	return nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(why string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrCorruptIndex, why)
	}
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad number")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bounded reads a number that must be at most hi.
func (r *reader) bounded(hi uint64) uint64 {
	v := r.uvarint()
	if v > hi {
		r.fail("number out of range")
		return 0
	}
	return v
}

// count reads a count of items each taking at least size bytes.
func (r *reader) count(size int) int {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)/size) {
		r.fail("count past the end")
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

func (r *reader) str() string {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		r.fail("string past the end")
	}
	if r.err != nil {
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}
