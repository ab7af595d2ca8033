package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
		got, _, err := sw.once(ctx(t))
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

// TestSweepWakesAtLeaseEnd: the sweeper looks again when the first lease
// of a chat with work left would end unless renewed, not only on its
// tick: a paused node's chat (as a dead node's) is taken soon after its
// 2 s lease ends although the sweeper's longest wait is a minute.
func TestSweepWakesAtLeaseEnd(t *testing.T) {
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
	dead := (leader + 1) % 3
	const chat = "c_sweep_wake"
	c, at, err := rc.nodes[dead].ClaimChat(ctx(t), chat)
	if err != nil {
		t.Fatal(err)
	}
	f := flushEvents(chat, []*chats.Event{chats.NewEvent(chat, 1, time.Unix(1700000000, 0).UTC(),
		&chats.MessageAccepted{Message: &chats.Message{Role: "user", Text: "left waiting"}})})
	f.Meta.Pending = 1
	if _, err := rc.nodes[dead].Records().Append(ctx(t), chat, at, f); err != nil {
		t.Fatal(err)
	}
	s := rc.routers[leader].sweep(time.Minute, SweepMax)
	t.Cleanup(s.Close)
	// Seen held by a sweep first: the sweeper's next look is the lease's end.
	rc.nodes[dead].paused.Store(true)
	paused := time.Now()
	name := rc.opts[leader].Name
	// Within 20 s, far less than the minute's tick: the lease's end
	// (2 s), NATS's expiry, a loaded machine's slowness.
	eventually(t, 20*time.Second, "the paused node's chat taken by the leader", func() bool {
		return fmt.Sprint(rc.serving(chat)) == "["+name+"]"
	})
	t.Logf("taken %v after its owner stopped renewing (lease TTL 2s, sweeper's longest wait 1m)", time.Since(paused).Round(time.Millisecond))
	if c.Held() {
		t.Fatal("the paused owner still counts its lease as held after another node took the chat")
	}
	rc.nodes[dead].paused.Store(false)
}

// TestSweepReadsWithoutLeaders: a sweep's readings (the work index, the
// leases of its chats) need neither a consumer, which the JetStream meta
// leader creates, nor a stream's leader: the node that died may have been
// either, and NATS elects a new one only after 4–9 s. With two of three
// servers stopped no leader of any kind can be elected, and the last
// server's replicas still answer: the chats with work left, the lease
// held (with its end), not the lease given up.
func TestSweepReadsWithoutLeaders(t *testing.T) {
	// A long TTL: nothing may expire while the test reads.
	tc := startCluster(t, 3, 30*time.Second, 16, func(*testCluster, int) func(string) { return func(string) {} })
	nd := tc.nodes[0]
	put := func(chat string) *Claim {
		c, at, err := nd.ClaimChat(ctx(t), chat)
		if err != nil {
			t.Fatal(err)
		}
		f := flushEvents(chat, events(chat, 1, 1))
		f.Meta.Pending = 1
		if _, err := nd.Records().Append(ctx(t), chat, at, f); err != nil {
			t.Fatal(err)
		}
		return c
	}
	claimed := time.Now()
	put("c_lone_held")
	if err := put("c_lone_free").Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	// The last server's replicas have every write before the others stop.
	eventually(t, 30*time.Second, "node 1's replicas current", func() bool {
		for _, s := range []string{"KV_" + WorkBucket, "KV_" + LeasesBucket} {
			info, err := nd.js.Stream(ctx(t), s)
			if err != nil || localLastSeq(t, nd, s) != info.CachedInfo().State.LastSeq {
				return false
			}
		}
		return true
	})
	tc.stop(1)
	tc.stop(2)
	rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// As the sweeper does, a reading that finds no replica answering
	// just then (the stopped servers' routes closing) is tried again.
	var work []string
	var err error
	for work, err = nd.workLeft(rctx); errors.Is(err, nats.ErrNoResponders) && rctx.Err() == nil; work, err = nd.workLeft(rctx) {
		select {
		case <-rctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
	if err != nil {
		t.Fatalf("the work index without leaders: %v", err)
	}
	slices.Sort(work)
	if fmt.Sprint(work) != "[c_lone_free c_lone_held]" {
		t.Fatalf("work left %v, want c_lone_free and c_lone_held", work)
	}
	held, err := nd.leasesOf(rctx, work)
	if err != nil {
		t.Fatalf("the leases without leaders: %v", err)
	}
	end, ok := held["c_lone_held"]
	if len(held) != 1 || !ok {
		t.Fatalf("held leases %v, want c_lone_held's alone", held)
	}
	if end.Before(claimed.Add(29*time.Second)) || end.After(time.Now().Add(30*time.Second)) {
		t.Fatalf("c_lone_held's lease ends %v, want its last write plus 30 s (claimed at %v)", end, claimed)
	}
}

// localLastSeq is the last sequence of stream's replica on nd's own server.
func localLastSeq(t *testing.T, nd *Node, stream string) uint64 {
	t.Helper()
	jsz, err := nd.srv.Jsz(&server.JSzOptions{Accounts: true, Streams: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range jsz.AccountDetails {
		for _, s := range a.Streams {
			if s.Name == stream {
				return s.State.LastSeq
			}
		}
	}
	return 0
}

// TestSweepWait: the next sweep comes when the first held lease ends,
// no sooner than soonest and no later than every.
func TestSweepWait(t *testing.T) {
	now := time.Unix(1700000000, 0)
	for _, c := range []struct {
		name string
		next time.Time
		want time.Duration
	}{
		{"no lease held", time.Time{}, 2 * time.Second},
		{"a lease ends in 1s", now.Add(time.Second), time.Second},
		{"a lease ends in 10s", now.Add(10 * time.Second), 2 * time.Second},
		{"a lease ended but is still stored", now.Add(-time.Second), 250 * time.Millisecond},
		{"more orphans than a sweep takes", now, 250 * time.Millisecond},
	} {
		if got := sweepWait(c.next, now, 250*time.Millisecond, 2*time.Second); got != c.want {
			t.Errorf("%s: wait %v, want %v", c.name, got, c.want)
		}
	}
}

// TestLeaseEnd: a lease message's end is its stored time plus its TTL in
// whole seconds, as the store counts it.
func TestLeaseEnd(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	msg := func(ts, ttl string) *nats.Msg {
		m := &nats.Msg{Header: nats.Header{}}
		if ts != "" {
			m.Header.Set(jetstream.TimeStampHeaer, ts)
		}
		if ttl != "" {
			m.Header.Set(jetstream.MsgTTLHeader, ttl)
		}
		return m
	}
	ts := at.Format(time.RFC3339Nano)
	for _, c := range []struct {
		name string
		m    *nats.Msg
		want time.Time
	}{
		{"duration", msg(ts, "5s"), at.Add(5 * time.Second)},
		{"a fraction counts whole seconds", msg(ts, "2.5s"), at.Add(2 * time.Second)},
		{"seconds", msg(ts, "3"), at.Add(3 * time.Second)},
		{"no TTL: the node's", msg(ts, ""), at.Add(4 * time.Second)},
		{"no time", msg("", "5s"), time.Time{}},
		{"bad time", msg("yesterday", "5s"), time.Time{}},
	} {
		if got := leaseEnd(c.m, 4*time.Second); !got.Equal(c.want) {
			t.Errorf("%s: end %v, want %v", c.name, got, c.want)
		}
	}
}
