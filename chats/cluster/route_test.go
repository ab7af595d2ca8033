package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/runtime/ids"
)

// fakeOwner is the gateway's side of routing in these tests: a chat it
// owns is its record position and last seq; each frame is one message,
// appended (fenced) as one event and published to the fan-out. Its answer
// is "NODE SEQ".
type fakeOwner struct {
	n      *Node
	fan    *Fanout
	opened atomic.Int32
	closed chan string

	mu    sync.Mutex
	chats map[string]*fakeChat
}

type fakeChat struct {
	claim   *Claim
	at, seq uint64
	texts   map[string]uint64 // the frames stored, as a chat knows client ids
}

// load reads the chat's position, last seq and stored frames.
func (fc *fakeChat) load(ctx context.Context, n *Node) error {
	at, err := n.Records().Position(ctx, fc.claim.Chat())
	if err != nil {
		return err
	}
	fc.at, fc.seq, fc.texts = at, 0, map[string]uint64{}
	_, err = n.Records().ReadEvents(ctx, fc.claim.Chat(), 1, func(e *chats.Event) error {
		fc.seq = e.Seq
		fc.texts[e.Message().Text] = e.Seq
		return nil
	})
	return err
}

func newFakeOwner(n *Node) *fakeOwner {
	return &fakeOwner{n: n, chats: map[string]*fakeChat{}, closed: make(chan string, 16)}
}

func (o *fakeOwner) Open(ctx context.Context, c *Claim, at uint64) error {
	fc := &fakeChat{claim: c}
	if err := fc.load(ctx, o.n); err != nil {
		return err
	}
	if fc.at != at {
		return fmt.Errorf("claimed at %d, the record is at %d", at, fc.at)
	}
	o.opened.Add(1)
	o.mu.Lock()
	o.chats[c.Chat()] = fc
	o.mu.Unlock()
	return nil
}

func (o *fakeOwner) Handle(ctx context.Context, chat string, frame []byte) ([]byte, error) {
	o.mu.Lock()
	fc := o.chats[chat]
	o.mu.Unlock()
	if fc == nil {
		return nil, fmt.Errorf("chat %s is not open here", chat)
	}
	if seq, ok := fc.texts[string(frame)]; ok { // sent again: answered as stored
		return fmt.Appendf(nil, "%s %d", o.n.Name(), seq), nil
	}
	e := chats.NewEvent(chat, fc.seq+1, time.Unix(1700000000, 0).UTC(),
		&chats.MessageAccepted{Message: &chats.Message{Role: "user", Text: string(frame)}})
	at, err := o.n.Records().Append(ctx, chat, fc.at, flushEvents(chat, []*chats.Event{e}))
	if err != nil {
		// An append not confirmed may have landed: read the record
		// again before the next, as the chat's actor does.
		if lerr := fc.load(ctx, o.n); lerr != nil {
			err = errors.Join(err, lerr)
		}
		return nil, err
	}
	fc.at, fc.seq, fc.texts[string(frame)] = at, e.Seq, e.Seq
	if o.fan != nil {
		if err := o.fan.Stored(chat, e); err != nil {
			return nil, err
		}
	}
	return fmt.Appendf(nil, "%s %d", o.n.Name(), e.Seq), nil
}

// LetGo: the fake owner keeps every chat (the routing tests give chats
// up through Release).
func (o *fakeOwner) LetGo(chat string) bool { return false }

func (o *fakeOwner) Close(chat string) {
	o.mu.Lock()
	delete(o.chats, chat)
	o.mu.Unlock()
	o.closed <- chat
}

// routed is a cluster with a router (and a fake owner) on each node.
type routed struct {
	*testCluster
	owners  []*fakeOwner
	routers []*Router
	wired   []atomic.Pointer[Router]
}

// newRouted starts n nodes with lease TTL ttl: longer than the store
// tests' (testTTL), so that a loaded test machine, slow to renew a lease,
// does not move the chat in tests that count its owners.
func newRouted(t *testing.T, n int, ttl time.Duration) *routed {
	t.Helper()
	// OnLost calls the node's router, as the gateway wires it; set before
	// the node starts, the router is made after.
	wired := make([]atomic.Pointer[Router], n)
	tc := startCluster(t, n, ttl, 1024, func(_ *testCluster, i int) func(string) {
		return func(chat string) {
			if r := wired[i].Load(); r != nil {
				r.Lost(chat)
			}
		}
	})
	rc := &routed{testCluster: tc, wired: wired}
	for i, nd := range rc.nodes {
		o := newFakeOwner(nd)
		r := nd.NewRouter(o)
		rc.wired[i].Store(r)
		o.fan = nd.NewFanout(r)
		rc.owners = append(rc.owners, o)
		rc.routers = append(rc.routers, r)
		t.Cleanup(func() { r.Close() })
	}
	return rc
}

// serving lists the nodes that serve chat now (subscribed to its route).
func (rc *routed) serving(chat string) []string {
	var out []string
	for i, r := range rc.routers {
		r.mu.Lock()
		if oc := r.owned[chat]; oc != nil && oc.sub != nil && oc.sub.IsValid() {
			out = append(out, rc.opts[i].Name)
		}
		r.mu.Unlock()
	}
	return out
}

func send(t *testing.T, r *Router, chat, frame string) (node string, seq uint64) {
	t.Helper()
	out, err := r.Send(ctx(t), chat, []byte(frame))
	if err != nil {
		t.Fatalf("send %q: %v", frame, err)
	}
	node, s, _ := strings.Cut(string(out), " ")
	seq, err = strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("answer %q", out)
	}
	return node, seq
}

// TestRouteToOwnerAndTakeover: the first frame for an unowned chat makes
// the node it was sent to the owner; frames sent through the other nodes
// reach that owner; approval and recovery answers reach it by the chat
// their id names. When the owner stops renewing its lease (paused), it
// stops serving the chat before the lease can expire, another node takes
// the chat on the next frame, and at no moment do two nodes serve it.
func TestRouteToOwnerAndTakeover(t *testing.T) {
	rc := newRouted(t, 3, 3*time.Second)
	const chat = "c_route0001"
	if node, seq := send(t, rc.routers[1], chat, "first"); node != "n2" || seq != 1 {
		t.Fatalf("first frame answered by %s seq %d, want n2 1", node, seq)
	}
	for i, r := range rc.routers {
		if node, seq := send(t, r, chat, fmt.Sprint("via ", i)); node != "n2" || seq != uint64(i+2) {
			t.Fatalf("frame via node %d answered by %s seq %d, want n2 %d", i, node, seq, i+2)
		}
	}
	for _, id := range []string{ids.NewApproval(chat), ids.NewRecovery(chat)} {
		out, err := rc.routers[2].Answer(ctx(t), id, []byte("answer "+id))
		if err != nil || !strings.HasPrefix(string(out), "n2 ") {
			t.Fatalf("answer %s: %q %v, want n2's", id, out, err)
		}
	}
	if got := rc.serving(chat); fmt.Sprint(got) != "[n2]" {
		t.Fatalf("serving %v, want [n2]", got)
	}

	// Watch the responders from here on: never two.
	stop := make(chan struct{})
	var most atomic.Int32
	var watched sync.WaitGroup
	watched.Go(func() {
		for {
			most.Store(max(most.Load(), int32(len(rc.serving(chat)))))
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	rc.nodes[1].paused.Store(true)
	paused := time.Now()
	eventually(t, rc.opts[1].LeaseTTL, "the paused owner stops serving the chat within its lease TTL", func() bool {
		return !slices.Contains(rc.serving(chat), "n2")
	})
	node, seq := send(t, rc.routers[0], chat, "after")
	if node == "n2" || seq != 7 {
		t.Fatalf("after the takeover: answered by %s seq %d, want another node, seq 7", node, seq)
	}
	if node2, seq2 := send(t, rc.routers[1], chat, "from the old owner"); node2 != node || seq2 != 8 {
		t.Fatalf("via the old owner: answered by %s seq %d, want %s 8", node2, seq2, node)
	}
	// The old owner lets the chat go once its lease is gone (a whole
	// TTL unrenewed), not before: a renewal merely late keeps it.
	select {
	case got := <-rc.owners[1].closed:
		if got != chat {
			t.Fatalf("closed %q", got)
		}
		if d := time.Since(paused); d < rc.opts[1].LeaseTTL*2/3 {
			t.Fatalf("the paused owner let the chat go %v after its last renewal could have been, before its lease could end", d)
		}
	case <-time.After(2 * rc.opts[1].LeaseTTL):
		t.Fatal("the paused owner did not let the chat go within twice its lease TTL")
	}
	close(stop)
	watched.Wait()
	if most.Load() > 1 {
		t.Fatalf("%d nodes served the chat at once", most.Load())
	}
	if got := rc.serving(chat); fmt.Sprint(got) != "["+node+"]" {
		t.Fatalf("serving %v, want [%s]", got, node)
	}
	rc.nodes[1].paused.Store(false)
	if got := readSeqs(t, rc.nodes[2], chat); fmt.Sprint(got) != "[1 2 3 4 5 6 7 8]" {
		t.Fatalf("record %v", got)
	}
}

// TestRouteLostAndRelease: a lease the node is told it lost (OnLost) stops
// the chat at once; a released chat is opened by the next node asked.
func TestRouteLostAndRelease(t *testing.T) {
	rc := newRouted(t, 3, 3*time.Second)
	const chat = "c_route0002"
	send(t, rc.routers[0], chat, "one")
	rc.routers[0].Lost(chat)
	if got := <-rc.owners[0].closed; got != chat {
		t.Fatalf("closed %q", got)
	}
	if got := rc.serving(chat); len(got) != 0 {
		t.Fatalf("serving %v after Lost", got)
	}
	// Its lease was given up with it: the next frame opens the chat
	// where it is sent.
	if node, seq := send(t, rc.routers[2], chat, "two"); node != "n3" || seq != 2 {
		t.Fatalf("answered by %s seq %d, want n3 2", node, seq)
	}
	rc.routers[2].Release(chat)
	if got := <-rc.owners[2].closed; got != chat {
		t.Fatalf("closed %q", got)
	}
	if node, seq := send(t, rc.routers[1], chat, "three"); node != "n2" || seq != 3 {
		t.Fatalf("after release: answered by %s seq %d, want n2 3", node, seq)
	}
	if rc.owners[0].opened.Load() != 1 || rc.owners[2].opened.Load() != 1 || rc.owners[1].opened.Load() != 1 {
		t.Fatal("each owner should have opened the chat once")
	}
}

// TestRouteErrors: a chat id that cannot name a subject and an id that
// names no chat are refused before anything is sent; an error of the
// owner's comes back as a RemoteError.
func TestRouteErrors(t *testing.T) {
	for _, id := range []string{"", "a_", "a_c_x", "r_c_x_123", "c_1234567890abcdef", "a_c_x_0123456789ABCDEF"} {
		if _, err := ChatOf(id); !errors.Is(err, chats.ErrBadInput) {
			t.Errorf("ChatOf(%q): %v, want ErrBadInput", id, err)
		}
	}
	for _, chat := range []string{"c_x", "c_1234567890abcdef"} {
		for _, id := range []string{ids.NewApproval(chat), ids.NewRecovery(chat)} {
			if got, err := ChatOf(id); err != nil || got != chat {
				t.Errorf("ChatOf(%q) = %q %v", id, got, err)
			}
		}
	}
	rc := newRouted(t, 1, 3*time.Second)
	for _, chat := range []string{"c.x", "c_*", "", "c >"} {
		if _, err := rc.routers[0].Send(ctx(t), chat, nil); !errors.Is(err, chats.ErrBadInput) {
			t.Errorf("send to %q: %v, want ErrBadInput", chat, err)
		}
	}
	const chat = "c_route0003"
	send(t, rc.routers[0], chat, "one")
	// A second router on another connection asks the owner, whose chat
	// was closed under it: its error comes back.
	rc.owners[0].mu.Lock()
	delete(rc.owners[0].chats, chat)
	rc.owners[0].mu.Unlock()
	o := rc.nodes[0].o
	o.Name = "n9"
	other := &Router{n: &Node{o: o, nc: rc.nodes[0].nc, js: rc.nodes[0].js, ready: rc.nodes[0].ready}, owned: map[string]*ownedChat{}, taking: map[string]chan struct{}{}, owners: map[string]string{}}
	other.n.records, other.n.leases, other.n.nodes, _ = rc.nodes[0].buckets()
	_, err := other.Send(ctx(t), chat, []byte("two"))
	var re *RemoteError
	if !errors.As(err, &re) || re.Node != "n1" || !strings.Contains(re.Msg, "not open") {
		t.Fatalf("error %v, want n1's RemoteError", err)
	}
}

// TestRoute200ConcurrentSends is the test 2 at the library level:
// 200 frames sent at once to one chat through three nodes' routers; one
// node opens the chat, every frame is stored once, seqs 1..200.
func TestRoute200ConcurrentSends(t *testing.T) {
	rc := newRouted(t, 3, 5*time.Second)
	const chat, n = "c_route0200", 200
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	answers := make([]string, n)
	for i := range n {
		wg.Go(func() {
			c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			// A frame the owner could not confirm is sent again, as a
			// client does with its client_id: stored once either way.
			var out []byte
			var err error
			for try := 0; try < 3; try++ {
				if out, err = rc.routers[i%3].Send(c, chat, fmt.Appendf(nil, "msg %d", i)); err == nil {
					break
				}
				t.Logf("msg %d, try %d: %v", i, try, err)
			}
			if err != nil {
				errs <- err
				return
			}
			answers[i] = string(out)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		for i, o := range rc.owners {
			t.Logf("n%d opened the chat %d times", i+1, o.opened.Load())
		}
		records, _, _, _ := rc.nodes[0].buckets()
		for seq := uint64(1); ; seq++ {
			m, err := records.GetMsg(ctx(t), seq)
			if err != nil {
				break
			}
			if m.Header.Get(hdrKind) == kindClaim {
				t.Logf("claim at %d by %s", seq, m.Header.Get(hdrNode))
			}
		}
		t.FailNow()
	}
	t.Logf("%d sends through 3 nodes in %v", n, time.Since(start).Round(time.Millisecond))
	opened := 0
	for _, o := range rc.owners {
		opened += int(o.opened.Load())
	}
	if opened != 1 {
		t.Fatalf("the chat was opened %d times, want once", opened)
	}
	owner, _ := rc.nodes[0].OwnerOf(ctx(t), chat)
	seen := map[uint64]bool{}
	for i, a := range answers {
		node, s, _ := strings.Cut(a, " ")
		seq, _ := strconv.ParseUint(s, 10, 64)
		if node != owner || seq < 1 || seq > n || seen[seq] {
			t.Fatalf("answer %d %q (owner %s)", i, a, owner)
		}
		seen[seq] = true
	}
	texts := map[string]int{}
	var seqs []uint64
	if _, err := rc.nodes[1].Records().ReadEvents(ctx(t), chat, 1, func(e *chats.Event) error {
		seqs = append(seqs, e.Seq)
		texts[e.Message().Text]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seqs) != n {
		t.Fatalf("%d events stored, want %d", len(seqs), n)
	}
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("seq %d at %d: gap or repeat", s, i)
		}
	}
	for i := range n {
		if texts[fmt.Sprintf("msg %d", i)] != 1 {
			t.Fatalf("msg %d stored %d times", i, texts[fmt.Sprintf("msg %d", i)])
		}
	}
}
