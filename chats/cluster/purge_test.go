package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mirror-gateway/mirror/chats"
)

// stored says node i's bbolt holds anything of chat: its metadata or its
// record.
func (sv *services) stored(t *testing.T, i int, chat string) bool {
	t.Helper()
	var found bool
	if err := sv.dbs[i].View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte("chats")); b != nil && b.Get([]byte(chat)) != nil {
			found = true
		}
		if b := tx.Bucket([]byte("records")); b != nil && b.Bucket([]byte(chat)) != nil {
			found = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return found
}

// listed says s's chat list shows chat.
func listed(t *testing.T, s *chats.Service, chat string) bool {
	t.Helper()
	l, err := s.List(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(l, func(c chats.Chat) bool { return c.ID == chat })
}

// found says s's search finds word in chat.
func found(t *testing.T, s *chats.Service, word, chat string) bool {
	t.Helper()
	hits, err := s.Search(ctx(t), word, 0)
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(hits, func(h chats.SearchHit) bool { return h.Chat == chat })
}

// written creates a chat through s titled title and has one message with
// word answered in it.
func (sv *services) written(t *testing.T, s *chats.Service, title, word string) chats.Chat {
	t.Helper()
	c, err := s.Create(ctx(t), title, "", chats.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(ctx(t), c.ID, word+" says hello", "k1", "", chats.Origin{}); err != nil {
		t.Fatal(err)
	}
	waitLogged(t, sv, c.ID, 1)
	eventually(t, 30*time.Second, title+" answered", func() bool {
		g, err := s.Get(ctx(t), c.ID)
		return err == nil && g.State == chats.StateIdle && g.Pending == 0
	})
	return c
}

// onEveryNode waits (bounded) until cond holds for every node.
func (sv *services) onEveryNode(t *testing.T, what string, cond func(i int, s *chats.Service) bool) {
	t.Helper()
	eventually(t, 60*time.Second, what, func() bool {
		for i, s := range sv.svcs {
			if !cond(i, s) {
				return false
			}
		}
		return true
	})
}

// onlyThePurge waits (bounded) until the chat's record in the log holds
// its purge flush and nothing before it (the owner drops the older ones
// just after it applied the purge).
func onlyThePurge(t *testing.T, nd *Node, chat string) {
	t.Helper()
	var kinds []string
	eventually(t, 30*time.Second, "the log keeps only the purge", func() bool {
		kinds = nil
		if _, err := nd.Records().Read(ctx(t), chat, 0, func(_ uint64, f *chats.Flush) error {
			kinds = append(kinds, fmt.Sprintf("purge=%v events=%d", f.Purge, len(f.Events)))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(kinds) == "[purge=true events=0]"
	})
}

// TestPurgeReachesEveryNode: a chat deleted on node A goes, when its
// undo window has passed, from every node (its rows and metadata leave
// each bbolt, the lists and searches of A, B and C stop showing it, and
// a history asked through B finds no chat), and the log keeps only its
// purge. A chat deleted and restored (through C) stays on every node.
// Without the purge in the log, B and C kept the deleted chat.
func TestPurgeReachesEveryNode(t *testing.T) {
	sv := startServicesWith(t, 3, newModel(true), true, func(_ int, o *chats.Options) { o.UndoDelete = time.Second })
	a, b, c := sv.svcs[0], sv.svcs[1], sv.svcs[2]
	gone := sv.written(t, a, "to purge", "quokkaword")
	kept := sv.written(t, a, "to restore", "wombatword")
	sv.onEveryNode(t, "both chats listed and found everywhere", func(i int, s *chats.Service) bool {
		return listed(t, s, gone.ID) && listed(t, s, kept.ID) && found(t, s, "quokkaword", gone.ID) && found(t, s, "wombatword", kept.ID)
	})

	// Deleted and restored first: its deadline is before the other's.
	if _, err := a.DeleteChat(ctx(t), kept.ID); err != nil {
		t.Fatal(err)
	}
	sv.onEveryNode(t, "the deleted chat hidden everywhere", func(_ int, s *chats.Service) bool { return !listed(t, s, kept.ID) })
	if r, err := c.RestoreChat(ctx(t), kept.ID); err != nil || r.DeleteAt != nil {
		t.Fatalf("restore through C: %+v %v", r, err)
	}
	if _, err := a.DeleteChat(ctx(t), gone.ID); err != nil {
		t.Fatal(err)
	}

	sv.onEveryNode(t, "the purged chat gone from every bbolt, list and search", func(i int, s *chats.Service) bool {
		return !sv.stored(t, i, gone.ID) && !listed(t, s, gone.ID) && !found(t, s, "quokkaword", gone.ID)
	})
	if _, err := b.History(ctx(t), gone.ID, 0, ""); !errors.Is(err, chats.ErrNotFound) {
		t.Fatalf("history of the purged chat through B: %v, want ErrNotFound", err)
	}
	if _, err := c.Get(ctx(t), gone.ID); !errors.Is(err, chats.ErrNotFound) {
		t.Fatalf("the purged chat through C: %v, want ErrNotFound", err)
	}
	onlyThePurge(t, sv.nodes[1], gone.ID)
	// The restored chat's deadline passed before the purged one's: it
	// is still everywhere.
	sv.onEveryNode(t, "the restored chat listed and found everywhere", func(i int, s *chats.Service) bool {
		return sv.stored(t, i, kept.ID) && listed(t, s, kept.ID) && found(t, s, "wombatword", kept.ID)
	})
	if g, err := b.Get(ctx(t), kept.ID); err != nil || g.DeleteAt != nil {
		t.Fatalf("the restored chat through B: %+v %v", g, err)
	}
}

// TestPruneReachesEveryNode: a prune run on node B (whose clock is 40
// days ahead, so every chat is old to it) removes the chats node A owns
// through A's log: they leave every node's bbolt, list and search, and a
// chat with a message still waiting is kept.
func TestPruneReachesEveryNode(t *testing.T) {
	late := func() time.Time { return time.Now().Add(40 * 24 * time.Hour) }
	sv := startServicesWith(t, 3, newModel(true), true, func(i int, o *chats.Options) {
		if i == 1 {
			o.Now = late
		}
	})
	a, b := sv.svcs[0], sv.svcs[1]
	x := sv.written(t, a, "old x", "narwhalword")
	y := sv.written(t, a, "old y", "axolotlword")
	sv.onEveryNode(t, "both chats listed everywhere", func(_ int, s *chats.Service) bool {
		return listed(t, s, x.ID) && listed(t, s, y.ID) && found(t, s, "narwhalword", x.ID)
	})
	r, err := b.Prune(ctx(t), 30, "")
	if err != nil || r.Removed != 2 {
		t.Fatalf("prune through B: %+v %v, want 2 removed", r, err)
	}
	sv.onEveryNode(t, "the pruned chats gone from every bbolt, list and search", func(i int, s *chats.Service) bool {
		return !sv.stored(t, i, x.ID) && !sv.stored(t, i, y.ID) && !listed(t, s, x.ID) && !listed(t, s, y.ID) &&
			!found(t, s, "narwhalword", x.ID) && !found(t, s, "axolotlword", y.ID)
	})
	onlyThePurge(t, sv.nodes[2], x.ID)
	if _, err := a.Get(ctx(t), y.ID); !errors.Is(err, chats.ErrNotFound) {
		t.Fatalf("a pruned chat on its owner: %v, want ErrNotFound", err)
	}
}

// TestPurgeWhenTheDeleterIsGone: the node that deleted a chat stops
// before its undo window passes (its purge never runs) and gives the chat
// up; the other nodes, which followed the delete, purge it themselves
// once the window and the grace have passed: one of them takes the chat
// and appends the purge, and both drop it.
func TestPurgeWhenTheDeleterIsGone(t *testing.T) {
	sv := startServicesWith(t, 3, newModel(true), true, func(_ int, o *chats.Options) { o.UndoDelete = time.Second })
	a := sv.svcs[0]
	c := sv.written(t, a, "orphan", "pangolinword")
	sv.onEveryNode(t, "the chat found everywhere", func(_ int, s *chats.Service) bool { return found(t, s, "pangolinword", c.ID) })
	if _, err := a.DeleteChat(ctx(t), c.ID); err != nil {
		t.Fatal(err)
	}
	sv.onEveryNode(t, "the delete followed everywhere", func(_ int, s *chats.Service) bool { return !listed(t, s, c.ID) })
	closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	a.Close(closeCtx) // its purge timer stops with it
	cancel()
	sv.routers[0].Release(c.ID)
	eventually(t, 90*time.Second, "B and C purge the chat themselves", func() bool {
		for i := 1; i < 3; i++ {
			if sv.stored(t, i, c.ID) || found(t, sv.svcs[i], "pangolinword", c.ID) {
				return false
			}
		}
		return true
	})
	onlyThePurge(t, sv.nodes[1], c.ID)
	if o := sv.owners(c.ID); len(o) != 1 || o[0] == "n1" {
		t.Fatalf("owners %v: the purge was not appended by a survivor", o)
	}
}
