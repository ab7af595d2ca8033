package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
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
