package view

import (
	"fmt"
	"math/rand"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
)

// Over random conversations with a lead (as the runtime builds them),
// where the holder of each view appends to its messages in their capacity
// as a turn does, and histories change under the memo (checkpoints,
// clears, pins, edits and deletions in place, results that bring an image
// back, another lead), a view built with the memo is the view built
// without one, and the last view is still what it was after the next one
// is built.
func TestMemoMessagesRandomHistories(t *testing.T) {
	count := func(s string) int { return (len(s) + 3) / 4 }
	img := providertest.NewPart(provider.PartImage, "image/png", "a.png", providertest.PNG(8, 6))
	leads := [][]provider.Message{
		{{Role: provider.RoleSystem, Content: "the prompt", Tokens: 3}},
		{{Role: provider.RoleSystem, Content: "another prompt", Tokens: 3}},
		{},
		nil,
	}
	shared, extended := 0, 0
	for seed := range 40 {
		r := rand.New(rand.NewSource(int64(seed)))
		c := &conv{}
		in := Input{Budget: mustBudget(t, 60000, "full"), Overhead: 1500, Roster: fullRoster, Count: count, Provider: "openai",
			Lead: leads[0]}
		memo := &Memo{}
		var last, before View
		var lastReq, lastMsgs []provider.Message
		for step := range 50 {
			if r.Intn(4) == 0 {
				c.user("one row more", 3) // a view one message longer
			} else {
				grow(r, c, 1)
			}
			switch k := r.Intn(16); k {
			default:
				change(k, r, c, &in, nil)
			case 5:
				// A result that brought an image back: its parts go in a
				// message of their own.
				c.call++
				id := fmt.Sprintf("img%d", c.call)
				c.add(Row{Kind: KindAssistant, ToolCalls: []provider.ToolCall{{ID: id, Name: "read_file", Arguments: `{}`}}, Tokens: 5})
				c.add(Row{Kind: KindTool, ToolCallID: id, ToolName: "read_file", Text: "an image", Tokens: 3, Parts: []provider.Part{img}})
			case 6:
				in.Lead = leads[r.Intn(len(leads))]
			case 7:
				// The same lead in another array.
				in.Lead = slices.Clone(in.Lead)
			}
			in.Rows = c.rows
			in.Context = []Section{{Key: "step", Text: fmt.Sprint(step / 3)}}
			if r.Intn(5) == 0 {
				in.Context = nil // no runtime context this turn
			}
			hits := memo.Extended()
			got, err2 := memoMatchesFresh(t, &in, memo, seed, step)
			if (got.Request == nil) != (in.Lead == nil) || len(got.Messages) > 0 && in.Lead != nil && &got.Request[len(in.Lead)] != &got.Messages[0] {
				t.Fatalf("seed %d, step %d: Messages is not Request's tail", seed, step)
			}
			if !reflect.DeepEqual(last.Request, lastReq) || !reflect.DeepEqual(last.Messages, lastMsgs) {
				t.Fatalf("seed %d, step %d: the next build changed the last view", seed, step)
			}
			if memo.Extended() > hits {
				extended++
				if len(got.Messages) > 0 && arrayOf(before.Messages) == arrayOf(got.Messages) {
					shared++ // the array of the view before the last, written again
				}
			}
			if err2 == nil {
				// The view's holder appends the turn's steps in its
				// capacity, as a turn does.
				scribbled := got.Messages
				for k := r.Intn(3); k > 0; k-- {
					scribbled = append(scribbled, provider.Message{Role: provider.RoleAssistant, Content: fmt.Sprintf("scribble %d", k)})
				}
				before, last = last, got
				lastReq, lastMsgs = slices.Clone(got.Request), slices.Clone(got.Messages)
			} else {
				got.Checkpoint = nil // a refused build's checkpoint is not kept
			}
			billed(&in, got, c)
		}
	}
	if extended < 200 || shared < 100 {
		t.Fatalf("%d views extended the last, %d in a reused array: the test no longer covers them", extended, shared)
	}
}

// arrayOf is the address of a slice's first element, nil when it has
// none: whether two views share their array.
func arrayOf(ms []provider.Message) *provider.Message {
	if len(ms) == 0 {
		return nil
	}
	return &ms[0]
}

// A turn's view through a memo: the turn appends its steps to the view's
// messages in their capacity and stores them as rows, the next view
// extends it; each is the fresh view, and the view before is unchanged
// while the next is built.
func TestMemoMessagesAfterATurnAppended(t *testing.T) {
	lead := []provider.Message{{Role: provider.RoleSystem, Content: "the prompt", Tokens: 3}}
	c := &conv{}
	in := Input{Budget: mustBudget(t, 100000, "full"), Overhead: 1000, Roster: fullRoster, Lead: lead, Memo: &Memo{}}
	var prev []provider.Message
	var prevView View
	for i := range 12 {
		c.context([]Section{{Key: "n", Text: fmt.Sprint(i)}}, 0)
		c.user(fmt.Sprintf("request %d", i), 5)
		in.Rows, in.Context = c.rows, []Section{{Key: "time", Text: fmt.Sprint(i)}}
		got, err := Materialize(in)
		if err != nil {
			t.Fatal(err)
		}
		fresh := in
		fresh.Memo = nil
		want, _ := Materialize(fresh)
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("turn %d: the view with a memo differs:\n%s", i, firstDiff(marshal(t, want), marshal(t, got)))
		}
		if prev != nil && !reflect.DeepEqual(prev, prevView.Request) {
			t.Fatalf("turn %d: building it changed the last view", i)
		}
		// The turn: a step and its result, then the answer, appended to
		// the view and stored.
		conv := got.Messages
		c.step("shell", fmt.Sprintf(`{"command": "make t%d"}`, i), "built", 4, false)
		for _, r := range c.rows[len(c.rows)-2:] {
			conv = append(conv, provider.Message{Role: provider.RoleAssistant, Content: r.Text, ToolCalls: r.ToolCalls, Seq: r.Seq})
		}
		c.answer(fmt.Sprintf("answer %d", i), 20)
		conv = append(conv, provider.Message{Role: provider.RoleAssistant, Content: "answer"})
		if &conv[0] != &got.Messages[0] {
			t.Fatalf("turn %d: the turn's steps did not fit after the view (capacity %d of %d)", i, cap(got.Messages), len(got.Messages))
		}
		prev, prevView = slices.Clone(got.Request), got
	}
	if in.Memo.Extended() < 10 {
		t.Fatalf("%d of 11 views extended the last", in.Memo.Extended())
	}
}

// Extending a view costs what was appended, not the history: the bytes a
// build allocates when a turn more is appended are about the same for a
// chat of 300 rows and one of 3,000.
func TestMemoExtensionAllocatesTheNewRows(t *testing.T) {
	perBuild := func(turns int) uint64 {
		c := &conv{}
		add := func(i int) {
			c.context([]Section{{Key: "time", Text: fmt.Sprintf("15:%02d", i%60)}, {Key: "cwd", Text: "/srv"}}, 12)
			c.user(fmt.Sprintf("request %d", i), 5)
			c.answer(fmt.Sprintf("answer %d", i), 20)
		}
		for i := range turns {
			add(i)
		}
		in := Input{Budget: mustBudget(t, 1000000, "full"), Overhead: 2000, Roster: fullRoster, Memo: &Memo{},
			Lead: []provider.Message{{Role: provider.RoleSystem, Content: "the prompt"}}}
		var ms runtime.MemStats
		var bytes []uint64
		for i := range 25 {
			add(turns + i)
			in.Rows, in.Context = c.rows, []Section{{Key: "time", Text: "now"}}
			runtime.ReadMemStats(&ms)
			before := ms.TotalAlloc
			if _, err := Materialize(in); err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&ms)
			if i > 0 { // the first builds afresh
				bytes = append(bytes, ms.TotalAlloc-before)
			}
		}
		if in.Memo.Extended() != 24 {
			t.Fatalf("%d of 24 builds extended the last", in.Memo.Extended())
		}
		// The median: an array that grows now and then (doubling) is
		// paid for over the builds after it.
		sort.Slice(bytes, func(i, j int) bool { return bytes[i] < bytes[j] })
		return bytes[len(bytes)/2]
	}
	short, long := perBuild(100), perBuild(1000)
	if long > short*3/2+1024 {
		t.Fatalf("a build of a chat of 1,000 turns allocates %d bytes, of 100 turns %d: it grows with the history", long, short)
	}
}

// A memo's kept entries and history point at its own rows where they are
// now, after its rows moved to larger arrays turn after turn: an older
// array is let go, not held by the entries.
func TestMemoEntriesFollowItsRows(t *testing.T) {
	c := &conv{}
	in := Input{Budget: mustBudget(t, 1000000, "full"), Overhead: 1000, Roster: fullRoster, Memo: &Memo{}}
	moved := 0
	var base *Row
	for i := range 200 {
		c.context([]Section{{Key: "n", Text: fmt.Sprint(i)}}, 0)
		c.user(fmt.Sprintf("request %d", i), 5)
		c.answer(fmt.Sprintf("answer %d", i), 20)
		in.Rows = c.rows
		if _, err := Materialize(in); err != nil {
			t.Fatal(err)
		}
		m := in.Memo
		if &m.rows[0] != base {
			base = &m.rows[0]
			moved++
		}
		s := m.last
		for j, r := range s.vis[:s.nvis] {
			if r != &m.rows[s.visAt[j]] {
				t.Fatalf("turn %d: history row %d is not the memo's row %d", i, j, s.visAt[j])
			}
		}
		for j := range s.entries {
			if e := &s.entries[j]; e.row != nil && e.row != &m.rows[e.at] {
				t.Fatalf("turn %d: entry %d is not at the memo's row %d", i, j, e.at)
			}
		}
	}
	if moved < 5 || in.Memo.Extended() < 190 {
		t.Fatalf("the memo's rows moved %d times, %d views extended: the test no longer covers a move", moved, in.Memo.Extended())
	}
}
