package view

import (
	"fmt"
	"reflect"
	"testing"
	"unsafe"
)

// A memo changes no byte of any view: over turns that cross checkpoints,
// a /clear, a caller changing a stored row's sections in place, a row
// removed from the middle and a memo shared by two conversations, every
// view built with it equals the one built without.
func TestMemoViewEqualsFresh(t *testing.T) {
	s := newSim(t, 0)
	memo := &Memo{}
	other := newSim(t, 0)
	checkpoints := 0
	check := func(s *sim, name string) {
		t.Helper()
		in := s.in
		in.Rows, in.Checkpoint, in.Measured, in.Signals = s.c.rows, s.cp, s.meas, s.sig
		in.Context = []Section{{Key: "clock", Text: fmt.Sprintf("hour %d", s.turnNum/5)}, {Key: "cwd", Text: "/work/project"}}
		want, err1 := Materialize(in)
		in.Memo = memo
		got, err2 := Materialize(in)
		if fmt.Sprint(err1) != fmt.Sprint(err2) || !reflect.DeepEqual(want, got) {
			t.Fatalf("%s, turn %d: the view with a memo differs:\n%s", name, s.turnNum, firstDiff(marshal(t, want), marshal(t, got)))
		}
	}
	for i := range 60 {
		v := s.turn()
		if v.Checkpoint != nil {
			checkpoints++
		}
		check(s, "turn")
		switch i {
		case 20:
			s.c.add(Row{Kind: KindClear})
			check(s, "after a clear")
		case 30:
			// The caller changes the sections of a stored context row in
			// place: the memo must see it.
			for j := range s.c.rows {
				if r := &s.c.rows[j]; r.Kind == KindContext && r.Seq > seqOf(s.cp) && len(r.Sections) > 0 {
					r.Sections[0].Text += " (changed)"
					break
				}
			}
			check(s, "after an in-place change")
		case 40:
			// A context row in the middle goes: the entries after it move.
			for j := len(s.c.rows) / 2; j < len(s.c.rows); j++ {
				if s.c.rows[j].Kind == KindContext && s.c.rows[j].Seq > seqOf(s.cp) {
					s.c.rows = append(s.c.rows[:j:j], s.c.rows[j+1:]...)
					break
				}
			}
			check(s, "after a row went")
		}
		if i%3 == 0 {
			other.turn()
			check(other, "another conversation")
		}
		if i%7 == 0 {
			s.sig.Compact = true
		}
	}
	if checkpoints == 0 {
		t.Fatal("no checkpoint in 60 turns; the test no longer covers one")
	}
}

func seqOf(cp *Checkpoint) uint64 {
	if cp == nil {
		return 0
	}
	return cp.Evicted
}

// With a memo, the runtime-context messages of the last view are the very
// strings of the next (the request encoder's cache compares those in
// O(1)); without one each view renders them anew.
func TestMemoKeepsRenderedContexts(t *testing.T) {
	for _, withMemo := range []bool{false, true} {
		c := &conv{}
		in := Input{Budget: mustBudget(t, 1000000, "full"), Overhead: 2000, Roster: fullRoster}
		if withMemo {
			in.Memo = &Memo{}
		}
		var last []string
		same, total := 0, 0
		for i := range 20 {
			c.context([]Section{{Key: "time", Text: fmt.Sprintf("15:%02d", i)}, {Key: "cwd", Text: "/srv"}}, 0)
			c.user(fmt.Sprintf("request %d", i), 5)
			in.Rows = c.rows
			v, err := Materialize(in)
			if err != nil {
				t.Fatal(err)
			}
			var ctx []string
			for _, m := range v.Messages {
				if m.Role == "system" {
					ctx = append(ctx, m.Content)
				}
			}
			for j := range min(len(last), len(ctx)) {
				total++
				if ctx[j] == last[j] && unsafe.StringData(ctx[j]) == unsafe.StringData(last[j]) {
					same++
				}
			}
			last = ctx
			c.answer(fmt.Sprintf("answer %d", i), 20)
		}
		if withMemo && same != total {
			t.Fatalf("with a memo, %d of %d context messages were the last view's strings", same, total)
		}
		if !withMemo && same != 0 {
			t.Fatalf("without a memo, %d of %d context messages were the last view's strings", same, total)
		}
	}
}
