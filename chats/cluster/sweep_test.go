package cluster

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
)

// TestSweepTakesOrphans: the leader's sweeper takes the chats with work
// left whose lease nobody holds (one released mid-turn, one whose owner
// stopped renewing, as a dead node does) within bounded time, and opens
// them on the leader; a chat with work whose owner is alive stays with
// it, and a chat without work is left alone. One sweep takes no more
// than its bound.
func TestSweepTakesOrphans(t *testing.T) {
	rc := newRouted(t, 3, 2*time.Second)
	var leader int
	eventually(t, 30*time.Second, "a leader", func() bool {
		for i, nd := range rc.nodes {
			if nd.IsLeader() {
				leader = i
				return true
			}
		}
		return false
	})
	other, dead := (leader+1)%3, (leader+2)%3
	// claim puts chat's first flush (work left when work) through node i
	// and returns its claim.
	claim := func(i int, chat string, work bool) *Claim {
		c, at, err := rc.nodes[i].ClaimChat(ctx(t), chat)
		if err != nil {
			t.Fatal(err)
		}
		f := flushEvents(chat, []*chats.Event{chats.NewEvent(chat, 1, time.Unix(1700000000, 0).UTC(),
			&chats.MessageAccepted{Message: &chats.Message{Role: "user", Text: "left waiting"}})})
		if work {
			f.Meta.Pending = 1
		}
		if _, err := rc.nodes[i].Records().Append(ctx(t), chat, at, f); err != nil {
			t.Fatal(err)
		}
		return c
	}
	released := []string{"c_sweep_rel1", "c_sweep_rel2"}
	for _, chat := range released {
		if err := claim(other, chat, true).Release(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	live := claim(other, "c_sweep_live", true) // kept: its owner renews it
	if err := claim(other, "c_sweep_idle", false).Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	claim(dead, "c_sweep_dead", true)
	rc.nodes[dead].paused.Store(true) // stops renewing, as if killed

	// One sweep by hand, bounded to one chat: it takes one of the two
	// released (the dead node's lease has not expired yet).
	// (Tried again while a loaded machine has the leader miss a renewal:
	// a sweep stops taking when its node stops leading.)
	sw := &Sweeper{r: rc.routers[leader], max: 1}
	var taken []string
	eventually(t, 30*time.Second, "a sweep that takes a chat", func() bool {
		got, err := sw.once(ctx(t))
		if len(got) > 1 || len(got) == 1 && !slices.Contains(released, got[0]) {
			t.Fatalf("a sweep bounded to 1 took %v %v", got, err)
		}
		taken = append(taken, got...)
		return len(taken) == 1
	})

	start := time.Now()
	for _, r := range rc.routers {
		s := r.sweep(100*time.Millisecond, SweepMax)
		t.Cleanup(s.Close)
	}
	want := append(slices.Clone(released), "c_sweep_dead")
	name := rc.opts[leader].Name
	eventually(t, 15*time.Second, "the orphans served by the leader", func() bool {
		for _, chat := range want {
			if fmt.Sprint(rc.serving(chat)) != "["+name+"]" {
				return false
			}
		}
		return true
	})
	t.Logf("orphans taken %v after the sweepers started (the dead node's lease TTL is 2s)", time.Since(start).Round(time.Millisecond))
	for _, chat := range want {
		if owner, err := rc.nodes[other].OwnerOf(ctx(t), chat); err != nil || owner != name {
			t.Fatalf("%s owned by %q %v, want %s", chat, owner, err, name)
		}
	}
	// (A loaded machine can make its owner miss a renewal: then the lease
	// is lost, and taking the chat is right.)
	if owner, _ := rc.nodes[leader].OwnerOf(ctx(t), "c_sweep_live"); owner != rc.opts[other].Name && live.Held() {
		t.Fatalf("the live chat moved to %q while its owner held it", owner)
	}
	if owner, _ := rc.nodes[leader].OwnerOf(ctx(t), "c_sweep_idle"); owner != "" {
		t.Fatalf("a chat without work was taken by %q", owner)
	}
	for i, o := range rc.owners {
		if i != leader && i != other && o.opened.Load() != 0 {
			t.Fatalf("node %d opened %d chats: only the leader sweeps", i, o.opened.Load())
		}
	}
	rc.nodes[dead].paused.Store(false)
}
