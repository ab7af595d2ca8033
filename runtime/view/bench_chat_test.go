package view

import (
	"fmt"
	"testing"
)

// BenchmarkMaterializeCheckpointed: a long chat's turns under a
// checkpoint, as the runtime builds them: every row since the chat's
// start (most of them evicted, some pinned), handed AppendOnly with the
// chat's memo, a turn more each time (a context row, a request, an
// answer); every 50 turns the chat is back to its start.
func BenchmarkMaterializeCheckpointed(b *testing.B) {
	for _, hist := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("rows=%d", hist), func(b *testing.B) {
			c := benchConv(hist, 100)
			for i := 0; i < len(c.rows); i += 97 {
				c.rows[i].Pinned = c.rows[i].Kind == KindUser
			}
			in := Input{Rows: c.rows, Budget: mustBudget(b, hist*20, "full"), Overhead: 2000, Roster: fullRoster, Signals: Signals{Compact: true}}
			v, err := Materialize(in)
			if err != nil || v.Checkpoint == nil || v.Checkpoint.Evicted < uint64(hist/2) {
				b.Fatalf("plan: %v", err)
			}
			in.Checkpoint, in.Signals, in.Memo = v.Checkpoint, Signals{}, &Memo{}
			in.AppendOnly = true
			start := len(c.rows)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if i%50 == 0 {
					c.rows = c.rows[:start:start]
				}
				c.context([]Section{{Key: "time", Text: fmt.Sprintf("15:%02d", i%60)}}, 8)
				c.user(fmt.Sprintf("request %d", i), 5)
				c.answer(fmt.Sprintf("answer %d", i), 20)
				in.Rows, in.Context = c.rows, []Section{{Key: "time", Text: "now"}}
				if v, err := Materialize(in); err != nil || v.Checkpoint != nil {
					b.Fatalf("a turn under the checkpoint re-planned or failed: %v", err)
				}
			}
		})
	}
}
