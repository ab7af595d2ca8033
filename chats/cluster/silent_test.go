package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/quota"
)

// TestSyncSilentOwnerBounded: Sync with an owner that does not answer (its
// lease stands and its server still carries its route's interest, as for
// a paused process) returns within half the lease TTL, not at the
// caller's deadline: a client opening the chat on another node is not
// held for it.
func TestSyncSilentOwnerBounded(t *testing.T) {
	rc := newRouted(t, 3, 3*time.Second)
	const chat = "c_silent0001"
	if _, _, err := rc.nodes[0].ClaimChat(ctx(t), chat); err != nil {
		t.Fatal(err)
	}
	// n1's lease names it; its route answers nothing (its router never
	// opened the chat: the subscription below stands for a process that
	// stopped after subscribing).
	silent, err := rc.nodes[0].nc.Subscribe(routePrefix+chat+"."+rc.opts[0].Name, func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Unsubscribe()
	if err := rc.nodes[0].nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// The asking node must see the lease and the silent subscription
	// (interest crosses routes asynchronously; without it the ask gets
	// "no responders", which rightly means nobody is serving the chat).
	eventually(t, 10*time.Second, "node 2 sees n1's lease and its silent route", func() bool {
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if owner, err := rc.nodes[1].OwnerOf(c, chat); err != nil || owner != rc.opts[0].Name {
			return false
		}
		_, err := rc.nodes[1].nc.Request(routePrefix+chat+"."+rc.opts[0].Name, nil, 50*time.Millisecond)
		return errors.Is(err, nats.ErrTimeout)
	})
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err = rc.routers[1].Sync(c, chat)
	took := time.Since(start)
	t.Logf("Sync with a silent owner: %v after %v", err, took.Round(time.Millisecond))
	if bound := rc.opts[1].LeaseTTL; took > bound {
		t.Fatalf("Sync with a silent owner took %v, want within the lease TTL (%v)", took, bound)
	}
	if err == nil {
		t.Fatal("Sync with a silent owner returned nil: it cannot have been ordered after it")
	}
}

// TestLeaderKeepsLapsedLease: a leader whose renewal fails while its lease
// has lapsed (not held, not yet able to expire in the store: a loaded
// machine, a store electing) keeps the lease: it does not lead meanwhile,
// its singletons are not told it stopped, and the next renewal restores
// it, with no other node leading in between. Before, the one failed
// renewal dropped the lease, and nobody led until its key expired.
func TestLeaderKeepsLapsedLease(t *testing.T) {
	tc := startCluster(t, 3, 9*time.Second, 16, func(*testCluster, int) func(string) { return func(string) {} })
	var nd *Node
	eventually(t, 30*time.Second, "a leader", func() bool {
		for _, x := range tc.nodes {
			if x.IsLeader() {
				nd = x
				return true
			}
		}
		return false
	})
	var stopped atomic.Int32
	defer nd.OnLeader(func(leading bool) {
		if !leading {
			stopped.Add(1)
		}
	})()
	nd.mu.Lock()
	l := nd.leader
	nd.mu.Unlock()
	nd.paused.Store(true) // no renewals, as on a machine too loaded to send them
	eventually(t, nd.o.LeaseTTL, "the leader lease lapses", func() bool { return !l.Held() })
	// The renewal that is due fails (here: its deadline passed already).
	late, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	nd.keepLeader(late)
	if l.Gone() {
		t.Skip("the machine is too slow for this test: the lease ran out before the failed renewal")
	}
	if n := stopped.Load(); n != 0 {
		t.Fatalf("the leader's singletons were told it stopped leading %d times after one failed renewal", n)
	}
	nd.mu.Lock()
	kept := nd.leader == l
	nd.mu.Unlock()
	if !kept {
		t.Fatal("the leader dropped a lapsed lease after one failed renewal")
	}
	nd.paused.Store(false)
	nd.keepLeader(ctx(t)) // the next renewal, at once (the keeper's tick may come first: one of them renews)
	eventually(t, nd.o.LeaseTTL, "the leader leads again, or its lease ran out", func() bool { return nd.IsLeader() || l.Gone() })
	if !nd.IsLeader() {
		t.Skip("the machine is too slow for this test: the lease ran out before the next renewal")
	}
	nd.mu.Lock()
	kept = nd.leader == l
	nd.mu.Unlock()
	if !kept || stopped.Load() != 0 {
		t.Fatalf("after the next renewal: same lease %v, told it stopped %d times", kept, stopped.Load())
	}
	for _, x := range tc.nodes {
		if x != nd && x.IsLeader() {
			t.Fatalf("%s leads too", x.Name())
		}
	}
}

// TestQuotaSilentLeaderAskedAgain: a grant asked of a leader that went
// silent (paused: its lease runs out, its server still carries its
// subscription, nothing answers) is asked again of the next leader once
// the lease names it, well within the book's MaxWait. Before, the grant
// was asked on one subject everyone's book listened to, reached only the
// silent ex-leader, and waited the whole MaxWait (two minutes by
// default): the paused owner's chat, taken over, did not ask its model.
func TestQuotaSilentLeaderAskedAgain(t *testing.T) {
	tc := startCluster(t, 3, 2*time.Second, 16, func(*testCluster, int) func(string) { return func(string) {} })
	books := make([]*QuotaBook, 3)
	for i, nd := range tc.nodes {
		books[i] = nd.Quotas(quota.Options{MaxWait: time.Minute})
	}
	t.Cleanup(func() {
		for _, b := range books {
			b.Close()
		}
	})
	old := -1
	eventually(t, 30*time.Second, "one node keeps the quota book", func() bool {
		for i, b := range books {
			if b.Leading() {
				old = i
				return true
			}
		}
		return false
	})
	asker := (old + 1) % 3
	key := quota.Key{Provider: "openai", Model: "m", Fingerprint: "k"}
	rel, err := books[asker].Reserve(ctx(t), key, 10, nil)
	if err != nil {
		t.Fatalf("a grant while the leader answers: %v", err)
	}
	rel(quota.Usage{Input: 10})

	// The leader goes silent: no renewals, its book answers nothing, and
	// its connection keeps subscriptions on every subject a grant may be
	// asked on (as a stopped process's server does).
	nd := tc.nodes[old]
	nd.paused.Store(true)
	t.Cleanup(func() { nd.paused.Store(false) })
	books[old].Close() // nothing of its book answers, and it takes nothing up again
	for _, subj := range []string{QuotaReserveSubject, reserveSubject(nd.Name())} {
		s, err := nd.nc.Subscribe(subj, func(*nats.Msg) {})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Unsubscribe()
	}
	if err := nd.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	rel, err = books[asker].Reserve(c, key, 10, nil)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("a grant asked while the leader is silent: %v after %v", err, took)
	}
	rel(quota.Usage{Input: 10})
	t.Logf("granted %v after the leader went silent (lease TTL %v)", took.Round(time.Millisecond), tc.opts[old].LeaseTTL)
	if bound := 10 * tc.opts[old].LeaseTTL; took > bound {
		t.Fatalf("granted %v after the leader went silent, want within %v (the lease's end and the next leader's book)", took, bound)
	}
	if books[old].Leading() {
		t.Fatal("the silent node keeps the book")
	}
}

// TestQuotaSameGrantAskedAgain: a grant asked again by its id (the answer
// was lost, or the leader that made it died and the next rebuilt it from
// the journal) is answered again, not reserved twice: the window holds it
// once.
func TestQuotaSameGrantAskedAgain(t *testing.T) {
	tc := newCluster(t, 3)
	books := make([]*QuotaBook, 3)
	for i, nd := range tc.nodes {
		books[i] = nd.Quotas(quota.Options{MaxWait: 300 * time.Millisecond})
	}
	t.Cleanup(func() {
		for _, b := range books {
			b.Close()
		}
	})
	lead := -1
	eventually(t, 30*time.Second, "one node keeps the quota book", func() bool {
		for i, b := range books {
			if b.Leading() {
				lead = i
				return true
			}
		}
		return false
	})
	key := quota.Key{Provider: "openai", Model: "gpt-test", Fingerprint: "k1"}
	books[lead].ObserveLimits(key, &provider.RateLimits{InputTokens: &provider.RateWindow{Limit: 1000, Remaining: -1}})
	usage := func() int {
		for _, s := range books[lead].Snapshot() {
			if s.Key == key {
				return s.Usage
			}
		}
		return -1
	}
	eventually(t, 30*time.Second, "the leader knows the quota", func() bool { return usage() == 0 })
	data, _ := json.Marshal(reserveRequest{ID: "same-grant-1", Key: key, Tokens: 100, MaxWait: 300})
	asker := tc.nodes[(lead+1)%3].nc
	for i := range 2 {
		m, err := asker.Request(reserveSubject(tc.nodes[lead].o.Name), data, 10*time.Second)
		if err != nil {
			t.Fatalf("ask %d: %v", i+1, err)
		}
		var rep reserveReply
		if err := json.Unmarshal(m.Data, &rep); err != nil || !rep.Granted {
			t.Fatalf("ask %d answered %s", i+1, m.Data)
		}
	}
	if got := usage(); got != 100 {
		t.Fatalf("the window holds %d tokens after one grant asked twice, want 100", got)
	}
}
