package telegram

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/chats/cluster"
	bolt "go.etcd.io/bbolt"
)

// replicaBot makes a bot of node tg over st's chats service, with a
// database of its own (as a node of a cluster has: the chats are the
// cluster's, the bot's bucket is the node's copy); started when start.
func replicaBot(t testing.TB, st *stack, tg *cluster.Telegram, start bool) *Bot {
	t.Helper()
	return replicaBotOver(t, st, tg, tg, start)
}

// replicaBotOver is replicaBot with the log reached through r.
func replicaBotOver(t testing.TB, st *stack, tg *cluster.Telegram, r Replica, start bool) *Bot {
	t.Helper()
	db, err := chats.OpenDB(filepath.Join(t.TempDir(), "node.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	store, err := chats.NewStore(db)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(context.Background(), Options{Config: st.cfg, Token: botToken, Chats: st.svc, Store: store,
		ChatInterval: testChatInterval, GlobalRate: testGlobalRate, PollTimeout: 10 * time.Second, WebhookSecret: "s3cret",
		Leader: tg, Offsets: tg, Replica: r})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Close()
		store.Close()
		db.Close()
	})
	if start {
		if err := b.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// TestClusterBotStateCarriesOver: three nodes' bots over one chats
// service, each bot's bucket in a database of its own. The leader streams
// a reply into Telegram when its node goes; the bot that leads next
// caught up with the cluster's copy of the bucket: it finishes that reply
// in the message the first one started (its final text in one message),
// and the next message of the Telegram chat continues the same chat. The
// bots that do not lead have the same copy, and never send.
func TestClusterBotStateCarriesOver(t *testing.T) {
	cn := startNodes(t, 3)
	gate := &gateModel{release: make(chan struct{}, 10)}
	fake := newFake(t, fakeInterval, fakeGlobal)
	tg0 := cn.nodes[0].Telegram()
	t.Cleanup(tg0.Close)
	st := newStackWith(t, stackOpts{model: gate, fake: fake, leader: tg0, offsets: tg0, replica: tg0})
	bots := []*Bot{st.bot}
	for _, nd := range cn.nodes[1:] {
		tg := nd.Telegram()
		t.Cleanup(tg.Close)
		bots = append(bots, replicaBot(t, st, tg, true))
	}
	leader := -1
	fake.waitFor("a bot leading", func() bool {
		for i, b := range bots {
			if b.leading() {
				leader = i
				return true
			}
		}
		return false
	})

	fake.pushText(111, 111, "first")
	fake.waitFor("the reply streaming", func() bool { return fake.hasTextLocked(111, "partial") })
	fake.mu.Lock()
	started := fake.msgWithLocked(111, "partial").ID
	fake.mu.Unlock()
	chat := bots[leader].currentChat(111)
	if chat == "" {
		t.Fatal("the leader has no current chat for the Telegram chat")
	}
	// The follower's state with the message it started is in the log:
	// every other node applies it.
	fake.waitFor("the streaming message's id on every node", func() bool {
		for _, b := range bots {
			if fs, ok := b.loadFollow(at(111), chat); !ok || len(fs.MsgIDs) == 0 || b.currentChat(111) != chat {
				return false
			}
		}
		return true
	})
	fake.mu.Lock()
	sent := fake.calls["sendMessage"] + fake.calls["editMessageText"]
	fake.mu.Unlock()

	bots[leader].Close()
	cn.close(leader)
	gate.release <- struct{}{}
	next := -1
	fake.waitFor("another bot leading", func() bool {
		for i, b := range bots {
			if i != leader && b.leading() {
				next = i
				return true
			}
		}
		return false
	})
	fake.waitFor("the reply finished", func() bool { return fake.hasTextLocked(111, "answer to first") })
	fake.mu.Lock()
	finished := fake.msgWithLocked(111, "answer to first").ID
	fake.mu.Unlock()
	if finished != started {
		t.Fatalf("the reply was finished in message %d, want the one the first leader started (%d): %q", finished, started, fake.texts(111))
	}
	if n := count(fake.texts(111), "answer to first"); n != 1 {
		t.Fatalf("the final text is in %d messages, want 1: %q", n, fake.texts(111))
	}

	fake.pushText(111, 111, "second")
	gate.release <- struct{}{}
	fake.waitFor("the next answer", func() bool { return fake.hasTextLocked(111, "answer to second") })
	if got := bots[next].currentChat(111); got != chat {
		t.Fatalf("the new leader's current chat is %q, want %q", got, chat)
	}
	list, err := st.svc.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("%d chats, want the one the first message made (the second continues it)", len(list))
	}
	fake.mu.Lock()
	after := fake.calls["sendMessage"] + fake.calls["editMessageText"]
	fake.mu.Unlock()
	if after <= sent {
		t.Fatalf("no send or edit after the leader went (%d, %d)", sent, after)
	}

	// A new chat: the follower left behind retires, its state deleted on
	// every node's copy.
	fake.pushText(111, 111, "/new")
	fake.waitFor("the old chat's follower gone from every copy", func() bool {
		for i, b := range bots {
			if i == leader {
				continue
			}
			if _, ok := b.loadFollow(at(111), chat); ok || b.currentChat(111) == chat {
				return false
			}
		}
		return true
	})
}

// TestClusterStaleLeaderWriteRefused: a bot whose claim another node's
// bot superseded has every write of its leader work refused, whether its
// copy is behind the log or caught up with it, and the log and the new
// leader's copy hold nothing of it; a write any node may make (a pairing
// approved) is stored after catching up.
func TestClusterStaleLeaderWriteRefused(t *testing.T) {
	cn := startNodes(t, 1)
	st := newStackWith(t, stackOpts{fake: newFake(t, fakeInterval, fakeGlobal)})
	ctx := context.Background()
	tgOld, tgCur := cn.nodes[0].Telegram(), cn.nodes[0].Telegram()
	t.Cleanup(tgOld.Close)
	t.Cleanup(tgCur.Close)
	old := replicaBot(t, st, tgOld, false)
	cur := replicaBot(t, st, tgCur, false)
	lead := func(b *Bot) {
		t.Helper()
		c, err := b.claimLead(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b.claim.Store(c)
	}
	put := func(b *Bot, k string) error {
		return b.write(func(bk stateBucket) error { return bk.Put([]byte(k), []byte("v")) })
	}
	has := func(b *Bot, k string) bool {
		found := false
		_ = b.read(func(bk stateBucket) error { found = bk.Get([]byte(k)) != nil; return nil })
		return found
	}

	if err := put(old, "k-before"); !errors.Is(err, errNotLeading) {
		t.Fatalf("a write before any claim: %v, want refused", err)
	}
	lead(old)
	if err := put(old, "k1"); err != nil {
		t.Fatal(err)
	}
	lead(cur) // catches up first
	if !has(cur, "k1") {
		t.Fatal("the new leader's copy lacks the old leader's write")
	}
	// Behind the log: the store refuses the append.
	if err := put(old, "k-behind"); !errors.Is(err, chats.ErrFenced) {
		t.Fatalf("a stale leader's write on a stale copy: %v, want fenced", err)
	}
	// Caught up: its claim is not the last one.
	if err := old.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if err := put(old, "k-caught-up"); !errors.Is(err, errNotLeading) {
		t.Fatalf("a stale leader's write on a caught-up copy: %v, want refused", err)
	}
	if err := put(cur, "k2"); err != nil {
		t.Fatal(err)
	}
	// A write any node may make goes after the copy caught up (with k2).
	if err := old.writeAny(func(bk stateBucket) error { return bk.Put([]byte("k-any"), []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	if err := cur.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	for _, b := range []*Bot{old, cur} {
		for k, want := range map[string]bool{"k-before": false, "k1": true, "k-behind": false, "k-caught-up": false, "k2": true, "k-any": true} {
			if got := has(b, k); got != want {
				t.Errorf("%s: has %s = %v, want %v", b.opt.Replica.Name(), k, got, want)
			}
		}
	}
	// The log holds the two claims and the three writes, nothing else.
	var kinds []string
	if err := cur.opt.Replica.Read(ctx, 0, func(_ uint64, data []byte) error {
		e, err := decodeEntry(data)
		if err != nil {
			return err
		}
		if e.Claim {
			kinds = append(kinds, "claim")
		} else {
			kinds = append(kinds, string(e.Ops[0].Key))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(kinds, " "); got != "claim k1 claim k2 k-any" {
		t.Fatalf("the log holds %q", got)
	}
}

// TestSingleNodeWriteUnchanged: without a cluster a write is the bbolt
// write it always was: no log position is kept.
func TestSingleNodeWriteUnchanged(t *testing.T) {
	st := newStackWith(t, stackOpts{})
	if err := st.bot.write(func(bk stateBucket) error {
		if _, ok := bk.(*bolt.Bucket); !ok {
			return fmt.Errorf("the bucket is a %T", bk)
		}
		return bk.Put([]byte("k"), []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	_ = st.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(logBucket) != nil {
			t.Error("a single node keeps a log position")
		}
		return nil
	})
}

func TestEntryRoundTrip(t *testing.T) {
	for _, e := range []logEntry{
		{Claim: true, Node: "n1"},
		{Node: "n2", Ops: []logOp{{Key: []byte("cur/111"), Val: []byte("c1")}}},
		{Node: "n3", Ops: []logOp{{Key: []byte("f/111/c1"), Val: []byte(`{"tg":111}`)}, {Key: []byte("g/1/x"), Del: true}, {Key: []byte("e"), Val: []byte{}}}},
	} {
		data := encodeEntry(e)
		got, err := decodeEntry(data)
		if err != nil {
			t.Fatalf("%+v: %v", e, err)
		}
		if !bytes.Equal(encodeEntry(got), data) || got.Claim != e.Claim || got.Node != e.Node || len(got.Ops) != len(e.Ops) {
			t.Fatalf("%+v decoded as %+v", e, got)
		}
	}
}

func TestEntryRefused(t *testing.T) {
	valid := encodeEntry(logEntry{Node: "n", Ops: []logOp{{Key: []byte("k"), Val: []byte("v")}}})
	for name, data := range map[string][]byte{
		"empty":              nil,
		"other magic":        append([]byte("MTG2"), valid[4:]...),
		"unknown kind":       append([]byte("MTG1x"), valid[5:]...),
		"no node":            []byte("MTG1w\x00\x01p\x01k\x01v"),
		"claim with writes":  []byte("MTG1c\x01n\x01p\x01k\x01v"),
		"write of nothing":   []byte("MTG1w\x01n\x00"),
		"empty key":          []byte("MTG1w\x01n\x01p\x00\x01v"),
		"unknown op":         []byte("MTG1w\x01n\x01x\x01k\x01v"),
		"truncated value":    []byte("MTG1w\x01n\x01p\x01k\x05v"),
		"trailing bytes":     append(append([]byte(nil), valid...), 0),
		"overlong length":    []byte("MTG1w\x81\x00n\x01p\x01k\x01v"),
		"too many ops":       []byte("MTG1w\x01n\xff\xff\x03p\x01k\x01v"),
		"missing op":         []byte("MTG1w\x01n\x02p\x01k\x01vd"),
		"truncated count":    []byte("MTG1w\x01n\x80"),
		"node past the end":  []byte("MTG1w\x09n"),
		"delete with value?": []byte("MTG1w\x01n\x01d\x01k\x01v"),
	} {
		if _, err := decodeEntry(data); !errors.Is(err, chats.ErrBadInput) {
			t.Errorf("%s: %v, want refused", name, err)
		}
	}
}

// FuzzDecodeEntry: the log's entries come from the network; decoding never
// panics, and what it accepts is exactly what encoding gives back.
func FuzzDecodeEntry(f *testing.F) {
	f.Add(encodeEntry(logEntry{Claim: true, Node: "n1"}))
	f.Add(encodeEntry(logEntry{Node: "n2", Ops: []logOp{{Key: []byte("cur/111"), Val: []byte("c1")}, {Key: []byte("x/1"), Del: true}}}))
	f.Add([]byte("MTG1w\x01n\x01p\x01k\x01v"))
	f.Add(encodeEntry(logEntry{Snap: true, Node: "n1", SnapClaim: 9, SnapBy: "n2", Part: 2, Last: true,
		Ops: []logOp{{Key: []byte("a"), Val: []byte("1")}, {Key: []byte("b"), Val: []byte{}}}}))
	f.Add(encodeEntry(logEntry{Snap: true, Node: "n1", SnapClaim: 1, SnapBy: "n1", Last: true}))
	f.Add([]byte("MTG1s\x01n\x01\x01n\x00\x01\x02p\x01k\x01vp\x01a\x01v"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := decodeEntry(data)
		if err != nil {
			if !errors.Is(err, chats.ErrBadInput) {
				t.Fatalf("an error not marked bad input: %v", err)
			}
			return
		}
		if !bytes.Equal(encodeEntry(e), data) {
			t.Fatalf("%q decoded as %+v, which encodes otherwise", data, e)
		}
	})
}

// BenchmarkStateWrite is one write of the bot's bucket (a follower's
// state): on one node, a bbolt commit; in a cluster of three in-process
// nodes, a synced append to the replicated log (three replicas) inside
// that commit.
func BenchmarkStateWrite(b *testing.B) {
	v := []byte(`{"tg":111,"chat":"c","last_seq":42,"turn":"t","msg_ids":[501]}`)
	run := func(b *testing.B, bot *Bot) {
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if err := bot.write(func(bk stateBucket) error { return bk.Put([]byte("f/111/c"), append(v, byte('0'+i%10))) }); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("single", func(b *testing.B) { run(b, newStackWith(b, stackOpts{}).bot) })
	b.Run("cluster3", func(b *testing.B) {
		cn := startNodes(b, 3)
		st := newStackWith(b, stackOpts{})
		tg := cn.nodes[0].Telegram()
		b.Cleanup(tg.Close)
		bot := replicaBot(b, st, tg, false)
		c, err := bot.claimLead(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		bot.claim.Store(c)
		run(b, bot)
	})
}
