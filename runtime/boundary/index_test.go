package boundary

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func archive(boundary uint64, texts ...string) *Index {
	docs := make([]Doc, len(texts))
	for i, s := range texts {
		docs[i] = Doc{Seq: boundary*100 + uint64(i), Role: []string{"user", "assistant", "tool"}[i%3], Text: s}
	}
	return BuildIndex(boundary, docs)
}

func TestSearchFindsTheFact(t *testing.T) {
	older := archive(1,
		"Can you look at the export code?",
		"The export handler lives in src/export/handler.py and streams rows as CSV.",
		"def export(rows): ...",
		"The staging database password rotates every Monday; the operator keeps it in the vault.",
		"Let's plan the export feature for the account page.",
	)
	newer := archive(2,
		"What port does the staging server use?",
		"I'll check the config for the export.",
		"The staging server listens on port 8443, behind the VPN gateway named Kestrel.",
		"Great, the export works on staging now.",
		"Staging staging staging.",
	)
	distractor := archive(3, strings.Repeat("export feature notes and plans. ", 20))
	indexes := []*Index{older, newer, distractor}

	tests := []struct {
		query    string
		boundary uint64
		seq      uint64
		snippet  string
	}{
		{"staging server port VPN", 2, 202, "The staging server listens on port 8443"},
		{"Kestrel", 2, 202, "behind the VPN gateway named Kestrel"},
		{"KESTREL gateway?", 2, 202, "Kestrel"},
		{"when does the database password rotate", 1, 103, "password rotates every Monday"},
		{"handler.py", 1, 101, "src/export/handler.py"},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			hits := Search(tc.query, indexes, 3)
			if len(hits) == 0 {
				t.Fatal("no hits")
			}
			if hits[0].Boundary != tc.boundary || hits[0].Seq != tc.seq {
				t.Errorf("first hit %+v, want boundary %d seq %d; all: %+v", hits[0], tc.boundary, tc.seq, hits)
			}
			if !strings.Contains(hits[0].Snippet, tc.snippet) {
				t.Errorf("snippet %q lacks %q", hits[0].Snippet, tc.snippet)
			}
			for i := 1; i < len(hits); i++ {
				if hits[i].Score > hits[i-1].Score {
					t.Errorf("not ranked: %+v", hits)
				}
			}
		})
	}
	if hits := Search("the of and", indexes, 5); hits != nil {
		t.Errorf("stopwords only: %+v", hits)
	}
	if hits := Search("zebra", indexes, 5); len(hits) != 0 {
		t.Errorf("no match: %+v", hits)
	}
	if hits := Search("staging", indexes, 2); len(hits) != 2 {
		t.Errorf("k=2 gave %d", len(hits))
	}
	if Search("staging", nil, 5) != nil || Search("staging", []*Index{nil, BuildIndex(9, nil)}, 5) != nil {
		t.Error("empty indexes gave hits")
	}
	if got := FormatHits("8443", Search("8443", indexes, 1)); got != "1 archived message matches \"8443\":\n- boundary 2, event 202 (tool): The staging server listens on port 8443, behind the VPN gateway named Kestrel.\n" {
		t.Errorf("FormatHits = %q", got)
	}
}

func TestSnippet(t *testing.T) {
	long := strings.Repeat("filler words here ", 20) + "the secret key sk-abcdefghijklmnopqrstuvwxyz was found near Kestrel\n\nand more " + strings.Repeat("tail ", 60)
	hits := Search("kestrel", []*Index{archive(1, long)}, 1)
	s := hits[0].Snippet
	if !strings.HasPrefix(s, "…") || !strings.HasSuffix(s, "…") || strings.Contains(s, "\n") || !strings.Contains(s, "Kestrel") {
		t.Errorf("snippet %q", s)
	}
	if strings.Contains(s, "sk-abc") {
		t.Errorf("secret in snippet %q", s)
	}
}

func TestTerms(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"The Export-handler, v2!", []string{"export", "handler", "v2"}},
		{"recall_history HANDOFF_history", []string{"recall", "history", "handoff"}},
		{"Größe ÉTÉ naïve", []string{"größe", "été", "naïve"}},
		{"東京タワー", []string{"東", "京", "タ", "ワ", "ー"}},
		{"日本語のテスト test", []string{"日", "本", "語", "の", "テ", "ス", "ト", "test"}},
		{"Москва и Питер", []string{"москва", "и", "питер"}},
		{"", nil},
		{"the a of", nil},
		{"\xff\xfebad utf8", []string{"bad", "utf8"}},
	}
	for _, tc := range tests {
		if got := Terms(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Terms(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := Terms(strings.Repeat("x", 1000)); len(got) != 1 || len([]rune(got[0])) != maxTerm {
		t.Errorf("long run: %q", got)
	}
}

func TestIndexRoundTrip(t *testing.T) {
	ix := archive(7, "alpha beta", "beta gamma gamma", "", "δέλτα alpha")
	b, err := ix.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back Index
	if err := back.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, ix) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, *ix)
	}
	again, _ := back.MarshalBinary()
	if !bytes.Equal(again, b) {
		t.Error("the same index encoded to other bytes")
	}
	if got, want := Search("gamma alpha", []*Index{&back}, 5), Search("gamma alpha", []*Index{ix}, 5); !reflect.DeepEqual(got, want) {
		t.Errorf("search differs after the round trip: %+v vs %+v", got, want)
	}
	for i := range b {
		var x Index
		if err := x.UnmarshalBinary(b[:i]); !errors.Is(err, ErrCorruptIndex) {
			t.Fatalf("truncated at %d: %v", i, err)
		}
	}
	if err := new(Index).UnmarshalBinary(append(b, 0)); !errors.Is(err, ErrCorruptIndex) {
		t.Errorf("trailing byte: %v", err)
	}
}

func TestToolArgs(t *testing.T) {
	for _, tool := range Tools() {
		var schema map[string]any
		if err := json.Unmarshal(tool.Parameters, &schema); err != nil || schema["type"] != "object" {
			t.Errorf("%s: schema %s: %v", tool.Name, tool.Parameters, err)
		}
	}
	// The handoff_update schema names exactly the fields ApplyUpdate reads.
	var s struct{ Properties map[string]any }
	json.Unmarshal(HandoffUpdateTool.Parameters, &s)
	err := ApplyUpdate(&Handoff{}, json.RawMessage(`{"x": 1}`))
	for name := range s.Properties {
		if strings.Contains(err.Error(), ""+name+",") || strings.Contains(err.Error(), " "+name+")") {
			continue
		}
		t.Errorf("schema property %s is not an argument", name)
	}

	tests := []struct {
		name string
		run  func() (any, error)
		want any
		err  string
	}{
		{"consolidate", func() (any, error) { return ParseConsolidate([]byte(`{"continue": true, "reason": " phase done "}`)) },
			Consolidate{Continue: true, Reason: "phase done"}, ""},
		{"consolidate missing", func() (any, error) { return ParseConsolidate([]byte(`{}`)) }, Consolidate{},
			`consolidate: argument "continue" is required; argument "reason" is required`},
		{"consolidate types", func() (any, error) { return ParseConsolidate([]byte(`{"continue": "yes", "reason": ""}`)) }, Consolidate{},
			`consolidate: argument "continue" must be true or false, not a string; argument "reason" must not be empty`},
		{"recall", func() (any, error) { return ParseRecall([]byte(`{"query": "port"}`)) }, Recall{Query: "port", Limit: 5}, ""},
		{"recall limit", func() (any, error) { return ParseRecall([]byte(`{"query": "port", "limit": 10.0}`)) }, Recall{Query: "port", Limit: 10}, ""},
		{"recall bad limit", func() (any, error) { return ParseRecall([]byte(`{"query": "port", "limit": "3"}`)) }, Recall{},
			`recall_history: argument "limit" must be a whole number, not a string`},
		{"recall limit range", func() (any, error) { return ParseRecall([]byte(`{"query": "port", "limit": 51}`)) }, Recall{},
			`recall_history: argument "limit" must be at most 50, not 51`},
		{"recall no words", func() (any, error) { return ParseRecall([]byte(`{"query": "the ?"}`)) }, Recall{},
			`recall_history: argument "query" has no word to search for (only punctuation or common words such as "the")`},
		{"history list", func() (any, error) { return ParseHandoffHistory(nil) }, uint64(0), ""},
		{"history read", func() (any, error) { return ParseHandoffHistory([]byte(`{"boundary": 3}`)) }, uint64(3), ""},
		{"history zero", func() (any, error) { return ParseHandoffHistory([]byte(`{"boundary": 0}`)) }, uint64(0),
			`handoff_history: argument "boundary" must be at least 1, not 0`},
		{"history fraction", func() (any, error) { return ParseHandoffHistory([]byte(`{"boundary": 1.5}`)) }, uint64(0),
			`handoff_history: argument "boundary" must be a whole number, not 1.5`},
		{"history unknown", func() (any, error) { return ParseHandoffHistory([]byte(`{"n": 1}`)) }, uint64(0),
			`handoff_history: unknown argument "n" (arguments: boundary)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.run()
			if fmt.Sprint(err) != tc.err && !(err == nil && tc.err == "") {
				t.Errorf("error:\n got %v\nwant %s", err, tc.err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
	if m := ForcedAskMessage(); !strings.Contains(m.Content, "`handoff_update`") || len(ForcedAskTools()) != 2 {
		t.Errorf("forced ask: %+v", m)
	}
}

func FuzzArgs(f *testing.F) {
	for _, s := range []string{seedArgs, `{}`, ``, `{"continue": true, "reason": "x"}`, `{"query": "a", "limit": 1e400}`,
		`{"boundary": -1}`, `{"steps": [{"state": null, "text": null}]}`, `[`, `"x"`, `{"done": [1, null, "x"]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h := &Handoff{Objective: "keep"}
		before := *h
		if err := ApplyUpdate(h, json.RawMessage(s)); err != nil && !reflect.DeepEqual(*h, before) {
			t.Fatalf("a bad update changed the record")
		}
		ParseConsolidate(json.RawMessage(s))
		ParseRecall(json.RawMessage(s))
		ParseHandoffHistory(json.RawMessage(s))
		ParseNotes(s)
	})
}

func FuzzTerms(f *testing.F) {
	for _, s := range []string{"The Export-handler", "東京タワー", "\xff", "a\u0301b", strings.Repeat("x", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		terms := Terms(s)
		for _, term := range terms {
			if term == "" || stopwords[term] {
				t.Fatalf("term %q", term)
			}
		}
		ix := BuildIndex(1, []Doc{{Seq: 1, Text: s}, {Seq: 2, Text: "other text"}})
		hits := Search(s, []*Index{ix}, 3)
		if len(terms) > 0 && (len(hits) == 0 || hits[0].Seq != 1) {
			t.Fatalf("the text does not find itself: %+v", hits)
		}
	})
}

func FuzzUnmarshalIndex(f *testing.F) {
	b, _ := archive(3, "alpha beta", "beta gamma").MarshalBinary()
	f.Add(b)
	f.Add([]byte("MBX1"))
	f.Add([]byte("MBX1\x01\xff\xff\xff\xff\x0f"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var ix Index
		if err := ix.UnmarshalBinary(data); err != nil {
			return
		}
		Search("alpha beta gamma", []*Index{&ix}, 5)
		if _, err := ix.MarshalBinary(); err != nil {
			t.Fatal(err)
		}
	})
}
