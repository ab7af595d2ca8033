package cluster

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/tools"
)

// idleFor is the chats' idle time in these tests: short, so that a chat
// left alone leaves memory (and gives its lease up) quickly.
const idleFor = 200 * time.Millisecond

func shortIdle(_ int, o *chats.Options) { o.Idle = idleFor }

// claimed says node nd renews a lease of chat.
func claimed(nd *Node, chat string) bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.claims[chat] != nil
}

// waitReleased waits (bounded) until node i neither serves chat nor
// renews its lease, and the leases bucket names no owner of it.
func waitReleased(t *testing.T, sv *services, i int, chat string) {
	t.Helper()
	eventually(t, 30*time.Second, "the idle chat's lease given up by "+sv.opts[i].Name, func() bool {
		owner, err := sv.nodes[i].OwnerOf(ctx(t), chat)
		return err == nil && owner == "" && !slices.Contains(sv.routers[i].Owned(), chat) && !claimed(sv.nodes[i], chat)
	})
}

// texts are the chat's messages as its Export on s reads them.
func texts(t *testing.T, s *chats.Service, chat string) []string {
	t.Helper()
	var out []string
	if _, err := s.Export(ctx(t), chat, nil, func(m chats.Message) error { out = append(out, m.Role+":"+m.Text); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestIdleChatGivesLeaseUp: a chat used once on A and left alone gives
// its lease up once its actor left memory idle (A renews it no more); the
// next send, through C, takes it there and is answered with the whole
// history, and a watcher on B goes on receiving the chat's events, in
// order, across the move.
func TestIdleChatGivesLeaseUp(t *testing.T) {
	sv := startServicesWith(t, 3, newModel(true), false, shortIdle)
	a, b, c := sv.svcs[0], sv.svcs[1], sv.svcs[2]
	ch, err := a.Create(ctx(t), "left alone", "", chats.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	watcher := newSubscriber()
	if err := b.Open(ctx(t), ch.ID, nil, watcher, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(ctx(t), ch.ID, "one", "i1", "", chats.Origin{}); err != nil {
		t.Fatal(err)
	}
	watcher.waitFor(t, "the first answer on B", finished(1))
	waitReleased(t, sv, 0, ch.ID)
	if got := sv.owners(ch.ID); len(got) != 0 {
		t.Fatalf("served by %v after its lease was given up", got)
	}

	m, err := c.Send(ctx(t), ch.ID, "two", "i2", "", chats.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	if got := sv.owners(ch.ID); fmt.Sprint(got) != "[n3]" {
		t.Fatalf("owners after the send through C: %v, want [n3]", got)
	}
	if owner, err := sv.nodes[1].OwnerOf(ctx(t), ch.ID); err != nil || owner != "n3" {
		t.Fatalf("the lease names %q (%v), want n3", owner, err)
	}
	want := []string{"user:one", "assistant:partial answer to one", "user:two", "assistant:partial answer to two"}
	eventually(t, 30*time.Second, "the second answer", func() bool { return len(texts(t, c, ch.ID)) == len(want) })
	if got := texts(t, c, ch.ID); !slices.Equal(got, want) {
		t.Fatalf("the history on C %q, want %q", got, want)
	}
	if got, err := c.Get(ctx(t), ch.ID); err != nil || got.Seq <= m.Seq {
		t.Fatalf("Get on C: %+v %v", got, err)
	}
	ds := watcher.waitFor(t, "the second answer on B, after the move", finished(2))
	checkOrder(t, ds, 0)
	accepted := 0
	for _, e := range sv.logged(t, ch.ID) {
		if e.Type == chats.EvMessageAccepted {
			accepted++
		}
	}
	if accepted != 2 {
		t.Fatalf("%d messages stored, want 2", accepted)
	}
	// The new owner gives it up in turn once it is idle there.
	waitReleased(t, sv, 2, ch.ID)
}

// TestIdleReleaseKeepsBusyChats: a chat whose turn runs with a message
// queued behind it, and a chat whose interrupted turn was taken over by
// another node (and runs there), keep their leases while a chat created
// at the same time as them, or later, and left alone gives its own up.
func TestIdleReleaseKeepsBusyChats(t *testing.T) {
	m := newModel(false)
	sv := startServicesWith(t, 2, m, false, shortIdle)
	a, b := sv.svcs[0], sv.svcs[1]

	queued, err := a.Create(ctx(t), "queued", "", chats.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(ctx(t), queued.ID, "busy", "q1", "", chats.Origin{}); err != nil {
		t.Fatal(err)
	}
	<-m.started
	if _, err := a.Send(ctx(t), queued.ID, "waiting", "q2", "", chats.Origin{}); err != nil {
		t.Fatal(err)
	}

	moved, err := a.Create(ctx(t), "interrupted", "", chats.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(ctx(t), moved.ID, "cut short", "m1", "", chats.Origin{}); err != nil {
		t.Fatal(err)
	}
	<-m.started
	sv.routers[0].Release(moved.ID) // A lets go mid-turn
	if _, err := b.Send(ctx(t), moved.ID, "after the move", "m2", "", chats.Origin{}); err != nil {
		t.Fatal(err)
	}
	<-m.started // B resumed the interrupted turn

	// Left alone from now on: once it gave its lease up, the busy chats'
	// idle time has passed too.
	control, err := a.Create(ctx(t), "control", "", chats.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	waitReleased(t, sv, 0, control.ID)

	tests := []struct {
		name, chat string
		node       int
	}{
		{"queued behind a running turn", queued.ID, 0},
		{"interrupted turn resumed on another node", moved.ID, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			owner, err := sv.nodes[0].OwnerOf(ctx(t), tc.chat)
			if err != nil || owner != sv.opts[tc.node].Name {
				t.Fatalf("the lease names %q (%v), want %s", owner, err, sv.opts[tc.node].Name)
			}
			if !claimed(sv.nodes[tc.node], tc.chat) || !slices.Contains(sv.routers[tc.node].Owned(), tc.chat) {
				t.Fatalf("%s no longer serves the chat", sv.opts[tc.node].Name)
			}
		})
	}
}

// TestSendRacingIdleRelease: a send that races the release of an idle
// chat, through its owner or through another node, before the release
// takes the chat's lock or while it holds it, is answered once: stored
// once, its turn run once, and the chat has one owner after.
func TestSendRacingIdleRelease(t *testing.T) {
	sv := startServicesWith(t, 3, newModel(true), false, shortIdle)
	type race struct {
		via    int
		locked bool
		once   sync.Once
		sent   chan error
	}
	var mu sync.Mutex
	races := map[string]*race{}
	sv.routers[0].letting = func(chat string, locked bool) {
		mu.Lock()
		r := races[chat]
		mu.Unlock()
		if r == nil || r.locked != locked {
			return
		}
		r.once.Do(func() {
			go func() {
				_, err := sv.svcs[r.via].Send(ctx(t), chat, "racing", "race", "", chats.Origin{})
				r.sent <- err
			}()
		})
	}
	tests := []struct {
		name   string
		via    int
		locked bool
	}{
		{"through the owner, before the lock", 0, false},
		{"through the owner, under the lock", 0, true},
		{"through another node, before the lock", 2, false},
		{"through another node, under the lock", 2, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := sv.svcs[0].Create(ctx(t), tc.name, "", chats.Origin{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sv.svcs[0].Send(ctx(t), ch.ID, "first", "first", "", chats.Origin{}); err != nil {
				t.Fatal(err)
			}
			waitLogged(t, sv, ch.ID, 1)
			r := &race{via: tc.via, locked: tc.locked, sent: make(chan error, 1)}
			mu.Lock()
			races[ch.ID] = r
			mu.Unlock()
			select {
			case err := <-r.sent:
				if err != nil {
					t.Fatalf("the racing send: %v", err)
				}
			case <-time.After(60 * time.Second):
				t.Fatal("no release raced by a send within 60s")
			}
			waitLogged(t, sv, ch.ID, 2)
			var accepted, finished int
			for i, e := range sv.logged(t, ch.ID) {
				if e.Seq != uint64(i+1) {
					t.Fatalf("seq %d at %d", e.Seq, i+1)
				}
				switch e.Type {
				case chats.EvMessageAccepted:
					if e.Message().ClientID == "race" {
						accepted++
					}
				case chats.EvTurnFinished:
					finished++
				}
			}
			if accepted != 1 || finished != 2 {
				t.Fatalf("the racing message stored %d times, %d turns finished; want 1 and 2", accepted, finished)
			}
			if got := sv.owners(ch.ID); len(got) > 1 {
				t.Fatalf("owners %v", got)
			}
		})
	}
}

// TestIdleReleaseKeepsOpenQuestion: a chat whose tool call was cut short
// when its owner let go is taken by B, which asks the Repeat/Skip
// question; with nothing running or queued its actor leaves memory idle,
// but B keeps its lease while the question waits (an answer must find the
// chat's work where it was), while a chat created after it on B and left
// alone gives its lease up.
func TestIdleReleaseKeepsOpenQuestion(t *testing.T) {
	gm := newGateModel()
	gm.open.Store(true)
	sv := startServicesWith(t, 2, nil, false, func(_ int, o *chats.Options) {
		o.Idle = idleFor
		ws := t.TempDir()
		eng, err := runtime.NewEngine([]*runtime.Model{{Name: "m", Provider: gm, Remote: "fake", Window: 128000}},
			map[string][]string{"default": {"m"}}, config.Roles{Chat: "default", Reflect: "default"}, 8)
		if err != nil {
			t.Fatal(err)
		}
		reg, err := tools.New(tools.Options{Workspace: ws, Policies: map[string]tools.Policy{"shell": tools.Allow}})
		if err != nil {
			t.Fatal(err)
		}
		if err := eng.Provision(runtime.Options{Tools: reg}); err != nil {
			t.Fatal(err)
		}
		o.Turner, o.Workspace = eng, reg.Workspace()
	})
	a, b := sv.svcs[0], sv.svcs[1]
	ch, err := a.Create(ctx(t), "question", "", chats.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	watcher := newSubscriber()
	if err := b.Open(ctx(t), ch.ID, nil, watcher, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(ctx(t), ch.ID, `/tool shell {"command":"sleep 30"}`, "q1", "", chats.Origin{}); err != nil {
		t.Fatal(err)
	}
	watcher.waitFor(t, "the tool call stored", func(ds []chats.Delivery) bool {
		for _, d := range ds {
			if d.Event != nil && d.Event.Type == chats.EvToolCall {
				return true
			}
		}
		return false
	})
	sv.routers[0].Release(ch.ID)                    // A lets go while the call runs
	if _, err := b.Get(ctx(t), ch.ID); err != nil { // B takes the chat: the call becomes a question
		t.Fatal(err)
	}
	if fmt.Sprint(sv.owners(ch.ID)) != "[n2]" {
		t.Fatalf("owners %v, want [n2]", sv.owners(ch.ID))
	}
	watcher.waitFor(t, "the Repeat/Skip question", func(ds []chats.Delivery) bool {
		for _, d := range ds {
			if d.Event != nil && d.Event.Type == chats.EvRecoveryRequested {
				return true
			}
		}
		return false
	})

	control, err := b.Create(ctx(t), "control", "", chats.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	waitReleased(t, sv, 1, control.ID)
	if owner, err := sv.nodes[0].OwnerOf(ctx(t), ch.ID); err != nil || owner != "n2" || !claimed(sv.nodes[1], ch.ID) {
		t.Fatalf("the chat with an open question: its lease names %q (%v), want n2 renewing it", owner, err)
	}
}
