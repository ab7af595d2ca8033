package view

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
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
		moved := func() { c.rows = changed() }
		for step := range 50 {
			if r.Intn(4) == 0 {
				c.user("one row more", 3)
			} else {
				grow(r, c, 1)
			}
			switch k := r.Intn(16); k {
			default:
				if change(k, r, c, &in, moved) && k == 1 && r.Intn(2) == 0 {
					grow(r, c, 1) // rows after the clear
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
			hits, compared := memo.Extended(), memo.compared
			got, _ := memoMatchesFresh(t, &in, memo, seed, step)
			if memo.Extended() > hits {
				extended++
				if memo.compared == compared {
					unread++
				}
			}
			billed(&in, got, c)
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

// sameCheckpoint tells two checkpoints apart by each of their fields and
// each field of a card: a field added to either and not compared would
// let a memo extend a view built under another checkpoint.
func TestSameCheckpointComparesEveryField(t *testing.T) {
	base := func() *Checkpoint {
		return &Checkpoint{Cards: []Card{{Requests: []Request{{ID: "m1"}}, Files: []string{"a"}, Commands: []string{"ls"}, Errors: []string{"e"}}},
			Masked: []Cut{{Seq: 1}}, Folded: []Cut{{Seq: 2}}, Pinned: []uint64{3}, MaskedImages: []uint64{4}}
	}
	// other sets v, a field, to a value unlike the one base gives it.
	var other func(v reflect.Value)
	other = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Int:
			v.SetInt(v.Int() + 1)
		case reflect.Uint64:
			v.SetUint(v.Uint() + 1)
		case reflect.Array:
			other(v.Index(0))
		case reflect.Slice:
			if v.Len() == 0 {
				t.Fatalf("base leaves a %s empty", v.Type())
			}
			c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
			reflect.Copy(c, v)
			v.Set(c)
			if e := v.Index(0); e.Kind() == reflect.Struct {
				other(e.Field(0))
			} else {
				other(e)
			}
		default:
			t.Fatalf("a field of kind %s: teach the test to change it", v.Kind())
		}
	}
	if !sameCheckpoint(base(), base()) {
		t.Fatal("a checkpoint is not the same as its copy")
	}
	ct := reflect.TypeOf(Checkpoint{})
	for i := range ct.NumField() {
		cp := base()
		other(reflect.ValueOf(cp).Elem().Field(i))
		if sameCheckpoint(base(), cp) {
			t.Errorf("Checkpoint.%s is not compared", ct.Field(i).Name)
		}
	}
	kt := reflect.TypeOf(Card{})
	for i := range kt.NumField() {
		cp := base()
		other(reflect.ValueOf(&cp.Cards[0]).Elem().Field(i))
		if sameCheckpoint(base(), cp) {
			t.Errorf("Card.%s is not compared", kt.Field(i).Name)
		}
	}
	r := base()
	r.Cards[0].Requests[0].Label = "assignment update"
	if sameCheckpoint(base(), r) {
		t.Error("a request's label is not compared")
	}
}

// Rows pinned after a checkpoint masked them come back in the turn's
// "# Pinned messages" section, and only they: with a few pins and with
// many (looked up otherwise), with a memo and without.
func TestLatePinsOfMaskedRows(t *testing.T) {
	for _, pins := range []int{3, 11} {
		for _, memo := range []bool{false, true} {
			c := &conv{}
			var results []int
			for i := range 40 {
				c.user(fmt.Sprintf("request %d", i), 10)
				c.step("shell", fmt.Sprintf(`{"command": "cat log%d"}`, i), fmt.Sprintf("log %d", i), 1500, false)
				results = append(results, len(c.rows)-1)
				c.answer(fmt.Sprintf("answer %d", i), 10)
			}
			in := Input{Rows: c.rows, Budget: mustBudget(t, 100000, "full"), Overhead: 1000, Roster: fullRoster, Signals: Signals{Compact: true}}
			if memo {
				in.Memo, in.AppendOnly = &Memo{}, true
			}
			v, err := Materialize(in)
			if err != nil || v.Checkpoint == nil {
				t.Fatalf("no checkpoint: %v", err)
			}
			masked := map[uint64]bool{}
			for _, m := range v.Checkpoint.Masked {
				masked[m.Seq] = true
			}
			in.Checkpoint, in.Signals = v.Checkpoint, Signals{}
			c.rows = slices.Clone(c.rows) // pinned in a new array, as a chat does
			var want []string
			whole := false
			for _, i := range results {
				r := &c.rows[i]
				if r.Seq <= v.Checkpoint.Evicted {
					continue
				}
				if masked[r.Seq] && len(want) < pins {
					r.Pinned = true
					want = append(want, pinHeading(r))
				} else if !masked[r.Seq] && !whole {
					r.Pinned, whole = true, true // shown whole: not a late pin
				}
			}
			if len(want) < pins {
				t.Fatalf("only %d masked results to pin; the test no longer covers %d", len(want), pins)
			}
			c.user("and now?", 5)
			in.Rows, in.Context = c.rows, []Section{{Key: "cwd", Text: "/"}}
			v, err = Materialize(in)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range v.Context {
				if s.Key == PinsKey {
					for _, line := range strings.Split(s.Text, "\n") {
						if strings.HasPrefix(line, "## ") {
							got = append(got, line)
						}
					}
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%d pins, memo %v: late pins %q, want %q", pins, memo, got, want)
			}
		}
	}
}
