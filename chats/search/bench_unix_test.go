//go:build unix

package search

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkApply: what the indexer's commits cost under load, per
// message: batches of 1,000 chats' turns (a question and an answer each,
// as one drain of the indexer gathers them), into an index that grows as
// the batches come. cpu-ns/msg is the process's CPU time, so it counts
// the index's work in the background (persisting, merging segments) too.
func BenchmarkApply(b *testing.B) {
	benchApply(b, applyLoad{chats: 1000, turns: 1, seed: 3, corpus: 4096, question: [2]int{6, 10}, answer: [2]int{20, 60}})
}

// BenchmarkApplyTurns: one pass of the indexer under load at 100 chats,
// each with its turns since the last pass (a question and an answer of a
// few hundred bytes each), into an index that grows as the passes come.
// ns/op, B/op and allocs/op are those of the commit; cpu-ns/msg is the
// process's CPU per message, the index's background work (persisting,
// merging segments) included.
func BenchmarkApplyTurns(b *testing.B) {
	for _, turns := range []int{1, 10} {
		b.Run(fmt.Sprintf("turns=%d", turns), func(b *testing.B) {
			benchApply(b, applyLoad{chats: 100, turns: turns, seed: 5, corpus: 1024, question: [2]int{20, 30}, answer: [2]int{60, 40}})
		})
	}
}

// applyLoad is what each batch of benchApply holds: chats updates of
// turns questions and answers each, their texts drawn from a corpus of
// sentences of question[0] (answer[0]) words and up to question[1]
// (answer[1]) more, seeded by seed.
type applyLoad struct {
	chats, turns, corpus int
	seed                 uint64
	question, answer     [2]int
}

// benchApply commits one batch of l per iteration and reports the
// process's CPU per message (cpu-ns/msg).
func benchApply(b *testing.B, l applyLoad) {
	x := open(b)
	if err := x.wait(); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(l.seed, l.seed+1))
	sentence := func(n [2]int) string {
		w := make([]string, n[0]+rng.IntN(n[1]))
		for j := range w {
			w[j] = benchWords[int(float64(len(benchWords))*rng.Float64()*rng.Float64())]
		}
		return strings.Join(w, " ") + "."
	}
	questions, answers := make([]string, l.corpus), make([]string, l.corpus)
	for i := range questions {
		questions[i], answers[i] = sentence(l.question), sentence(l.answer)
	}
	seq := make([]uint64, l.chats)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	docs := 0
	cpu0 := cpuTime()
	b.ReportAllocs()
	for b.Loop() {
		us := make([]Update, l.chats)
		for c := range us {
			u := Update{Chat: fmt.Sprintf("c_%04d", c)}
			if seq[c] == 0 {
				title := fmt.Sprintf("Chat %d", c)
				u.Title = &title
			}
			for range l.turns {
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

// cpuTime is the CPU time the process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
