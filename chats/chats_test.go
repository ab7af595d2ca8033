package chats

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

var bg = context.Background()

func TestTurnAnswersAndRecordsInOrder(t *testing.T) {
	e := newEnv(t, newGate(true))
	c := e.chat()
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, "r1"); err != nil {
		t.Fatal(err)
	}
	m, err := e.svc.Send(bg, c.ID, "hello", "k1", "", Origin{Sub: s, Req: "r2"})
	if err != nil {
		t.Fatal(err)
	}
	if m.State != MsgPending || m.Text != "hello" || m.Tokens == 0 {
		t.Fatalf("accepted message = %+v", m)
	}
	evs := s.waitFor(t, "turn.finished", has(EvTurnFinished, 1))
	var last uint64
	var types []string
	for _, ev := range evs {
		if ev.Type == EvReplyDelta {
			continue
		}
		if ev.Seq <= last {
			t.Fatalf("seq not increasing: %d after %d", ev.Seq, last)
		}
		last = ev.Seq
		types = append(types, ev.Type)
	}
	// The one model attempt leaves its diagnostic, committed with the
	// pickup, before the answer.
	want := []string{EvMessageAccepted, EvMessagePicked, EvTurnStarted, EvContext, EvRuntimeContext, EvDiagnostic, EvTurnFinished}
	if fmt.Sprint(types) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", types, want)
	}
	if s.req(0) != "r2" {
		t.Fatalf("requester's copy lacks req: %+v", evs[0])
	}
	fin := evs[len(evs)-1]
	if p := pay[*TurnFinished](fin); p.Reply != "partial answer to hello" || p.Message.Tokens == 0 || p.Usage.InputTokens != 10 {
		t.Fatalf("finished = %+v", fin)
	}
	// Everything shown was stored, in the same order.
	stored := e.durable(c.ID)
	if len(stored) != 8 || stored[7].Type != EvTurnFinished {
		t.Fatalf("stored %s", typesOf(stored))
	}
}

func TestTwoChatsStreamAtOnce(t *testing.T) {
	g := newGate(false)
	e := newEnv(t, g)
	a, b := e.chat(), e.chat()
	sa, sb := newSub(), newSub()
	for _, x := range []struct {
		c Chat
		s *sub
	}{{a, sa}, {b, sb}} {
		if err := e.svc.Open(bg, x.c.ID, nil, x.s, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Send(bg, x.c.ID, "hi "+x.c.ID, "k", "", Origin{}); err != nil {
			t.Fatal(err)
		}
	}
	// Both turns are streaming before either is let go.
	recvStarted(t, g)
	recvStarted(t, g)
	sa.waitFor(t, "a streaming", has(EvReplyDelta, 1))
	sb.waitFor(t, "b streaming", has(EvReplyDelta, 1))
	for _, c := range []Chat{a, b} {
		got, err := e.svc.Get(bg, c.ID)
		if err != nil || got.State != StateRunning {
			t.Fatalf("chat %s state %q, %v", c.ID, got.State, err)
		}
	}
	g.release <- struct{}{}
	g.release <- struct{}{}
	sa.waitFor(t, "a finished", has(EvTurnFinished, 1))
	sb.waitFor(t, "b finished", has(EvTurnFinished, 1))
}

// TestEditDeleteVersusPickup races an edit or a delete of a queued message
// against the end of the running turn, which picks the message up. Whatever
// wins, the answer and the record agree.
func TestEditDeleteVersusPickup(t *testing.T) {
	for _, op := range []string{"edit", "delete"} {
		t.Run(op, func(t *testing.T) {
			g := newGate(false)
			e := newEnv(t, g)
			for i := range 40 {
				c := e.chat()
				if _, err := e.svc.Send(bg, c.ID, "first", "k1", "", Origin{}); err != nil {
					t.Fatal(err)
				}
				recvStarted(t, g)
				q, err := e.svc.Send(bg, c.ID, "queued", "k2", "", Origin{})
				if err != nil {
					t.Fatal(err)
				}
				var wg sync.WaitGroup
				var opErr error
				wg.Add(2)
				go func() { defer wg.Done(); g.release <- struct{}{} }()
				go func() {
					defer wg.Done()
					if op == "edit" {
						_, opErr = e.svc.Edit(bg, c.ID, q.ID, "edited", Origin{})
					} else {
						opErr = e.svc.Delete(bg, c.ID, q.ID, Origin{})
					}
				}()
				wg.Wait()
				won := opErr == nil
				if !won && !errors.Is(opErr, ErrInUse) {
					t.Fatalf("round %d: %s: %v", i, op, opErr)
				}
				picked := ""
				if !(op == "delete" && won) {
					picked = recvStarted(t, g) // the second turn asks about the queued message
					g.release <- struct{}{}
				}
				want := map[string]string{"edit/true": "edited", "edit/false": "queued", "delete/false": "queued", "delete/true": ""}[fmt.Sprintf("%s/%v", op, won)]
				if picked != want {
					t.Fatalf("round %d: %s won=%v but the model read %q", i, op, won, picked)
				}
				// Wait for the chat to go idle, then check the record.
				waitIdle(t, e, c.ID)
				stored := e.durable(c.ID)
				nPicked := count(stored, EvMessagePicked)
				if op == "delete" && won && (nPicked != 1 || count(stored, EvMessageDeleted) != 1) {
					t.Fatalf("round %d: stored %s", i, typesOf(stored))
				}
				if !(op == "delete" && won) && nPicked != 2 {
					t.Fatalf("round %d: stored %s", i, typesOf(stored))
				}
			}
		})
	}
}

// waitIdle polls, bounded, until the chat's last stored event ends a turn
// and nothing is pending or running.
func waitIdle(t *testing.T, e *env, chat string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		c, err := e.svc.Get(bg, chat)
		if err != nil {
			t.Fatal(err)
		}
		stored := e.durable(chat)
		if c.State == StateIdle && c.Pending == 0 && stored[len(stored)-1].Type == EvTurnFinished {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("chat %s never went idle: %s", chat, typesOf(stored))
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRepeatedClientIDAnswersTheSameMessage(t *testing.T) {
	g := newGate(false)
	e := newEnv(t, g)
	c := e.chat()
	s := newSub()
	m1, err := e.svc.Send(bg, c.ID, "one", "same", "", Origin{Sub: s, Req: "a"})
	if err != nil {
		t.Fatal(err)
	}
	m2, err := e.svc.Send(bg, c.ID, "one again", "same", "", Origin{Sub: s, Req: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if m1.ID != m2.ID || m2.Text != "one" {
		t.Fatalf("second send made %+v, want the first %+v", m2, m1)
	}
	evs := s.waitFor(t, "two answers", has(EvMessageAccepted, 2))
	if s.req(1) != "b" || evs[1].Message().ID != m1.ID {
		t.Fatalf("answer to the repeat: %+v", evs[1])
	}
	recvStarted(t, g)
	g.release <- struct{}{}
	waitIdle(t, e, c.ID)
	if n := count(e.durable(c.ID), EvMessageAccepted); n != 1 {
		t.Fatalf("%d messages stored, want 1", n)
	}
	// Still the same after a restart.
	e.restart()
	m3, err := e.svc.Send(bg, c.ID, "later", "same", "", Origin{})
	if err != nil || m3.ID != m1.ID {
		t.Fatalf("after restart: %+v %v", m3, err)
	}
}

func TestSinceGivesExactlyTheMissedEvents(t *testing.T) {
	e := newEnv(t, newGate(true))
	c := e.chat()
	s1 := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s1, ""); err != nil {
		t.Fatal(err)
	}
	send := func(text, k string) {
		if _, err := e.svc.Send(bg, c.ID, text, k, "", Origin{}); err != nil {
			t.Fatal(err)
		}
	}
	send("one", "1")
	s1.waitFor(t, "first turn", has(EvTurnFinished, 1))
	seen := e.durable(c.ID)
	cut := seen[len(seen)-1].Seq
	if err := e.svc.Unsubscribe(bg, c.ID, s1); err != nil {
		t.Fatal(err)
	}
	send("two", "2")
	send("three", "3")
	waitIdle(t, e, c.ID)
	all := e.durable(c.ID)
	var want []uint64
	for _, ev := range all {
		if ev.Seq > cut {
			want = append(want, ev.Seq)
		}
	}
	s2 := newSub()
	if err := e.svc.Open(bg, c.ID, &cut, s2, "x"); err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, ev := range s2.events() {
		got = append(got, ev.Seq)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("since %d gave %v, want %v", cut, got, want)
	}
	s2.mu.Lock()
	last := s2.got[len(s2.got)-1]
	s2.mu.Unlock()
	if last.Snapshot == nil || last.Snapshot.Type != "chat.resumed" || last.Snapshot.Seq != all[len(all)-1].Seq || last.Snapshot.Req != "x" {
		t.Fatalf("resume did not end with chat.resumed at the last seq: %+v", last)
	}
}

func TestRestartLosesNoAcknowledgedMessage(t *testing.T) {
	g := newGate(false)
	e := newEnv(t, g)
	c := e.chat()
	if _, err := e.svc.Send(bg, c.ID, "first", "1", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	recvStarted(t, g)
	if _, err := e.svc.Send(bg, c.ID, "second", "2", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	// Stop the process while the first turn runs and the second waits.
	e.restart()
	if _, err := e.svc.Resume(bg); err != nil {
		t.Fatal(err)
	}
	// The interrupted turn is answered again, alone; the queued message
	// then gets a turn and an answer of its own, as without the crash.
	if got := recvStarted(t, g); got != "first" {
		t.Fatalf("after restart the resumed turn read %q last, want the interrupted message", got)
	}
	g.release <- struct{}{}
	if got := recvStarted(t, g); got != "second" {
		t.Fatalf("the next turn read %q last", got)
	}
	g.release <- struct{}{}
	waitIdle(t, e, c.ID)
	stored := e.durable(c.ID)
	for typ, want := range map[string]int{EvMessageAccepted: 2, EvMessagePicked: 2, EvTurnFailed: 1, EvTurnFinished: 2} {
		if n := count(stored, typ); n != want {
			t.Fatalf("%d %s, want %d: %s", n, typ, want, typesOf(stored))
		}
	}
	var replies []string
	picked := map[string]string{} // message text -> turn that picked it
	for _, ev := range stored {
		switch ev.Type {
		case EvTurnFinished:
			replies = append(replies, pay[*TurnFinished](ev).Reply)
		case EvMessagePicked:
			picked[ev.Message().Text] = ev.Turn()
		}
	}
	if len(replies) != 2 || !strings.Contains(replies[0], "answer to first") || !strings.Contains(replies[1], "answer to second") {
		t.Fatalf("replies %q, want one to each message in order", replies)
	}
	if picked["first"] == picked["second"] {
		t.Fatalf("both messages picked by turn %s", picked["first"])
	}
}

func TestStopKeepsThePartialReply(t *testing.T) {
	g := newGate(false)
	e := newEnv(t, g)
	c := e.chat()
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Send(bg, c.ID, "go on", "1", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	recvStarted(t, g)
	s.waitFor(t, "streaming", has(EvReplyDelta, 1))
	if err := e.svc.Stop(bg, c.ID, Origin{Sub: s, Req: "stop"}); err != nil {
		t.Fatal(err)
	}
	evs := s.waitFor(t, "finished", has(EvTurnFinished, 1))
	fin := evs[len(evs)-1]
	if p := pay[*TurnFinished](fin); !p.Stopped || p.Reply != "partial " || s.req(len(evs)-1) != "stop" || !p.Message.Stopped {
		t.Fatalf("finished = %+v", fin)
	}
	if err := e.svc.Stop(bg, c.ID, Origin{}); !errors.Is(err, ErrNoTurn) {
		t.Fatalf("second stop: %v", err)
	}
}

func TestFailedCommitChangesNothing(t *testing.T) {
	e := newEnv(t, newGate(true))
	c := e.chat()
	e.store.commitHook = func() error { return errors.New("disk full") }
	if _, err := e.svc.Send(bg, c.ID, "lost?", "1", "", Origin{}); err == nil {
		t.Fatal("send succeeded while commits fail")
	}
	e.store.commitHook = nil
	if n := len(e.durable(c.ID)); n != 1 {
		t.Fatalf("stored %d events, want only chat.created", n)
	}
	// The chat loads again as stored and works.
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Send(bg, c.ID, "works", "1", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "finished", has(EvTurnFinished, 1))
}

func TestIdleChatsAreEvicted(t *testing.T) {
	e := newEnv(t, newGate(true))
	e.svc.opt.Idle = 20 * time.Millisecond
	c := e.chat()
	if _, err := e.svc.Send(bg, c.ID, "hi", "1", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(wait)
	for e.svc.Live() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("idle chat stayed in memory")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := count(e.durable(c.ID), EvTurnFinished); n != 1 {
		t.Fatalf("turn not finished before eviction")
	}
	got, err := e.svc.Get(bg, c.ID)
	if err != nil || got.ID != c.ID {
		t.Fatalf("reload: %+v %v", got, err)
	}
}

func TestBadInputIsRefused(t *testing.T) {
	e := newEnv(t, newGate(true))
	c := e.chat()
	cases := []struct {
		name string
		do   func() error
		want error
	}{
		{"empty text", func() error { _, err := e.svc.Send(bg, c.ID, "  ", "1", "", Origin{}); return err }, ErrBadInput},
		{"no client id", func() error { _, err := e.svc.Send(bg, c.ID, "x", "", "", Origin{}); return err }, ErrBadInput},
		{"bad mode", func() error { _, err := e.svc.Send(bg, c.ID, "x", "1", "shout", Origin{}); return err }, ErrBadInput},
		{"bad utf8", func() error { _, err := e.svc.Send(bg, c.ID, "\xff", "1", "", Origin{}); return err }, ErrBadInput},
		{"unknown chat", func() error { _, err := e.svc.Send(bg, "c_nope", "x", "1", "", Origin{}); return err }, ErrNotFound},
		{"unknown message", func() error { return e.svc.Delete(bg, c.ID, "m999", Origin{}) }, ErrNotFound},
		{"unknown chain", func() error { _, err := e.svc.Create(bg, "t", "nope", Origin{}); return err }, ErrBadInput},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	if n := len(e.durable(c.ID)); n != 1 {
		t.Fatalf("bad input stored %d events", n)
	}
}

func TestFirstMessageNamesAnUntitledChat(t *testing.T) {
	e := newEnv(t, newGate(true))
	c, err := e.svc.Create(bg, "", "", Origin{})
	if err != nil || c.Title != DefaultTitle {
		t.Fatalf("%+v %v", c, err)
	}
	long := "Plan the garden: tomatoes, beans, a lot of basil and something for the shade\nand more"
	if _, err := e.svc.Send(bg, c.ID, long, "1", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	got, _ := e.svc.Get(bg, c.ID)
	if got.Title != "Plan the garden: tomatoes, beans, a lot of basil…" {
		t.Fatalf("title %q", got.Title)
	}
	if _, err := e.svc.Send(bg, c.ID, "second", "2", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	if again, _ := e.svc.Get(bg, c.ID); again.Title != got.Title {
		t.Fatalf("title changed to %q", again.Title)
	}
}
