package chats

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"time"
)

// SharedBlobs is the attachment store every node of a cluster reaches
// (chats/cluster implements it on a JetStream object store and a KV
// bucket; chats imports no NATS). In cluster mode an upload lands on the
// node the browser or the bot talked to, while the chat that names it
// runs on its owner and its blob may be fetched from any node: each
// upload is stored here too, with its upload entry, before it is
// acknowledged, and a node missing a blob fetches it from here. nil (the
// single-node mode) keeps everything local.
type SharedBlobs interface {
	// Store stores the blob named sum, read from r, and returns once it is
	// durable; a blob stored recently (younger than half the upload TTL
	// given) is not stored again.
	Store(ctx context.Context, sum string, r io.Reader, fresh time.Duration) error
	// Fetch opens the stored blob sum; an error wrapping fs.ErrNotExist
	// when none is stored. The content is what was stored under that name:
	// the caller checks it against sum.
	Fetch(ctx context.Context, sum string) (io.ReadCloser, error)
	// Note sets sum's upload entry to update(old), old being the stored
	// entry (nil: none); a concurrent change makes it read and update
	// again.
	Note(ctx context.Context, sum string, update func(old []byte) []byte) error
	// Noted returns sum's upload entry; nil when there is none.
	Noted(ctx context.Context, sum string) ([]byte, error)
	// Leading reports whether this node collects the shared store: only
	// the cluster's leader does.
	Leading() bool
	// Notes lists every upload entry, by sum.
	Notes(ctx context.Context) (map[string][]byte, error)
	// Stored lists every stored blob and when it was stored.
	Stored(ctx context.Context) (map[string]time.Time, error)
	// Remove removes the blob sum; Forget removes sum's upload entry.
	// Neither fails when there is nothing to remove.
	Remove(ctx context.Context, sum string) error
	Forget(ctx context.Context, sum string) error
}

// ErrBlobMismatch refuses a blob whose content is not what its name (its
// SHA-256) says: a fetched copy that is corrupt, or another file stored
// under the name. Nothing is placed.
var ErrBlobMismatch = errors.New("attachment content does not match its sha256")

// fetchTimeout bounds fetching one blob from the shared store when the
// reader gave no deadline (a model request's part, a Telegram send).
const fetchTimeout = 2 * time.Minute

// Share makes the store a cluster node's: uploads are also stored in
// shared, and a blob missing here is fetched from it (see SharedBlobs).
// Call it before the store is used.
func (b *Blobs) Share(shared SharedBlobs) { b.shared = shared }

// Shared returns the cluster's store Share set; nil on a single node.
func (b *Blobs) Shared() SharedBlobs { return b.shared }

// SetClock sets the clock the upload TTL is measured by (time.Now unless
// set), so that collection can be driven past the TTL without waiting
// for it (tests of a cluster's collection, outside this package). Call
// it before the store is used.
func (b *Blobs) SetClock(now func() time.Time) { b.now = now }

// fetch copies the blob sum from the shared store into this node's,
// checking its SHA-256 and size while it writes, and places it as an
// upload is placed (writeBlob): every later read is local. Concurrent
// fetches of one blob share one copy.
func (b *Blobs) fetch(ctx context.Context, sum string) error {
	ch := b.fetching.DoChan(sum, func() (any, error) { return nil, b.fetchOnce(ctx, sum) })
	select {
	case r := <-ch:
		return r.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *Blobs) fetchOnce(ctx context.Context, sum string) error {
	rc, err := b.shared.Fetch(ctx, sum)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("attachment %s: %w", sum, err)
	}
	if err != nil {
		return fmt.Errorf("%w: attachment %s: fetch from the cluster: %v", ErrUnavailable, sum, err)
	}
	defer rc.Close()
	return b.writeBlob(func(f *os.File) (string, error) {
		// No kind is known here: the largest limit bounds what is written.
		limit := max(b.limits.Image, b.limits.Document, b.limits.Audio)
		h := sha256.New()
		n, err := copyBlob(f, h, io.LimitReader(rc, limit+1), 0)
		if err != nil {
			return "", fmt.Errorf("attachment %s: fetch from the cluster: %w", sum, err)
		}
		if n > limit {
			return "", fmt.Errorf("%w: the cluster's copy of attachment %s is larger than any attachment may be (%s); not stored", ErrBlobMismatch, sum, byteSize(limit))
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != sum {
			return "", fmt.Errorf("%w: the cluster's copy of attachment %s has the content of %s; not stored", ErrBlobMismatch, sum, got)
		}
		return sum, nil
	})
}

// share stores an upload just placed here in the shared store, then its
// upload entry (which makes the sum known to a send on any node), merging
// the uploaders with those the entry names. The entry is written first,
// so the leader's collection never removes the blob between the two.
func (b *Blobs) share(ctx context.Context, up upload, by string) error {
	sum := up.Attachment.SHA256
	err := b.shared.Note(ctx, sum, func(old []byte) []byte {
		next := up
		var prev upload
		if old != nil && json.Unmarshal(old, &prev) == nil {
			next.By = slices.Clone(prev.By)
		}
		if by != "" && !slices.Contains(next.By, by) {
			next.By = append(next.By, by)
		}
		return Marshal(next)
	})
	if err != nil {
		return fmt.Errorf("%w: the cluster did not record upload %s: %v", ErrUnavailable, sum, err)
	}
	f, err := b.Open(sum)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := b.shared.Store(ctx, sum, f, b.ttl/2); err != nil {
		return fmt.Errorf("%w: the cluster did not store upload %s: %v", ErrUnavailable, sum, err)
	}
	return nil
}

// sharedUpload reads sum's upload entry from the shared store: the upload
// was made on another node. ok is false when there is none, or it is past
// the TTL.
func (b *Blobs) sharedUpload(ctx context.Context, sum string) (upload, bool, error) {
	v, err := b.shared.Noted(ctx, sum)
	if err != nil || v == nil {
		return upload{}, false, err
	}
	var u upload
	if json.Unmarshal(v, &u) != nil || u.Attachment.SHA256 != sum || b.now().Sub(u.Time) >= b.ttl {
		return upload{}, false, nil
	}
	return u, true, nil
}

// collectShared is the leader's collection of the shared store: upload
// entries past the TTL and its margin go, and a blob goes when no row
// names it (keep: the leader follows every chat, so its rows are all of
// them), no upload entry left names it, and it was stored longer than the
// TTL ago. The margin also covers the leader's following: a row a send
// accepted through an entry is followed long before the entry goes.
//
// stored is the shared store's blobs, listed before the scan of the rows
// (CollectBlobs skips the scan when none is old enough to go).
func (b *Blobs) collectShared(ctx context.Context, keep map[string]bool, cutoff time.Time, stored map[string]time.Time) (int, error) {
	sh := b.shared
	notes, err := sh.Notes(ctx)
	if err != nil {
		return 0, fmt.Errorf("list the cluster's uploads: %w", err)
	}
	live := map[string]bool{}
	var firstErr error
	for sum, v := range notes {
		var u upload
		if json.Unmarshal(v, &u) != nil || u.Time.Before(cutoff) {
			firstErr = cmpErr(firstErr, sh.Forget(ctx, sum))
			continue
		}
		live[sum] = true
	}
	removed := 0
	for sum, at := range stored {
		if keep[sum] || live[sum] || b.now().Sub(at) < b.ttl {
			continue
		}
		// An upload of the same content may have come since the list:
		// its entry, written before it is stored, keeps the blob.
		if v, err := sh.Noted(ctx, sum); err != nil || v != nil {
			firstErr = cmpErr(firstErr, err)
			continue
		}
		if err := sh.Remove(ctx, sum); err != nil {
			firstErr = cmpErr(firstErr, err)
			continue
		}
		removed++
	}
	return removed, firstErr
}

// anyOld reports whether a blob of the shared store was stored longer
// than the TTL ago: one the leader's collection could remove.
func (b *Blobs) anyOld(stored map[string]time.Time) bool {
	for _, at := range stored {
		if b.now().Sub(at) >= b.ttl {
			return true
		}
	}
	return false
}
