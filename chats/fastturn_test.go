package chats

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/runtime/ids"
)

// TestMessageStartingATurnIsAcknowledgedAfterOneCommit (issue 20, item 5):
// a message that starts a turn at once is acknowledged after the commit
// that stores it, and a turn that ends within PickupDelay goes in that same
// commit: one synced commit for the lone turn, events in seq order with
// the acknowledgement first, nothing shown before it is durable. A slower
// turn is acknowledged when PickupDelay is up, without waiting for its end.
func TestMessageStartingATurnIsAcknowledgedAfterOneCommit(t *testing.T) {
	for _, tc := range []struct {
		name string
		open bool // the model answers at once
		// commits is how many the turn makes in all; atAck says the
		// turn had finished when Send returned.
		commits int64
		atAck   bool
	}{
		{name: "fast turn", open: true, commits: 1, atAck: true},
		{name: "slow turn", open: false, commits: 2, atAck: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGate(tc.open)
			e := newEnv(t, g)
			if tc.open {
				// However slow the machine, the end comes first.
				e.svc.opt.PickupDelay = wait
			}
			c := e.chat()
			s := newSub()
			if err := e.svc.Open(bg, c.ID, nil, s, "r1"); err != nil {
				t.Fatal(err)
			}
			var commits atomic.Int64
			e.store.commitHook = func() error { commits.Add(1); return nil }
			m, err := e.svc.Send(bg, c.ID, "hello", "k1", "", Origin{Sub: s, Req: "r2"})
			if err != nil {
				t.Fatal(err)
			}
			// Acknowledged: durable, and the acknowledgement was the
			// first event the asker got.
			stored := e.durable(c.ID)
			if count(stored, EvMessageAccepted) != 1 || m.ID != ids.Message(2) || m.State != MsgPending {
				t.Fatalf("acknowledged %+v with %s stored", m, typesOf(stored))
			}
			seen := s.events()
			if len(seen) == 0 || seen[0].Type != EvMessageAccepted || s.req(0) != "r2" {
				t.Fatalf("the asker saw %s before its acknowledgement", typesOf(seen))
			}
			if got := count(seen, EvTurnFinished) == 1; got != tc.atAck {
				t.Fatalf("turn finished at the acknowledgement: %v, want %v (%s)", got, tc.atAck, typesOf(seen))
			}
			if !tc.open {
				if n := commits.Load(); n != 1 {
					t.Fatalf("%d commits before the slow turn's end, want 1", n)
				}
				s.waitFor(t, "the slow turn's text", has(EvReplyDelta, 1))
				g.release <- struct{}{}
			}
			evs := s.waitFor(t, "turn.finished", has(EvTurnFinished, 1))
			var last uint64
			for _, ev := range evs {
				if ev.Type == EvReplyDelta {
					if ev.Seq < 4 {
						t.Fatalf("text shown before the turn's start was durable: %s", typesOf(evs))
					}
					continue
				}
				if ev.Seq <= last {
					t.Fatalf("seq %d after %d: %s", ev.Seq, last, typesOf(evs))
				}
				last = ev.Seq
			}
			if n := commits.Load(); n != tc.commits {
				t.Fatalf("the turn made %d commits, want %d", n, tc.commits)
			}
			if stored := e.durable(c.ID); stored[len(stored)-1].Type != EvTurnFinished || count(stored, EvTurnFinished) != 1 {
				t.Fatalf("stored %s", typesOf(stored))
			}
		})
	}
}

// TestAcknowledgementWaitingForItsCommit: while a message's acknowledgement
// waits for its commit (PickupDelay long, the model slow), whatever asks
// about it is answered as if it had been committed at once: a repeated
// client_id gets the same message (not a second one), an edit finds it
// picked up (in_use), and the waiting Send is answered by that commit.
func TestAcknowledgementWaitingForItsCommit(t *testing.T) {
	for _, op := range []string{"repeat", "edit", "delete"} {
		t.Run(op, func(t *testing.T) {
			g := newGate(false)
			e := newEnv(t, g)
			e.svc.opt.PickupDelay = time.Hour // only the second request commits
			c := e.chat()
			type answer struct {
				m   Message
				err error
			}
			first := make(chan answer, 1)
			asker := newSub()
			go func() {
				m, err := e.svc.Send(bg, c.ID, "hello", "k1", "", Origin{Sub: asker, Req: "r1"})
				first <- answer{m, err}
			}()
			recvStarted(t, g) // picked up, asked, not committed
			if n := len(e.durable(c.ID)); n != 1 {
				t.Fatalf("stored %d events before anything was acknowledged, want chat.created only", n)
			}
			id := ids.Message(2)
			switch op {
			case "repeat":
				m, err := e.svc.Send(bg, c.ID, "hello", "k1", "", Origin{Sub: newSub(), Req: "r2"})
				if err != nil || m.ID != id {
					t.Fatalf("repeat answered %+v, %v; want %s", m, err, id)
				}
			case "edit":
				if _, err := e.svc.Edit(bg, c.ID, id, "changed", Origin{}); !errors.Is(err, ErrInUse) {
					t.Fatalf("edit: %v, want in_use", err)
				}
			case "delete":
				if err := e.svc.Delete(bg, c.ID, id, Origin{}); !errors.Is(err, ErrInUse) {
					t.Fatalf("delete: %v, want in_use", err)
				}
			}
			select {
			case a := <-first:
				if a.err != nil || a.m.ID != id {
					t.Fatalf("first send answered %+v, %v", a.m, a.err)
				}
			case <-time.After(wait):
				t.Fatal("the first send was not answered by the commit the second request made")
			}
			g.release <- struct{}{}
			s := newSub()
			var zero uint64
			if err := e.svc.Open(bg, c.ID, &zero, s, ""); err != nil {
				t.Fatal(err)
			}
			s.waitFor(t, "turn.finished", has(EvTurnFinished, 1))
			stored := e.durable(c.ID)
			if count(stored, EvMessageAccepted) != 1 || count(stored, EvMessageUpdated)+count(stored, EvMessageDeleted) != 0 {
				t.Fatalf("stored %s", typesOf(stored))
			}
		})
	}
}
