package view

import (
	"fmt"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// benchConv is a stored conversation of rows turns of four rows each
// (user, tool call, result, answer), perRow tokens a row on average.
func benchConv(rows, perRow int) *conv {
	c := &conv{}
	for len(c.rows) < rows {
		n := len(c.rows)
		c.user(fmt.Sprintf("request %d", n), perRow/2)
		c.call++
		id := fmt.Sprintf("call_%d", c.call)
		c.add(Row{Kind: KindAssistant, ToolCalls: []provider.ToolCall{{ID: id, Name: "shell", Arguments: fmt.Sprintf(`{"command": "make t%d"}`, n%50)}}, Tokens: 20})
		c.add(Row{Kind: KindTool, ToolCallID: id, ToolName: "shell", Text: "ok", Tokens: 3*perRow - 20 - perRow/2})
		c.answer(fmt.Sprintf("answer %d", n), perRow)
	}
	return c
}

// BenchmarkMaterializeFrozen: with a checkpoint in force, a turn costs what
// was appended since, not the size of the history behind the checkpoint.
func BenchmarkMaterializeFrozen(b *testing.B) {
	// The same 100 tokens a row: 10k rows are ~1M tokens, 50k rows ~5M.
	// The checkpoint keeps the same view of either; only what lies behind
	// its evicted seq differs.
	for _, hist := range []int{10000, 50000} {
		for _, fresh := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("history=%dk/new=%dk", hist/1000, fresh/1000), func(b *testing.B) {
				c := benchConv(hist, 100)
				in := Input{Rows: c.rows, Budget: mustBudget(b, 1000000, "full"), Overhead: 2000, Roster: fullRoster, Signals: Signals{Compact: true}}
				v, err := Materialize(in)
				if err != nil || v.Checkpoint == nil {
					b.Fatalf("plan: %v", err)
				}
				for i := 0; i < fresh/4; i++ {
					c.user("more", 1)
					c.step("shell", `{"command": "ls"}`, "x", 1, false)
					c.answer("ok", 1)
				}
				in.Rows, in.Checkpoint, in.Signals = c.rows, v.Checkpoint, Signals{}
				in.Context = []Section{{Key: "cwd", Text: "/"}}
				// As the lead reads them: the rows after the evicted seq (a
				// cursor seek) and the pinned ones; "all" passes the whole
				// record, which adds a scan of the evicted rows for pins.
				after := c.rows[int(v.Checkpoint.Evicted):]
				for _, rows := range []struct {
					name string
					rows []Row
				}{{"all", c.rows}, {"after-evicted", after}} {
					b.Run(rows.name, func(b *testing.B) {
						in.Rows = rows.rows
						b.ReportAllocs()
						for b.Loop() {
							v, err := Materialize(in)
							if err != nil || v.Checkpoint != nil {
								b.Fatalf("frozen turn re-planned or failed: %v", err)
							}
						}
					})
				}
			})
		}
	}
}

// BenchmarkPlanCheckpoint plans a checkpoint over 10k rows (~1M tokens).
func BenchmarkPlanCheckpoint(b *testing.B) {
	c := benchConv(10000, 100)
	in := Input{Rows: c.rows, Budget: mustBudget(b, 0, "auto"), Overhead: 2000, Roster: fullRoster, Signals: Signals{Compact: true}}
	b.ReportAllocs()
	for b.Loop() {
		v, err := Materialize(in)
		if err != nil || v.Checkpoint == nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMaterializeContexts: a chat whose runtime context changes every
// turn (the time, say) has a context row per turn, each rendered against
// the one before it on every turn, as the lone-turn benchmark's chat does.
func BenchmarkMaterializeContexts(b *testing.B) { benchContexts(b, false) }

// BenchmarkMaterializeContextsMemo is BenchmarkMaterializeContexts with the
// chat's Memo, as a chat's turns build their views: the context rows
// rendered by the last view are not rendered again.
func BenchmarkMaterializeContextsMemo(b *testing.B) { benchContexts(b, true) }

func benchContexts(b *testing.B, memo bool) {
	for _, turns := range []int{100, 1000} {
		b.Run(fmt.Sprintf("turns=%d", turns), func(b *testing.B) {
			c := &conv{}
			for i := range turns {
				c.context([]Section{{Key: "time", Text: fmt.Sprintf("2026-12-03 15:%02d UTC", i%60)}, {Key: "cwd", Text: "/srv"},
					{Key: "model", Text: "builtin"}}, 12)
				c.user(fmt.Sprintf("request %d", i), 5)
				c.answer(fmt.Sprintf("answer %d", i), 20)
			}
			in := Input{Rows: c.rows, Budget: mustBudget(b, 1000000, "full"), Overhead: 2000, Roster: fullRoster}
			if memo {
				in.Memo = &Memo{}
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Materialize(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMaterializeGrowing: a chat's turns as they come, one view per
// turn, each after a turn more (a context row, a request, an answer) than
// the last; every 50 turns the chat is back to its start (the memo then
// builds afresh once, as after a checkpoint).
func BenchmarkMaterializeGrowing(b *testing.B) {
	for _, turns := range []int{100, 1000} {
		for _, memo := range []bool{false, true} {
			b.Run(fmt.Sprintf("turns=%d/memo=%t", turns, memo), func(b *testing.B) {
				c := &conv{}
				add := func(i int) {
					c.context([]Section{{Key: "time", Text: fmt.Sprintf("2026-12-03 15:%02d UTC", i%60)}, {Key: "cwd", Text: "/srv"}}, 12)
					c.user(fmt.Sprintf("request %d", i), 5)
					c.answer(fmt.Sprintf("answer %d", i), 20)
				}
				for i := range turns {
					add(i)
				}
				start := len(c.rows)
				in := Input{Budget: mustBudget(b, 1000000, "full"), Overhead: 2000, Roster: fullRoster}
				if memo {
					in.Memo = &Memo{}
				}
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if i%50 == 0 {
						c.rows = c.rows[:start:start]
					}
					add(turns + i%50)
					in.Rows = c.rows
					in.Context = []Section{{Key: "time", Text: "now"}}
					if _, err := Materialize(in); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
