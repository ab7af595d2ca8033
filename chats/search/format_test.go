package search

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/document"
	"github.com/blevesearch/bleve/v2/mapping"
	index "github.com/blevesearch/bleve_index_api"
)

// writeFormat1 writes, in dir, an index as the version before formatKey
// did: documents mapped from a struct, every field with doc values, an
// _all field, no format key; chat c1 indexed up to seq 6, closed cleanly.
func writeFormat1(t *testing.T, dir string) {
	t.Helper()
	type record struct {
		Chat string  `json:"chat"`
		Kind string  `json:"kind"`
		Msg  string  `json:"msg"`
		Seq  float64 `json:"seq"`
		Role string  `json:"role"`
		Text string  `json:"text"`
		Time string  `json:"time"`
	}
	kw := bleve.NewTextFieldMapping()
	kw.Analyzer = keyword.Name
	kw.IncludeInAll = false
	text := bleve.NewTextFieldMapping()
	text.Analyzer = en.AnalyzerName
	text.Store = true
	text.IncludeTermVectors = true
	stored := bleve.NewTextFieldMapping()
	stored.Index = false
	stored.IncludeInAll = false
	num := bleve.NewNumericFieldMapping()
	num.Index = false
	num.IncludeInAll = false
	doc := bleve.NewDocumentStaticMapping()
	doc.AddFieldMappingsAt("chat", kw)
	doc.AddFieldMappingsAt("kind", kw)
	doc.AddFieldMappingsAt("msg", stored)
	doc.AddFieldMappingsAt("role", stored)
	doc.AddFieldMappingsAt("time", stored)
	doc.AddFieldMappingsAt("seq", num)
	doc.AddFieldMappingsAt("text", text)
	m := bleve.NewIndexMapping()
	m.DefaultMapping = doc
	m.DefaultAnalyzer = en.AnalyzerName
	idx, err := bleve.New(dir, m)
	if err != nil {
		t.Fatal(err)
	}
	b := idx.NewBatch()
	for _, err := range []error{
		b.Index("t/c1", record{Chat: "c1", Kind: KindTitle, Text: "Garden plans"}),
		b.Index("m/c1/m2", record{Chat: "c1", Kind: KindMessage, Msg: "m2", Seq: 2, Role: "user", Text: "where do the tomatoes go"}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	b.SetInternal(markKey("c1"), []byte("6"))
	if err := idx.Batch(b); err != nil {
		t.Fatal(err)
	}
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, cleanMarker), nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestOldFormatIsRebuilt: an index written in an older format (no format
// key) opens empty and not clean, every mark at 0, so the feeder refills
// it from the record; the index made then is of this format, and opens as
// it was left the next time.
func TestOldFormatIsRebuilt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "search")
	writeFormat1(t, dir)

	x, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if x.Clean() {
		t.Error("an index rebuilt for its format is said to be clean")
	}
	if !x.Rebuilt() {
		t.Error("an index of an older format is not said to be rebuilt")
	}
	if m, err := x.Mark("c1"); err != nil || m != 0 {
		t.Errorf("mark of c1 after the rebuild: %d %v; want 0", m, err)
	}
	if hits, err := x.Search("tomatoes", 10, nil); err != nil || len(hits) != 0 {
		t.Errorf("the old documents are still there: %+v %v", hits, err)
	}
	if f, err := x.idx.GetInternal([]byte(formatKey)); err != nil || string(f) != format {
		t.Errorf("format %q %v; want %q", f, err, format)
	}
	title := "Garden plans"
	if err := x.Apply("c1", &title, []Doc{{Message: "m2", Seq: 2, Role: "user", Text: "where do the tomatoes go"}}, 6); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}

	x, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if !x.Clean() || x.Rebuilt() {
		t.Errorf("an index of this format, closed cleanly: clean %v, rebuilt %v; want clean, not rebuilt", x.Clean(), x.Rebuilt())
	}
	if m, err := x.Mark("c1"); err != nil || m != 6 {
		t.Errorf("mark of c1 after a reopen: %d %v; want 6 (rebuilt again?)", m, err)
	}
	hits, err := x.Search("tomatoes", 10, nil)
	if err != nil || len(hits) != 1 || hits[0].Chat != "c1" || hits[0].Message != "m2" || hits[0].Seq != 2 {
		t.Errorf("after a reopen: %+v %v", hits, err)
	}
}

// TestDocumentsAsMapped: the documents built field by field are those
// bleve's mapping (newMapping, which the queries use) makes of the same
// values: the same fields, with the same options and the same terms.
func TestDocumentsAsMapped(t *testing.T) {
	x := open(t)
	if err := x.wait(); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC)
	d := Doc{Message: "m12", Seq: 12, Role: "assistant", Text: "The gardener's Tomatoes, planted in rows: 12 of them!", Time: at}
	title := "Garden Plans 2026"
	for _, tc := range []struct {
		name  string
		built *document.Document
		value map[string]any
	}{
		{"message", x.messageDoc("c_1", d), map[string]any{"chat": "c_1", "kind": KindMessage, "msg": d.Message, "seq": float64(d.Seq),
			"role": d.Role, "time": at.Format(time.RFC3339Nano), "text": d.Text}},
		{"title", x.titleDoc("c_1", title), map[string]any{"chat": "c_1", "kind": KindTitle, "text": title}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mapped := document.NewDocument(tc.built.ID())
			if err := x.idx.Mapping().(*mapping.IndexMappingImpl).MapDocument(mapped, tc.value); err != nil {
				t.Fatal(err)
			}
			if got, want := fieldsOf(tc.built), fieldsOf(mapped); !slices.Equal(got, want) {
				t.Errorf("built:\n%q\nmapped:\n%q", got, want)
			}
		})
	}
}

// fieldsOf lists a document's fields: name, options, stored value and the
// terms the field is indexed under, with their positions and offsets.
func fieldsOf(d *document.Document) []string {
	var out []string
	d.VisitFields(func(f index.Field) {
		s := f.Name() + " " + f.Options().String() + " " + strconv.Quote(string(f.Value()))
		if f.Options().IsIndexed() {
			f.Analyze()
			var terms []string
			for term, tf := range f.AnalyzedTokenFrequencies() {
				var locs []string
				for _, l := range tf.Locations {
					locs = append(locs, strconv.Itoa(l.Position)+"@"+strconv.Itoa(l.Start)+"-"+strconv.Itoa(l.End))
				}
				terms = append(terms, term+"="+strconv.Itoa(tf.Frequency())+"["+strings.Join(locs, ",")+"]")
			}
			slices.Sort(terms)
			s += " " + strings.Join(terms, " ")
		}
		out = append(out, s)
	})
	d.VisitComposite(func(f index.CompositeField) { out = append(out, "composite "+f.Name()) })
	slices.Sort(out)
	return out
}
