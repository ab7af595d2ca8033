//go:build unix

package search

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// BenchmarkApplyTurns: one pass of the indexer under load at 100 chats,
// each with its turns since the last pass (a question and an answer of a
// few hundred bytes each), into an index that grows as the passes come.
// ns/op, B/op and allocs/op are those of the commit; cpu-ns/msg is the
// process's CPU per message, the index's background work (persisting,
// merging segments) included.
func BenchmarkApplyTurns(b *testing.B) {
	for _, turns := range []int{1, 10} {
		b.Run(fmt.Sprintf("turns=%d", turns), func(b *testing.B) {
			benchApplyTurns(b, 100, turns)
		})
	}
}

func benchApplyTurns(b *testing.B, chats, turns int) {
	x := open(b)
	if err := x.wait(); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	sentence := func(n int) string {
		w := make([]string, n)
		for j := range w {
			w[j] = benchWords[int(float64(len(benchWords))*rng.Float64()*rng.Float64())]
		}
		return strings.Join(w, " ") + "."
	}
	questions, answers := make([]string, 1024), make([]string, 1024)
	for i := range questions {
		questions[i], answers[i] = sentence(20+rng.IntN(30)), sentence(60+rng.IntN(40))
	}
	seq := make([]uint64, chats)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	docs := 0
	cpu0 := cpuTime()
	b.ReportAllocs()
	for b.Loop() {
		us := make([]Update, chats)
		for c := range us {
			u := Update{Chat: fmt.Sprintf("c_%03d", c)}
			if seq[c] == 0 {
				title := fmt.Sprintf("Chat %d", c)
				u.Title = &title
			}
			for range turns {
				q, a := seq[c]+1, seq[c]+2
				seq[c] += 3
				u.Docs = append(u.Docs,
					Doc{Message: fmt.Sprintf("m%d", q), Seq: q, Role: "user", Text: questions[rng.IntN(len(questions))], Time: at},
					Doc{Message: fmt.Sprintf("m%d", a), Seq: a, Role: "assistant", Text: answers[rng.IntN(len(answers))], Time: at})
			}
			u.Mark = seq[c]
			docs += len(u.Docs)
			us[c] = u
		}
		if err := x.ApplyAll(us); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(docs), "cpu-ns/msg")
}
