package people

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// memLog is a Log in memory, fenced as the cluster's stream is.
type memLog struct {
	mu      sync.Mutex
	entries [][]byte
	grew    chan struct{}
	max     int
	// inflight is another node's entry the log holds (appends after the
	// position before it are refused) but reads do not show yet, as a
	// stream whose leader has not stored a proposed write; refused says
	// each append refused.
	inflight []byte
	refused  chan struct{}
}

// show stores the entry in flight.
func (l *memLog) show() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, l.inflight)
	l.inflight = nil
	close(l.grew)
	l.grew = make(chan struct{})
}

func newMemLog() *memLog { return &memLog{grew: make(chan struct{})} }

func (l *memLog) MaxEntry() int { return l.max }

func (l *memLog) Append(_ context.Context, at uint64, entry []byte) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if at != uint64(len(l.entries)) || l.inflight != nil {
		if l.refused != nil {
			select {
			case l.refused <- struct{}{}:
			default:
			}
		}
		return 0, fmt.Errorf("%w: at %d, the log is at %d", ErrLogMoved, at, len(l.entries))
	}
	l.entries = append(l.entries, bytes.Clone(entry))
	close(l.grew)
	l.grew = make(chan struct{})
	return uint64(len(l.entries)), nil
}

func (l *memLog) Read(_ context.Context, after uint64, fn func(uint64, []byte) error) error {
	l.mu.Lock()
	entries := l.entries
	l.mu.Unlock()
	for i := after; i < uint64(len(entries)); i++ {
		if err := fn(i+1, entries[i]); err != nil {
			return err
		}
	}
	return nil
}

func (l *memLog) Follow(ctx context.Context, after uint64, fn func(uint64, []byte) error) error {
	for {
		l.mu.Lock()
		entries, grew := l.entries, l.grew
		l.mu.Unlock()
		for ; after < uint64(len(entries)); after++ {
			if err := fn(after+1, entries[after]); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-grew:
		}
	}
}

// tlog writes a registry's log into the test's.
type tlog struct{ t *testing.T }

func (w tlog) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }

const testToken = "the-access-token-0123456789"

// replicaOn opens a registry on a new database and replicates it through l.
func replicaOn(t *testing.T, l Log) (*Registry, *bolt.DB) {
	t.Helper()
	r, db := openTest(t, testToken)
	stop := r.Replicate(l, slog.New(slog.NewTextHandler(tlog{t}, nil)))
	t.Cleanup(stop)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.rep.waitJoined(ctx); err != nil {
		t.Fatal(err)
	}
	return r, db
}

// eventually polls cond, bounded.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestReplicatedRegistry: with a log, every registry joins one set of
// people (the first to join seeds it; a later one's own people are
// replaced, so the first owner is one person everywhere), and each
// write made on one copy is seen on the others: a token (at once, by the
// catch-up a miss makes), a grant, a revocation, a Telegram link made
// inside another package's transaction.
func TestReplicatedRegistry(t *testing.T) {
	l := newMemLog()
	a, _ := replicaOn(t, l)
	// b had people of its own before it joined: they go.
	b, bdb := openTest(t, testToken)
	if _, _, err := b.Add("local-only", ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Replicate(l, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.rep.waitJoined(ctx); err != nil {
		t.Fatal(err)
	}
	fa, _ := a.First()
	fb, _ := b.First()
	if fa.ID != fb.ID {
		t.Fatalf("first owners %s and %s: one cluster, one first owner", fa.ID, fb.ID)
	}
	if _, err := b.ByName("local-only"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a joining node's own person: %v, want replaced by the cluster's", err)
	}
	if p, ok := b.ByToken(testToken); !ok || p.ID != fa.ID {
		t.Fatalf("the access token on b: %+v %v", p, ok)
	}

	alice, tok, err := a.Add("alice", "")
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := b.ByToken(tok); !ok || p.ID != alice.ID {
		t.Fatalf("a token made on a, on b: %+v %v", p, ok)
	}
	if _, err := b.Share("c1", "alice", Write); err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error { return SetCreatorTx(tx, "c1", fa.ID) }); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a grant made on b, on a", func() bool { return a.Access(alice, "c1") == Write })
	err = bdb.Update(func(tx *bolt.Tx) error {
		_, err := LinkNewTx(tx, "tg-42", 42, time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "a Telegram link made in b's transaction, on a", func() bool { _, ok := a.ByTelegram(42); return ok })
	if _, err := a.Revoke("alice"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a revocation on a, on b", func() bool { _, ok := b.ByToken(tok); return !ok })

	// Usage stays on the node that ran the turn.
	if err := bdb.Update(func(tx *bolt.Tx) error { return AddUsageTx(tx, alice.ID, "2026-01-01", 10) }); err != nil {
		t.Fatal(err)
	}
	if n := b.Usage(alice.ID, "2026-01-01"); n != 10 {
		t.Fatalf("usage on b %d", n)
	}
}

// TestReplicatedNameOnce: two copies adding the same name at once, each
// on a copy that has not seen the other's write: exactly one succeeds,
// the other is told the name exists.
func TestReplicatedNameOnce(t *testing.T) {
	l := newMemLog()
	a, _ := replicaOn(t, l)
	b, _ := replicaOn(t, l)
	for i := range 20 {
		name := fmt.Sprintf("carol%d", i)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j, r := range []*Registry{a, b} {
			wg.Go(func() { _, _, errs[j] = r.Add(name, "") })
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, ErrExists):
				t.Fatalf("%s: %v", name, err)
			}
		}
		if ok != 1 {
			t.Fatalf("%s added %d times: %v", name, ok, errs)
		}
	}
	for _, r := range []*Registry{a, b} {
		eventually(t, "every copy has the first owner and the 20 names", func() bool { l, _ := r.List(); return len(l) == 21 })
	}
}

// TestWriteWaitsForAWriteInFlight: an append refused for another node's
// write the log's tail does not show yet is made again once it shows,
// for a registry write and for one inside another package's transaction.
func TestWriteWaitsForAWriteInFlight(t *testing.T) {
	for _, inside := range []bool{false, true} {
		l := newMemLog()
		a, db := replicaOn(t, l)
		l.mu.Lock()
		l.inflight = encodeEntry([]logOp{{Bucket: 'p', Key: []byte("n/zed"), Val: []byte("p_zed")}})
		l.refused = make(chan struct{}, 1)
		l.mu.Unlock()
		done := make(chan error, 1)
		go func() {
			if inside {
				done <- db.Update(func(tx *bolt.Tx) error { _, err := LinkNewTx(tx, "tg-7", 7, time.Now()); return err })
				return
			}
			_, _, err := a.Add("xena", "")
			done <- err
		}()
		select {
		case <-l.refused:
		case <-time.After(10 * time.Second):
			t.Fatal("no append was refused")
		}
		l.show()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("inside %v: %v", inside, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("inside %v: the write never went through", inside)
		}
		var id []byte
		_ = db.View(func(tx *bolt.Tx) error { id = bytes.Clone(tx.Bucket(bucketPeople).Get([]byte("n/zed"))); return nil })
		if string(id) != "p_zed" {
			t.Fatalf("the entry in flight was not applied: %q", id)
		}
	}
}

// TestReplicaRefusesOfflineWrites: a node's copy written without the
// cluster (`mirror person add` while the node is down) would never reach
// the others: refused with a clear error, until a single gateway takes the
// file as its own (Leave).
func TestReplicaRefusesOfflineWrites(t *testing.T) {
	l := newMemLog()
	a, db := replicaOn(t, l)
	a.rep.cancel()
	<-a.rep.done
	offline, err := Open(db, testToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := offline.Add("dave", ""); !errors.Is(err, ErrReplica) {
		t.Fatalf("an offline write to a node's copy: %v, want ErrReplica", err)
	}
	// Run alone (single-node mode), the file is its own again.
	if err := offline.Leave(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := offline.Add("dave", ""); err != nil {
		t.Fatalf("a write after Leave: %v", err)
	}
}

// TestSeedInChunks: a registry larger than one entry seeds in several.
func TestSeedInChunks(t *testing.T) {
	r, _ := openTest(t, testToken)
	for i := range 30 {
		if _, _, err := r.Add(fmt.Sprintf("p%02d", i), ""); err != nil {
			t.Fatal(err)
		}
	}
	l := newMemLog()
	l.max = 2000
	t.Cleanup(r.Replicate(l, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.rep.waitJoined(ctx); err != nil {
		t.Fatal(err)
	}
	if len(l.entries) < 2 {
		t.Fatalf("%d entries", len(l.entries))
	}
	for _, e := range l.entries {
		if len(e) > l.max {
			t.Fatalf("an entry of %d bytes", len(e))
		}
	}
	b, _ := replicaOn(t, l)
	if list, _ := b.List(); len(list) != 31 {
		t.Fatalf("the joiner has %d people", len(list))
	}
}

// TestDecodeEntry: entries decode only when well formed and carrying
// keys the log replicates.
func TestDecodeEntry(t *testing.T) {
	good := encodeEntry([]logOp{{Bucket: 'p', Key: []byte("p/x"), Val: []byte("{}")}, {Bucket: 'g', Key: []byte("g/c/x"), Del: true}})
	for _, tc := range []struct {
		name string
		data []byte
		ok   bool
	}{
		{"good", good, true},
		{"no magic", good[1:], false},
		{"trailing", append(bytes.Clone(good), 0), false},
		{"truncated", good[:len(good)-1], false},
		{"empty", encodeEntry(nil), false},
		{"usage key", encodeEntry([]logOp{{Bucket: 'p', Key: []byte("u/2026-01-01/x"), Val: []byte("1")}}), false},
		{"creator key", encodeEntry([]logOp{{Bucket: 'g', Key: []byte("o/c"), Val: []byte("x")}}), false},
		{"unknown bucket", encodeEntry([]logOp{{Bucket: 'z', Key: []byte("p/x"), Val: []byte("1")}}), false},
		{"overlong length", []byte("MPL1\x81\x00"), false},
	} {
		ops, err := decodeEntry(tc.data)
		if (err == nil) != tc.ok {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err == nil && !bytes.Equal(encodeEntry(ops), tc.data) {
			t.Fatalf("%s: does not encode back", tc.name)
		}
	}
}

// FuzzDecodeEntry: whatever decodes encodes back to the same bytes, and
// carries only keys the log replicates.
func FuzzDecodeEntry(f *testing.F) {
	f.Add(encodeEntry([]logOp{{Bucket: 'p', Key: []byte("p/x"), Val: []byte("{}")}, {Bucket: 'g', Key: []byte("g/c/x"), Del: true}}))
	f.Add(encodeEntry([]logOp{{Bucket: 'p', Key: []byte("first"), Val: nil}}))
	f.Add([]byte("MPL1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ops, err := decodeEntry(data)
		if err != nil {
			return
		}
		if !bytes.Equal(encodeEntry(ops), data) {
			t.Fatalf("%q does not encode back", data)
		}
		for _, op := range ops {
			name := bucketPeople
			if op.Bucket == 'g' {
				name = bucketGrants
			}
			if !replicatedKey(name, op.Key) {
				t.Fatalf("key %q decoded", op.Key)
			}
		}
	})
}

// downLog is a Log whose reads wait until up is closed, as the cluster's
// do until enough of its nodes are up; reading says a read began.
type downLog struct {
	*memLog
	up      chan struct{}
	reading chan struct{}
}

func (l *downLog) Read(ctx context.Context, after uint64, fn func(uint64, []byte) error) error {
	select {
	case l.reading <- struct{}{}:
	default:
	}
	select {
	case <-l.up:
	case <-ctx.Done():
		return ctx.Err()
	}
	return l.memLog.Read(ctx, after, fn)
}

// TestJoinWaitsOutsideTheTransaction: while the cluster is not up yet, a
// node joining its registry (for the first time, or again at a restart)
// holds no write transaction of the node's database, so the rest of the
// gateway's start writes it meanwhile; the node joins once the cluster
// answers. (A cluster's first node once waited so for peers that its
// start, printing no listening line, kept from being started.)
func TestJoinWaitsOutsideTheTransaction(t *testing.T) {
	for _, again := range []bool{false, true} {
		t.Run(fmt.Sprintf("joined_before=%v", again), func(t *testing.T) {
			l := newMemLog()
			r, db := openTest(t, testToken)
			if again {
				r, db = replicaOn(t, l)
				r.rep.cancel()
				<-r.rep.done
				var err error
				if r, err = Open(db, testToken); err != nil {
					t.Fatal(err)
				}
			}
			down := &downLog{memLog: l, up: make(chan struct{}), reading: make(chan struct{}, 1)}
			t.Cleanup(r.Replicate(down, nil))
			select {
			case <-down.reading:
			case <-time.After(10 * time.Second):
				t.Fatal("the join did not read the log")
			}
			wrote := make(chan error, 1)
			go func() {
				wrote <- db.Update(func(tx *bolt.Tx) error {
					_, err := tx.CreateBucketIfNotExists([]byte("another_part_of_the_gateway"))
					return err
				})
			}()
			select {
			case err := <-wrote:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				close(down.up) // the join ends, and so can the test
				t.Fatal("a write to the node's database waited for the cluster: the join held its transaction meanwhile")
			}
			close(down.up)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := r.rep.waitJoined(ctx); err != nil {
				t.Fatal(err)
			}
			if _, _, err := r.Add("erin", ""); err != nil {
				t.Fatalf("a write once joined: %v", err)
			}
		})
	}
}
