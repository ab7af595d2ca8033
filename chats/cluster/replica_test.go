package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/ids"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/builtin"
	"github.com/mirror-gateway/mirror/runtime/tools"
	bolt "go.etcd.io/bbolt"
)

// gateModel is the built-in model behind a gate: each request waits for
// a release (or cancellation) unless the gate is open, then the built-in
// model answers it (a "/tool NAME {json}" message makes it call NAME).
type gateModel struct {
	open    atomic.Bool
	release chan struct{}
	started chan string // the last user message of each request
	inner   *builtin.Model
}

func newGateModel() *gateModel {
	return &gateModel{release: make(chan struct{}, 100), started: make(chan string, 100), inner: builtin.New(0)}
}

func (g *gateModel) Stream(ctx context.Context, req provider.Request, emit func(provider.Delta) error) (provider.Result, error) {
	last := ""
	for _, m := range req.Messages {
		if m.Role == provider.RoleUser {
			last = m.Content
		}
	}
	g.started <- last
	if !g.open.Load() {
		select {
		case <-g.release:
		case <-ctx.Done():
			return provider.Result{}, ctx.Err()
		}
	}
	return g.inner.Stream(ctx, req, emit)
}

// waitStarted waits (bounded) for a request whose last user message
// contains want.
func (g *gateModel) waitStarted(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case got := <-g.started:
			if strings.Contains(got, want) {
				return
			}
		case <-deadline:
			t.Fatalf("no model request for %q within 30s", want)
		}
	}
}

// svcNode is a chats.Service in cluster mode on one node, with its own
// bbolt file and workspace.
type svcNode struct {
	t     *testing.T
	n     *Node
	db    *bolt.DB
	store *chats.Store
	svc   *chats.Service
	model *gateModel
	ws    string
	claim map[string]*Claim // the chats' claims this node took
}

func newSvcNode(t *testing.T, n *Node) *svcNode { t.Helper(); return newSvcNodeLog(t, n, n.Records()) }

// newSvcNodeLog is newSvcNode with the Service's record log given.
func newSvcNodeLog(t *testing.T, n *Node, log chats.RecordLog) *svcNode {
	t.Helper()
	return newSvcNodeAt(t, n, log, "")
}

// newSvcNodeAt is newSvcNodeLog with the tools' workspace given ("": one
// of its own), so that nodes can share one.
func newSvcNodeAt(t *testing.T, n *Node, log chats.RecordLog, ws string) *svcNode {
	t.Helper()
	dir := t.TempDir()
	if ws == "" {
		ws = filepath.Join(dir, "ws")
	}
	db, err := chats.OpenDB(filepath.Join(dir, "mirror.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	store, err := chats.NewStore(db)
	if err != nil {
		t.Fatal(err)
	}
	sn := &svcNode{t: t, n: n, db: db, store: store, model: newGateModel(), ws: ws, claim: map[string]*Claim{}}
	eng, err := runtime.NewEngine([]*runtime.Model{{Name: "m", Provider: sn.model, Remote: "fake", Window: 128000}},
		map[string][]string{"default": {"m"}}, config.Roles{Chat: "default", Reflect: "default"}, 8)
	if err != nil {
		t.Fatal(err)
	}
	ledger, err := tools.NewLedger(db)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.New(tools.Options{Workspace: sn.ws, Ledger: ledger, Policies: map[string]tools.Policy{"write_file": tools.Allow}})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Provision(runtime.Options{Tools: reg}); err != nil {
		t.Fatal(err)
	}
	sn.svc = chats.New(chats.Options{Store: store, Turner: eng, Idle: time.Minute, Ledger: ledger, Workspace: reg.Workspace(),
		RecordLog: log, Log: testLog})
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		sn.svc.Close(c)
		store.Close()
		db.Close()
	})
	return sn
}

// take takes chat's lease on the node (waiting, bounded, for a previous
// owner's to end) and adopts the chat with fence (nil: the claim).
func (sn *svcNode) take(chat string, fence func(*Claim) chats.Fence) *Claim {
	sn.t.Helper()
	var c *Claim
	var at uint64
	var err error
	eventually(sn.t, 30*time.Second, "the chat's lease", func() bool {
		c, at, err = sn.n.ClaimChat(ctx(sn.t), chat)
		return err == nil
	})
	sn.claim[chat] = c
	var f chats.Fence = c
	if fence != nil {
		f = fence(c)
	}
	if err := sn.svc.Adopt(ctx(sn.t), chat, f, at); err != nil {
		sn.t.Fatal(err)
	}
	return c
}

// let gives the chat up: Disown, then the lease goes.
func (sn *svcNode) let(chat string) {
	sn.t.Helper()
	sn.svc.Disown(chat)
	if c := sn.claim[chat]; c != nil {
		if err := c.Release(ctx(sn.t)); err != nil {
			sn.t.Fatal(err)
		}
		delete(sn.claim, chat)
	}
}

// picked waits (bounded) until the chat's record on this node holds n
// turn.started rows: the pickup is committed.
func (sn *svcNode) picked(chat string, n int) {
	sn.t.Helper()
	eventually(sn.t, 30*time.Second, "the pickup committed", func() bool {
		k := 0
		for _, f := range sn.frames(chat) {
			if strings.HasSuffix(f, " "+chats.EvTurnStarted) {
				k++
			}
		}
		return k >= n
	})
}

// create stores a new chat's first flush in the log through the node's
// claim on it, as the owner that creates a chat does, and adopts it with
// fence (nil: the claim).
func (sn *svcNode) create(title string, fence func(*Claim) chats.Fence) string {
	sn.t.Helper()
	chat := ids.NewChat()
	c, at, err := sn.n.ClaimChat(ctx(sn.t), chat)
	if err != nil {
		sn.t.Fatal(err)
	}
	sn.claim[chat] = c
	var fc chats.Fence = c
	if fence != nil {
		fc = fence(c)
	}
	if err := sn.svc.Adopt(ctx(sn.t), chat, fc, at); err != nil {
		sn.t.Fatal(err)
	}
	// Create makes its own id, which this node has not claimed: refused,
	// nothing stored.
	if _, err := sn.svc.Create(ctx(sn.t), title, "", chats.Origin{}); !errors.Is(err, chats.ErrFenced) {
		sn.t.Fatalf("create of an unclaimed chat in cluster mode: %v, want ErrFenced", err)
	}
	now := time.Now().UTC()
	f := &chats.Flush{Chat: chat, Events: []*chats.Event{chats.NewEvent(chat, 1, now, &chats.ChatCreated{Title: title})},
		Meta: chats.Chat{ID: chat, Title: title, Chain: "default", State: chats.StateIdle, CreatedAt: now, UpdatedAt: now, Seq: 1}}
	pos, err := sn.n.Records().Append(ctx(sn.t), chat, at, f)
	if err != nil {
		sn.t.Fatal(err)
	}
	if err := sn.svc.Adopt(ctx(sn.t), chat, fc, pos); err != nil {
		sn.t.Fatal(err)
	}
	return chat
}

// frames are the chat's stored events on this node, as "seq type".
func (sn *svcNode) frames(chat string) []string {
	sn.t.Helper()
	fs, err := sn.svc.Events(ctx(sn.t), chat, 0, 64<<20)
	if err != nil {
		sn.t.Fatal(err)
	}
	var out []string
	for _, f := range fs {
		var e chats.Event
		if err := e.UnmarshalJSON(f.Raw); err != nil {
			sn.t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d %s", f.Seq, e.Type))
	}
	return out
}

// finished counts the chat's turn.finished rows on this node.
func (sn *svcNode) finished(chat string) int {
	n := 0
	for _, f := range sn.frames(chat) {
		if strings.HasSuffix(f, " "+chats.EvTurnFinished) {
			n++
		}
	}
	return n
}

// recorder is a subscriber that keeps what it gets.
type recorder struct {
	mu  sync.Mutex
	got []chats.Delivery
}

func (r *recorder) Deliver(d chats.Delivery) {
	r.mu.Lock()
	r.got = append(r.got, d)
	r.mu.Unlock()
}

func (r *recorder) snapshot() *chats.Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	var sn *chats.Snapshot
	for _, d := range r.got {
		if d.Snapshot != nil {
			sn = d.Snapshot
		}
	}
	return sn
}

func (r *recorder) has(f func(chats.Delivery) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.got {
		if f(d) {
			return true
		}
	}
	return false
}

// newSvcCluster is three nodes for tests that run chats on them: a lease
// TTL of 3 s, so a loaded machine's late renewal does not count as a
// lost lease while turns run.
func newSvcCluster(t *testing.T) *testCluster {
	t.Helper()
	return startCluster(t, 3, 3*time.Second, 16, func(tc *testCluster, _ int) func(string) {
		return func(chat string) {
			select {
			case tc.lost <- chat:
			default:
			}
		}
	})
}

// TestChatMovesBetweenNodes: a chat used on node A (answered turns, a
// tool call, a client id, a running turn and a pending message when A
// lets go) is adopted by node B from the log alone: B has the same
// record, the same pending message, answers a resend of a client_id with
// the same message, resumes the interrupted turn once and goes on with
// the next seq; the work index follows the chat's state.
func TestChatMovesBetweenNodes(t *testing.T) {
	tc := newSvcCluster(t)
	a, b := newSvcNode(t, tc.nodes[0]), newSvcNode(t, tc.nodes[1])
	chat := a.create("moving", nil)
	bg := ctx(t)

	a.model.open.Store(true)
	if _, err := a.svc.Send(bg, chat, "hello there", "k1", "", chats.Origin{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the first answer on A", func() bool { return a.finished(chat) == 1 })
	if _, err := a.svc.Send(bg, chat, `/tool write_file {"path":"a.txt","content":"from A"}`, "k2", "", chats.Origin{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the tool turn's answer on A", func() bool { return a.finished(chat) == 2 })
	if data, err := os.ReadFile(filepath.Join(a.ws, "a.txt")); err != nil || string(data) != "from A" {
		t.Fatalf("the tool did not run on A: %q %v", data, err)
	}

	// A turn that runs when A lets go, and a message waiting behind it.
	a.model.open.Store(false)
	if _, err := a.svc.Send(bg, chat, "third, interrupted", "k3", "", chats.Origin{}); err != nil {
		t.Fatal(err)
	}
	a.model.waitStarted(t, "third, interrupted")
	a.picked(chat, 3)
	queued, err := a.svc.Send(bg, chat, "fourth, queued", "k4", "", chats.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	work, err := tc.nodes[2].WorkLeft(bg)
	if err != nil || len(work) != 1 || work[0] != chat {
		t.Fatalf("work index while a turn runs: %v %v", work, err)
	}
	aFrames := a.frames(chat)
	aInfo, err := a.svc.Get(bg, chat)
	if err != nil {
		t.Fatal(err)
	}

	// A lets go: its turn stops, nothing more is written.
	a.let(chat)
	b.take(chat, nil)
	bFrames := b.frames(chat)
	if len(bFrames) < len(aFrames) || strings.Join(bFrames[:len(aFrames)], "\n") != strings.Join(aFrames, "\n") {
		t.Fatalf("B's record does not start with A's:\nA %v\nB %v", aFrames, bFrames)
	}
	for i, f := range bFrames {
		if !strings.HasPrefix(f, fmt.Sprint(i+1)+" ") {
			t.Fatalf("B's record has a gap at %d: %v", i+1, bFrames)
		}
	}
	// B answered the interrupted turn first (a turn.failed, then the
	// resumed turn), after A's last seq.
	if rest := bFrames[len(aFrames):]; len(rest) == 0 || rest[0] != fmt.Sprintf("%d %s", aInfo.Seq+1, chats.EvTurnFailed) {
		t.Fatalf("B's first rows after A's (seq %d): %v", aInfo.Seq, rest)
	}
	b.model.waitStarted(t, "third, interrupted")
	sub := &recorder{}
	if err := b.svc.Open(bg, chat, nil, sub, "r1"); err != nil {
		t.Fatal(err)
	}
	if sn := sub.snapshot(); sn == nil || len(sn.Pending) != 1 || sn.Pending[0].ID != queued.ID || sn.Running == nil {
		t.Fatalf("B's snapshot: %+v", sn)
	}
	// The same client_id on B answers the message A stored.
	again, err := b.svc.Send(bg, chat, "fourth, queued", "k4", "", chats.Origin{})
	if err != nil || again.ID != queued.ID {
		t.Fatalf("resend of k4 on B: %+v %v, want %s", again, err, queued.ID)
	}
	b.model.open.Store(true)
	b.model.release <- struct{}{}
	eventually(t, 30*time.Second, "B answers the interrupted turn and the queued message", func() bool { return b.finished(chat) == 4 })
	final := b.frames(chat)
	for i, f := range final {
		if !strings.HasPrefix(f, fmt.Sprint(i+1)+" ") {
			t.Fatalf("B's record has a gap at %d: %v", i+1, final)
		}
	}
	eventually(t, 10*time.Second, "the work index empties", func() bool {
		w, err := tc.nodes[2].WorkLeft(bg)
		return err == nil && len(w) == 0
	})
	// A's bbolt stayed as A left it: A wrote nothing after letting go.
	if got := a.frames(chat); strings.Join(got, "\n") != strings.Join(aFrames, "\n") {
		t.Fatalf("A wrote after Disown: %v", got[len(aFrames):])
	}
	if _, err := a.svc.Send(bg, chat, "from A again", "k5", "", chats.Origin{}); !errors.Is(err, chats.ErrFenced) {
		t.Fatalf("send on A after Disown: %v, want ErrFenced", err)
	}
}

// liar is a fence that says it holds whatever its lease says: a node
// that does not know yet it lost the chat (a paused process), so only
// the store's fence stands between it and the record.
type liar struct{ *Claim }

func (liar) Held() bool { return true }

// TestStaleOwnerIsFenced: an owner that lost its lease without knowing
// has its next flush refused by the store (ErrFenced): its turn stops
// before the tool call it had in hand runs, and it writes nothing more;
// the new owner's record holds none of it.
func TestStaleOwnerIsFenced(t *testing.T) {
	tc := newSvcCluster(t)
	a, b := newSvcNode(t, tc.nodes[0]), newSvcNode(t, tc.nodes[1])
	chat := a.create("fenced", func(c *Claim) chats.Fence { return liar{c} })
	bg := ctx(t)

	sub := &recorder{}
	if err := a.svc.Open(bg, chat, nil, sub, "r1"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.svc.Send(bg, chat, `/tool write_file {"path":"late.txt","content":"stale"}`, "k1", "", chats.Origin{}); err != nil {
		t.Fatal(err)
	}
	a.model.waitStarted(t, "/tool write_file")
	a.picked(chat, 1)
	aFrames := a.frames(chat)

	// A stops renewing; B takes the chat once A's lease expired.
	tc.nodes[0].paused.Store(true)
	t.Cleanup(func() { tc.nodes[0].paused.Store(false) })
	b.take(chat, nil)

	// A's model now answers with the call: the step's flush is refused.
	a.model.release <- struct{}{}
	eventually(t, 30*time.Second, "A's subscriber is told the chat closed", func() bool {
		return sub.has(func(d chats.Delivery) bool { return d.Closed == chat })
	})
	if _, err := os.Stat(filepath.Join(a.ws, "late.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the stale owner ran the tool: %v", err)
	}
	if got := a.frames(chat); strings.Join(got, "\n") != strings.Join(aFrames, "\n") {
		t.Fatalf("the stale owner wrote %v", got[len(aFrames):])
	}
	for _, f := range b.frames(chat) {
		if strings.HasSuffix(f, " "+chats.EvAssistantStep) || strings.HasSuffix(f, " "+chats.EvToolCall) {
			t.Fatalf("the new owner's record holds the stale owner's step: %v", b.frames(chat))
		}
	}
	if _, err := a.svc.Send(bg, chat, "late", "k2", "", chats.Origin{}); !errors.Is(err, chats.ErrFenced) {
		t.Fatalf("send on the fenced owner: %v, want ErrFenced", err)
	}
}

// TestUnconfirmedFlushIsNotAcknowledged is the test 9 through a
// chat: with two of three NATS servers stopped a send fails with the
// clear "did not confirm" error and its sender gets no event; once the
// servers are back and the chat is adopted again, every acknowledged
// message and answer is there, the refused message at most once.
func TestUnconfirmedFlushIsNotAcknowledged(t *testing.T) {
	tc := newSvcCluster(t)
	a := newSvcNode(t, tc.nodes[0])
	chat := a.create("quorum", nil)
	bg := ctx(t)
	a.model.open.Store(true)
	m1, err := a.svc.Send(bg, chat, "acknowledged", "k1", "", chats.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the first answer", func() bool { return a.finished(chat) == 1 })
	acked := a.frames(chat)

	var wg sync.WaitGroup
	for _, i := range []int{1, 2} {
		wg.Go(func() { tc.stop(i) })
	}
	wg.Wait()
	sub := &recorder{}
	_, err = a.svc.Send(bg, chat, "not confirmed", "k2", "", chats.Origin{Sub: sub, Req: "r2"})
	if !errors.Is(err, chats.ErrUnavailable) || !strings.Contains(err.Error(), "did not confirm") || !strings.Contains(err.Error(), "nothing was accepted") {
		t.Fatalf("send with two of three servers down: %v", err)
	}
	t.Logf("refused: %v", err)
	if sub.has(func(d chats.Delivery) bool { return d.Event != nil }) {
		t.Fatal("the refused send's asker got an event")
	}

	tc.start(1)
	tc.start(2)
	tc.waitReady()
	// The lease either ran out during the outage (taken again here, the
	// tail read on adoption) or outlived it (renewed once the servers
	// answer: still this node's, and the Service loads the chat again by
	// itself, the tail read first). Which one depends on how long the
	// outage took.
	old := a.claim[chat]
	eventually(t, 30*time.Second, "the old lease renewed or gone", func() bool { return old.Held() || old.lease.Gone() })
	if old.lease.Gone() {
		delete(a.claim, chat)
		a.take(chat, nil)
	}
	m3, err := a.svc.Send(bg, chat, "after the outage", "k3", "", chats.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the answer after the outage", func() bool {
		n := a.finished(chat)
		return n >= 2
	})
	got := a.frames(chat)
	if strings.Join(got[:len(acked)], "\n") != strings.Join(acked, "\n") {
		t.Fatalf("acknowledged rows changed:\nbefore %v\nafter %v", acked, got)
	}
	// The refused message may have landed (once), never twice.
	again, err := a.svc.Send(bg, chat, "acknowledged", "k1", "", chats.Origin{})
	if err != nil || again.ID != m1.ID {
		t.Fatalf("resend of k1: %+v %v", again, err)
	}
	accepted := 0
	for _, f := range got {
		if strings.HasSuffix(f, " "+chats.EvMessageAccepted) {
			accepted++
		}
	}
	if accepted < 2 || accepted > 3 {
		t.Fatalf("%d messages accepted, want 2 (or 3 with the refused one landed): %v", accepted, got)
	}
	if m3.Seq <= m1.Seq {
		t.Fatalf("seq went back: %d after %d", m3.Seq, m1.Seq)
	}
	// Another node reads the same record from the log.
	b := newSvcNode(t, tc.nodes[1])
	a.let(chat)
	b.take(chat, nil)
	if bf := b.frames(chat); len(bf) < len(got) || strings.Join(bf[:len(got)], "\n") != strings.Join(got, "\n") {
		t.Fatalf("B reads another record:\nA %v\nB %v", got, bf)
	}
}

// TestReadFromPosition: Read gives a chat's flushes after a position,
// each with its own position, skipping other chats' messages and claims
// between them; ReadEvents from any seq gives exactly the events from it
// on; the work index follows the flushes' metadata and is written only
// when a chat's state changes.
func TestReadFromPosition(t *testing.T) {
	tc := newCluster(t, 1)
	nd := tc.nodes[0]
	r := nd.Records()
	const chat, other = "c_read01", "c_read02"
	c1, at1, err := nd.ClaimChat(ctx(t), chat)
	if err != nil {
		t.Fatal(err)
	}
	_, at2, err := nd.ClaimChat(ctx(t), other)
	if err != nil {
		t.Fatal(err)
	}
	var positions []uint64
	for i := uint64(0); i < 20; i++ {
		f := flushOf(chat, 2*i+1, 2*i+2)
		f.Meta.Pending = int(i % 2) // work, none, work...
		if at1, err = r.Append(ctx(t), chat, at1, f); err != nil {
			t.Fatal(err)
		}
		positions = append(positions, at1)
		if at2, err = r.Append(ctx(t), other, at2, flushOf(other, i+1, i+1)); err != nil {
			t.Fatal(err)
		}
		if i == 9 { // a new owner's claim in the middle
			if err := c1.Release(ctx(t)); err != nil {
				t.Fatal(err)
			}
			if c1, at1, err = nd.ClaimChat(ctx(t), chat); err != nil {
				t.Fatal(err)
			}
		}
	}
	for k := range positions {
		var got []uint64
		var first uint64
		last, err := r.Read(ctx(t), chat, positions[k], func(pos uint64, f *chats.Flush) error {
			if len(got) == 0 {
				first = f.First()
			}
			got = append(got, pos)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(positions[k+1:]) || last != positions[len(positions)-1] {
			t.Fatalf("after %d: %v (last %d), want %v", positions[k], got, last, positions[k+1:])
		}
		if len(got) > 0 && first != uint64(2*k+3) {
			t.Fatalf("after %d the first flush starts at seq %d", positions[k], first)
		}
	}
	for from := uint64(1); from <= 41; from++ {
		if got, want := fmt.Sprint(readFrom(t, nd, chat, from)), fmt.Sprint(seqRange(from, 40)); got != want {
			t.Fatalf("events from %d: %s, want %s", from, got, want)
		}
	}
	// A read costs what it returns: the last flush's events read one
	// message, an older seq a binary search, never a walk from the start.
	// (A walk from the start gets each of the chat's 22 messages.)
	for _, c := range []struct{ from, most int64 }{{40, 1}, {39, 1}, {31, 7 + 5}} {
		before := nd.gets.Load()
		readFrom(t, nd, chat, uint64(c.from))
		if n := nd.gets.Load() - before; n > c.most {
			t.Errorf("events from %d: %d gets, want at most %d", c.from, n, c.most)
		}
	}
	if got := readSeqs(t, nd, "c_nothing"); len(got) != 0 {
		t.Fatalf("a chat never written reads %v", got)
	}

	// The last flush of chat left work (Pending 1), other's none.
	if w, err := nd.WorkLeft(ctx(t)); err != nil || fmt.Sprint(w) != "["+chat+"]" {
		t.Fatalf("work left: %v %v", w, err)
	}
	nd.mu.Lock()
	kv := nd.work
	nd.mu.Unlock()
	e1, err := kv.Get(ctx(t), chat)
	if err != nil {
		t.Fatal(err)
	}
	f := flushOf(chat, 41, 41)
	f.Meta.Pending = 3 // still work: the index is not written again
	if at1, err = r.Append(ctx(t), chat, at1, f); err != nil {
		t.Fatal(err)
	}
	if e2, err := kv.Get(ctx(t), chat); err != nil || e2.Revision() != e1.Revision() {
		t.Fatalf("the work index was rewritten without a change: %v %v", e2, err)
	}
	if _, err = r.Append(ctx(t), chat, at1, flushOf(chat, 42, 42)); err != nil {
		t.Fatal(err)
	}
	if w, err := nd.WorkLeft(ctx(t)); err != nil || len(w) != 0 {
		t.Fatalf("work left after the chat's work ended: %v %v", w, err)
	}

	// Another owner changes the index meanwhile (it had work, then took
	// it off): taking the chat back, this node writes the state its next
	// flush leaves, whatever it remembered.
	f = flushOf(chat, 43, 43)
	f.Meta.Pending = 1
	if at1, err = r.Position(ctx(t), chat); err != nil {
		t.Fatal(err)
	}
	if at1, err = r.Append(ctx(t), chat, at1, f); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx(t), chat); err != nil { // the other owner
		t.Fatal(err)
	}
	if err := c1.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if c1, at1, err = nd.ClaimChat(ctx(t), chat); err != nil {
		t.Fatal(err)
	}
	f = flushOf(chat, 44, 44)
	f.Meta.Pending = 1
	if _, err = r.Append(ctx(t), chat, at1, f); err != nil {
		t.Fatal(err)
	}
	if w, err := nd.WorkLeft(ctx(t)); err != nil || fmt.Sprint(w) != "["+chat+"]" {
		t.Fatalf("work left after this node took the chat back: %v %v", w, err)
	}
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}
