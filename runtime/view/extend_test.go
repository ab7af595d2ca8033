package view

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
)

// A memo that extends the last view gives the very view a fresh
// materialization gives, byte for byte, across histories that only grow
// (where it must extend) and histories that change under it: a
// checkpoint, a /clear, a row edited or deleted in place, attachments, a
// pin of an evicted row, another roster, provider or counter.
func TestMemoExtendsLikeFresh(t *testing.T) {
	img := providertest.NewPart(provider.PartImage, "image/png", "a.png", providertest.PNG(8, 6))
	const (
		any    = iota // the step may or may not extend
		extend        // the step must extend the last view
		fresh         // the step must build afresh
	)
	type step struct {
		name string
		do   func(c *conv, in *Input)
		want int
	}
	n := 0
	drop := false // the step's checkpoint is not stored
	turn := func(c *conv, in *Input) {
		n++
		c.context([]Section{{Key: "time", Text: fmt.Sprintf("15:%02d", n%60)}, {Key: "cwd", Text: "/srv"}}, 0)
		c.user(fmt.Sprintf("request %d", n), 0)
		c.step("shell", fmt.Sprintf(`{"command": "make t%d"}`, n), fmt.Sprintf("built t%d", n), 0, n%5 == 0)
		c.answer(fmt.Sprintf("answer %d, a few words longer than the request", n), 0)
	}
	grow := step{"a turn appended", turn, extend}
	steps := []step{
		{"first view", turn, fresh},
		grow, grow, grow,
		{"an image", func(c *conv, in *Input) {
			turn(c, in)
			c.add(Row{Kind: KindUser, Text: "look", Parts: []provider.Part{img}})
		}, extend},
		{"a result that brought an image back", func(c *conv, in *Input) {
			c.call++
			id := fmt.Sprintf("call_%d", c.call)
			c.add(Row{Kind: KindAssistant, ToolCalls: []provider.ToolCall{{ID: id, Name: "read_file", Arguments: `{"path": "a.png"}`}}})
			c.add(Row{Kind: KindTool, ToolCallID: id, ToolName: "read_file", Text: "an image", Parts: []provider.Part{img}})
			c.answer("seen", 0)
		}, extend},
		{"an answer edited in place", func(c *conv, in *Input) {
			r := &c.rows[len(c.rows)/2]
			r.Text += " (edited)"
			turn(c, in)
		}, fresh},
		grow,
		{"a context row's sections changed in place", func(c *conv, in *Input) {
			for i := range c.rows {
				if c.rows[i].Kind == KindContext {
					c.rows[i].Sections[1].Text = "/elsewhere"
					break
				}
			}
		}, fresh},
		{"a row deleted", func(c *conv, in *Input) {
			i := len(c.rows) / 3
			c.rows = append(c.rows[:i:i], c.rows[i+1:]...)
		}, fresh},
		grow,
		{"another roster", func(c *conv, in *Input) { in.Roster = []string{"shell"} }, fresh},
		{"another provider", func(c *conv, in *Input) { in.Provider = "anthropic" }, fresh},
		{"another counter", func(c *conv, in *Input) { in.Count = func(s string) int { return len(s) } }, fresh},
		grow,
		{"a result too large for the ceiling, with no signal: admission plans", func(c *conv, in *Input) {
			c.user("read the log", 0)
			c.step("shell", `{"command": "cat log"}`, "a long log", 9000, false)
		}, any},
		grow,
		{"a checkpoint planned but not stored (a hook blocked it)", func(c *conv, in *Input) {
			turn(c, in)
			in.Signals, drop = Signals{Compact: true}, true
		}, fresh},
		{"the next turn, under the checkpoint in force before", turn, fresh},
		{"an early request pinned", func(c *conv, in *Input) {
			for i := range c.rows {
				if c.rows[i].Kind == KindUser {
					c.rows[i].Pinned = true
					break
				}
			}
		}, any},
		{"a checkpoint", func(c *conv, in *Input) {
			turn(c, in)
			c.user("and the other log", 0)
			c.step("shell", `{"command": "cat log.1"}`, "another long log", 4000, false)
			c.answer("both read", 0)
			in.Signals = Signals{Compact: true}
		}, fresh},
		{"after the checkpoint", turn, any},
		grow, grow,
		{"an evicted pinned request edited", func(c *conv, in *Input) {
			for i := range c.rows {
				if c.rows[i].Pinned && c.rows[i].Seq <= in.Checkpoint.Evicted {
					c.rows[i].Text += " (edited)"
					break
				}
			}
		}, fresh},
		{"an evicted row pinned", func(c *conv, in *Input) {
			for i := range c.rows {
				if in.Checkpoint != nil && c.rows[i].Seq <= in.Checkpoint.Evicted && c.rows[i].Kind == KindUser {
					c.rows[i].Pinned = true
					break
				}
			}
		}, any},
		grow,
		{"a clear", func(c *conv, in *Input) {
			c.add(Row{Kind: KindClear})
			turn(c, in)
		}, fresh},
		grow, grow,
	}
	c := &conv{}
	in := Input{Budget: mustBudget(t, 10000, "full"), Overhead: 2000, Roster: fullRoster, Provider: "openai"}
	memo := &Memo{}
	extended, evicted := 0, uint64(0)
	for i, s := range steps {
		s.do(c, &in)
		in.Rows = c.rows
		in.Context = []Section{{Key: "turn", Text: fmt.Sprint(i)}}
		in.Memo = nil
		want, err1 := Materialize(in)
		in.Memo = memo
		hits := memo.hits
		got, err2 := Materialize(in)
		if fmt.Sprint(err1) != fmt.Sprint(err2) || !reflect.DeepEqual(want, got) {
			t.Fatalf("step %d (%s): the view with a memo differs:\n%s", i, s.name, firstDiff(marshal(t, want), marshal(t, got)))
		}
		did := memo.hits > hits
		if s.want == extend && !did || s.want == fresh && did {
			t.Fatalf("step %d (%s): extended %v, want %v", i, s.name, did, s.want == extend)
		}
		if did {
			extended++
		}
		if got.Checkpoint != nil && !drop {
			evicted = max(evicted, got.Checkpoint.Evicted)
			in.Checkpoint = got.Checkpoint
		}
		drop = false
		in.Signals = Signals{}
	}
	if evicted == 0 || len(in.Checkpoint.Pinned) == 0 {
		t.Fatal("no checkpoint evicted rows; the table no longer covers one")
	}
	if extended < 8 {
		t.Fatalf("only %d steps extended the last view", extended)
	}
}

// View.Request is the lead and the messages in one array, Messages its
// tail, whether or not attachments moved into messages of their own; no
// lead, no Request.
func TestRequestLeadsMessages(t *testing.T) {
	img := providertest.NewPart(provider.PartImage, "image/png", "a.png", providertest.PNG(8, 6))
	lead := []provider.Message{{Role: provider.RoleSystem, Content: "the prompt"}}
	for _, recovered := range []bool{false, true} {
		c := &conv{}
		c.user("hello", 2)
		c.call++
		c.add(Row{Kind: KindAssistant, ToolCalls: []provider.ToolCall{{ID: "call_1", Name: "read_file", Arguments: `{}`}}, Tokens: 5})
		r := Row{Kind: KindTool, ToolCallID: "call_1", ToolName: "read_file", Text: "ok", Tokens: 1}
		if recovered {
			r.Parts = []provider.Part{img}
		}
		c.add(r)
		in := Input{Rows: c.rows, Budget: mustBudget(t, 100000, "full"), Overhead: 100, Roster: fullRoster, Provider: "openai"}
		plain, err := Materialize(in)
		if err != nil || plain.Request != nil {
			t.Fatalf("without a lead: Request %v, err %v", plain.Request, err)
		}
		in.Lead = lead
		v, err := Materialize(in)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(v.Messages, plain.Messages) || !reflect.DeepEqual(v.Request, append(slices.Clone(lead), plain.Messages...)) {
			t.Fatalf("recovered %v: Request %+v, Messages %+v", recovered, v.Request, v.Messages)
		}
		if len(v.Messages) != len(c.rows)+btoi(recovered) {
			t.Fatalf("recovered %v: %d messages", recovered, len(v.Messages))
		}
		if &v.Request[len(lead)] != &v.Messages[0] {
			t.Fatalf("recovered %v: Messages is not Request's tail", recovered)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The safety net, below its limit, makes nothing: it runs before every
// request.
func TestSafetyNetQuietAllocatesNothing(t *testing.T) {
	msgs := []provider.Message{{Role: provider.RoleSystem, Content: "prompt", Tokens: 3}, {Role: provider.RoleUser, Content: "hi", Tokens: 1},
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "a", Name: "shell", Arguments: "{}"}}},
		{Role: provider.RoleTool, ToolCallID: "a", Content: "done"}, {Role: provider.RoleUser, Content: "again", Tokens: 1},
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "b", Name: "shell", Arguments: "{}"}}},
		{Role: provider.RoleTool, ToolCallID: "b", Content: "done"}}
	allocs := testing.AllocsPerRun(100, func() {
		if out, net := SafetyNet(msgs, 0, 100000, func(s string) int { return len(s) }); net.Fired() || &out[0] != &msgs[0] {
			t.Fatal("the net fired below its limit")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations below the limit", allocs)
	}
	if _, net := SafetyNet(msgs, 0, 10, func(s string) int { return len(s) }); net.Trimmed == 0 && net.Cleared == 0 {
		t.Fatal("the net did not fire over its limit; the test no longer sees it")
	}
}

// Over random conversations that grow a turn at a time, with checkpoints
// (asked for and measured), clears, pins, edits and deletions now and
// then, a view built with the chat's memo is the view built without one.
func TestMemoRandomHistories(t *testing.T) {
	count := func(s string) int { return (len(s) + 3) / 4 }
	for seed := range 30 {
		r := rand.New(rand.NewSource(int64(seed)))
		c := &conv{}
		in := Input{Budget: mustBudget(t, 60000, "full"), Overhead: 1500, Roster: fullRoster, Count: count, Provider: "openai"}
		memo := &Memo{}
		for step := range 40 {
			grow(r, c, 1)
			switch k := r.Intn(14); k {
			case 5:
				// A result whose call is not in the view (it went, or never
				// was): the view leaves it out.
				c.add(Row{Kind: KindTool, ToolCallID: fmt.Sprintf("gone%d", step), ToolName: "shell", Text: "orphan", Tokens: 3})
			case 6:
				// A result for a call made turns ago, the call still shown.
				for i := len(c.rows) - 1; i >= 0; i-- {
					if calls := c.rows[i].ToolCalls; len(calls) > 0 && i < len(c.rows)-8 {
						c.add(Row{Kind: KindTool, ToolCallID: calls[0].ID, ToolName: "shell", Text: "late", Tokens: 3})
						break
					}
				}
			default:
				change(k, r, c, &in, nil)
			}
			in.Rows = c.rows
			in.Context = []Section{{Key: "step", Text: fmt.Sprint(step / 3)}}
			got, _ := memoMatchesFresh(t, &in, memo, seed, step)
			billed(&in, got, c)
		}
		if memo.Extended() == 0 {
			t.Fatalf("seed %d: no view extended the last one", seed)
		}
	}
}

// A build that fails still leaves the memo true: a row changed under a
// build that was refused, then the same rows again, give the fresh view.
func TestMemoAfterARefusedBuild(t *testing.T) {
	c := &conv{}
	for i := range 6 {
		c.context([]Section{{Key: "n", Text: fmt.Sprint(i)}}, 0)
		c.user(fmt.Sprintf("request %d", i), 5)
		c.answer(fmt.Sprintf("answer %d", i), 20)
	}
	in := Input{Rows: c.rows, Budget: mustBudget(t, 100000, "full"), Overhead: 1000, Roster: fullRoster, Memo: &Memo{}}
	if _, err := Materialize(in); err != nil {
		t.Fatal(err)
	}
	c.rows[4].Text = "an edited answer"
	refused := in
	refused.Rows, refused.Overhead = c.rows, 10000000
	if _, err := Materialize(refused); err == nil {
		t.Fatal("the oversized build was not refused; the test no longer covers a refusal")
	}
	in.Rows = c.rows
	got, err1 := Materialize(in)
	in.Memo = nil
	want, err2 := Materialize(in)
	if err1 != nil || err2 != nil || !reflect.DeepEqual(want, got) {
		t.Fatalf("after a refused build the memo's view differs (%v, %v):\n%s", err1, err2, firstDiff(marshal(t, want), marshal(t, got)))
	}
}
