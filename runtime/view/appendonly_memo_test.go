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

// Over random conversations handed AppendOnly, as a chat hands them (rows
// appended in the same array while it has room, every change in place
// made in a new array: an edit, a pin, a deletion, a transcript), with
// checkpoints, clears and measured turns, a view built with the memo is
// the view built without one; and a view that extends the last one
// compares no row it read before.
func TestMemoAppendOnlyRandomHistories(t *testing.T) {
	count := func(s string) int { return (len(s) + 3) / 4 }
	voice := providertest.NewPart(provider.PartAudio, "audio/ogg", "v.ogg", []byte("OggS voice"))
	extended, unread := 0, 0
	for seed := range 40 {
		r := rand.New(rand.NewSource(int64(seed)))
		c := &conv{}
		in := Input{Budget: mustBudget(t, 60000, "full"), Overhead: 1500, Roster: fullRoster, Count: count, Provider: "openai",
			Lead: []provider.Message{{Role: provider.RoleSystem, Content: "the prompt"}}, AppendOnly: true}
		memo := &Memo{}
		// changed is c.rows in a new array, for a change in place.
		changed := func() []Row { return append(make([]Row, 0, len(c.rows)+r.Intn(40)), c.rows...) }
		for step := range 50 {
			if r.Intn(4) == 0 {
				c.user("one row more", 3)
			} else {
				grow(r, c, 1)
			}
			switch r.Intn(16) {
			case 0:
				in.Signals.Compact = true
			case 1:
				c.add(Row{Kind: KindClear})
				if r.Intn(2) == 0 {
					grow(r, c, 1)
				}
			case 2:
				c.rows = changed()
				c.rows[r.Intn(len(c.rows))].Pinned = true
			case 3:
				c.rows = changed()
				if i := r.Intn(len(c.rows)); c.rows[i].Kind == KindAssistant || c.rows[i].Kind == KindUser {
					c.rows[i].Text += " (edited)"
				}
			case 4:
				if i := r.Intn(len(c.rows)); c.rows[i].Kind == KindUser {
					c.rows = append(c.rows[:i:i], c.rows[i+1:]...)
				}
			case 5:
				// A voice note, then its transcript in a new array.
				c.add(Row{Kind: KindUser, Parts: []provider.Part{voice}, Tokens: 2})
				c.rows = changed()
				last := &c.rows[len(c.rows)-1]
				last.Parts = slices.Clone(last.Parts)
				last.Parts[0].Transcript = "hello"
			}
			in.Rows = c.rows[:len(c.rows):len(c.rows)]
			if r.Intn(3) == 0 {
				in.Rows = c.rows // with its room: the caller appends there later
			}
			in.Context = []Section{{Key: "step", Text: fmt.Sprint(step / 3)}}
			in.Memo = nil
			want, err1 := Materialize(in)
			in.Memo = memo
			hits, compared := memo.Extended(), memo.compared
			got, err2 := Materialize(in)
			if fmt.Sprint(err1) != fmt.Sprint(err2) || !reflect.DeepEqual(want, got) {
				t.Fatalf("seed %d, step %d: the view with a memo differs:\n%s", seed, step, firstDiff(marshal(t, want), marshal(t, got)))
			}
			if memo.Extended() > hits {
				extended++
				if memo.compared == compared {
					unread++
				}
			}
			if got.Checkpoint != nil {
				in.Checkpoint = got.Checkpoint
			}
			in.Measured = Measurement{Tokens: got.Size + got.Size/20, Epoch: got.Epoch, Seq: c.rows[len(c.rows)-1].Seq, Basis: in.Basis}
			in.Signals = Signals{}
		}
	}
	if extended < 300 || unread < extended/2 {
		t.Fatalf("%d views extended the last, %d without comparing a row: the test no longer covers them", extended, unread)
	}
}

// The latest clear is found where a fresh scan finds it when the rows are
// handed AppendOnly and the memo reads only the rows after its last scan:
// a clear among them, one before them, one at or before the evicted seq
// (the checkpoint's floor, which the scan stops at), none at all.
func TestMemoScanClearAppendOnly(t *testing.T) {
	turn := func(c *conv) {
		c.user("request", 3000)
		c.answer("answer", 3000)
	}
	clear := func(c *conv) { c.add(Row{Kind: KindClear}) }
	for _, tc := range []struct {
		name  string
		steps []func(c *conv)
	}{
		{"no clear", []func(*conv){turn, turn, turn}},
		{"a clear among the new rows", []func(*conv){turn, func(c *conv) { clear(c); turn(c) }, turn}},
		{"a clear before the new rows", []func(*conv){func(c *conv) { turn(c); clear(c) }, turn, turn, turn}},
		{"two clears", []func(*conv){func(c *conv) { turn(c); clear(c) }, turn, func(c *conv) { clear(c) }, turn}},
	} {
		for _, compact := range []bool{false, true} {
			c := &conv{}
			for i := range 12 {
				turn(c)
				if i == 2 {
					clear(c) // at or before the evicted seq, once checkpointed
				}
			}
			in := Input{Budget: mustBudget(t, 64000, "full"), Overhead: 1000, Roster: fullRoster, AppendOnly: true, Memo: &Memo{}}
			if compact {
				// A checkpoint first: the scan stops at its evicted seq.
				in.Rows, in.Signals = c.rows, Signals{Compact: true}
				v, err := Materialize(in)
				if err != nil || v.Checkpoint == nil || v.Checkpoint.Evicted <= c.rows[6].Seq {
					t.Fatalf("no checkpoint past the first clear (%v); the test no longer covers the floor", err)
				}
				in.Checkpoint, in.Signals = v.Checkpoint, Signals{}
			}
			for i, s := range tc.steps {
				s(c)
				in.Rows = c.rows
				got, err1 := Materialize(in)
				fresh := in
				fresh.Memo = nil
				want, err2 := Materialize(fresh)
				if fmt.Sprint(err1) != fmt.Sprint(err2) || !reflect.DeepEqual(want, got) {
					t.Fatalf("%s (checkpoint %v), step %d: the view with a memo differs:\n%s", tc.name, compact, i, firstDiff(marshal(t, want), marshal(t, got)))
				}
			}
		}
	}
}
