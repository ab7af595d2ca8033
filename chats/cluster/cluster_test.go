package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/chats/cluster/clustertest"
)

// testTTL is the lease TTL of the in-process clusters: the shortest NATS
// message TTLs allow, so expiry tests stay short.
const testTTL = time.Second

// freeAddr returns a loopback address for a node's routes.
func freeAddr(t testing.TB) string { return clustertest.RouteAddr(t) }

var testLog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

// testCluster is n in-process nodes routed to each other on loopback.
type testCluster struct {
	t     testing.TB
	opts  []Options
	nodes []*Node
	lost  chan string // chats whose lease a node lost (OnLost)
}

func newCluster(t testing.TB, n int) *testCluster {
	t.Helper()
	return startCluster(t, n, testTTL, 16, func(tc *testCluster, _ int) func(string) {
		return func(chat string) { tc.lost <- chat }
	})
}

// startCluster starts n nodes, routed to each other, with lease TTL ttl,
// room for lost chats on tc.lost, and onLost(tc, i) as node i's OnLost;
// it waits until they are ready and closes them when t ends.
func startCluster(t testing.TB, n int, ttl time.Duration, lost int, onLost func(tc *testCluster, i int) func(string)) *testCluster {
	t.Helper()
	tc := &testCluster{t: t, lost: make(chan string, lost)}
	routes := make([]string, n)
	for i := range routes {
		routes[i] = freeAddr(t)
	}
	base := t.TempDir()
	for i := range n {
		var peers []string
		for j, r := range routes {
			if j != i {
				peers = append(peers, r)
			}
		}
		tc.opts = append(tc.opts, Options{Name: fmt.Sprintf("n%d", i+1), Listen: "127.0.0.1:0", Routes: routes[i], Peers: peers,
			StoreDir: filepath.Join(base, fmt.Sprintf("n%d", i+1)), Replicas: min(n, 3), LeaseTTL: ttl, Secret: RouteSecret("test-token"),
			OnLost: onLost(tc, i), Log: testLog})
	}
	tc.nodes = make([]*Node, n)
	for i := range n {
		tc.start(i)
	}
	t.Cleanup(func() {
		start := time.Now()
		// All leave first, then all close (see Node.Leave).
		for _, step := range []func(*Node){(*Node).Leave, func(nd *Node) { nd.Close() }} {
			var wg sync.WaitGroup
			for _, nd := range tc.nodes {
				if nd != nil {
					wg.Go(func() { step(nd) })
				}
			}
			wg.Wait()
		}
		t.Logf("closed in %v", time.Since(start).Round(time.Millisecond))
	})
	start := time.Now()
	tc.waitReady()
	t.Logf("%d nodes ready in %v", n, time.Since(start).Round(time.Millisecond))
	return tc
}

// start (re)starts node i with its options (its store dir kept).
func (tc *testCluster) start(i int) {
	tc.t.Helper()
	nd, err := Start(context.Background(), tc.opts[i])
	if err != nil {
		tc.t.Fatal(err)
	}
	tc.nodes[i] = nd
}

// stop shuts node i down (its server too).
func (tc *testCluster) stop(i int) {
	tc.nodes[i].Close()
	tc.nodes[i] = nil
}

func (tc *testCluster) waitReady() {
	tc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, nd := range tc.nodes {
		if nd == nil {
			continue
		}
		if err := nd.WaitReady(ctx); err != nil {
			tc.t.Fatal(err)
		}
	}
}

// eventually polls cond every 50ms until it holds, failing after limit.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// events makes the events seq from..to of chat.
func events(chat string, from, to uint64) []*chats.Event {
	var out []*chats.Event
	for s := from; s <= to; s++ {
		out = append(out, chats.NewEvent(chat, s, time.Unix(1700000000, 0).UTC(), &chats.TurnFailed{Error: fmt.Sprintf("e%d", s)}))
	}
	return out
}

// flushOf is a flush of chat holding the events seq from..to.
func flushOf(chat string, from, to uint64) *chats.Flush {
	return flushEvents(chat, events(chat, from, to))
}

// flushEvents is a flush of chat holding evs (metadata: its id and the
// last seq).
func flushEvents(chat string, evs []*chats.Event) *chats.Flush {
	f := &chats.Flush{Chat: chat, Events: evs, Meta: chats.Chat{ID: chat}}
	for _, e := range evs {
		f.Meta.Seq = max(f.Meta.Seq, e.Seq)
	}
	return f
}

// readSeqs reads chat's record through nd and returns the seqs in order.
func readSeqs(t *testing.T, nd *Node, chat string) []uint64 { return readFrom(t, nd, chat, 1) }

// readFrom is readSeqs from seq from on.
func readFrom(t *testing.T, nd *Node, chat string, from uint64) []uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var seqs []uint64
	if _, err := nd.Records().ReadEvents(ctx, chat, from, func(e *chats.Event) error {
		if e.Chat != chat {
			return fmt.Errorf("event of chat %q in %q's record", e.Chat, chat)
		}
		seqs = append(seqs, e.Seq)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return seqs
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// TestFencedAppendAndTakeover: one owner per chat; when the owner stops
// renewing (paused past its lease), another node takes the chat after the
// lease expires, reads what was stored, and the paused owner's appends
// are refused by the store itself, before and after the new owner wrote;
// the old owner is told it lost the chat.
func TestFencedAppendAndTakeover(t *testing.T) {
	tc := newCluster(t, 3)
	a, b := tc.nodes[0], tc.nodes[1]
	const chat = "c_fence01"
	ca, pos, err := a.ClaimChat(ctx(t), chat)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.ClaimChat(ctx(t), chat); !errors.Is(err, ErrHeld) {
		t.Fatalf("second claim while held: %v, want ErrHeld", err)
	}
	if owner, err := b.OwnerOf(ctx(t), chat); err != nil || owner != "n1" {
		t.Fatalf("owner %q %v", owner, err)
	}
	if pos, err = a.Records().Append(ctx(t), chat, pos, flushOf(chat, 1, 3)); err != nil {
		t.Fatal(err)
	}
	// An append after a stale position is refused even by its owner.
	if _, err := a.Records().Append(ctx(t), chat, pos-1, flushOf(chat, 4, 4)); !errors.Is(err, chats.ErrFenced) {
		t.Fatalf("append at a stale position: %v, want ErrFenced", err)
	}

	a.paused.Store(true) // a stops renewing, as if SIGSTOPped
	start := time.Now()
	var cb *Claim
	var bpos uint64
	eventually(t, 10*testTTL, "b takes the chat after a's lease expires", func() bool {
		cb, bpos, err = b.ClaimChat(ctx(t), chat)
		return err == nil
	})
	t.Logf("takeover %v after the owner stopped renewing (lease TTL %v)", time.Since(start).Round(time.Millisecond), testTTL)
	if ca.Held() {
		t.Fatal("the paused owner still counts its lease as held")
	}
	// b's claim alone fences a: its append, made after the position it
	// knew, is refused although b has not written yet.
	if _, err := a.Records().Append(ctx(t), chat, pos, flushOf(chat, 4, 4)); !errors.Is(err, chats.ErrFenced) {
		t.Fatalf("stale owner's append after the takeover: %v, want ErrFenced", err)
	}
	if got := readSeqs(t, b, chat); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("b reads %v, want [1 2 3]", got)
	}
	if _, err := b.Records().Append(ctx(t), chat, bpos, flushOf(chat, 4, 5)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Records().Append(ctx(t), chat, pos, flushOf(chat, 4, 4)); !errors.Is(err, chats.ErrFenced) {
		t.Fatalf("stale owner's append after the new owner's: %v, want ErrFenced", err)
	}
	if got := readSeqs(t, a, chat); fmt.Sprint(got) != "[1 2 3 4 5]" {
		t.Fatalf("record %v, want [1 2 3 4 5]", got)
	}
	// Resume by seq, across flushes and the claim between them.
	if got := readFrom(t, tc.nodes[2], chat, 3); fmt.Sprint(got) != "[3 4 5]" {
		t.Fatalf("record from 3: %v, want [3 4 5]", got)
	}
	// a wakes up: its keeper finds the lease gone and says so.
	a.paused.Store(false)
	select {
	case lost := <-tc.lost:
		if lost != chat {
			t.Fatalf("lost %q", lost)
		}
	case <-time.After(10 * testTTL):
		t.Fatal("the old owner was not told it lost the chat")
	}
	if !cb.Held() {
		t.Fatal("the new owner's lease is not held")
	}
	if owner, _ := a.OwnerOf(ctx(t), chat); owner != "n2" {
		t.Fatalf("owner %q, want n2", owner)
	}
}

// TestAppendRefusesBadInput: a chat id that cannot name a subject, events
// of another chat, and seqs out of order are refused before any write.
func TestAppendRefusesBadInput(t *testing.T) {
	tc := newCluster(t, 1)
	r := tc.nodes[0].Records()
	for _, c := range []struct {
		chat string
		evs  []*chats.Event
	}{
		{"c.x", events("c.x", 1, 1)},
		{"c_>", events("c_>", 1, 1)},
		{"c_a", events("c_b", 1, 1)},
		{"c_a", append(events("c_a", 2, 2), events("c_a", 1, 1)...)},
	} {
		if _, err := r.Append(ctx(t), c.chat, 0, &chats.Flush{Chat: c.chat, Events: c.evs, Meta: chats.Chat{ID: c.chat, Seq: 9}}); !errors.Is(err, chats.ErrBadInput) {
			t.Errorf("%q: %v, want ErrBadInput", c.chat, err)
		}
	}
	// A flush larger than the cluster's largest message is refused as
	// such, before it is sent.
	big := flushOf("c_a", 1, 1)
	big.Outputs = [][2]string{{"h", strings.Repeat("x", maxFlushPayload)}}
	if _, err := r.Append(ctx(t), "c_a", 0, big); !errors.Is(err, chats.ErrBadInput) || !strings.Contains(err.Error(), "largest message") {
		t.Errorf("a flush past the largest message: %v", err)
	}
	// Up to it, one message carries it (a long tool output).
	big.Outputs = [][2]string{{"h", strings.Repeat("x", 4<<20)}}
	if _, err := r.Append(ctx(t), "c_big", 0, flushOf("c_big", 1, 1)); err != nil {
		t.Fatal(err)
	}
	big.Chat, big.Meta.ID, big.Events = "c_big", "c_big", events("c_big", 2, 2)
	big.Meta.Seq = 2
	if pos, err := r.Position(ctx(t), "c_big"); err != nil {
		t.Fatal(err)
	} else if _, err := r.Append(ctx(t), "c_big", pos, big); err != nil {
		t.Fatalf("a 4 MiB flush: %v", err)
	}
	if got := readSeqs(t, tc.nodes[0], "c_a"); len(got) != 0 {
		t.Fatalf("stored %v", got)
	}
}

// TestLeaderLease: exactly one node leads; when it stops renewing,
// another leads within a bounded time, and the old one knows it does not.
func TestLeaderLease(t *testing.T) {
	tc := newCluster(t, 3)
	leaders := func() []int {
		var out []int
		for i, nd := range tc.nodes {
			if nd.IsLeader() {
				out = append(out, i)
			}
		}
		return out
	}
	eventually(t, 20*testTTL, "one leader", func() bool { return len(leaders()) == 1 })
	old := leaders()[0]
	eventually(t, 20*testTTL, "the status names the leader and three nodes", func() bool {
		st, err := tc.nodes[(old+1)%3].Status(ctx(t))
		return err == nil && st.Leader == tc.opts[old].Name && len(st.Nodes) == 3 && st.Nodes[old].Leader
	})
	tc.nodes[old].paused.Store(true)
	start := time.Now()
	eventually(t, 20*testTTL, "a new leader", func() bool {
		l := leaders()
		return len(l) == 1 && l[0] != old
	})
	t.Logf("new leader %v after the old one stopped renewing (lease TTL %v)", time.Since(start).Round(time.Millisecond), testTTL)
	tc.nodes[old].paused.Store(false)
	eventually(t, 10*testTTL, "the old leader steps down for good", func() bool {
		st, err := tc.nodes[old].Status(ctx(t))
		return err == nil && st.Leader != tc.opts[old].Name && len(leaders()) == 1
	})

	// Without the secret nobody joins: a server routed to the cluster
	// with another secret never gets its stream, and a client without
	// credentials is refused.
	o := tc.opts[0]
	o.Name, o.Routes, o.Peers, o.StoreDir, o.Secret = "intruder", freeAddr(t), []string{tc.opts[0].Routes}, t.TempDir(), RouteSecret("another token")
	intruder, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer intruder.Close()
	wctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	if err := intruder.WaitReady(wctx); err == nil {
		t.Fatal("a server with another secret joined the cluster")
	}
	if st, err := tc.nodes[0].Status(ctx(t)); err != nil || len(st.Nodes) != 3 {
		t.Fatalf("status with an intruder around: %+v %v", st, err)
	}
	if nc, err := nats.Connect(tc.nodes[0].ClientURL(), nats.Timeout(2*time.Second)); err == nil {
		nc.Close()
		t.Fatal("a client without credentials was let in")
	}
}

// TestTwoOfThreeDown is the test 9 at the store: with two of three
// servers stopped an append is refused with ErrUnavailable; when they come
// back every acknowledged event is there, once, in order.
func TestTwoOfThreeDown(t *testing.T) {
	tc := newCluster(t, 3)
	a := tc.nodes[0]
	const chat = "c_quorum1"
	_, pos, err := a.ClaimChat(ctx(t), chat)
	if err != nil {
		t.Fatal(err)
	}
	var acked []uint64
	for s := uint64(1); s <= 9; s += 3 {
		if pos, err = a.Records().Append(ctx(t), chat, pos, flushOf(chat, s, s+2)); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, s, s+1, s+2)
	}
	var wg sync.WaitGroup
	for _, i := range []int{1, 2} {
		wg.Go(func() { tc.stop(i) })
	}
	wg.Wait()
	start := time.Now()
	_, err = a.Records().Append(ctx(t), chat, pos, flushOf(chat, 10, 12))
	if !errors.Is(err, chats.ErrUnavailable) {
		t.Fatalf("append with two of three servers down: %v, want ErrUnavailable", err)
	}
	t.Logf("refused in %v: %v", time.Since(start).Round(time.Millisecond), err)

	tc.start(1)
	tc.start(2)
	tc.waitReady()
	var got []uint64
	eventually(t, 30*time.Second, "the record is readable again", func() bool {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got = got[:0]
		_, err := tc.nodes[1].Records().ReadEvents(c, chat, 1, func(e *chats.Event) error { got = append(got, e.Seq); return nil })
		return err == nil
	})
	// Every acknowledged event, once and in order; the refused batch may
	// only follow them whole (it was never confirmed, so it may land).
	if len(got) < len(acked) || fmt.Sprint(got[:len(acked)]) != fmt.Sprint(acked) {
		t.Fatalf("record %v, want %v first", got, acked)
	}
	if rest := got[len(acked):]; len(rest) != 0 && fmt.Sprint(rest) != "[10 11 12]" {
		t.Fatalf("after the acknowledged events: %v", rest)
	}
}

// TestExternalNATS: a node given nats_url uses an existing NATS server
// (here another node's embedded one) with the same code: it sees the same
// leader, and the same fence holds between the two.
func TestExternalNATS(t *testing.T) {
	tc := newCluster(t, 1)
	a := tc.nodes[0]
	u := strings.Replace(a.ClientURL(), "nats://", "nats://"+routeUser+":"+RouteSecret("test-token")+"@", 1)
	b, err := Start(context.Background(), Options{Name: "ext", NATSURL: u, Replicas: 1, LeaseTTL: testTTL, Log: testLog})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.WaitReady(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if b.ClientURL() != "" {
		t.Fatalf("an external node reports an embedded server at %q", b.ClientURL())
	}
	eventually(t, 20*testTTL, "one leader of the two", func() bool { return a.IsLeader() != b.IsLeader() })
	eventually(t, 20*testTTL, "both nodes' heartbeats and the leader in the status", func() bool {
		st, err := b.Status(ctx(t))
		return err == nil && len(st.Nodes) == 2 && st.Leader != ""
	})
	const chat = "c_ext1"
	_, pos, err := a.ClaimChat(ctx(t), chat)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.ClaimChat(ctx(t), chat); !errors.Is(err, ErrHeld) {
		t.Fatalf("claim of a held chat through nats_url: %v", err)
	}
	if _, err := a.Records().Append(ctx(t), chat, pos, flushOf(chat, 1, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Records().Append(ctx(t), chat, pos, flushOf(chat, 3, 3)); !errors.Is(err, chats.ErrFenced) {
		t.Fatalf("append after a stale position through nats_url: %v", err)
	}
	if got := readSeqs(t, b, chat); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("record %v", got)
	}
}

// TestRoutePortTaken: a node whose route port another process holds fails
// to start at once, saying so, instead of waiting out the server's start
// for routes that can never be made (a test that drew a port another
// test's server had just taken waited 30 s, then blamed the client port).
func TestRoutePortTaken(t *testing.T) {
	held, err := net.Listen("tcp", freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	o := Options{Name: "n1", Listen: "127.0.0.1:0", Routes: held.Addr().String(), Peers: []string{freeAddr(t)},
		StoreDir: t.TempDir(), Replicas: 3, LeaseTTL: testTTL, Secret: RouteSecret("test-token"), Log: testLog}
	start := time.Now()
	nd, err := Start(context.Background(), o)
	if err == nil {
		nd.Close()
		t.Fatal("a node started without its route port")
	}
	if took := time.Since(start); !strings.Contains(err.Error(), "address already in use") || took > 10*time.Second {
		t.Fatalf("start failed after %v with %v; want at once, naming the port in use", took.Round(time.Millisecond), err)
	}
}
