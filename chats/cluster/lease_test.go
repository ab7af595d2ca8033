package cluster

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mirror-gateway/mirror/chats"
)

// TestRenewAfterUnconfirmedRenewal: a renewal whose answer was lost but
// which the store kept (here written behind the lease's back, with its
// token) does not make the next renewal take the lease for lost; a write
// by anyone else does.
func TestRenewAfterUnconfirmedRenewal(t *testing.T) {
	tc := newCluster(t, 3)
	nd := tc.nodes[0]
	for _, tt := range []struct {
		name     string
		own      bool
		wantLost bool
	}{
		{"own renewal landed unconfirmed", true, false},
		{"another holder wrote the key", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			key := chatKeyPrefix + "c_renew_" + map[bool]string{true: "own", false: "other"}[tt.own]
			l, err := nd.acquire(ctx(t), key)
			if err != nil {
				t.Fatal(err)
			}
			m := &nats.Msg{Subject: l.subject, Data: []byte("n1"), Header: nats.Header{}}
			if tt.own {
				m.Header.Set(hdrLeaseID, l.token)
			} else {
				m.Header.Set(hdrLeaseID, "someone else")
			}
			if _, err := nd.js.PublishMsg(ctx(t), m, jetstream.WithExpectLastSequencePerSubject(l.Revision()), jetstream.WithMsgTTL(l.ttl)); err != nil {
				t.Fatal(err)
			}
			err = l.Renew(ctx(t))
			if lost := errors.Is(err, ErrLost); lost != tt.wantLost {
				t.Fatalf("renew: %v, want lost %v", err, tt.wantLost)
			}
			if !tt.wantLost && (!l.Held() || l.Gone()) {
				t.Fatal("the lease renewed after its own unconfirmed renewal does not count as held")
			}
			if tt.wantLost && !l.Gone() {
				t.Fatal("a lease another holder wrote is not gone")
			}
		})
	}
}

// TestRouteLapsedLeaseKeepsChat: an owner whose renewals come late (its
// lease lapsed: not held, not yet able to expire in the store) stops
// serving the chat's route but does not let the chat go; once a renewal
// lands it serves it again, with the same open chat (no new claim, which
// would fence its own live chat).
func TestRouteLapsedLeaseKeepsChat(t *testing.T) {
	rc := newRouted(t, 3, 6*time.Second)
	const chat = "c_lapse001"
	if node, _ := send(t, rc.routers[0], chat, "first"); node != "n1" {
		t.Fatalf("first frame answered by %s, want n1", node)
	}
	nd := rc.nodes[0]
	nd.mu.Lock()
	c := nd.claims[chat]
	nd.mu.Unlock()
	if c == nil {
		t.Fatal("n1 holds no claim of the chat")
	}
	nd.paused.Store(true) // renewals stop, as on a machine too loaded to send them
	eventually(t, rc.opts[0].LeaseTTL, "the lease lapses", func() bool { return !c.Held() })
	eventually(t, rc.opts[0].LeaseTTL/3, "the lapsed chat's route stops", func() bool {
		return !slices.Contains(rc.serving(chat), "n1")
	})
	select {
	case got := <-rc.owners[0].closed:
		t.Fatalf("the owner let %s go when its lease only lapsed", got)
	default:
	}
	if c.lease.Gone() {
		t.Skip("the machine is too slow for this test: the lease ran out before it could be renewed")
	}
	nd.paused.Store(false)
	if err := c.lease.Renew(ctx(t)); err != nil {
		t.Fatalf("the late renewal: %v", err)
	}
	eventually(t, rc.opts[0].LeaseTTL, "the chat served again", func() bool {
		return slices.Contains(rc.serving(chat), "n1")
	})
	select {
	case got := <-rc.owners[0].closed:
		t.Fatalf("the owner let %s go after a late renewal", got)
	default:
	}
	if node, seq := send(t, rc.routers[1], chat, "after"); node != "n1" || seq != 2 {
		t.Fatalf("after the late renewal: answered by %s seq %d, want n1 2", node, seq)
	}
	if n := rc.owners[0].opened.Load(); n != 1 {
		t.Fatalf("the chat was opened %d times on n1, want once", n)
	}
}

// crash stops node i as kill -9 would: no lease given up, its server and
// connection gone at once.
func (tc *testCluster) crash(i int) {
	nd := tc.nodes[i]
	nd.stop()
	<-nd.done
	nd.nc.Close()
	nd.shutdownServer()
	tc.nodes[i] = nil
}

// TestRouteQuorumLost: with two of three nodes crashed, a frame for a chat
// the survivor owns, and one for a chat a crashed node owned, are both
// refused as chats.ErrUnavailable (too few nodes answer) well before the
// asker's deadline, never as that deadline.
func TestRouteQuorumLost(t *testing.T) {
	rc := newRouted(t, 3, 2*time.Second)
	const mine, theirs = "c_quorum_mine", "c_quorum_theirs"
	send(t, rc.routers[0], mine, "first")
	if node, _ := send(t, rc.routers[1], theirs, "first"); node != "n2" {
		t.Fatalf("answered by %s, want n2", node)
	}
	rc.crash(1)
	rc.crash(2)
	for _, chat := range []string{mine, theirs} {
		c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		start := time.Now()
		_, err := rc.routers[0].Send(c, chat, []byte("refused"))
		cancel()
		t.Logf("%s: refused after %v: %v", chat, time.Since(start).Round(time.Millisecond), err)
		if !errors.Is(err, chats.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s with two of three nodes down: %v, want ErrUnavailable (and not a deadline)", chat, err)
		}
	}
}
