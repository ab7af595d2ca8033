package telegram

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/mirror-gateway/mirror/chats"
	bolt "go.etcd.io/bbolt"
)

// Compacting the cluster's log of the bot's bucket (replica.go). The log
// gets one entry per write of the bucket; without compaction it grows
// forever and a new node replays all of it. The leader (the only writer
// of the bot's own work) appends a snapshot of the whole bucket once
// compactEvery entries per part of the last one followed it, then purges
// every entry before it:
//
//   - The snapshot is written like any write: inside the store's commit,
//     appended after this copy's position (the store refuses it when the
//     log moved on), under the stint's claim (a superseded leader's is
//     refused). It carries the last claim's position and node, so that a
//     copy that jumps to it refuses a superseded leader's writes as one
//     that applied the claim itself.
//   - A snapshot larger than one entry (Replica.MaxEntry: a NATS message)
//     is split into parts appended one after another, each after the
//     previous one, so they are consecutive in the log. A copy stages the
//     parts in a bucket of their own and replaces its bucket with them at
//     the last part, in that part's transaction; parts not followed by
//     the next (a write of another node came between: the leader's next
//     part was refused, and it tries again later) are dropped.
//   - The purge drops only what is before the snapshot's first part, and
//     only once the store confirmed every part: what it drops the
//     snapshot holds. A copy whose position is in the purged range (a
//     node that was away) reads on from the snapshot and replaces its
//     bucket with it; any other entry after such a gap is refused.
//
// A bucket holding one value too large for an entry with a snapshot's
// header is not compacted; the leader says so in its log, and tries again
// after compactEvery more entries.

// compactEvery is how many entries after the last snapshot, per part of
// it, make the leader write the next one: the log then holds the snapshot
// and at most about this many entries (a few hundred bytes each) per part.
// Counting per part keeps a snapshot's cost, spread over the writes
// between two, at most one entry's largest size (a NATS message, 1 MiB by
// default) per compactEvery writes, however large the bucket grows. Not a
// setting: it bounds the replay a node makes, and a thousand small writes
// between two snapshots is cheap either way.
const compactEvery = 1000

// stageBucket holds the parts of a snapshot being applied.
var stageBucket = []byte("telegram_snap")

// errGap is an entry that is not a snapshot's start after entries this
// copy never applied were purged.
var errGap = errors.New("telegram: the cluster's bot state log was purged past this copy's position without a snapshot after it; the copy is not applied further")

// errSnapTooLarge is a bucket whose snapshot cannot be split into entries.
var errSnapTooLarge = errors.New("telegram: a value of the bot's state is too large for one entry of the cluster's log with a snapshot's header: the log is not compacted")

// compactDue asks the leader's compactor to run when the log at position
// pos is due (replicate calls it after each of the leader's writes).
func (b *Bot) compactDue(pos uint64) {
	if b.compactEvery == 0 || pos < b.compactAt.Load() {
		return
	}
	select {
	case b.compactKick <- struct{}{}:
	default:
	}
}

// compactLoop compacts the log when due, until the stint lr ends.
func (b *Bot) compactLoop(lr *leadRun) {
	defer lr.wg.Done()
	for {
		select {
		case <-lr.ctx.Done():
			return
		case <-b.compactKick:
		}
		next, err := b.compact(lr.ctx)
		switch {
		case err == nil:
		case lr.ctx.Err() != nil || errors.Is(err, errNotLeading):
			return
		case errors.Is(err, chats.ErrFenced):
			// Another node's write (a pairing approved there) came
			// first: catch up and try again.
			if b.catchUp(lr.ctx) == nil {
				b.compactDue(math.MaxUint64)
			}
		default:
			b.log.Warn("telegram: compacting the cluster's bot state failed; it is tried again later", "err", err)
		}
		if next > 0 {
			b.compactAt.Store(next)
		}
	}
}

// startCompacting starts the stint's compactor; a log already due (a
// new leader's) is compacted at once.
func (b *Bot) startCompacting(lr *leadRun) error {
	if b.compactEvery == 0 {
		return nil
	}
	m, err := b.applied()
	if err != nil {
		return err
	}
	b.compactAt.Store(m.due(b.compactEvery))
	lr.wg.Add(1)
	go b.compactLoop(lr)
	b.compactDue(m.pos)
	return nil
}

// compact writes a snapshot of the bucket when due and purges the log
// before it. It returns the position the next compaction is due at (0:
// unchanged, the next write of the leader asks again).
func (b *Bot) compact(ctx context.Context) (uint64, error) {
	claim := b.claim.Load()
	if claim == 0 {
		return 0, errNotLeading
	}
	var (
		sent        []appended
		first, next uint64
	)
	err := b.store.Write(ctx, func(tx *bolt.Tx) error {
		first, next = 0, 0
		m := readMeta(tx)
		if m.claim != claim {
			return errNotLeading
		}
		if next = m.due(b.compactEvery); m.pos < next {
			return nil // not due (compacted since it was asked)
		}
		parts, err := snapshotParts(tx.Bucket(bucket), b.opt.Replica.Name(), m, b.opt.Replica.MaxEntry())
		if err != nil {
			next = m.pos + b.compactEvery
			return err
		}
		next = 0
		at := m.pos
		for i, data := range parts {
			if i < len(sent) { // run again by the store's committer
				if !bytes.Equal(sent[i].data, data) {
					return errRerun
				}
				at = sent[i].pos
				continue
			}
			pos, err := b.opt.Replica.Append(ctx, at, data)
			if err != nil {
				return err
			}
			sent = append(sent, appended{pos: pos, data: data})
			at = pos
		}
		first, next = sent[0].pos, at+b.compactEvery*uint64(len(sent))
		if err := putPos(tx, posKey, at); err != nil {
			return err
		}
		if err := putPos(tx, partsKey, uint64(len(sent))); err != nil {
			return err
		}
		return putPos(tx, snapKey, at)
	})
	if err != nil {
		if !errors.Is(err, errSnapTooLarge) {
			next = 0
		}
		return next, err
	}
	if first == 0 {
		return next, nil
	}
	b.log.Info("telegram: compacted the cluster's bot state log", "snapshot", first, "parts", len(sent))
	if err := b.opt.Replica.Purge(ctx, first); err != nil {
		return next, fmt.Errorf("telegram: the snapshot at %d is stored, the entries before it are not purged: %w", first, err)
	}
	return next, nil
}

// due is the position at which the log is due for a snapshot: every
// entries per part of the last snapshot after it.
func (m logMeta) due(every uint64) uint64 {
	return m.snap + every*max(m.parts, 1)
}

// snapshotParts encodes the whole bucket as a snapshot at m (its last
// claim), in parts of at most max bytes.
func snapshotParts(bk *bolt.Bucket, node string, m logMeta, max int) ([][]byte, error) {
	head := len(encodeEntry(logEntry{Snap: true, Node: node, SnapClaim: m.claim, SnapBy: m.by, Part: math.MaxUint32})) + binary.MaxVarintLen64
	room := max - head
	var (
		parts [][]logOp
		cur   []logOp
		size  int
	)
	err := bk.ForEach(func(k, v []byte) error {
		if v == nil {
			return nil // a nested bucket: the bot keeps none, writes carry none
		}
		op := logOp{Key: k, Val: v}
		n := opSize(op)
		if n > room {
			return fmt.Errorf("%w (key %q: %d bytes, at most %d)", errSnapTooLarge, k, n, room)
		}
		if size+n > room {
			parts, cur, size = append(parts, cur), nil, 0
		}
		cur, size = append(cur, op), size+n
		return nil
	})
	if err != nil {
		return nil, err
	}
	parts = append(parts, cur)
	out := make([][]byte, len(parts))
	for i, ops := range parts {
		out[i] = encodeEntry(logEntry{Snap: true, Node: node, SnapClaim: m.claim, SnapBy: m.by,
			Part: uint64(i), Last: i == len(parts)-1, Ops: ops})
	}
	return out, nil
}

// applySnap applies a snapshot's part at position pos: a whole snapshot
// replaces the bucket; a part is staged, after the one before it, and the
// last replaces the bucket with every part staged.
func (b *Bot) applySnap(tx *bolt.Tx, pos uint64, ent logEntry) error {
	lb, err := tx.CreateBucketIfNotExists(logBucket)
	if err != nil {
		return err
	}
	if ent.Part > 0 {
		st := lb.Get(stageKey)
		if len(st) != 16 || binary.BigEndian.Uint64(st) != pos-1 || binary.BigEndian.Uint64(st[8:]) != ent.Part-1 {
			b.log.Warn("telegram: a part of a snapshot of the cluster's bot state without the part before it is skipped", "pos", pos, "part", ent.Part)
			return dropStage(tx)
		}
	} else if err := dropStage(tx); err != nil {
		return err
	}
	var ops []logOp
	if ent.Part == 0 && ent.Last {
		ops = ent.Ops
	} else {
		sb, err := tx.CreateBucketIfNotExists(stageBucket)
		if err != nil {
			return err
		}
		for _, op := range ent.Ops {
			if err := sb.Put(op.Key, op.Val); err != nil {
				return err
			}
		}
		if !ent.Last {
			st := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, pos), ent.Part)
			return lb.Put(stageKey, st)
		}
		if err := sb.ForEach(func(k, v []byte) error {
			ops = append(ops, logOp{Key: k, Val: v})
			return nil
		}); err != nil {
			return err
		}
	}
	if err := tx.DeleteBucket(bucket); err != nil && !errors.Is(err, bolt.ErrBucketNotFound) {
		return err
	}
	bk, err := tx.CreateBucket(bucket)
	if err != nil {
		return err
	}
	for _, op := range ops {
		if err := bk.Put(op.Key, op.Val); err != nil {
			return err
		}
	}
	if err := dropStage(tx); err != nil {
		return err
	}
	if err := putPos(tx, partsKey, ent.Part+1); err != nil {
		return err
	}
	if err := putPos(tx, claimKey, ent.SnapClaim); err != nil {
		return err
	}
	if err := lb.Put(byKey, []byte(ent.SnapBy)); err != nil {
		return err
	}
	return putPos(tx, snapKey, pos)
}

// dropStage drops a staged snapshot, if any.
func dropStage(tx *bolt.Tx) error {
	if tx.Bucket(stageBucket) == nil {
		return nil
	}
	if err := tx.DeleteBucket(stageBucket); err != nil {
		return err
	}
	return tx.Bucket(logBucket).Delete(stageKey)
}
