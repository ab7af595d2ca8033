package chats

import (
	"fmt"
	"testing"

	"github.com/mirror-gateway/mirror/runtime"
)

// TestSnapshotAndHistoryPagesCarryEachMarkOnce: a long chat with /clear,
// /compact and a refused command every few turns, read as the browser reads
// it (the snapshot, then chat.history pages back to the start): every mark
// row of the record comes exactly once, in record order, each placed after
// the messages stored before it and before those stored after it.
func TestSnapshotAndHistoryPagesCarryEachMarkOnce(t *testing.T) {
	e := newEnv(t, newGate(true))
	c := e.chat()
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	turns := PageMessages/2 + 20 // more messages than one page holds
	for i := 1; i <= turns; i++ {
		if _, err := e.svc.Send(bg, c.ID, fmt.Sprintf("message %d", i), fmt.Sprintf("k%d", i), "", Origin{}); err != nil {
			t.Fatal(err)
		}
		s.waitFor(t, fmt.Sprintf("turn %d", i), has(EvTurnFinished, i))
		switch i % 10 {
		case 3:
			if _, err := e.svc.Command(bg, c.ID, "/clear", Origin{}); err != nil {
				t.Fatal(err)
			}
		case 6:
			if _, err := e.svc.Command(bg, c.ID, "/compact keep it", Origin{}); err != nil {
				t.Fatal(err)
			}
		case 9:
			if _, err := e.svc.Command(bg, c.ID, "/pin", Origin{}); err == nil {
				t.Fatal("/pin without an id was not refused")
			}
		}
	}
	// What the record holds, in order: each mark row, and the row seq of
	// each transcript message.
	var want []uint64
	rowOf := map[string]uint64{} // message id -> its row
	for _, ev := range e.durable(c.ID) {
		if markRow(ev.Type) {
			want = append(want, ev.Seq)
		}
		if m, ok := transcriptMessage(ev); ok {
			rowOf[m.ID] = ev.Seq
		}
	}
	s2 := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s2, ""); err != nil {
		t.Fatal(err)
	}
	sn := firstSnapshot(t, s2)
	if !sn.More {
		t.Fatalf("one page held all %d messages", len(sn.Messages))
	}
	var got []uint64
	var diags, clears int
	check := func(msgs []Message, marks []Mark) []uint64 {
		var seqs []uint64
		for _, mk := range marks {
			if mk.At < 0 || mk.At > len(msgs) {
				t.Fatalf("mark %d at %d of %d messages", mk.Seq, mk.At, len(msgs))
			}
			if mk.At > 0 && rowOf[msgs[mk.At-1].ID] > mk.Seq {
				t.Errorf("mark %d (%s) placed after message %s of row %d", mk.Seq, mk.Type, msgs[mk.At-1].ID, rowOf[msgs[mk.At-1].ID])
			}
			if mk.At < len(msgs) && rowOf[msgs[mk.At].ID] <= mk.Seq {
				t.Errorf("mark %d (%s) placed before message %s of row %d", mk.Seq, mk.Type, msgs[mk.At].ID, rowOf[msgs[mk.At].ID])
			}
			switch mk.Type {
			case EvDiagnostic:
				diags++
				if d := pay[*Diagnosed](mk.Event).Diagnostic; d == nil || (d.Kind == runtime.DiagAttempt) == (mk.Turn() == "") {
					t.Errorf("diagnostic mark %+v", mk.Event)
				}
			case EvClear:
				clears++
			}
			seqs = append(seqs, mk.Seq)
		}
		return seqs
	}
	got = check(sn.Messages, sn.Marks)
	for before := sn.Before; before != 0; {
		h, err := e.svc.History(bg, c.ID, before, "")
		if err != nil {
			t.Fatal(err)
		}
		got = append(check(h.Messages, h.Marks), got...)
		before = h.Before
		if !h.More {
			break
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("pages carried marks\n%v\nthe record holds\n%v", got, want)
	}
	if wantDiags := turns + turns/10; diags != wantDiags || clears != turns/10 {
		t.Fatalf("%d diagnostics, %d clears; want %d and %d", diags, clears, wantDiags, turns/10)
	}
}

// TestAClearDropsTheCheckpointDivider: the snapshot's checkpoint divider
// is the checkpoint in force's, and a /clear after it drops it, as the
// view drops that checkpoint and the live page drops its divider.
func TestAClearDropsTheCheckpointDivider(t *testing.T) {
	e := newEnv(t, newGate(true))
	c := e.chat()
	err := e.svc.do(bg, c.ID, func(a *actor) error {
		a.replay(a.append(&CheckpointTaken{Through: 7, Checkpoint: []byte(`{}`)}, Origin{}))
		return a.flush()
	})
	if err != nil {
		t.Fatal(err)
	}
	through := func() uint64 {
		s := newSub()
		if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
			t.Fatal(err)
		}
		return firstSnapshot(t, s).CheckpointThrough
	}
	if got := through(); got != 7 {
		t.Fatalf("divider after %d, want 7", got)
	}
	if _, err := e.svc.Command(bg, c.ID, "/clear", Origin{}); err != nil {
		t.Fatal(err)
	}
	if got := through(); got != 0 {
		t.Fatalf("after /clear the divider is after %d, want none", got)
	}
	// The same after a restart: the rows replay to the same state.
	e.restart()
	if got := through(); got != 0 {
		t.Fatalf("after a restart the divider is after %d, want none", got)
	}
}
