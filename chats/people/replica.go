package people

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mirror-gateway/mirror/chats/varbytes"
)

// Cluster mode: the registry is replicated through a log of its writes
// (Log; chats/cluster implements it on a JetStream stream). A write runs
// against an overlay of this node's buckets, and what it put and deleted
// goes, as one entry, to the log, appended after the position this node's
// copy is at; the log refuses it when it moved on (another node wrote
// first), and the write then catches up and runs again on the fresh copy,
// so a read-modify-write (a name taken once only) holds cluster-wide. Only
// a confirmed append lets the bbolt transaction commit, with the entry's
// writes and the new position in it: a write returns once it is in the
// log and applied here. Every node follows the log into its own bbolt.
//
// Replicated: persons, their names, token hashes, Telegram links and the
// first owner (bucket "people"), and grants (g/ keys of "grants"). Not
// in this log: a chat's creator and the removal of its grants, which
// travel in the chat's own record (chats.Flush), and the daily usage
// counters (u/ keys), which stay on the node that ran the turn.
//
// Joining: the first node whose registry replicates when the log is empty
// writes its registry into the log (a seed); every other node replaces its
// own registry by the log's, so the cluster has one first owner.

// Log is the cluster's log of the registry's writes. Entries are opaque
// to it.
type Log interface {
	// Append stores entry after position at (the log's last entry, 0
	// when empty) and returns its position. When the log is past at it
	// stores nothing and its error wraps ErrLogMoved.
	Append(ctx context.Context, at uint64, entry []byte) (uint64, error)
	// Read calls fn with each entry after position after, in order, up
	// to the log's last entry when Read began.
	Read(ctx context.Context, after uint64, fn func(pos uint64, entry []byte) error) error
	// Follow calls fn with each entry after position after, in order, as
	// they are stored, until ctx ends (nil) or fn or the log fails.
	Follow(ctx context.Context, after uint64, fn func(pos uint64, entry []byte) error) error
	// MaxEntry is the largest entry Append stores (0: no limit).
	MaxEntry() int
}

// ErrLogMoved is an append refused because the log is past the position
// the writer named: its copy was behind.
var ErrLogMoved = errors.New("people: the cluster's log of people moved on")

// ErrReplica refuses a write to a cluster node's copy made without the
// cluster (`mirror person` or `mirror pair approve` while the node is
// down): it would never reach the other nodes.
var ErrReplica = errors.New("this database is a cluster node's copy of the people registry: change people through a running node")

// logBucket holds how far this node applied the log: posKey the position
// (8 bytes big endian); joinedKey set once the node's registry is the
// cluster's.
var (
	logBucket = []byte("people_log")
	posKey    = []byte("pos")
	joinedKey = []byte("joined")
)

const (
	// writeTimeout bounds one replicated write, catch-ups included.
	writeTimeout = 10 * time.Second
	// maxRetries bounds how often a write refused because this node's
	// copy was behind is run again after catching up.
	maxRetries = 5
	// missWait bounds the catch-up a lookup that missed makes.
	missWait = 2 * time.Second
	// followRetry is how soon following starts again after it failed.
	followRetry = 500 * time.Millisecond
)

// replica is a registry's side of the cluster's log.
type replica struct {
	log    Log
	logger *slog.Logger
	joined chan struct{} // closed once this node's registry is the cluster's

	syncMu sync.Mutex
	synced time.Time // when the last completed catch-up on a miss began

	cancel context.CancelFunc
	done   chan struct{}
}

// replicated finds the registry replicating a database, for the writes
// made inside another package's transaction (LinkNewTx, from the Telegram
// bot's pairing approval), which reach this package with a *bolt.Tx only.
var replicated sync.Map // *bolt.DB → *Registry

// Replicate makes the registry the cluster's (see Log): from now on its
// writes go through log, and a goroutine joins the cluster's registry
// (the seed or the replacement above) and follows log into this node's
// bbolt until stop. Writes wait for the join (bounded); reads answer from
// this node's copy, and a token lookup that misses catches up once. Call
// it before the registry is used.
func (r *Registry) Replicate(log Log, logger *slog.Logger) (stop func()) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rp := &replica{log: log, logger: logger, joined: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	r.rep = rp
	replicated.Store(r.db, r)
	go r.follow(ctx, rp)
	return func() {
		cancel()
		<-rp.done
		replicated.CompareAndDelete(r.db, r)
	}
}

// Leave forgets that this database was a cluster node's copy of the
// registry: a gateway run on it alone (single-node mode) manages its
// people again. Started in cluster mode later, it joins anew, its people
// replaced by the cluster's.
func (r *Registry) Leave() error {
	joined := false
	if err := r.db.View(func(tx *bolt.Tx) error { joined = isReplica(tx); return nil }); err != nil || !joined {
		return err // a single gateway's own file: nothing written
	}
	return r.db.Update(func(tx *bolt.Tx) error {
		if !isReplica(tx) {
			return nil
		}
		return tx.DeleteBucket(logBucket)
	})
}

// follow joins, then applies the log as it grows, until ctx ends.
func (r *Registry) follow(ctx context.Context, rp *replica) {
	defer close(rp.done)
	for ctx.Err() == nil {
		err := r.join(ctx, rp)
		if err == nil {
			break
		}
		rp.logger.Warn("people: joining the cluster's registry failed; trying again", "err", err)
		if sleep(ctx, followRetry) != nil {
			return
		}
	}
	close(rp.joined)
	for ctx.Err() == nil {
		pos, err := r.applied()
		if err == nil {
			err = rp.log.Follow(ctx, pos, func(pos uint64, entry []byte) error {
				return r.updateDB(func(tx *bolt.Tx) error { return r.applyTx(tx, pos, entry) })
			})
		}
		if ctx.Err() != nil {
			return
		}
		rp.logger.Warn("people: following the cluster's registry stopped; trying again", "err", err)
		if sleep(ctx, followRetry) != nil {
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// join makes this node's registry the cluster's, in one transaction: a
// node that joined before catches up; otherwise the log's registry
// replaces this node's, or, when the log is empty, this node's is written
// into it.
func (r *Registry) join(ctx context.Context, rp *replica) error {
	// A read of the log waits for the cluster, for as long as its nodes
	// take to come up. That wait happens here, outside the transaction:
	// held meanwhile, the transaction would stop every other write to this
	// node's database, its own start among them (and another node's start
	// may be waiting for this one's).
	pos, err := r.applied()
	if err != nil {
		return err
	}
	if err := rp.log.Read(ctx, pos, func(uint64, []byte) error { return nil }); err != nil {
		return err
	}
	// The cluster answers: what the transaction asks of the log is bounded
	// as a write's is, and a cluster lost meanwhile means trying again.
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	return r.updateDB(func(tx *bolt.Tx) error {
		if lb := tx.Bucket(logBucket); lb != nil && lb.Get(joinedKey) != nil {
			return r.catchUpTx(ctx, tx)
		}
		for {
			var entries []logged
			err := rp.log.Read(ctx, 0, func(pos uint64, entry []byte) error {
				entries = append(entries, logged{pos, entry})
				return nil
			})
			if err != nil {
				return err
			}
			if len(entries) > 0 {
				dropped, err := dropReplicated(tx)
				if err != nil {
					return err
				}
				if dropped > 0 {
					rp.logger.Warn("people: this node's own people are replaced by the cluster's", "persons_dropped", dropped)
				}
				if err := putPos(tx, 0); err != nil {
					return err
				}
				for _, e := range entries {
					if err := r.applyTx(tx, e.pos, e.data); err != nil {
						return err
					}
				}
				return markJoined(tx)
			}
			err = r.seedTx(ctx, tx, rp)
			if errors.Is(err, ErrLogMoved) {
				continue // another node seeded first: take its registry
			}
			if err != nil {
				return err
			}
			return markJoined(tx)
		}
	})
}

// logged is one entry of the log.
type logged struct {
	pos  uint64
	data []byte
}

func markJoined(tx *bolt.Tx) error {
	lb, err := tx.CreateBucketIfNotExists(logBucket)
	if err != nil {
		return err
	}
	return lb.Put(joinedKey, []byte{1})
}

// seedTx writes this node's registry into the empty log, in entries no
// larger than the log takes; the first is appended at 0, so only one node
// seeds.
func (r *Registry) seedTx(ctx context.Context, tx *bolt.Tx, rp *replica) error {
	var ops []logOp
	for _, b := range [][]byte{bucketPeople, bucketGrants} {
		bk := tx.Bucket(b)
		if bk == nil {
			continue
		}
		err := bk.ForEach(func(k, v []byte) error {
			if replicatedKey(b, k) && v != nil {
				ops = append(ops, logOp{Bucket: b[0], Key: bytes.Clone(k), Val: bytes.Clone(v)})
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	limit := rp.log.MaxEntry()
	var pos uint64
	for len(ops) > 0 {
		n := len(ops)
		if limit > 0 {
			size := len(entryMagic) + 10
			for i, op := range ops {
				size += 3 + 2*binary.MaxVarintLen64 + len(op.Key) + len(op.Val)
				if size > limit && i > 0 {
					n = i
					break
				}
			}
		}
		at, err := rp.log.Append(ctx, pos, encodeEntry(ops[:n]))
		if err != nil {
			return err
		}
		pos, ops = at, ops[n:]
	}
	return putPos(tx, pos)
}

// dropReplicated deletes this node's replicated keys and says how many
// persons went (the first owner not counted).
func dropReplicated(tx *bolt.Tx) (int, error) {
	persons := 0
	for _, b := range [][]byte{bucketPeople, bucketGrants} {
		bk := tx.Bucket(b)
		if bk == nil {
			continue
		}
		var keys [][]byte
		first := ""
		if b[0] == bucketPeople[0] {
			first = string(bk.Get([]byte("first")))
		}
		_ = bk.ForEach(func(k, _ []byte) error {
			if replicatedKey(b, k) {
				keys = append(keys, bytes.Clone(k))
				if strings.HasPrefix(string(k), "p/") && string(k) != "p/"+first {
					persons++
				}
			}
			return nil
		})
		for _, k := range keys {
			markKey(tx, k)
			if err := bk.Delete(k); err != nil {
				return 0, err
			}
		}
	}
	return persons, nil
}

// replicatedKey says whether key of bucket b travels in the log.
func replicatedKey(b, key []byte) bool {
	k := string(key)
	switch b[0] {
	case bucketPeople[0]:
		return k == "first" || strings.HasPrefix(k, "p/") || strings.HasPrefix(k, "n/") ||
			strings.HasPrefix(k, "t/") || strings.HasPrefix(k, "tg/")
	case bucketGrants[0]:
		return strings.HasPrefix(k, "g/")
	}
	return false
}

// applied is the log position this node's copy is at.
func (r *Registry) applied() (uint64, error) {
	var pos uint64
	err := r.db.View(func(tx *bolt.Tx) error { pos = readPos(tx); return nil })
	return pos, err
}

func readPos(tx *bolt.Tx) uint64 {
	if lb := tx.Bucket(logBucket); lb != nil {
		if v := lb.Get(posKey); len(v) == 8 {
			return binary.BigEndian.Uint64(v)
		}
	}
	return 0
}

func putPos(tx *bolt.Tx, pos uint64) error {
	lb, err := tx.CreateBucketIfNotExists(logBucket)
	if err != nil {
		return err
	}
	return lb.Put(posKey, binary.BigEndian.AppendUint64(nil, pos))
}

// isReplica says whether tx's database joined a cluster's registry.
func isReplica(tx *bolt.Tx) bool {
	lb := tx.Bucket(logBucket)
	return lb != nil && lb.Get(joinedKey) != nil
}

// applyTx applies the entry at pos to tx, with the position past it. An
// entry at or below the position is skipped (this node wrote it, or
// applied it already); one that does not decode is logged and skipped
// (the position passes it): it can never apply.
func (r *Registry) applyTx(tx *bolt.Tx, pos uint64, data []byte) error {
	if pos <= readPos(tx) {
		return nil
	}
	ops, err := decodeEntry(data)
	if err != nil {
		if r.rep != nil {
			r.rep.logger.Warn("people: a write of the cluster's registry this node cannot apply is skipped", "pos", pos, "err", err)
		}
		return putPos(tx, pos)
	}
	if err := applyOps(tx, ops); err != nil {
		return err
	}
	return putPos(tx, pos)
}

func applyOps(tx *bolt.Tx, ops []logOp) error {
	for _, op := range ops {
		name := bucketPeople
		if op.Bucket == bucketGrants[0] {
			name = bucketGrants
		}
		bk, err := tx.CreateBucketIfNotExists(name)
		if err != nil {
			return err
		}
		markKey(tx, op.Key)
		if op.Del {
			err = bk.Delete(op.Key)
		} else {
			err = bk.Put(op.Key, op.Val)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// catchUpTx applies the log up to its tail as of now, inside tx.
func (r *Registry) catchUpTx(ctx context.Context, tx *bolt.Tx) error {
	err := r.rep.log.Read(ctx, readPos(tx), func(pos uint64, entry []byte) error {
		return r.applyTx(tx, pos, entry)
	})
	if err != nil {
		return fmt.Errorf("people: catch up with the cluster's registry: %w", err)
	}
	return nil
}

// waitJoined waits, until ctx ends, for the registry to be the cluster's.
func (rp *replica) waitJoined(ctx context.Context) error {
	select {
	case <-rp.joined:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("people: this node has not joined the cluster's registry yet (is the cluster up?): %w", ctx.Err())
	}
}

// awaitJoin waits, a moment at most, for this node to join the cluster's
// registry (at once on a single gateway and once joined).
func (r *Registry) awaitJoin() {
	if rp := r.rep; rp != nil {
		ctx, cancel := context.WithTimeout(context.Background(), missWait)
		defer cancel()
		_ = rp.waitJoined(ctx)
	}
}

// caughtUpOnMiss catches up once after a lookup missed (a person just
// added on another node, not followed here yet) and says whether that
// completed (the lookup is worth making again). Lookups missing together
// share one catch-up.
func (r *Registry) caughtUpOnMiss() bool {
	rp := r.rep
	if rp == nil {
		return false
	}
	missed := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), missWait)
	defer cancel()
	if rp.waitJoined(ctx) != nil {
		return false
	}
	rp.syncMu.Lock()
	defer rp.syncMu.Unlock()
	if rp.synced.After(missed) {
		return true // a catch-up that began after this miss completed: look again
	}
	began := time.Now()
	pos, err := r.applied()
	var entries []logged
	if err == nil {
		// Read first, outside a write: a miss that finds nothing new (a
		// wrong token) costs one read of the log's tail, no commit.
		err = rp.log.Read(ctx, pos, func(pos uint64, entry []byte) error {
			entries = append(entries, logged{pos, entry})
			return nil
		})
	}
	if err == nil && len(entries) > 0 {
		err = r.updateDB(func(tx *bolt.Tx) error {
			for _, e := range entries {
				if err := r.applyTx(tx, e.pos, e.data); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		rp.logger.Debug("people: catching up after a miss", "err", err)
		return false
	}
	rp.synced = began
	// Looked up again even when nothing was read here: the follower may
	// have applied the entry between the miss and this read.
	return true
}

// kv is one of the registry's buckets as a write sees it: the bbolt
// bucket itself, or in cluster mode an overlay that keeps what the write
// puts and deletes for the log.
type kv interface {
	Get(key []byte) []byte
	Put(key, value []byte) error
	Delete(key []byte) error
}

var _ kv = (*bolt.Bucket)(nil)

// buckets are the registry's two buckets as one write sees them.
type buckets struct{ people, grants kv }

// update runs fn as one write of the registry: in its own transaction,
// replicated in cluster mode.
func (r *Registry) update(fn func(b buckets) error) error {
	if rp := r.rep; rp != nil {
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		defer cancel()
		if err := rp.waitJoined(ctx); err != nil {
			return err
		}
		for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
			err := r.updateDB(func(tx *bolt.Tx) error { return r.writeTx(ctx, tx, fn, true) })
			if !errors.Is(err, errInFlight) {
				return err
			}
			// Outside the transaction: this node's other writes go on.
			if sleep(ctx, wait) != nil {
				return err
			}
		}
	}
	return r.updateDB(func(tx *bolt.Tx) error { return localWrite(tx, fn) })
}

// updateTx runs fn as one write of the registry inside tx, another
// package's transaction: replicated when tx's database replicates.
func updateTx(tx *bolt.Tx, fn func(b buckets) error) error {
	if v, ok := replicated.Load(tx.DB()); ok {
		r := v.(*Registry)
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		defer cancel()
		if err := r.rep.waitJoined(ctx); err != nil {
			return err
		}
		return r.writeTx(ctx, tx, fn, false)
	}
	return localWrite(tx, fn)
}

// localWrite is a write of a single node's registry.
func localWrite(tx *bolt.Tx, fn func(b buckets) error) error {
	if isReplica(tx) {
		return fmt.Errorf("%w: %w", ErrBadInput, ErrReplica)
	}
	pb, err := tx.CreateBucketIfNotExists(bucketPeople)
	if err != nil {
		return err
	}
	gb, err := tx.CreateBucketIfNotExists(bucketGrants)
	if err != nil {
		return err
	}
	return fn(buckets{people: marking{kv: pb, tx: tx}, grants: marking{kv: gb, tx: tx}})
}

// writeTx is a replicated write inside tx: fn runs on an overlay; what it
// changed is appended after this node's position and, once the log took
// it, applied to tx. A refused append (the log moved on), or fn failing
// on something another node may have just written (a name not known here
// yet), catches up inside tx and runs fn again. An append refused while
// the log's tail shows nothing new is another node's write still being
// stored (the stream refuses against writes in flight): with own, tx is
// the registry's own and errInFlight lets update wait outside it; inside
// another package's transaction the wait is made here, a few
// milliseconds at a time.
func (r *Registry) writeTx(ctx context.Context, tx *bolt.Tx, fn func(b buckets) error, own bool) error {
	caught, moves, wait := false, 0, time.Millisecond
	for {
		pos := readPos(tx)
		ov := &overlay{tx: tx}
		err := fn(buckets{people: ov.bucket(bucketPeople), grants: ov.bucket(bucketGrants)})
		if err == nil && len(ov.ops) == 0 {
			return nil
		}
		if err == nil {
			var at uint64
			if at, err = r.rep.log.Append(ctx, pos, encodeEntry(ov.ops)); err == nil {
				if err := applyOps(tx, ov.ops); err != nil {
					return err
				}
				return putPos(tx, at)
			}
			if !errors.Is(err, ErrLogMoved) || moves == maxRetries {
				return err
			}
		} else if caught || !(errors.Is(err, ErrNotFound) || errors.Is(err, ErrExists) || errors.Is(err, ErrBadInput)) {
			return err
		}
		caught = true
		if cerr := r.catchUpTx(ctx, tx); cerr != nil {
			return errors.Join(err, cerr)
		}
		switch {
		case readPos(tx) != pos:
			moves++
		case !errors.Is(err, ErrLogMoved):
			return err // nothing new: fn's answer stands
		case own:
			return fmt.Errorf("%w: %w", errInFlight, err)
		default:
			if sleep(ctx, wait) != nil {
				return err
			}
			wait = min(2*wait, 20*time.Millisecond)
		}
	}
}

// errInFlight is an append refused for another node's write the log's
// tail does not show yet: the write is made again a moment later.
var errInFlight = errors.New("people: another node's write is being stored")

// overlay is a write's view of the registry in cluster mode: reads see
// the transaction's buckets under the write's own changes, which are kept
// as ops and reach the buckets only once the log took them.
type overlay struct {
	tx  *bolt.Tx
	ops []logOp
}

type overlayBucket struct {
	o    *overlay
	name []byte
}

func (o *overlay) bucket(name []byte) kv { return overlayBucket{o: o, name: name} }

func (b overlayBucket) Get(key []byte) []byte {
	for i := len(b.o.ops) - 1; i >= 0; i-- {
		op := b.o.ops[i]
		if op.Bucket == b.name[0] && bytes.Equal(op.Key, key) {
			if op.Del {
				return nil
			}
			return op.Val
		}
	}
	if bk := b.o.tx.Bucket(b.name); bk != nil {
		return bk.Get(key)
	}
	return nil
}

func (b overlayBucket) Put(key, value []byte) error {
	if len(key) == 0 || len(key) > bolt.MaxKeySize {
		return fmt.Errorf("people: a key of %d bytes", len(key))
	}
	if old := b.Get(key); old != nil && bytes.Equal(old, value) {
		return nil // unchanged: nothing to replicate
	}
	b.o.ops = append(b.o.ops, logOp{Bucket: b.name[0], Key: bytes.Clone(key), Val: bytes.Clone(value)})
	return nil
}

func (b overlayBucket) Delete(key []byte) error {
	if b.Get(key) == nil {
		return nil
	}
	b.o.ops = append(b.o.ops, logOp{Bucket: b.name[0], Key: bytes.Clone(key), Del: true})
	return nil
}

// The log's entries. An entry is one write of the registry:
//
//	entry  = "MPL1" count op*          (count >= 1)
//	op     = kind bucket key [value]
//	kind   = 'p' (put, with a value) | 'd' (delete)
//	bucket = 'p' (people) | 'g' (grants)
//	key    = bytes: 1 to bolt.MaxKeySize, one the log carries (first, p/,
//	         n/, t/, tg/ in people; g/ in grants)
//	value  = bytes
//	bytes  = uvarint length (minimal) then that many bytes
//
// decodeEntry is strict: anything else, trailing bytes included, is
// refused, so an entry never writes a usage counter or a chat's creator.
const (
	entryMagic = "MPL1"
	opPut      = 'p'
	opDelete   = 'd'
)

// logOp is a put (Val) or a delete (Del) of Key in Bucket (the first
// byte of its name: 'p' people, 'g' grants).
type logOp struct {
	Bucket   byte
	Key, Val []byte
	Del      bool
}

func encodeEntry(ops []logOp) []byte {
	n := len(entryMagic) + binary.MaxVarintLen64
	for _, op := range ops {
		n += 2 + 2*binary.MaxVarintLen64 + len(op.Key) + len(op.Val)
	}
	out := make([]byte, 0, n)
	out = append(out, entryMagic...)
	out = binary.AppendUvarint(out, uint64(len(ops)))
	for _, op := range ops {
		if op.Del {
			out = append(out, opDelete, op.Bucket)
			out = varbytes.Append(out, op.Key)
			continue
		}
		out = append(out, opPut, op.Bucket)
		out = varbytes.Append(out, op.Key)
		out = varbytes.Append(out, op.Val)
	}
	return out
}

// errEntry is a log entry that does not decode.
var errEntry = fmt.Errorf("%w: people: bad registry log entry", ErrBadInput)

func decodeEntry(data []byte) ([]logOp, error) {
	rest, ok := bytes.CutPrefix(data, []byte(entryMagic))
	if !ok {
		return nil, fmt.Errorf("%w: no %s header", errEntry, entryMagic)
	}
	count, rest, err := varbytes.Uvarint(rest)
	if err != nil {
		return nil, fmt.Errorf("%w: count: %w", errEntry, err)
	}
	switch {
	case count == 0:
		return nil, fmt.Errorf("%w: a write of nothing", errEntry)
	case count > uint64(len(rest))/4: // an op takes 4 bytes at least
		return nil, fmt.Errorf("%w: %d writes in %d bytes", errEntry, count, len(rest))
	}
	ops := make([]logOp, 0, count)
	for i := range count {
		if len(rest) < 2 {
			return nil, fmt.Errorf("%w: write %d: truncated", errEntry, i)
		}
		kind, bk := rest[0], rest[1]
		if kind != opPut && kind != opDelete {
			return nil, fmt.Errorf("%w: write %d: unknown op %q", errEntry, i, kind)
		}
		var name []byte
		switch bk {
		case bucketPeople[0]:
			name = bucketPeople
		case bucketGrants[0]:
			name = bucketGrants
		default:
			return nil, fmt.Errorf("%w: write %d: unknown bucket %q", errEntry, i, bk)
		}
		op := logOp{Bucket: bk, Del: kind == opDelete}
		if op.Key, rest, err = varbytes.Bytes(rest[2:]); err != nil {
			return nil, fmt.Errorf("%w: write %d: key: %w", errEntry, i, err)
		}
		if len(op.Key) == 0 || len(op.Key) > bolt.MaxKeySize || !replicatedKey(name, op.Key) {
			return nil, fmt.Errorf("%w: write %d: a key the log does not carry (%d bytes)", errEntry, i, len(op.Key))
		}
		if !op.Del {
			if op.Val, rest, err = varbytes.Bytes(rest); err != nil {
				return nil, fmt.Errorf("%w: write %d: value: %w", errEntry, i, err)
			}
		}
		ops = append(ops, op)
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last write", errEntry, len(rest))
	}
	return ops, nil
}
