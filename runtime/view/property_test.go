package view

import (
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// randomConv builds a random conversation: turns of a user message, some
// tool steps (several calls per step sometimes), steers, wakes, pins, long
// and short answers, context rows.
func randomConv(r *rand.Rand, turns int) *conv { return grow(r, &conv{}, turns) }

func grow(r *rand.Rand, c *conv, turns int) *conv {
	for t := 0; t < turns; t++ {
		u := c.user(fmt.Sprintf("user %d %s", t, strings.Repeat("w", r.Intn(50))), 10+r.Intn(3000))
		u.Pinned = r.Intn(15) == 0
		if r.Intn(10) == 0 {
			u.Origin = OriginWake
		}
		if r.Intn(4) == 0 {
			c.context([]Section{{"k", fmt.Sprint(t)}}, 0)
		}
		for s := r.Intn(4); s > 0; s-- {
			n := 1 + r.Intn(3)
			var calls []provider.ToolCall
			for k := 0; k < n; k++ {
				c.call++
				calls = append(calls, provider.ToolCall{ID: fmt.Sprintf("c%d", c.call), Name: "shell", Arguments: `{"command":"ls"}`})
			}
			c.add(Row{Kind: KindAssistant, ToolCalls: calls, Tokens: 15})
			for _, call := range calls {
				tr := c.add(Row{Kind: KindTool, ToolCallID: call.ID, ToolName: "shell", Text: "out " + call.ID, Tokens: 10 + r.Intn(6000), IsError: r.Intn(8) == 0})
				tr.Pinned = r.Intn(40) == 0
			}
			if r.Intn(6) == 0 {
				st := c.add(Row{Kind: KindUser, Text: "steer", Tokens: 5, Origin: OriginAmendment})
				st.Turn = fmt.Sprintf("t%d", c.turn)
			}
		}
		if r.Intn(3) == 0 {
			a := c.answer(strings.Repeat("long answer text ", 250+r.Intn(200)), 0)
			a.Tokens = 800 + r.Intn(1500)
			a.Pinned = r.Intn(20) == 0
		} else {
			c.answer(fmt.Sprintf("short %d", t), 20)
		}
	}
	return c
}

// Planner properties over hundreds of random conversations and two
// checkpoints each: the target is reached when it can be; a tool call and
// its result stay together; pinned messages stay whole; an eviction is
// never undone; the protected tail is intact.
func TestPlannerProperties(t *testing.T) {
	count := func(s string) int { return (len(s) + 3) / 4 } // fast and deterministic; the planner takes any counter
	r := rand.New(rand.NewSource(6))
	runs := 300
	if testing.Short() {
		runs = 60
	}
	evictions := 0
	for run := 0; run < runs; run++ {
		c := randomConv(r, 10+r.Intn(60))
		window := []int{0, 200000, 64000}[r.Intn(3)]
		in := Input{Budget: mustBudget(t, window, "auto"), Overhead: 500 + r.Intn(3000), Roster: fullRoster, Count: count}
		var prev *Checkpoint
		for round := 0; round < 2; round++ {
			if round == 1 {
				grow(r, c, 5+r.Intn(30))
			}
			in.Rows, in.Checkpoint, in.Signals = c.rows, prev, Signals{Compact: true}
			v, err := Materialize(in)
			name := fmt.Sprintf("run %d round %d", run, round)
			if err != nil {
				if _, ok := err.(*BudgetError); ok {
					break // a random pinned or active turn can be too big: a correct refusal
				}
				t.Fatalf("%s: %v", name, err)
			}
			cp := v.Checkpoint
			checkPairs(t, name, v.Messages)
			if cp == nil {
				if prev == nil {
					continue
				}
				cp = prev
			}
			checkPins(t, name, c.rows, cp, v.Messages)
			if prev != nil {
				if cp.Evicted < prev.Evicted || len(cp.Cards) < len(prev.Cards) {
					t.Fatalf("%s: eviction undone: %d < %d", name, cp.Evicted, prev.Evicted)
				}
				for i := range prev.Cards {
					if cp.Cards[i].From != prev.Cards[i].From || cp.Cards[i].To != prev.Cards[i].To {
						t.Fatalf("%s: card %d changed", name, i)
					}
				}
			}
			checkTail(t, name, c.rows, in, v.Messages)
			if v.Checkpoint != nil && cp.After > cp.Target && cuttable(c.rows, cp, in) {
				t.Fatalf("%s: after %d > target %d while a turn could still be evicted (evicted m%d)", name, cp.After, cp.Target, cp.Evicted)
			}
			if cp.Evicted > 0 {
				evictions++
			}
			prev = cp
		}
	}
	if evictions < runs/4 {
		t.Errorf("only %d rounds of %d runs evicted: the random histories no longer exercise eviction", evictions, runs)
	}
}

// checkPairs: every tool message follows the assistant message that asked
// for it, and every call asked for in the view has its result in the view.
func checkPairs(t *testing.T, name string, ms []provider.Message) {
	t.Helper()
	asked := map[string]bool{}
	answered := map[string]bool{}
	for i, m := range ms {
		for _, c := range m.ToolCalls {
			asked[c.ID] = true
		}
		if m.Role == provider.RoleTool {
			if !asked[m.ToolCallID] {
				t.Fatalf("%s: message %d answers %s, which the view does not ask for", name, i, m.ToolCallID)
			}
			answered[m.ToolCallID] = true
		}
	}
	for id := range asked {
		if !answered[id] {
			t.Fatalf("%s: call %s lost its result", name, id)
		}
	}
}

// checkPins: every pinned row's text is in the view whole.
func checkPins(t *testing.T, name string, rows []Row, cp *Checkpoint, ms []provider.Message) {
	t.Helper()
	var all strings.Builder
	for _, m := range ms {
		all.WriteString(m.Content)
		all.WriteString("\x00")
	}
	s := all.String()
	for _, r := range rows {
		if r.Pinned && r.Text != "" && !strings.Contains(s, r.Text) {
			t.Fatalf("%s: pinned m%d is not whole in the view (evicted m%d)", name, r.Seq, cp.Evicted)
		}
	}
}

// checkTail: the protected tail (up to 8 messages within the tail tokens)
// comes out exactly as stored.
func checkTail(t *testing.T, name string, rows []Row, in Input, ms []provider.Message) {
	t.Helper()
	n, toks := 0, 0
	j := len(ms) - 1
	for i := len(rows) - 1; i >= 0 && j >= 0; i-- {
		r := rows[i]
		if r.Kind == KindContext {
			// Rendered, not stored text: it counts as a message when sent.
			if strings.HasPrefix(ms[j].Content, "<runtime-context") {
				ct := (len(ms[j].Content) + 3) / 4
				if n == 8 || toks+ct > in.Budget.TailTokens {
					return
				}
				n++
				toks += ct
				j--
			}
			continue
		}
		if n == 8 || toks+r.Tokens > in.Budget.TailTokens {
			return
		}
		if ms[j].Content != r.Text {
			t.Fatalf("%s: tail row m%d changed: %q", name, r.Seq, ms[j].Content[:min(60, len(ms[j].Content))])
		}
		n++
		toks += r.Tokens
		j--
	}
}

// cuttable reports whether a user row after the evicted range, before the
// tail and the active turn, could start the view with no open call across.
func cuttable(rows []Row, cp *Checkpoint, in Input) bool {
	var kept []Row
	for _, r := range rows {
		if r.Seq > cp.Evicted && r.Kind != KindContext {
			kept = append(kept, r)
		}
	}
	// The tail, counted as checkTail does, and the active turn.
	limit, n, toks := len(kept), 0, 0
	for i := len(kept) - 1; i >= 0; i-- {
		if n == 8 || toks+kept[i].Tokens > in.Budget.TailTokens {
			break
		}
		n++
		toks += kept[i].Tokens
		limit = i
	}
	lastTurn := ""
	for i := len(kept) - 1; i >= 0; i-- {
		if kept[i].Kind == KindUser {
			lastTurn = kept[i].Turn
			break
		}
	}
	open := map[string]bool{}
	for i := 0; i < limit; i++ {
		r := kept[i]
		if i > 0 && r.Kind == KindUser && len(open) == 0 && r.Turn != lastTurn {
			return true
		}
		for _, c := range r.ToolCalls {
			open[c.ID] = true
		}
		if r.Kind == KindTool {
			delete(open, r.ToolCallID)
		}
	}
	return false
}

// change makes the random histories' common change k to c or in (0: a
// compaction asked for, 1: a clear, 2: a row pinned, 3: a row edited,
// 4: a user row deleted) and says whether k is one of them. inPlace, when
// not nil, is called before a row is changed in place: a chat hands such
// a change in a new array.
func change(k int, r *rand.Rand, c *conv, in *Input, inPlace func()) bool {
	if inPlace == nil {
		inPlace = func() {}
	}
	switch k {
	case 0:
		in.Signals.Compact = true
	case 1:
		c.add(Row{Kind: KindClear})
	case 2:
		inPlace()
		c.rows[r.Intn(len(c.rows))].Pinned = true
	case 3:
		inPlace()
		if i := r.Intn(len(c.rows)); c.rows[i].Kind == KindAssistant || c.rows[i].Kind == KindUser {
			c.rows[i].Text += " (edited)"
		}
	case 4:
		if i := r.Intn(len(c.rows)); c.rows[i].Kind == KindUser {
			c.rows = append(c.rows[:i:i], c.rows[i+1:]...)
		}
	default:
		return false
	}
	return true
}

// memoMatchesFresh builds in's view without a memo and with memo, fails
// the test when they differ, and returns the memo's.
func memoMatchesFresh(t *testing.T, in *Input, memo *Memo, seed, step int) (View, error) {
	t.Helper()
	in.Memo = nil
	want, err1 := Materialize(*in)
	in.Memo = memo
	got, err2 := Materialize(*in)
	if fmt.Sprint(err1) != fmt.Sprint(err2) || !reflect.DeepEqual(want, got) {
		t.Fatalf("seed %d, step %d: the view with a memo differs:\n%s", seed, step, firstDiff(marshal(t, want), marshal(t, got)))
	}
	return got, err2
}

// billed readies in for the next turn after view v: its checkpoint kept,
// what the provider billed for it measured (a little over the estimate,
// so later turns may take a checkpoint for it), no signal left.
func billed(in *Input, v View, c *conv) {
	if v.Checkpoint != nil {
		in.Checkpoint = v.Checkpoint
	}
	in.Measured = Measurement{Tokens: v.Size + v.Size/20, Epoch: v.Epoch, Seq: c.rows[len(c.rows)-1].Seq, Basis: in.Basis}
	in.Signals = Signals{}
}
