package telegram

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/chats/cluster"
	bolt "go.etcd.io/bbolt"
)

// smallReplica is the cluster's log with a smaller largest entry, so that
// a test's snapshot comes in several parts.
type smallReplica struct {
	*cluster.Telegram
	max int
}

func (r smallReplica) MaxEntry() int { return r.max }

// compactingBot is node tg's replicated bot (not started) compacting
// every `every` entries, in entries of at most max bytes (0: the
// cluster's largest).
func compactingBot(t testing.TB, st *stack, tg *cluster.Telegram, max int, every uint64) *Bot {
	t.Helper()
	var r Replica = tg
	if max > 0 {
		r = smallReplica{tg, max}
	}
	b := replicaBotOver(t, st, tg, r, false)
	b.compactEvery = every
	return b
}

// leadBot makes b the log's leader (a claim after catching up) with its
// stint's leader work (the compactor) started, until the test ends.
func leadBot(t testing.TB, b *Bot) uint64 {
	t.Helper()
	ctx := context.Background()
	c, err := b.claimLead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lr, err := b.beginLead(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.endLead(lr) })
	return c
}

// dump is the bot's bucket.
func dump(t testing.TB, b *Bot) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := b.read(func(bk stateBucket) error {
		c := bk.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			out[string(k)] = string(v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// logShape is what the log holds: its entries, their bytes, and each
// entry's kind ('w', 'c', 's').
func logShape(t testing.TB, r Replica) (n, size int, kinds string) {
	t.Helper()
	if err := r.Read(context.Background(), 0, func(_ uint64, data []byte) error {
		e, err := decodeEntry(data)
		if err != nil {
			return err
		}
		n, size = n+1, size+len(data)
		switch {
		case e.Snap:
			kinds += "s"
		case e.Claim:
			kinds += "c"
		default:
			kinds += "w"
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n, size, kinds
}

// eventually waits, bounded, for cond.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func putKey(b *Bot, k, v string) error {
	return b.write(func(bk stateBucket) error { return bk.Put([]byte(k), []byte(v)) })
}

func deleteKey(b *Bot, k string) error {
	return b.write(func(bk stateBucket) error { return bk.Delete([]byte(k)) })
}

// TestClusterStateCompacted: after many writes the log holds a snapshot
// and a bounded tail; a node that was away while it was compacted (its
// copy's position purged) catches up to the same bucket, deletes made
// while it was away included; a node starting fresh gets the same bucket.
// The snapshot comes in parts when larger than one entry.
func TestClusterStateCompacted(t *testing.T) {
	const every = 20
	cn := startNodes(t, 3)
	st := newStackWith(t, stackOpts{fake: newFake(t, fakeInterval, fakeGlobal)})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		max  int // the largest entry; 0: the cluster's
	}{{"one part", 0}, {"parts", 700}} {
		t.Run(tc.name, func(t *testing.T) {
			bot := func(i int) *Bot {
				tg := cn.nodes[i].Telegram()
				t.Cleanup(tg.Close)
				return compactingBot(t, st, tg, tc.max, every)
			}
			leader, away, follower := bot(0), bot(1), bot(2)
			leadBot(t, leader)
			// follower applies the log as it comes, as followLog does.
			fctx, fcancel := context.WithCancel(ctx)
			followed := make(chan error, 1)
			go func() {
				followed <- follower.opt.Replica.Follow(fctx, 0, func(pos uint64, entry []byte) error {
					return follower.apply(fctx, []logged{{pos, entry}})
				})
			}()
			defer func() {
				fcancel()
				if err := <-followed; err != nil {
					t.Errorf("following: %v", err)
				}
			}()
			start, _, _ := logShape(t, leader.opt.Replica)
			if err := putKey(leader, "gone", "soon"); err != nil {
				t.Fatal(err)
			}
			if err := away.catchUp(ctx); err != nil {
				t.Fatal(err)
			}
			if _, ok := dump(t, away)["gone"]; !ok {
				t.Fatal("the away node's copy lacks the write it caught up with")
			}
			const writes = 400
			for i := range writes {
				var err error
				switch {
				case i == 5:
					err = deleteKey(leader, "gone")
				case i%7 == 6:
					err = deleteKey(leader, fmt.Sprintf("f/%d", i%41))
				default:
					err = putKey(leader, fmt.Sprintf("f/%d", i%41), fmt.Sprintf(`{"n":%d,"pad":%q}`, i, strings.Repeat("x", 60)))
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			want := dump(t, leader)
			parts := 0
			eventually(t, "the log compacted", func() bool {
				n, _, kinds := logShape(t, leader.opt.Replica)
				parts = strings.Count(kinds, "s")
				return strings.HasPrefix(kinds, "s") && n <= parts*(every+1)
			})
			n, size, _ := logShape(t, leader.opt.Replica)
			eventually(t, "the follower's copy", func() bool { return maps.Equal(dump(t, follower), want) })
			t.Logf("%d entries appended: the log holds %d entries (%d snapshot parts), %d bytes", writes+start+1, n, parts, size)
			if tc.max > 0 && parts < 2 {
				t.Fatalf("a snapshot of %d bytes in %d parts of at most %d", len(want)*80, parts, tc.max)
			}
			m, err := away.applied()
			if err != nil {
				t.Fatal(err)
			}
			var first uint64
			_ = leader.opt.Replica.Read(ctx, 0, func(pos uint64, _ []byte) error {
				if first == 0 {
					first = pos
				}
				return nil
			})
			if first <= m.pos+1 {
				t.Fatalf("the log was not purged past the away node's copy (at %d, the log starts at %d)", m.pos, first)
			}
			if err := away.catchUp(ctx); err != nil {
				t.Fatal(err)
			}
			if got := dump(t, away); !maps.Equal(got, want) {
				t.Fatalf("the away node's copy after catching up:\n%v\nwant\n%v", got, want)
			}
			fresh := bot(2)
			if err := fresh.catchUp(ctx); err != nil {
				t.Fatal(err)
			}
			if got := dump(t, fresh); !maps.Equal(got, want) {
				t.Fatalf("a fresh node's copy:\n%v\nwant\n%v", got, want)
			}
		})
	}
}

// TestClusterLeaderChangeAfterSnapshot: a new leader claiming right after
// a snapshot (its copy's position purged) has the old leader's state and
// goes on; the old leader's writes are refused, also once its own copy
// caught up through the new leader's snapshot (the snapshot carries the
// last claim, so the copy knows it was superseded).
func TestClusterLeaderChangeAfterSnapshot(t *testing.T) {
	const every = 10
	cn := startNodes(t, 1)
	st := newStackWith(t, stackOpts{fake: newFake(t, fakeInterval, fakeGlobal)})
	ctx := context.Background()
	tgA, tgB := cn.nodes[0].Telegram(), cn.nodes[0].Telegram()
	t.Cleanup(tgA.Close)
	t.Cleanup(tgB.Close)
	a := compactingBot(t, st, tgA, 0, every)
	b := compactingBot(t, st, tgB, 0, every)
	leadBot(t, a)
	for i := range every + 3 {
		if err := putKey(a, fmt.Sprintf("a/%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the first leader's snapshot", func() bool {
		_, _, kinds := logShape(t, a.opt.Replica)
		return strings.HasPrefix(kinds, "s")
	})
	leadBot(t, b) // b's copy is at 0: it starts at the snapshot
	if got, want := dump(t, b), dump(t, a); !maps.Equal(got, want) {
		t.Fatalf("the new leader's copy %v, want the old one's %v", got, want)
	}
	if err := putKey(a, "a/stale", "v"); !errors.Is(err, chats.ErrFenced) {
		t.Fatalf("the old leader's write after the claim: %v, want refused", err)
	}
	for i := range every + 3 {
		if err := putKey(b, fmt.Sprintf("b/%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the new leader's snapshot, the old one's purged", func() bool {
		_, _, kinds := logShape(t, b.opt.Replica)
		return strings.HasPrefix(kinds, "s") && !strings.Contains(kinds, "c")
	})
	if err := a.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if err := putKey(a, "a/caught-up", "v"); !errors.Is(err, errNotLeading) {
		t.Fatalf("the old leader's write on a copy caught up through a snapshot: %v, want refused as not leading", err)
	}
	if _, err := a.compact(ctx); !errors.Is(err, errNotLeading) {
		t.Fatalf("the old leader's compaction: %v, want refused", err)
	}
	want := dump(t, b)
	if got := dump(t, a); !maps.Equal(got, want) {
		t.Fatalf("the old leader's copy %v, want %v", got, want)
	}
	for _, k := range []string{"a/0", "b/0"} {
		if _, ok := want[k]; !ok {
			t.Fatalf("%s lost across the leader change: %v", k, want)
		}
	}
	if _, ok := want["a/stale"]; ok {
		t.Fatal("the old leader's refused write is in the state")
	}
}

// TestSnapshotTooLarge: a value too large for a snapshot's entry leaves
// the log as it is, with a clear error, and the next try waits for more
// writes.
func TestSnapshotTooLarge(t *testing.T) {
	cn := startNodes(t, 1)
	st := newStackWith(t, stackOpts{fake: newFake(t, fakeInterval, fakeGlobal)})
	tg := cn.nodes[0].Telegram()
	t.Cleanup(tg.Close)
	b := compactingBot(t, st, tg, 900, 3)
	c, err := b.claimLead(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b.claim.Store(c) // no compactor: compact is called here
	for i := range 4 {
		if err := putKey(b, fmt.Sprintf("k%d", i), strings.Repeat("v", 880)); err != nil {
			t.Fatal(err)
		}
	}
	before, _, _ := logShape(t, b.opt.Replica)
	next, err := b.compact(context.Background())
	if !errors.Is(err, errSnapTooLarge) {
		t.Fatalf("compact: %v, want too large", err)
	}
	m, _ := b.applied()
	if next != m.pos+3 {
		t.Fatalf("the next try at %d, want %d", next, m.pos+3)
	}
	if after, _, kinds := logShape(t, b.opt.Replica); after != before || strings.Contains(kinds, "s") {
		t.Fatalf("the log changed: %d entries (%s), was %d", after, kinds, before)
	}
}

// TestApplySnapshot: how a copy applies snapshot parts, on one node's
// bucket: a whole snapshot replaces it (and sets the claim it carries);
// parts replace it at the last one; parts another entry came between, or
// a part without the one before, are dropped; after a gap (a purge) only
// a snapshot's start applies.
func TestApplySnapshot(t *testing.T) {
	snap := func(part uint64, last bool, kv ...string) []byte {
		e := logEntry{Snap: true, Node: "n2", SnapClaim: 7, SnapBy: "n2", Part: part, Last: last}
		for i := 0; i < len(kv); i += 2 {
			e.Ops = append(e.Ops, logOp{Key: []byte(kv[i]), Val: []byte(kv[i+1])})
		}
		return encodeEntry(e)
	}
	write := func(k, v string) []byte {
		return encodeEntry(logEntry{Node: "n1", Ops: []logOp{{Key: []byte(k), Val: []byte(v)}}})
	}
	for _, tc := range []struct {
		name    string
		entries []logged
		want    string // the bucket, "k=v ..."; "!" an error
		claim   uint64
	}{
		{"whole", []logged{{1, write("old", "1")}, {2, snap(0, true, "a", "1", "b", "2")}}, "a=1 b=2", 7},
		{"empty whole", []logged{{1, write("old", "1")}, {2, snap(0, true)}}, "", 7},
		{"parts", []logged{{1, write("old", "1")}, {2, snap(0, false, "a", "1")}, {3, snap(1, false, "b", "2")}, {4, snap(2, true, "c", "3")}}, "a=1 b=2 c=3", 7},
		{"parts unfinished", []logged{{1, write("old", "1")}, {2, snap(0, false, "a", "1")}}, "old=1", 0},
		{"parts broken", []logged{{1, write("old", "1")}, {2, snap(0, false, "a", "1")}, {3, write("x", "1")}, {4, snap(1, true, "b", "2")}}, "old=1 x=1", 0},
		{"part alone", []logged{{1, write("old", "1")}, {2, snap(1, true, "b", "2")}}, "old=1", 0},
		{"after a gap", []logged{{1, write("old", "1")}, {9, snap(0, false, "a", "1")}, {10, snap(1, true, "b", "2")}, {11, write("c", "3")}}, "a=1 b=2 c=3", 7},
		{"write after a gap", []logged{{1, write("old", "1")}, {9, write("x", "1")}}, "!", 0},
		{"part after a gap", []logged{{1, write("old", "1")}, {9, snap(1, true, "b", "2")}}, "!", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStackWith(t, stackOpts{})
			b := st.bot
			var err error
			for _, e := range tc.entries {
				if err = b.apply(context.Background(), []logged{e}); err != nil {
					break
				}
			}
			if tc.want == "!" {
				if !errors.Is(err, errGap) {
					t.Fatalf("apply: %v, want a gap refused", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for k, v := range dump(t, b) {
				got = append(got, k+"="+v)
			}
			slices.Sort(got)
			if g := strings.Join(got, " "); g != tc.want {
				t.Fatalf("bucket %q, want %q", g, tc.want)
			}
			m, _ := b.applied()
			if m.claim != tc.claim || m.pos != tc.entries[len(tc.entries)-1].pos {
				t.Fatalf("claim %d at %d, want %d at the last entry", m.claim, m.pos, tc.claim)
			}
			_ = st.db.View(func(tx *bolt.Tx) error {
				if tc.name != "parts unfinished" && tx.Bucket(stageBucket) != nil {
					t.Error("a staged snapshot left behind")
				}
				return nil
			})
		})
	}
}

func TestSnapshotEntries(t *testing.T) {
	valid := logEntry{Snap: true, Node: "n1", SnapClaim: 3, SnapBy: "n2", Part: 1, Last: true,
		Ops: []logOp{{Key: []byte("a"), Val: []byte("1")}, {Key: []byte("b"), Val: []byte{}}}}
	data := encodeEntry(valid)
	got, err := decodeEntry(data)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(encodeEntry(got), data) || !got.Snap || got.SnapClaim != 3 || got.SnapBy != "n2" || got.Part != 1 || !got.Last || len(got.Ops) != 2 {
		t.Fatalf("decoded as %+v", got)
	}
	if _, err := decodeEntry(encodeEntry(logEntry{Snap: true, Node: "n", SnapClaim: 1, SnapBy: "n", Last: true})); err != nil {
		t.Fatalf("a whole snapshot of an empty bucket: %v", err)
	}
	for name, data := range map[string][]byte{
		"no claim":        []byte("MTG1s\x01n\x00\x01n\x00\x01\x01p\x01k\x01v"),
		"no claim node":   []byte("MTG1s\x01n\x01\x00\x00\x01\x01p\x01k\x01v"),
		"end mark 2":      []byte("MTG1s\x01n\x01\x01n\x00\x02\x01p\x01k\x01v"),
		"no end mark":     []byte("MTG1s\x01n\x01\x01n\x00"),
		"empty part":      []byte("MTG1s\x01n\x01\x01n\x01\x01\x00"),
		"empty not last":  []byte("MTG1s\x01n\x01\x01n\x00\x00\x00"),
		"a delete":        []byte("MTG1s\x01n\x01\x01n\x00\x01\x01d\x01k"),
		"keys unordered":  []byte("MTG1s\x01n\x01\x01n\x00\x01\x02p\x01k\x01vp\x01a\x01v"),
		"keys repeated":   []byte("MTG1s\x01n\x01\x01n\x00\x01\x02p\x01k\x01vp\x01k\x01v"),
		"trailing bytes":  append(bytes.Clone(data), 0),
		"truncated":       data[:len(data)-1],
		"overlong claim":  []byte("MTG1s\x01n\x81\x00\x01n\x00\x01\x01p\x01k\x01v"),
		"claim node long": append([]byte("MTG1s\x01n\x01\x80\x02"), bytes.Repeat([]byte("n"), 256)...),
	} {
		if _, err := decodeEntry(data); !errors.Is(err, chats.ErrBadInput) {
			t.Errorf("%s: %v, want refused", name, err)
		}
	}
}

// TestSnapshotOnStaleCopyRefused: a snapshot is fenced like any write: a
// leader whose copy is behind the log (another node's write came first)
// stores none and purges nothing, and compacts once caught up.
func TestSnapshotOnStaleCopyRefused(t *testing.T) {
	cn := startNodes(t, 1)
	st := newStackWith(t, stackOpts{fake: newFake(t, fakeInterval, fakeGlobal)})
	tgL, tgO := cn.nodes[0].Telegram(), cn.nodes[0].Telegram()
	t.Cleanup(tgL.Close)
	t.Cleanup(tgO.Close)
	l := compactingBot(t, st, tgL, 0, 3)
	o := compactingBot(t, st, tgO, 0, 3)
	c, err := l.claimLead(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	l.claim.Store(c) // no compactor: compact is called here
	for i := range 4 {
		if err := putKey(l, fmt.Sprintf("k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.writeAny(func(bk stateBucket) error { return bk.Put([]byte("paired"), []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	if _, err := l.compact(context.Background()); !errors.Is(err, chats.ErrFenced) {
		t.Fatalf("a snapshot on a stale copy: %v, want fenced", err)
	}
	if _, _, kinds := logShape(t, l.opt.Replica); kinds != "cwwwww" {
		t.Fatalf("the log holds %q", kinds)
	}
	if err := l.catchUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, _, kinds := logShape(t, l.opt.Replica); kinds != "s" {
		t.Fatalf("the log holds %q after compacting, want the snapshot alone", kinds)
	}
	if err := o.catchUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := dump(t, o), dump(t, l); !maps.Equal(got, want) || want["paired"] != "v" {
		t.Fatalf("copies %v and %v", got, want)
	}
}

// BenchmarkStateLog: the cluster's log of the bot's bucket after b.N
// writes (followers' states of 200 Telegram chats, ~100 bytes each) on
// three in-process nodes, without compaction and with the default: the
// entries and bytes it holds, and how long a new node takes to catch up.
// Run with -benchtime 3000x.
func BenchmarkStateLog(b *testing.B) {
	for _, tc := range []struct {
		name  string
		every uint64
	}{{"uncompacted", 0}, {"compacted", compactEvery}} {
		b.Run(tc.name, func(b *testing.B) {
			cn := startNodes(b, 3)
			st := newStackWith(b, stackOpts{})
			tg := cn.nodes[0].Telegram()
			b.Cleanup(tg.Close)
			bot := compactingBot(b, st, tg, 0, tc.every)
			leadBot(b, bot)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				v := fmt.Sprintf(`{"tg":%d,"chat":"c%d","last_seq":%d,"turn":"t%d","msg_ids":[%d]}`, i%200, i%200, i, i, 500+i)
				if err := putKey(bot, fmt.Sprintf("f/%d/c%d", i%200, i%200), v); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if tc.every > 0 && uint64(b.N) > tc.every {
				eventually(b, "a snapshot", func() bool {
					_, _, kinds := logShape(b, bot.opt.Replica)
					return strings.HasPrefix(kinds, "s")
				})
			}
			n, size, _ := logShape(b, bot.opt.Replica)
			tg2 := cn.nodes[1].Telegram()
			b.Cleanup(tg2.Close)
			fresh := compactingBot(b, st, tg2, 0, tc.every)
			start := time.Now()
			if err := fresh.catchUp(context.Background()); err != nil {
				b.Fatal(err)
			}
			took := time.Since(start)
			bucket := 0
			for k, v := range dump(b, bot) {
				bucket += len(k) + len(v)
			}
			b.ReportMetric(float64(n), "log-entries")
			b.ReportMetric(float64(size)/1024, "log-KiB")
			b.ReportMetric(float64(bucket)/1024, "bucket-KiB")
			b.ReportMetric(float64(took.Milliseconds()), "catchup-ms")
		})
	}
}
