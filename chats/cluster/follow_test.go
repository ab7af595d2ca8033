package cluster

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
)

// newFollowers is newServices with each node following the records
// stream into its Service, and a search index per node.
func newFollowers(t *testing.T, n int, m *model) *services { return startServices(t, n, m, true) }

// listWatcher records the list changes it is told of.
type listWatcher struct {
	mu  sync.Mutex
	got []string
}

func (w *listWatcher) ChatChanged(c chats.Chat, created bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, fmt.Sprintf("%s/%s/%v", c.ID, c.Title, created))
}

func (w *listWatcher) told(s string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, g := range w.got {
		if g == s {
			return true
		}
	}
	return false
}

// eventSeqs are the chat's stored events as a node serves them: "seq
// type" each, in order.
func eventSeqs(t *testing.T, s *chats.Service, chat string) []string {
	t.Helper()
	evs, err := s.Events(ctx(t), chat, 0, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range evs {
		var e chats.Event
		if err := e.UnmarshalJSON(f.Raw); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d %s", f.Seq, e.Type))
	}
	return out
}

// TestFollowedChatListedAndFound: a chat created and written through node
// A is in B's chat list (List and ListPage) and B's search within a
// bounded wait, B's list watcher is told, and when the chat moves to B,
// B's catch-up reads only what it had not followed: no row twice, no
// re-read of the chat's history.
func TestFollowedChatListedAndFound(t *testing.T) {
	sv := newFollowers(t, 2, newModel(true))
	a, b := sv.svcs[0], sv.svcs[1]
	w := &listWatcher{}
	defer b.Watch(w)()

	c, err := a.Create(ctx(t), "followed", "", chats.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	const sends = 6
	for i := range sends {
		if _, err := a.Send(ctx(t), c.ID, fmt.Sprintf("zebracorn number %d", i), fmt.Sprintf("k%d", i), "", chats.Origin{}); err != nil {
			t.Fatal(err)
		}
		waitLogged(t, sv, c.ID, i+1) // each answer lands before the next send
	}
	eventually(t, 30*time.Second, "all answers on A", func() bool {
		g, err := a.Get(ctx(t), c.ID)
		return err == nil && g.State == chats.StateIdle && g.Pending == 0 && len(sv.logged(t, c.ID)) == int(g.Seq)
	})
	want, err := a.Get(ctx(t), c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := sv.owners(c.ID); fmt.Sprint(got) != "[n1]" {
		t.Fatalf("owners %v, want [n1]", got)
	}

	eventually(t, 30*time.Second, "the chat in B's list at A's seq", func() bool {
		l, err := b.List(ctx(t))
		return err == nil && len(l) == 1 && l[0].ID == c.ID && l[0].Seq == want.Seq && l[0].Title == "followed"
	})
	p, err := b.ListPage(ctx(t), "", 10)
	if err != nil || len(p.Chats) != 1 || p.Chats[0].ID != c.ID {
		t.Fatalf("B's list page: %+v %v", p, err)
	}
	eventually(t, 30*time.Second, "B's search finds A's text", func() bool {
		hits, err := b.Search(ctx(t), "zebracorn", 0)
		return err == nil && len(hits) > 0 && hits[0].Chat == c.ID
	})
	if !w.told(c.ID + "/followed/true") {
		t.Fatalf("B's list watcher was told %v, want the chat's creation", w.got)
	}
	if pos, err := b.Followed(); err != nil || pos == 0 {
		t.Fatalf("B's followed position %d %v, want saved", pos, err)
	}
	aRows := eventSeqs(t, a, c.ID)

	// Following the chat's whole record again (a restart that lost its
	// saved position) writes nothing and tells no watcher: every flush is
	// at or below B's LogPos.
	w.mu.Lock()
	told := len(w.got)
	w.mu.Unlock()
	if _, err := sv.nodes[1].Records().Read(ctx(t), c.ID, 0, func(pos uint64, f *chats.Flush) error {
		return b.Follow(ctx(t), c.ID, pos, f)
	}); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	again := w.got[told:]
	w.mu.Unlock()
	if len(again) != 0 {
		t.Fatalf("following again told B's watcher %v", again)
	}
	if l, err := b.List(ctx(t)); err != nil || len(l) != 1 || l[0].Seq != want.Seq {
		t.Fatalf("B's list after following again: %+v %v", l, err)
	}

	// The chat moves to B: A lets go, the next op through B takes it.
	// B's catch-up starts at its followed LogPos: it reads the claims
	// after it, not the chat's flushes again.
	sv.routers[0].Release(c.ID)
	before := sv.nodes[1].gets.Load()
	eventually(t, 30*time.Second, "B takes the chat", func() bool {
		_, err := b.Send(ctx(t), c.ID, "zebracorn on B", "kb", "", chats.Origin{})
		return err == nil
	})
	if got := sv.owners(c.ID); fmt.Sprint(got) != "[n2]" {
		t.Fatalf("owners %v, want [n2]", got)
	}
	if read := sv.nodes[1].gets.Load() - before; read >= sends {
		t.Fatalf("B read %d record messages to take a chat it followed, want fewer than %d", read, sends)
	}
	eventually(t, 30*time.Second, "B's answer", func() bool {
		g, err := b.Get(ctx(t), c.ID)
		return err == nil && g.State == chats.StateIdle && g.Pending == 0 && g.Seq > want.Seq
	})
	rows := eventSeqs(t, b, c.ID)
	for i, r := range rows {
		if n := fmt.Sprint(i+1) + " "; len(r) < len(n) || r[:len(n)] != n {
			t.Fatalf("B's record has a gap or a row twice at %d: %v", i+1, rows)
		}
	}
	if fmt.Sprint(rows[:len(aRows)]) != fmt.Sprint(aRows) {
		t.Fatalf("B's record does not start with A's:\nA %v\nB %v", aRows, rows)
	}
	if logged := sv.logged(t, c.ID); len(logged) != len(rows) {
		t.Fatalf("B holds %d rows, the log %d", len(rows), len(logged))
	}
	// And A, now a follower, lists the chat as B left it.
	last, err := b.Get(ctx(t), c.ID)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "A's list follows B's writes", func() bool {
		l, err := a.List(ctx(t))
		return err == nil && len(l) == 1 && l[0].Seq == last.Seq
	})
}
