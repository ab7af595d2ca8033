package chats

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestPinIsStoredAndSurvivesARestart(t *testing.T) {
	e := newEnv(t, newGate(true))
	c := e.chat()
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	m, err := e.svc.Send(bg, c.ID, "keep this", "k1", "", Origin{})
	if err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "turn.finished", has(EvTurnFinished, 1))
	if _, err := e.svc.Pin(bg, c.ID, m.ID, true, Origin{Sub: s, Req: "p"}); err != nil {
		t.Fatal(err)
	}
	evs := s.waitFor(t, "message.pinned", has(EvMessagePinned, 1))
	if ev := evs[len(evs)-1]; ev.Message().ID != m.ID || !ev.Message().Pinned {
		t.Fatalf("pinned event %+v", ev.Message())
	}
	e.restart()
	s2 := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s2, ""); err != nil {
		t.Fatal(err)
	}
	sn := firstSnapshot(t, s2)
	if len(sn.Messages) == 0 || sn.Messages[0].ID != m.ID || !sn.Messages[0].Pinned {
		t.Fatalf("snapshot after restart: %+v", sn.Messages)
	}
	for _, bad := range []string{"m999", "nope"} {
		if _, err := e.svc.Pin(bg, c.ID, bad, true, Origin{}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("pin %s: %v, want not found", bad, err)
		}
	}
	out, err := e.svc.Command(bg, c.ID, "/unpin "+m.ID, Origin{})
	if err != nil || !strings.Contains(out, "Unpinned") {
		t.Fatalf("/unpin: %q %v", out, err)
	}
}

func firstSnapshot(t *testing.T, s *sub) *Snapshot {
	t.Helper()
	deadline := time.After(wait)
	for {
		s.mu.Lock()
		for _, d := range s.got {
			if d.Snapshot != nil {
				s.mu.Unlock()
				return d.Snapshot
			}
		}
		s.mu.Unlock()
		select {
		case <-s.notify:
		case <-deadline:
			t.Fatal("no snapshot")
		}
	}
}

func TestPruneSessions(t *testing.T) {
	e := newEnv(t, newGate(true))
	old, recent, asking := e.chat(), e.chat(), e.chat()
	waiting := e.chat()
	// Age three chats on disk: the one asking and one with a pending
	// message must survive all the same.
	age := func(id string, pending int) {
		err := e.db.Update(func(tx *bolt.Tx) error {
			c, _, err := loadChat(tx, id)
			if err != nil {
				return err
			}
			c.UpdatedAt, c.Pending = time.Now().Add(-40*24*time.Hour), pending
			v, _ := json.Marshal(c)
			return tx.Bucket(bucketChats).Put([]byte(id), v)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The chats must not be in memory for their rows to go.
	e.restart()
	age(old.ID, 0)
	age(asking.ID, 0)
	age(waiting.ID, 1)
	for _, bad := range []string{"/prune-sessions 0", "/prune-sessions -3", "/prune-sessions x", "/prune-sessions 1 2", "/prune-sessions 07"} {
		// Asked in a recent chat: a refused command leaves a diagnostic,
		// which is activity, and asking's age must stay as set.
		if _, err := e.svc.Command(bg, recent.ID, bad, Origin{}); !errors.Is(err, ErrBadInput) {
			t.Fatalf("%s: %v, want bad input", bad, err)
		}
	}
	if list, _ := e.svc.List(bg); len(list) != 4 {
		t.Fatalf("an invalid form deleted something: %d chats", len(list))
	}
	r, err := e.svc.Prune(bg, 30, asking.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.Removed != 1 || r.SkippedActive != 2 || r.Failed != 0 {
		t.Fatalf("report %+v", r)
	}
	list, _ := e.svc.List(bg)
	ids := map[string]bool{}
	for _, c := range list {
		ids[c.ID] = true
	}
	if ids[old.ID] || !ids[recent.ID] || !ids[asking.ID] || !ids[waiting.ID] {
		t.Fatalf("after prune: %v", ids)
	}
	if evs := e.durable(old.ID); len(evs) != 0 {
		t.Fatalf("pruned chat kept %d rows", len(evs))
	}
	if _, err := e.svc.Get(bg, old.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("pruned chat still loads: %v", err)
	}
}

func TestCommandsOfLongConversations(t *testing.T) {
	e := newEnv(t, newGate(true))
	c := e.chat()
	out, err := e.svc.Command(bg, c.ID, "/status", Origin{})
	if err != nil || !strings.HasPrefix(out, "Context:") {
		t.Fatalf("/status: %q %v", out, err)
	}
	if out, err = e.svc.Command(bg, c.ID, "/compact keep the plan", Origin{}); err != nil || !strings.Contains(out, "checkpoint") {
		t.Fatalf("/compact: %q %v", out, err)
	}
	if out, err = e.svc.Command(bg, c.ID, "/clear", Origin{}); err != nil || !strings.Contains(out, "Cleared") {
		t.Fatalf("/clear: %q %v", out, err)
	}
	if out, err = e.svc.Command(bg, c.ID, "/new Plans", Origin{}); err != nil || !strings.Contains(out, "Plans") {
		t.Fatalf("/new: %q %v", out, err)
	}
	if _, err = e.svc.Command(bg, c.ID, "/nonsense", Origin{}); !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "/compact") {
		t.Fatalf("unknown command: %v", err)
	}
	stored := e.durable(c.ID)
	if count(stored, EvCompact) != 1 || count(stored, EvClear) != 1 {
		t.Fatalf("stored %s", typesOf(stored))
	}
}
