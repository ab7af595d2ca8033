// Package search is the full-text index of the chats: titles and transcript
// messages, searched from the browser. It wraps bleve (scorch, on disk
// beside the record under the data dir) and knows nothing of the chats
// package: chats feeds it documents and asks it questions.
//
// Each chat's high-water mark (the last record seq indexed) is stored in
// the index itself, in the same batch as the documents it covers, so after
// a crash the feeder re-indexes exactly from where the index stands.
package search

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	"github.com/blevesearch/bleve/v2/document"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search/query"
	index "github.com/blevesearch/bleve_index_api"

	"github.com/mirror-gateway/mirror/config/datadir"
)

// Document kinds.
const (
	KindTitle   = "title"
	KindMessage = "message"
)

// MaxQuery bounds a query's length in bytes.
const MaxQuery = 500

// ErrBadQuery is returned for an empty or oversized query.
var ErrBadQuery = errors.New("bad query")

// Doc is one transcript message to index.
type Doc struct {
	Message string // message id, unique in its chat
	Seq     uint64
	Role    string
	Text    string
	Time    time.Time
}

// Part is a piece of a snippet; Hit parts are what the query matched.
type Part struct {
	Text string `json:"text"`
	Hit  bool   `json:"hit,omitempty"`
}

// Hit is one search result: a message (Kind message) or a chat's title.
type Hit struct {
	Chat    string    `json:"chat"`
	Kind    string    `json:"kind"`
	Message string    `json:"message,omitempty"`
	Seq     uint64    `json:"seq,omitempty"`
	Role    string    `json:"role,omitempty"`
	Time    time.Time `json:"time,omitzero"`
	Score   float64   `json:"score"`
	// Snippet is the matched text around the first hit, as parts, so a
	// client renders highlights without parsing markup.
	Snippet []Part `json:"snippet"`
}

// Index is the on-disk full-text index.
type Index struct {
	ready chan struct{} // closed once the open (in the background) ended
	err   error         // why it failed
	idx   bleve.Index
	dir   string
	// text analyses the text field of every document (the index's own
	// analyzer, looked up once at open, not for each document).
	text *enAnalyzer
	// clean says the previous process closed this index (cleanMarker was
	// there at Open); tainted, that this one must not say so at Close.
	clean   bool
	tainted atomic.Bool
	old     bool // made again at open: written in an older format
}

// cleanMarker is the file Close leaves in the index's folder and Open
// removes: found at Open, it says every batch the previous process applied
// is on disk (bleve persists batches in the background, so after a crash
// the last ones may be missing, and the feeder must check every chat).
const cleanMarker = "mirror-closed-cleanly"

// The fields of a document. A message is found by text, a chat's documents
// by chat, its title by kind; a hit shows msg, seq, role, time and text.
// Only text keeps term vectors (a snippet's highlights need the matched
// words' offsets); nothing keeps doc values (no search sorts or facets on
// a field) and there is no _all field (every query names its field): each
// was work at every commit, and in every merge, for nothing.
const (
	fieldChat = "chat"
	fieldKind = "kind"
	fieldMsg  = "msg"
	fieldSeq  = "seq"
	fieldRole = "role"
	fieldTime = "time"
	fieldText = "text"
)

// Indexing options of the fields, in the mapping and in the documents
// built for it (documents skip the mapping: see titleDoc).
const (
	optKey    = index.IndexField                                               // found by its whole value, never shown
	optStored = index.StoreField                                               // shown, never searched
	optText   = index.IndexField | index.StoreField | index.IncludeTermVectors // searched and shown
)

// formatKey holds, in the index's internal storage, the format its
// documents were written in; format is this version's. An index without
// it, or of another format, is rebuilt at open (see openIndex).
const (
	formatKey = "mirror/format"
	format    = "2"
)

func newMapping() mapping.IndexMapping {
	field := func(analyzer string, o index.FieldIndexingOptions) *mapping.FieldMapping {
		f := bleve.NewTextFieldMapping()
		f.Analyzer = analyzer
		f.Index = o.IsIndexed()
		f.Store = o.IsStored()
		f.IncludeTermVectors = o.IncludeTermVectors()
		f.IncludeInAll = false
		f.DocValues = false
		return f
	}
	num := bleve.NewNumericFieldMapping()
	num.Index = false
	num.IncludeInAll = false
	num.DocValues = false
	doc := bleve.NewDocumentStaticMapping()
	doc.AddFieldMappingsAt(fieldChat, field(keyword.Name, optKey))
	doc.AddFieldMappingsAt(fieldKind, field(keyword.Name, optKey))
	doc.AddFieldMappingsAt(fieldMsg, field(keyword.Name, optStored))
	doc.AddFieldMappingsAt(fieldRole, field(keyword.Name, optStored))
	doc.AddFieldMappingsAt(fieldTime, field(keyword.Name, optStored))
	doc.AddFieldMappingsAt(fieldSeq, num)
	doc.AddFieldMappingsAt(fieldText, field(analyzerName, optText))
	doc.AddSubDocumentMapping("_all", bleve.NewDocumentDisabledMapping())
	m := bleve.NewIndexMapping()
	m.DefaultMapping = doc
	m.DefaultAnalyzer = analyzerName
	m.StoreDynamic = false
	m.IndexDynamic = false
	m.DocValuesDynamic = false
	return m
}

// Open opens the index in dir, creating it (0700) when absent, in the
// background: bleve reads every chat's mark into memory as it opens (tens
// of milliseconds and megabytes with 100,000 chats), and the gateway's
// start must not wait for that. Every method waits for the open to end,
// and returns its error if it failed. The index is derived data: one whose
// creation a crash cut short is made again, and the chats package refills
// it from the record.
func Open(dir string) (*Index, error) {
	if fi, err := os.Lstat(dir); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return nil, fmt.Errorf("search index %s: is a symbolic link; refused", dir)
	}
	x := &Index{dir: dir, ready: make(chan struct{})}
	go func() {
		defer close(x.ready)
		x.idx, x.clean, x.old, x.err = openIndex(dir)
		if x.err != nil {
			return
		}
		if x.text, _ = x.idx.Mapping().AnalyzerNamed(analyzerName).(*enAnalyzer); x.text == nil {
			x.idx.Close()
			x.err = fmt.Errorf("search index %s: no analyzer %q", dir, analyzerName)
		}
	}()
	return x, nil
}

// errOldFormat says the index on disk was written by an older version.
var errOldFormat = errors.New("written in an older format")

// openIndex opens or creates the bleve index in dir, and says whether the
// previous process closed it cleanly (taking the marker away), and whether
// it was made again for its format. An index
// written in an older format (formatKey) is removed and made again, as one
// whose creation a crash cut short is: it opens not clean and empty, so
// the feeder checks every chat and refills it from the record, in the
// background, while searches answer from what is indexed so far.
func openIndex(dir string) (_ bleve.Index, clean, old bool, _ error) {
	idx, err := bleve.Open(dir)
	if err == nil {
		var f []byte
		if f, err = idx.GetInternal([]byte(formatKey)); err == nil && string(f) != format {
			err = errOldFormat
		}
		if err != nil {
			idx.Close()
		}
	}
	if errors.Is(err, errOldFormat) {
		old = true
		// The meta file first: should the removal stop half-way, the
		// next open finds no meta and removes the rest.
		if err := os.Remove(filepath.Join(dir, "index_meta.json")); err != nil {
			return nil, false, false, fmt.Errorf("search index %s: %w", dir, err)
		}
		if err := datadir.SyncDir(dir); err != nil {
			return nil, false, false, fmt.Errorf("search index %s: %w", dir, err)
		}
		err = bleve.ErrorIndexMetaMissing
	}
	if errors.Is(err, bleve.ErrorIndexMetaMissing) {
		if err := os.RemoveAll(dir); err != nil {
			return nil, false, false, fmt.Errorf("search index %s: %w", dir, err)
		}
	}
	if errors.Is(err, bleve.ErrorIndexPathDoesNotExist) || errors.Is(err, bleve.ErrorIndexMetaMissing) {
		idx, err = create(dir)
	}
	if err != nil {
		return nil, false, false, fmt.Errorf("search index %s: %w (it is rebuilt from the record when removed)", dir, err)
	}
	marker := filepath.Join(dir, cleanMarker)
	if _, err := os.Lstat(marker); err != nil {
		return idx, false, old, nil
	}
	// Gone for good before anything is applied: a crash from now on
	// leaves no marker.
	if err := os.Remove(marker); err != nil {
		idx.Close()
		return nil, false, false, fmt.Errorf("search index %s: %w", dir, err)
	}
	if err := datadir.SyncDir(dir); err != nil {
		idx.Close()
		return nil, false, false, fmt.Errorf("search index %s: %w", dir, err)
	}
	return idx, true, old, nil
}

// create makes an empty index in dir, of this version's format. Should a
// crash come before the format is on disk, the next open makes it again:
// it held nothing the record does not.
func create(dir string) (bleve.Index, error) {
	idx, err := bleve.New(dir, newMapping())
	if err != nil {
		return nil, err
	}
	if err := idx.SetInternal([]byte(formatKey), []byte(format)); err != nil {
		idx.Close()
		return nil, err
	}
	return idx, nil
}

// wait waits for the open to end and returns its error.
func (x *Index) wait() error {
	<-x.ready
	return x.err
}

// Clean says the previous process closed the index cleanly: every batch
// it applied, and so every mark, is on disk. Otherwise (a crash, a new or
// rebuilt index, one from before the marker, one that failed to open) the
// feeder checks every chat.
func (x *Index) Clean() bool { return x.wait() == nil && x.clean }

// Rebuilt says the index was written in an older format and Open made it
// again, empty: the feeder refills it from the record.
func (x *Index) Rebuilt() bool { return x.wait() == nil && x.old }

// Taint keeps Close from marking the index as closed cleanly: the feeder
// could not record what it still had to index.
func (x *Index) Taint() { x.tainted.Store(true) }

// Close closes the index and, unless tainted, marks it as closed cleanly.
func (x *Index) Close() error {
	if x.wait() != nil {
		return nil // nothing open
	}
	if err := x.idx.Close(); err != nil {
		return err
	}
	if x.tainted.Load() {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(x.dir, cleanMarker), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return datadir.SyncDir(x.dir)
}

func markKey(chat string) []byte { return []byte("hw/" + chat) }

// Mark returns the last record seq of chat indexed (0: none).
func (x *Index) Mark(chat string) (uint64, error) {
	if err := x.wait(); err != nil {
		return 0, err
	}
	v, err := x.idx.GetInternal(markKey(chat))
	if err != nil || v == nil {
		return 0, err
	}
	return strconv.ParseUint(string(v), 10, 64)
}

func msgID(chat, msg string) string { return "m/" + chat + "/" + msg }
func titleID(chat string) string    { return "t/" + chat }

// idChat is the chat and kind of the document id (msgID or titleID), msg
// being the document's message id (stored; the chat and kind are not, the
// id says them).
func idChat(id, msg string) (chat, kind string, ok bool) {
	if chat, ok := strings.CutPrefix(id, "t/"); ok && msg == "" {
		return chat, KindTitle, true
	}
	rest, ok := strings.CutPrefix(id, "m/")
	if !ok || msg == "" {
		return "", "", false
	}
	chat, ok = strings.CutSuffix(rest, "/"+msg)
	return chat, KindMessage, ok
}

// Update is what one chat adds to the index: its title (nil: unchanged),
// new documents, and its new mark.
type Update struct {
	Chat  string
	Title *string
	Docs  []Doc
	Mark  uint64
}

// Apply indexes chat's title (when title is not nil) and docs, and moves
// the chat's mark to mark, in one batch: the documents and the mark that
// covers them are stored together or not at all.
func (x *Index) Apply(chat string, title *string, docs []Doc, mark uint64) error {
	return x.ApplyAll([]Update{{Chat: chat, Title: title, Docs: docs, Mark: mark}})
}

// ApplyAll is Apply for several chats in one batch (one commit).
func (x *Index) ApplyAll(us []Update) error {
	if err := x.wait(); err != nil {
		return err
	}
	b := x.idx.NewBatch()
	for _, u := range us {
		if u.Title != nil {
			if err := b.IndexAdvanced(x.titleDoc(u.Chat, *u.Title)); err != nil {
				return err
			}
		}
		for _, d := range u.Docs {
			if err := b.IndexAdvanced(x.messageDoc(u.Chat, d)); err != nil {
				return err
			}
		}
		b.SetInternal(markKey(u.Chat), []byte(strconv.FormatUint(u.Mark, 10)))
	}
	return x.idx.Batch(b)
}

// titleDoc is the document of chat's title. Documents are built here, field
// by field, rather than mapped from a struct by reflection (bleve's
// mapping walks every field of every document, and looks up each field's
// analyzer, at every commit); newMapping describes the same fields, for
// the queries. A document's fields, and the bytes of their values, are
// allocated together (docFields).
func (x *Index) titleDoc(chat, title string) *document.Document {
	f := newDocFields(len(chat) + len(KindTitle) + len(title))
	doc := document.NewDocument(titleID(chat))
	doc.Fields = f.list[:0]
	doc.AddField(f.key(&f.chat, fieldChat, chat))
	doc.AddField(f.key(&f.kind, fieldKind, KindTitle))
	doc.AddField(f.text(x, title))
	doc.SetIndexed()
	return doc
}

// messageDoc is the document of one of chat's messages. The keyword fields
// have no analyzer: bleve then takes the whole value as the one term, as
// the keyword analyzer of the mapping does.
func (x *Index) messageDoc(chat string, d Doc) *document.Document {
	f := newDocFields(len(chat) + len(KindMessage) + len(d.Message) + len(d.Role) + len(time.RFC3339Nano) + len(d.Text))
	doc := document.NewDocument(msgID(chat, d.Message))
	doc.Fields = f.list[:0]
	doc.AddField(f.key(&f.chat, fieldChat, chat))
	doc.AddField(f.key(&f.kind, fieldKind, KindMessage))
	doc.AddField(f.stored(&f.msg, fieldMsg, f.bytes(d.Message)))
	doc.AddField(document.NewNumericFieldWithIndexingOptions(fieldSeq, nil, float64(d.Seq), optStored))
	doc.AddField(f.stored(&f.role, fieldRole, f.bytes(d.Role)))
	if !d.Time.IsZero() {
		at := len(f.buf)
		f.buf = d.Time.UTC().AppendFormat(f.buf, time.RFC3339Nano)
		doc.AddField(f.stored(&f.time, fieldTime, f.buf[at:len(f.buf):len(f.buf)]))
	}
	doc.AddField(f.text(x, d.Text))
	doc.SetIndexed()
	return doc
}

// DropChat removes every document of chat and its mark.
func (x *Index) DropChat(chat string) error {
	if err := x.wait(); err != nil {
		return err
	}
	for {
		q := bleve.NewTermQuery(chat)
		q.SetField(fieldChat)
		req := bleve.NewSearchRequestOptions(q, 1000, 0, false)
		res, err := x.idx.Search(req)
		if err != nil {
			return err
		}
		b := x.idx.NewBatch()
		for _, h := range res.Hits {
			b.Delete(h.ID)
		}
		if len(res.Hits) == 0 {
			b.DeleteInternal(markKey(chat))
			return x.idx.Batch(b)
		}
		if err := x.idx.Batch(b); err != nil {
			return err
		}
	}
}

// Chats returns the ids of the chats whose title is indexed.
func (x *Index) Chats() ([]string, error) {
	if err := x.wait(); err != nil {
		return nil, err
	}
	q := bleve.NewTermQuery(KindTitle)
	q.SetField(fieldKind)
	var out []string
	for from := 0; ; from += 1000 {
		req := bleve.NewSearchRequestOptions(q, 1000, from, false)
		res, err := x.idx.Search(req)
		if err != nil {
			return nil, err
		}
		for _, h := range res.Hits {
			out = append(out, strings.TrimPrefix(h.ID, "t/"))
		}
		if len(res.Hits) < 1000 {
			return out, nil
		}
	}
}

// Search finds the messages and titles matching text (every word must
// match, in any order; the last word may be a prefix, as one types), best
// first, at most limit of them. keep, when not nil, drops the hits of chats
// it refuses (deleted ones) before counting them.
func (x *Index) Search(text string, limit int, keep func(chat string) bool) ([]Hit, error) {
	text = strings.TrimSpace(text)
	if text == "" || len(text) > MaxQuery || !utf8.ValidString(text) {
		return nil, fmt.Errorf("%w: a query is 1 to %d bytes of text", ErrBadQuery, MaxQuery)
	}
	if limit <= 0 || limit > 200 {
		limit = 50
	}
	if err := x.wait(); err != nil {
		return nil, err
	}
	words := strings.Fields(text)
	match := bleve.NewMatchQuery(text)
	match.SetField(fieldText)
	match.SetOperator(query.MatchQueryOperatorAnd)
	var q query.Query = match
	if last := strings.ToLower(words[len(words)-1]); utf8.RuneCountInString(last) >= 2 {
		// As one types: the last word may be the start of one.
		pre := bleve.NewPrefixQuery(last)
		pre.SetField(fieldText)
		var must []query.Query
		for _, w := range words[:len(words)-1] {
			m := bleve.NewMatchQuery(w)
			m.SetField(fieldText)
			must = append(must, m)
		}
		must = append(must, pre)
		q = bleve.NewDisjunctionQuery(match, bleve.NewConjunctionQuery(must...))
	}
	var out []Hit
	for from := 0; len(out) < limit; from += limit {
		req := bleve.NewSearchRequestOptions(q, limit, from, false)
		req.Fields = []string{fieldMsg, fieldSeq, fieldRole, fieldText, fieldTime}
		req.IncludeLocations = true
		res, err := x.idx.Search(req)
		if err != nil {
			return nil, err
		}
		for _, h := range res.Hits {
			hit := Hit{Score: h.Score}
			hit.Message, _ = h.Fields[fieldMsg].(string)
			var ok bool
			if hit.Chat, hit.Kind, ok = idChat(h.ID, hit.Message); !ok {
				continue // not a document of ours
			}
			hit.Role, _ = h.Fields[fieldRole].(string)
			if f, ok := h.Fields[fieldSeq].(float64); ok {
				hit.Seq = uint64(f)
			}
			if t, ok := h.Fields[fieldTime].(string); ok {
				hit.Time, _ = time.Parse(time.RFC3339Nano, t)
			}
			body, _ := h.Fields[fieldText].(string)
			var spans [][2]int
			for _, locs := range h.Locations[fieldText] {
				for _, l := range locs {
					spans = append(spans, [2]int{int(l.Start), int(l.End)})
				}
			}
			hit.Snippet = Snippet(body, spans, 160)
			if keep != nil && !keep(hit.Chat) {
				continue
			}
			if len(out) < limit {
				out = append(out, hit)
			}
		}
		if len(res.Hits) < limit {
			break
		}
	}
	return out, nil
}
