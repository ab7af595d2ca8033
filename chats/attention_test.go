package chats

import (
	"strings"
	"testing"
)

// TestStopHoldsTheQueue: Stop ends the turn and the message queued behind
// it does not start on its own; turn.finished says how many are held, the
// chat is listed paused, /continue starts them, and a paused chat stays
// paused across a restart.
func TestStopHoldsTheQueue(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart bool
		goOn    func(e *env, chat string) // how the person goes on
	}{
		{"continue", false, func(e *env, chat string) {
			out, err := e.svc.Command(bg, chat, "/continue", Origin{})
			if err != nil || out != "1 queued message started." {
				e.t.Fatalf("/continue = %q, %v", out, err)
			}
		}},
		{"new message", false, func(e *env, chat string) {
			if _, err := e.svc.Send(bg, chat, "and this", "3", "", Origin{}); err != nil {
				e.t.Fatal(err)
			}
		}},
		{"continue after a restart", true, func(e *env, chat string) {
			if _, err := e.svc.Command(bg, chat, "/continue", Origin{}); err != nil {
				e.t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGate(false)
			e := newEnv(t, g)
			c := e.chat()
			s := newSub()
			if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
				t.Fatal(err)
			}
			if _, err := e.svc.Send(bg, c.ID, "first", "1", "", Origin{}); err != nil {
				t.Fatal(err)
			}
			recvStarted(t, g)
			if _, err := e.svc.Send(bg, c.ID, "second", "2", "", Origin{}); err != nil {
				t.Fatal(err)
			}
			out, err := e.svc.Command(bg, c.ID, "/stop", Origin{})
			if err != nil || !strings.Contains(out, "1 queued message held") {
				t.Fatalf("/stop = %q, %v", out, err)
			}
			evs := s.waitFor(t, "stopped", has(EvTurnFinished, 1))
			var fin *TurnFinished
			for _, ev := range evs {
				if ev.Type == EvTurnFinished {
					fin = pay[*TurnFinished](ev)
				}
			}
			if !fin.Stopped || fin.Held != 1 {
				t.Fatalf("turn.finished = %+v, want stopped with 1 held", fin)
			}
			if got, _ := e.svc.Get(bg, c.ID); got.Outcome != OutcomeStopped {
				t.Fatalf("outcome %q after a stop", got.Outcome)
			}
			got, err := e.svc.Get(bg, c.ID)
			if err != nil || !got.Paused || got.Pending != 1 || got.State != StateIdle {
				t.Fatalf("after stop: %+v %v", got, err)
			}
			select {
			case m := <-g.started:
				t.Fatalf("a request for %q started after Stop", m)
			default:
			}
			if tc.restart {
				e.restart()
				page, err := e.svc.ListPage(bg, "", 10)
				if err != nil || len(page.Chats) != 1 || !page.Chats[0].Paused {
					t.Fatalf("listed after restart: %+v %v", page.Chats, err)
				}
				s = newSub()
				if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
					t.Fatal(err)
				}
				select {
				case m := <-g.started:
					t.Fatalf("a request for %q started at the restart", m)
				default:
				}
			}
			tc.goOn(e, c.ID)
			if m := recvStarted(t, g); m == "first" {
				t.Fatalf("the next request was for %q", m)
			}
			if got, _ := e.svc.Get(bg, c.ID); got.Paused {
				t.Fatalf("still paused after going on: %+v", got)
			}
			g.release <- struct{}{}
		})
	}
}

// TestStopWithNothingQueuedHoldsNothing: Stop alone does not pause a chat,
// so the next message starts at once.
func TestStopWithNothingQueuedHoldsNothing(t *testing.T) {
	g := newGate(false)
	e := newEnv(t, g)
	c := e.chat()
	if _, err := e.svc.Send(bg, c.ID, "first", "1", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	recvStarted(t, g)
	out, err := e.svc.Command(bg, c.ID, "/stop", Origin{})
	if err != nil || out != "Stopped." {
		t.Fatalf("/stop = %q, %v", out, err)
	}
	if got, _ := e.svc.Get(bg, c.ID); got.Paused {
		t.Fatalf("paused with nothing queued: %+v", got)
	}
	if out, err := e.svc.Command(bg, c.ID, "/continue", Origin{}); err != nil || !strings.HasPrefix(out, "Nothing is held") {
		t.Fatalf("/continue = %q, %v", out, err)
	}
}

// TestListShowsWhatAChatWaitsFor: a chat whose tool call waits for its
// approval is listed waiting (to list watchers at once, and in the stored
// list), and no longer once it is answered.
func TestListShowsWhatAChatWaitsFor(t *testing.T) {
	e := newToolEnv(t)
	c := e.chat()
	w := &watcher{}
	defer e.svc.Watch(w)()
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Send(bg, c.ID, `/tool shell {"command":"echo hi"}`, "1", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	ap := approvalOf(t, s, 1)
	eventually(t, "a watcher hears it waits", func() bool {
		return w.saw(func(x Chat) bool { return x.ID == c.ID && x.Waiting == WaitApproval && x.State == StateRunning })
	})
	page, err := e.svc.ListPage(bg, "", 10)
	if err != nil || page.Chats[0].Waiting != WaitApproval {
		t.Fatalf("stored list: %+v %v", page.Chats, err)
	}
	if err := e.svc.AnswerApproval(bg, ap.ID, true, Origin{}); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "finished", has(EvTurnFinished, 1))
	eventually(t, "no longer waiting", func() bool {
		got, err := e.svc.Get(bg, c.ID)
		return err == nil && got.Waiting == "" && got.State == StateIdle
	})
	page, _ = e.svc.ListPage(bg, "", 10)
	if page.Chats[0].Waiting != "" || page.Chats[0].Outcome != OutcomeOK {
		t.Fatalf("stored list after the answer: %+v", page.Chats[0])
	}
}
