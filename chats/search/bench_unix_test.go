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
	x := open(b)
	rng := rand.New(rand.NewPCG(3, 4))
	words := benchWords
	sentence := func(n int) string {
		w := make([]string, n)
		for j := range w {
			w[j] = words[int(float64(len(words))*rng.Float64()*rng.Float64())]
		}
		return strings.Join(w, " ") + "."
	}
	questions, answers := make([]string, 4096), make([]string, 4096)
	for i := range questions {
		questions[i], answers[i] = sentence(6+rng.IntN(10)), sentence(20+rng.IntN(60))
	}
	const chats = 1000
	seq := make([]uint64, chats)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	docs := 0
	cpu0 := cpuTime()
	for b.Loop() {
		us := make([]Update, chats)
		for c := range us {
			q, a := seq[c]+1, seq[c]+2
			seq[c] += 3
			us[c] = Update{Chat: fmt.Sprintf("c_%04d", c), Mark: seq[c], Docs: []Doc{
				{Message: fmt.Sprintf("m%d", q), Seq: q, Role: "user", Text: questions[rng.IntN(len(questions))], Time: at},
				{Message: fmt.Sprintf("m%d", a), Seq: a, Role: "assistant", Text: answers[rng.IntN(len(answers))], Time: at},
			}}
			if seq[c] == 3 {
				title := fmt.Sprintf("Chat %d", c)
				us[c].Title = &title
			}
			docs += len(us[c].Docs)
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
