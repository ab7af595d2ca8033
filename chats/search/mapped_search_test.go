package search

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSearchesAsMapped: an index fed documents built field by field (as
// ApplyAll does) answers every query as one fed the same values through
// bleve's mapping (its own TextField and the analyzer's filter chain):
// the same hits, scores and snippets.
func TestSearchesAsMapped(t *testing.T) {
	built, mapped := open(t), open(t)
	for _, x := range []*Index{built, mapped} {
		if err := x.wait(); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(7, 8))
	special := []string{
		"The gardener's Tomatoes were RUNNING to the rivers' banks",
		"Café’s naïve tomatoes — “quoted” and ’possessive’s, 日本語 mixed with tomatoes",
		"e.g. U.S.A. 3.14 1,000,000 snake_case http://example.com/tomato?x=1",
	}
	at := time.Date(2026, 2, 3, 4, 5, 6, 7, time.UTC)
	var us []Update
	b := mapped.idx.NewBatch()
	for c := range 15 { // fewer documents than a query's limit: no cut among equal scores
		chat := fmt.Sprintf("c_%02d", c)
		title := fmt.Sprintf("Chat %d about %s", c, benchWords[len(benchWords)-1-c])
		u := Update{Chat: chat, Title: &title, Mark: 100}
		if err := b.Index(titleID(chat), map[string]any{"chat": chat, "kind": KindTitle, "text": title}); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			w := make([]string, 5+rng.IntN(60))
			for j := range w {
				w[j] = benchWords[int(float64(len(benchWords))*rng.Float64()*rng.Float64())]
			}
			text := strings.Join(w, " ")
			if i == 0 {
				text += " " + special[c%len(special)]
			}
			d := Doc{Message: fmt.Sprintf("m%d", i+2), Seq: uint64(i + 2), Role: []string{"user", "assistant"}[i%2], Text: text}
			if i%3 != 0 {
				d.Time = at.Add(time.Duration(i) * time.Minute)
			}
			u.Docs = append(u.Docs, d)
			value := map[string]any{"chat": chat, "kind": KindMessage, "msg": d.Message, "seq": float64(d.Seq), "role": d.Role, "text": d.Text}
			if !d.Time.IsZero() {
				value["time"] = d.Time.UTC().Format(time.RFC3339Nano)
			}
			if err := b.Index(msgID(chat, d.Message), value); err != nil {
				t.Fatal(err)
			}
		}
		us = append(us, u)
	}
	if err := built.ApplyAll(us); err != nil {
		t.Fatal(err)
	}
	if err := mapped.idx.Batch(b); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"tomatoes", "tomato", "garden", "the", "gardener's", "running rivers", "RUN", "cafés", "naïve",
		"possessive", "日本語", "u.s.a", "3.14", "snake_case", "example", "garden tomato", "chat", "bound", "quot", "wa"} {
		got, err := built.Search(q, 200, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := mapped.Search(q, 200, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 && q != "the" {
			t.Errorf("%q: no hits in either index (a query that tests nothing)", q)
		}
		// Hits of equal scores come in the order of their documents in
		// the index, which is the order bleve's analysis finished them in.
		for _, hits := range [][]Hit{got, want} {
			slices.SortStableFunc(hits, func(a, b Hit) int {
				return cmp.Or(cmp.Compare(b.Score, a.Score), cmp.Compare(a.Chat, b.Chat), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Message, b.Message))
			})
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q:\n built %+v\nmapped %+v", q, got, want)
		}
	}
}
