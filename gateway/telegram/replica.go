package telegram

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/chats/varbytes"
	bolt "go.etcd.io/bbolt"
)

// Cluster mode: the bot's bucket is replicated through the cluster, the
// way chats are, so that a new leader goes on where the old one stopped
// (the reply it was editing into Telegram, each Telegram chat's current
// chat, pairings).
//
// Every write of the leader's bot (Bot.write) runs against a recording
// bucket, and the puts and deletes it made go, as one entry, to the
// cluster's log (Replica), appended after the position this node's copy
// is at: the store refuses it when the log moved on, and only a confirmed
// append lets the bbolt transaction commit, with the new position in it.
// Every node applies the log's entries in order to its own bucket (and
// the position with them, in the same transaction), and a node that
// becomes leader catches up to the log's tail, then appends a claim, before
// it receives an update or starts a follower. A write made under a stint
// is stored only when that stint's claim is the last claim before it, so a
// former leader's write (paused past its lease, or still finishing) is
// refused however far it caught up.
//
// The update offset is in the cluster's KV bucket (Offsets), committed by
// compare-and-set after the update's writes are in the log, and, when
// handling an update recorded anything (an album part, a message's
// mapping), also in the bucket, in the same entry as what it recorded,
// as on a single node; a leader starts at the larger of the two. An
// update is never lost: neither offset moves past it before everything
// handling it wrote is stored. It is never handled twice: a kill after
// its entry was stored leaves the bucket's offset past it on every copy
// (the new leader catches up before it reads it), so the album part is
// not gathered again; a kill before that leaves no trace of it in the
// log, and the new leader handles it as if for the first time. Handling
// that records nothing here (a message passed on to a chat that is
// followed already) moves only the KV offset; a kill just before that
// commit has the new leader handle it again, and its effect is keyed by
// the update's own ids (the message's client id "tg:<chat>:<message>"),
// so the chat stores it once.
//
// The leader compacts the log: a snapshot of the bucket, then a purge of
// everything before it (compact.go).
//
// The quarantine (quarantine.go) stays per node: it is what one node
// could not handle, for its operator.

// Replica is the cluster's log of the bot's bucket (chats/cluster
// implements it). Entries are opaque to it.
type Replica interface {
	// Name is this node's name, written into its claims.
	Name() string
	// Append stores entry after position at (the log's last entry, 0
	// when empty) and returns its position. When the log is past at it
	// stores nothing and its error wraps chats.ErrFenced.
	Append(ctx context.Context, at uint64, entry []byte) (uint64, error)
	// Read calls fn with each entry after position after, in order, up
	// to the log's last entry when Read began.
	Read(ctx context.Context, after uint64, fn func(pos uint64, entry []byte) error) error
	// Follow calls fn with each entry after position after, in order, as
	// they are stored, until ctx ends (nil) or fn or the log fails.
	// Read and Follow pass over purged entries: they start at the first
	// entry still stored after after.
	Follow(ctx context.Context, after uint64, fn func(pos uint64, entry []byte) error) error
	// MaxEntry is the largest entry Append stores, in bytes.
	MaxEntry() int
	// Purge drops the entries before position before: the first entry of
	// a snapshot the log confirmed (compact.go).
	Purge(ctx context.Context, before uint64) error
}

// stateBucket is the bot's bucket as its reads and writes see it: the
// bbolt bucket itself, or in cluster mode one that records what a write
// puts and deletes (recorder).
type stateBucket interface {
	Get(key []byte) []byte
	Put(key, value []byte) error
	Delete(key []byte) error
	// Cursor reads; its Delete would not be recorded, and is not used.
	Cursor() *bolt.Cursor
	Tx() *bolt.Tx
}

var _ stateBucket = (*bolt.Bucket)(nil)

// logBucket holds how far this node applied the log: posKey the position
// (8 bytes big endian), claimKey the position of the last claim applied,
// byKey the node that made it, snapKey the position of the last snapshot
// (its last part) and partsKey its parts, stageKey the position and number
// of the snapshot part staged last (compact.go).
var (
	logBucket = []byte("telegram_log")
	posKey    = []byte("pos")
	claimKey  = []byte("claim")
	byKey     = []byte("by")
	snapKey   = []byte("snap")
	partsKey  = []byte("parts")
	stageKey  = []byte("stage")
)

// errNotLeading refuses a write of the bot's leader work made by a node
// whose stint's claim is not the log's last.
var errNotLeading = fmt.Errorf("telegram: this node no longer leads the cluster's bot (another node claimed it): %w", chats.ErrFenced)

// logMeta is where this node's copy of the log is.
type logMeta struct {
	pos, claim, snap, parts uint64
	by                      string
}

func readMeta(tx *bolt.Tx) logMeta {
	var m logMeta
	if b := tx.Bucket(logBucket); b != nil {
		if v := b.Get(posKey); len(v) == 8 {
			m.pos = binary.BigEndian.Uint64(v)
		}
		if v := b.Get(claimKey); len(v) == 8 {
			m.claim = binary.BigEndian.Uint64(v)
		}
		if v := b.Get(snapKey); len(v) == 8 {
			m.snap = binary.BigEndian.Uint64(v)
		}
		if v := b.Get(partsKey); len(v) == 8 {
			m.parts = binary.BigEndian.Uint64(v)
		}
		m.by = string(b.Get(byKey))
	}
	return m
}

func putPos(tx *bolt.Tx, key []byte, pos uint64) error {
	b, err := tx.CreateBucketIfNotExists(logBucket)
	if err != nil {
		return err
	}
	return b.Put(key, binary.BigEndian.AppendUint64(nil, pos))
}

// recorder is the bucket a cluster write runs against: the real one, with
// every put and delete also kept for the log.
type recorder struct {
	*bolt.Bucket
	ops []logOp
}

func (r *recorder) Put(k, v []byte) error {
	if old := r.Bucket.Get(k); old != nil && bytes.Equal(old, v) {
		return nil // unchanged: nothing to replicate
	}
	if err := r.Bucket.Put(k, v); err != nil {
		return err
	}
	r.ops = append(r.ops, logOp{Key: bytes.Clone(k), Val: bytes.Clone(v)})
	return nil
}

func (r *recorder) Delete(k []byte) error {
	if r.Bucket.Get(k) == nil {
		return nil
	}
	if err := r.Bucket.Delete(k); err != nil {
		return err
	}
	r.ops = append(r.ops, logOp{Key: bytes.Clone(k), Del: true})
	return nil
}

// appended remembers the entry a write appended, for the store's
// committer: when a group it was in rolls back it runs each write again
// alone, and the entry must not be appended twice.
type appended struct {
	pos  uint64
	data []byte
}

// errRerun is a write whose second run (see appended) made other changes
// than its first: the transaction is rolled back and the log's copy
// arrives through following.
var errRerun = errors.New("telegram: a replicated write ran again with other changes; the cluster's copy is applied instead")

// appendIn appends data after the position tx is at, once per write
// (prev), inside the transaction that commits it.
func (b *Bot) appendIn(ctx context.Context, tx *bolt.Tx, prev **appended, data []byte) (uint64, error) {
	if a := *prev; a != nil {
		if !bytes.Equal(a.data, data) {
			return 0, errRerun
		}
		return a.pos, nil
	}
	pos, err := b.opt.Replica.Append(ctx, readMeta(tx).pos, data)
	if err != nil {
		return 0, err
	}
	*prev = &appended{pos: pos, data: data}
	return pos, nil
}

// maxFencedRetries bounds how often a write refused because this node's
// copy was behind is tried again after catching up.
const maxFencedRetries = 5

// replicate is Bot.write in cluster mode. leader says the write is the
// leader's work (handling updates, followers, albums): it needs this
// node's current stint's claim to be the log's last. A write refused
// because the copy was behind (another node's write came first: a pairing
// approved elsewhere) catches up and runs again.
//
// The append is made inside the store's commit, so the node's other
// writes wait for it (at most the cluster's append timeout); the bot's
// writes are few next to a chat's.
func (b *Bot) replicate(ctx context.Context, fn func(bk stateBucket) error, leader bool) error {
	for try := 0; ; try++ {
		var claim uint64
		if leader {
			if claim = b.claim.Load(); claim == 0 {
				return errNotLeading
			}
		}
		var (
			sent *appended
			at   uint64
		)
		err := b.store.Write(ctx, func(tx *bolt.Tx) error {
			at = 0
			if leader && readMeta(tx).claim != claim {
				return errNotLeading
			}
			rec := &recorder{Bucket: tx.Bucket(bucket)}
			if err := fn(rec); err != nil {
				return err
			}
			if len(rec.ops) == 0 {
				return nil
			}
			pos, err := b.appendIn(ctx, tx, &sent, encodeEntry(logEntry{Node: b.opt.Replica.Name(), Ops: rec.ops}))
			if err != nil {
				return err
			}
			at = pos
			return putPos(tx, posKey, pos)
		})
		if err == nil && leader && at > 0 {
			b.compactDue(at)
		}
		if errors.Is(err, errNotLeading) || !errors.Is(err, chats.ErrFenced) || try == maxFencedRetries {
			return err
		}
		if cerr := b.catchUp(ctx); cerr != nil {
			return errors.Join(err, cerr)
		}
	}
}

// writeAny is a write any node may make (a pairing approved through its
// HTTP API), not only the leader.
func (b *Bot) writeAny(fn func(bk stateBucket) error) error {
	if b.opt.Replica == nil {
		return b.write(fn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return b.replicate(ctx, fn, false)
}

// applied is the log position this node's copy is at.
func (b *Bot) applied() (logMeta, error) {
	var m logMeta
	err := b.store.DB().View(func(tx *bolt.Tx) error { m = readMeta(tx); return nil })
	return m, err
}

// logged is one entry of the log.
type logged struct {
	pos  uint64
	data []byte
}

// apply applies entries, in order, to this node's bucket in one write,
// with the position past them. Entries at or below the position are
// skipped (this node wrote them, or applied them already); one that does
// not decode is logged and skipped (the position passes it), as the
// records' follower does: it can never apply. An entry after a gap (the
// log was purged past this copy's position) must be a snapshot's first
// part, which holds all the purged entries made; anything else is refused
// (errGap), so that a copy never goes on without what it missed.
func (b *Bot) apply(ctx context.Context, entries []logged) error {
	return b.store.Write(ctx, func(tx *bolt.Tx) error {
		m := readMeta(tx)
		for _, e := range entries {
			if e.pos <= m.pos {
				continue
			}
			prev := m.pos
			m.pos = e.pos
			ent, err := decodeEntry(e.data)
			if e.pos != prev+1 && (err != nil || !ent.Snap || ent.Part != 0) {
				return fmt.Errorf("%w: this copy is at %d, the next entry stored is %d", errGap, prev, e.pos)
			}
			if err != nil {
				b.log.Warn("telegram: a write of the cluster's bot state this node cannot apply is skipped", "pos", e.pos, "err", err)
				continue
			}
			if ent.Snap {
				if err := b.applySnap(tx, e.pos, ent); err != nil {
					return err
				}
				continue
			}
			if err := dropStage(tx); err != nil { // a snapshot abandoned part way
				return err
			}
			if ent.Claim {
				if err := putPos(tx, claimKey, e.pos); err != nil {
					return err
				}
				if err := tx.Bucket(logBucket).Put(byKey, []byte(ent.Node)); err != nil {
					return err
				}
				continue
			}
			bk := tx.Bucket(bucket)
			for _, op := range ent.Ops {
				if op.Del {
					err = bk.Delete(op.Key)
				} else {
					err = bk.Put(op.Key, op.Val)
				}
				if err != nil {
					return err
				}
			}
		}
		return putPos(tx, posKey, m.pos)
	})
}

// catchUpBatch bounds the entries one write of catching up applies.
const catchUpBatch = 256

// catchUp applies the log up to its tail as of now.
func (b *Bot) catchUp(ctx context.Context) error {
	m, err := b.applied()
	if err != nil {
		return err
	}
	var batch []logged
	err = b.opt.Replica.Read(ctx, m.pos, func(pos uint64, entry []byte) error {
		batch = append(batch, logged{pos, entry})
		if len(batch) < catchUpBatch {
			return nil
		}
		err := b.apply(ctx, batch)
		batch = batch[:0]
		return err
	})
	if err == nil && len(batch) > 0 {
		err = b.apply(ctx, batch)
	}
	if err != nil {
		return fmt.Errorf("telegram: catch up with the cluster's bot state: %w", err)
	}
	return nil
}

// claimLead catches up with the log and appends this node's claim after
// its tail (again, while another node's write came in between) and
// returns the claim's position. Until ctx ends.
func (b *Bot) claimLead(ctx context.Context) (uint64, error) {
	data := encodeEntry(logEntry{Claim: true, Node: b.opt.Replica.Name()})
	for {
		if err := b.catchUp(ctx); err != nil {
			return 0, err
		}
		var (
			sent *appended
			pos  uint64
		)
		err := b.store.Write(ctx, func(tx *bolt.Tx) (err error) {
			if pos, err = b.appendIn(ctx, tx, &sent, data); err != nil {
				return err
			}
			if err := putPos(tx, posKey, pos); err != nil {
				return err
			}
			if err := putPos(tx, claimKey, pos); err != nil {
				return err
			}
			return tx.Bucket(logBucket).Put(byKey, []byte(b.opt.Replica.Name()))
		})
		if err == nil {
			return pos, nil
		}
		if !errors.Is(err, chats.ErrFenced) || ctx.Err() != nil {
			return 0, err
		}
	}
}

// logRetry is how soon following the log starts again after it failed.
const logRetry = 500 * time.Millisecond

// followLog applies the log to this node's bucket as it grows, on every
// node, until the bot closes: a node that becomes leader then has little
// to catch up.
func (b *Bot) followLog() {
	defer b.wg.Done()
	for b.ctx.Err() == nil {
		m, err := b.applied()
		if err == nil {
			err = b.opt.Replica.Follow(b.ctx, m.pos, func(pos uint64, entry []byte) error {
				return b.apply(b.ctx, []logged{{pos, entry}})
			})
		}
		if b.ctx.Err() != nil || errors.Is(err, chats.ErrClosed) {
			return
		}
		b.log.Warn("telegram: following the cluster's bot state stopped; trying again", "err", err)
		if sleep(b.ctx, logRetry) != nil {
			return
		}
	}
}

// leadRun is one stint's leader work: the followers it started.
type leadRun struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// followerRun is the context a new follower runs under and how it counts
// itself out: the bot's, or in cluster mode the current stint's (none
// while this node does not lead: only the leader sends). Under b.mu.
func (b *Bot) followerRun() (context.Context, func(), error) {
	if b.opt.Leader == nil {
		b.wg.Add(1)
		return b.ctx, b.wg.Done, nil
	}
	lr := b.lead
	if lr == nil || lr.ctx.Err() != nil {
		return nil, nil, errNotLeading
	}
	b.wg.Add(1)
	lr.wg.Add(1)
	return lr.ctx, func() { lr.wg.Done(); b.wg.Done() }, nil
}

// beginLead starts a stint's leader work: its claim made, the followers
// the log's copy holds and the albums it was gathering go on here.
func (b *Bot) beginLead(stint context.Context, claim uint64) (*leadRun, error) {
	ctx, cancel := context.WithCancel(stint)
	lr := &leadRun{ctx: ctx, cancel: cancel}
	b.mu.Lock()
	b.lead = lr
	b.claim.Store(claim)
	b.mu.Unlock()
	if err := b.startCompacting(lr); err != nil {
		b.endLead(lr)
		return nil, err
	}
	states, err := loadFollows(b.store)
	if err != nil {
		b.endLead(lr)
		return nil, err
	}
	var failed []followKey
	for _, st := range states {
		if err := b.follow(place{st.TG, st.Thread}, st.Chat, &st); err != nil && !errors.Is(err, chats.ErrNotFound) {
			failed = append(failed, followKey{place{st.TG, st.Thread}, st.Chat})
		}
	}
	if len(failed) > 0 {
		// A chat whose owner died with the old leader may not answer
		// until its lease runs out: its follower is started again until
		// it starts (or its state is gone), so the reply it was
		// streaming still lands.
		b.mu.Lock()
		lr.wg.Add(1)
		b.mu.Unlock()
		go func() {
			defer lr.wg.Done()
			b.refollow(lr.ctx, failed)
		}()
	}
	b.resumeGroups()
	return lr, nil
}

// refollow starts the followers of keys that failed to start, backing off,
// until each started, its stored state is gone, or ctx ends.
func (b *Bot) refollow(ctx context.Context, keys []followKey) {
	wait := pollBackoff
	for len(keys) > 0 {
		b.log.Warn("telegram: followers of the cluster's bot state did not start; trying again", "followers", len(keys), "retry_in", wait)
		if sleep(ctx, wait) != nil {
			return
		}
		wait = min(2*wait, maxPollBackoff)
		left := keys[:0]
		for _, k := range keys {
			st, ok := b.loadFollow(k.where, k.chat)
			if !ok {
				continue
			}
			if err := b.follow(k.where, k.chat, &st); err != nil && !errors.Is(err, chats.ErrNotFound) && ctx.Err() == nil {
				left = append(left, k)
			}
		}
		keys = left
	}
}

// endLead stops a stint's leader work: no write of it is stored from now
// on, and it returns once its followers stopped, so that the next leader
// never sends beside them.
func (b *Bot) endLead(lr *leadRun) {
	b.mu.Lock()
	if b.lead == lr {
		b.lead = nil
		b.claim.Store(0)
	}
	b.mu.Unlock()
	lr.cancel()
	b.stopGroups()
	lr.wg.Wait()
}

// The log's entries. An entry is one write of the bucket, a claim, or a
// part of a snapshot of the whole bucket (compact.go):
//
//	entry = "MTG1" kind node [snap] count op*
//	kind  = 'w' (a write: count >= 1 ops) | 'c' (a claim: count = 0)
//	      | 's' (a snapshot part: snap present, puts only, keys ascending;
//	        count = 0 only for a whole snapshot of an empty bucket)
//	node  = bytes: the node that wrote it (1 to maxNodeName bytes)
//	snap  = claim by part last
//	claim = uvarint >= 1: the position of the last claim before it
//	by    = bytes: the node that made that claim (1 to maxNodeName bytes)
//	part  = uvarint: the part's number, from 0
//	last  = 0 | 1: whether the part ends the snapshot
//	op    = 'p' key value | 'd' key
//	key   = bytes (1 to bolt.MaxKeySize); value = bytes
//	bytes = uvarint length (minimal) then that many bytes
//
// decodeEntry is strict: anything else, trailing bytes included, is
// refused.
const (
	entryMagic  = "MTG1"
	kindWrite   = 'w'
	kindClaim   = 'c'
	kindSnap    = 's'
	opPut       = 'p'
	opDelete    = 'd'
	maxNodeName = 255
)

// logEntry is one entry of the log.
type logEntry struct {
	Claim bool
	Node  string
	Ops   []logOp
	// Snap marks a snapshot's part: SnapClaim and SnapBy are the last
	// claim it holds, Part its number, Last whether it ends it.
	Snap      bool
	SnapClaim uint64
	SnapBy    string
	Part      uint64
	Last      bool
}

// logOp is a put (Val) or a delete (Del) of Key.
type logOp struct {
	Key, Val []byte
	Del      bool
}

// entryHead bounds the bytes of an entry before its ops.
const entryHead = len(entryMagic) + 1 + 5*binary.MaxVarintLen64 + 2*maxNodeName + 1

// opSize is the bytes op takes in an entry.
func opSize(op logOp) int {
	n := 1 + uvarintLen(len(op.Key)) + len(op.Key)
	if !op.Del {
		n += uvarintLen(len(op.Val)) + len(op.Val)
	}
	return n
}

func uvarintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(n))
}

func encodeEntry(e logEntry) []byte {
	n := entryHead
	for _, op := range e.Ops {
		n += opSize(op)
	}
	out := make([]byte, 0, n)
	out = append(out, entryMagic...)
	switch {
	case e.Snap:
		out = append(out, kindSnap)
	case e.Claim:
		out = append(out, kindClaim)
	default:
		out = append(out, kindWrite)
	}
	out = varbytes.Append(out, []byte(e.Node))
	if e.Snap {
		out = binary.AppendUvarint(out, e.SnapClaim)
		out = varbytes.Append(out, []byte(e.SnapBy))
		out = binary.AppendUvarint(out, e.Part)
		if e.Last {
			out = append(out, 1)
		} else {
			out = append(out, 0)
		}
	}
	out = binary.AppendUvarint(out, uint64(len(e.Ops)))
	for _, op := range e.Ops {
		if op.Del {
			out = append(out, opDelete)
			out = varbytes.Append(out, op.Key)
			continue
		}
		out = append(out, opPut)
		out = varbytes.Append(out, op.Key)
		out = varbytes.Append(out, op.Val)
	}
	return out
}

// errEntry is a log entry that does not decode.
var errEntry = fmt.Errorf("%w: telegram: bad state log entry", chats.ErrBadInput)

func decodeEntry(data []byte) (logEntry, error) {
	var e logEntry
	rest, ok := bytes.CutPrefix(data, []byte(entryMagic))
	if !ok || len(rest) == 0 {
		return e, fmt.Errorf("%w: no %s header", errEntry, entryMagic)
	}
	kind := rest[0]
	rest = rest[1:]
	switch kind {
	case kindWrite:
	case kindClaim:
		e.Claim = true
	case kindSnap:
		e.Snap = true
	default:
		return e, fmt.Errorf("%w: unknown kind %q", errEntry, kind)
	}
	node, rest, err := varbytes.Bytes(rest)
	if err != nil {
		return e, fmt.Errorf("%w: node: %w", errEntry, err)
	}
	if len(node) == 0 || len(node) > maxNodeName {
		return e, fmt.Errorf("%w: a node name of %d bytes", errEntry, len(node))
	}
	e.Node = string(node)
	if e.Snap {
		if rest, err = decodeSnap(&e, rest); err != nil {
			return e, err
		}
	}
	count, rest, err := varbytes.Uvarint(rest)
	if err != nil {
		return e, fmt.Errorf("%w: count: %w", errEntry, err)
	}
	switch {
	case e.Claim && count != 0:
		return e, fmt.Errorf("%w: a claim with %d writes", errEntry, count)
	case e.Snap && count == 0 && !(e.Part == 0 && e.Last):
		return e, fmt.Errorf("%w: an empty snapshot part that is not a whole snapshot", errEntry)
	case !e.Claim && !e.Snap && count == 0:
		return e, fmt.Errorf("%w: a write of nothing", errEntry)
	case count > uint64(len(rest))/3: // an op takes 3 bytes at least
		return e, fmt.Errorf("%w: %d writes in %d bytes", errEntry, count, len(rest))
	}
	e.Ops = make([]logOp, 0, count)
	for i := range count {
		if len(rest) == 0 {
			return e, fmt.Errorf("%w: write %d: truncated", errEntry, i)
		}
		kind := rest[0]
		if kind != opPut && kind != opDelete {
			return e, fmt.Errorf("%w: write %d: unknown op %q", errEntry, i, kind)
		}
		var op logOp
		if op.Key, rest, err = varbytes.Bytes(rest[1:]); err != nil {
			return e, fmt.Errorf("%w: write %d: key: %w", errEntry, i, err)
		}
		if len(op.Key) == 0 || len(op.Key) > bolt.MaxKeySize {
			return e, fmt.Errorf("%w: write %d: a key of %d bytes", errEntry, i, len(op.Key))
		}
		if e.Snap && kind != opPut {
			return e, fmt.Errorf("%w: write %d: a snapshot holds puts only", errEntry, i)
		}
		if e.Snap && len(e.Ops) > 0 && bytes.Compare(e.Ops[len(e.Ops)-1].Key, op.Key) >= 0 {
			return e, fmt.Errorf("%w: write %d: a snapshot's keys out of order", errEntry, i)
		}
		if kind == opDelete {
			op.Del = true
		} else if op.Val, rest, err = varbytes.Bytes(rest); err != nil {
			return e, fmt.Errorf("%w: write %d: value: %w", errEntry, i, err)
		}
		e.Ops = append(e.Ops, op)
	}
	if len(rest) > 0 {
		return e, fmt.Errorf("%w: %d bytes after the last write", errEntry, len(rest))
	}
	return e, nil
}

// decodeSnap reads a snapshot part's fields into e.
func decodeSnap(e *logEntry, rest []byte) ([]byte, error) {
	claim, rest, err := varbytes.Uvarint(rest)
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot claim: %w", errEntry, err)
	}
	if claim == 0 {
		return nil, fmt.Errorf("%w: a snapshot without a claim", errEntry)
	}
	by, rest, err := varbytes.Bytes(rest)
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot claim's node: %w", errEntry, err)
	}
	if len(by) == 0 || len(by) > maxNodeName {
		return nil, fmt.Errorf("%w: a snapshot claim's node name of %d bytes", errEntry, len(by))
	}
	part, rest, err := varbytes.Uvarint(rest)
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot part: %w", errEntry, err)
	}
	if len(rest) == 0 || rest[0] > 1 {
		return nil, fmt.Errorf("%w: a snapshot part's end mark missing or not 0 or 1", errEntry)
	}
	e.SnapClaim, e.SnapBy, e.Part, e.Last = claim, string(by), part, rest[0] == 1
	return rest[1:], nil
}
