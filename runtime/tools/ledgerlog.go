package tools

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// maxJournaledSnapshot bounds the previous bytes of a file change in
// cluster mode: they travel base64-encoded in one message of the cluster's
// log, whose largest is 8 MiB.
const maxJournaledSnapshot = 4 << 20

// LedgerRow is one change of the ledger as a chat's record carries it in
// cluster mode (chats.Flush): every node applies it to its own ledger
// with ApplyLedgerTx, so /changes and /rewind work on whichever node owns
// the chat. Its fields are the ledger's entry; Prior is the file's bytes
// before the change (StatusModified only).
type LedgerRow struct {
	// Key is the change's place in the chat's ledger, the same on every
	// node (NextLedgerKey gives the owner the next one).
	Key        uint64    `json:"key"`
	Turn       uint64    `json:"turn"`
	CallID     string    `json:"call_id"`
	Path       string    `json:"path"`
	Status     string    `json:"status"`
	SizeBefore int64     `json:"size_before"`
	SizeAfter  int64     `json:"size_after"`
	Mode       uint32    `json:"mode,omitempty"`
	Time       time.Time `json:"time"`
	Prior      []byte    `json:"prior,omitempty"`
}

// LedgerWrites are what one chat's flush changes in the ledger: rows
// added (a file tool's change) and keys forgotten (a rewind's).
type LedgerWrites struct {
	Put    []LedgerRow `json:"put,omitempty"`
	Forget []uint64    `json:"forget,omitempty"`
}

// Empty says w changes nothing.
func (w *LedgerWrites) Empty() bool { return w == nil || len(w.Put)+len(w.Forget) == 0 }

// Check says what makes w not something ApplyLedgerTx would store as the
// file tools do: keys zero or not increasing, a path that is not clean
// and relative, an unknown status, previous bytes that do not match it.
func (w *LedgerWrites) Check() error {
	for i, r := range w.Put {
		switch {
		case r.Key == 0 || i > 0 && r.Key <= w.Put[i-1].Key:
			return fmt.Errorf("ledger row %d: key %d not increasing", i, r.Key)
		case !cleanRelative(r.Path):
			return fmt.Errorf("ledger row %d: path %q is not a clean relative path", i, r.Path)
		case r.SizeBefore < 0 || r.SizeAfter < 0:
			return fmt.Errorf("ledger row %d: negative size", i)
		case len(r.Prior) > maxSnapshot:
			return fmt.Errorf("ledger row %d: %d previous bytes", i, len(r.Prior))
		}
		switch r.Status {
		case StatusCreated:
			if r.SizeBefore != 0 || len(r.Prior) != 0 || r.Mode != 0 {
				return fmt.Errorf("ledger row %d: a created file with previous bytes", i)
			}
		case StatusModified:
			if r.SizeBefore != int64(len(r.Prior)) {
				return fmt.Errorf("ledger row %d: size before %d, %d previous bytes", i, r.SizeBefore, len(r.Prior))
			}
		default:
			return fmt.Errorf("ledger row %d: status %q", i, r.Status)
		}
	}
	for i, k := range w.Forget {
		if k == 0 || i > 0 && k <= w.Forget[i-1] {
			return fmt.Errorf("ledger forget %d: key %d not increasing", i, k)
		}
	}
	return nil
}

// entry is the row as the ledger stores it (the same bytes a single
// node's record writes).
func (r *LedgerRow) entry() entry {
	e := entry{Turn: r.Turn, CallID: r.CallID, Path: r.Path, Status: r.Status, SizeBefore: r.SizeBefore,
		SizeAfter: r.SizeAfter, Mode: r.Mode, Time: r.Time.UTC()}
	if r.Status == StatusModified {
		sum := sha256.Sum256(r.Prior)
		e.Blob = sum[:]
	}
	return e
}

// NextLedgerKey is the key of chat's next change in tx's ledger: past
// every key it holds, whichever node wrote them.
func NextLedgerKey(tx *bolt.Tx, chat string) (uint64, error) {
	top := tx.Bucket(bucketChanges)
	if top == nil {
		return 1, nil
	}
	b := top.Bucket(bucketChats).Bucket([]byte(chat))
	if b == nil {
		return 1, nil
	}
	next := b.Sequence()
	if k, _ := b.Cursor().Last(); len(k) == 8 {
		next = max(next, binary.BigEndian.Uint64(k))
	}
	return next + 1, nil
}

// ApplyLedgerTx stores w, a flush's ledger writes for chat, in tx: each
// row at its key (with its previous bytes, shared by content as the
// ledger keeps them), then the forgotten keys removed and their bytes
// released. The owner's commit and each node's apply of the flush run
// it alike; a row already there or a key already gone changes nothing.
func ApplyLedgerTx(tx *bolt.Tx, chat string, w *LedgerWrites) error {
	if w.Empty() {
		return nil
	}
	if chat == "" {
		return errors.New("ledger: no chat")
	}
	top, err := tx.CreateBucketIfNotExists(bucketChanges)
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	for _, name := range [][]byte{bucketChats, bucketBlobs, bucketRefs} {
		if _, err := top.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("ledger: %w", err)
		}
	}
	chats, blobs, refs := top.Bucket(bucketChats), top.Bucket(bucketBlobs), top.Bucket(bucketRefs)
	b := chats.Bucket([]byte(chat))
	if len(w.Put) > 0 {
		if b, err = chats.CreateBucketIfNotExists([]byte(chat)); err != nil {
			return fmt.Errorf("ledger: %w", err)
		}
	}
	for _, r := range w.Put {
		key := u64(r.Key)
		if b.Get(key) != nil {
			continue
		}
		e := r.entry()
		if e.Blob != nil {
			if blobs.Get(e.Blob) == nil {
				prior := r.Prior
				if prior == nil {
					prior = []byte{} // an empty file's bytes, kept as record keeps them
				}
				if err := blobs.Put(e.Blob, prior); err != nil {
					return fmt.Errorf("ledger: %w", err)
				}
			}
			if err := refs.Put(e.Blob, u64(count(refs, e.Blob)+1)); err != nil {
				return fmt.Errorf("ledger: %w", err)
			}
		}
		val, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("ledger: %w", err)
		}
		if err := b.Put(key, val); err != nil {
			return fmt.Errorf("ledger: %w", err)
		}
		if r.Key > b.Sequence() {
			// A change this node records itself later goes after it.
			if err := b.SetSequence(r.Key); err != nil {
				return fmt.Errorf("ledger: %w", err)
			}
		}
	}
	if b == nil {
		return nil
	}
	for _, k := range w.Forget {
		key := u64(k)
		if b.Get(key) == nil {
			continue
		}
		if err := forget(b, key, blobs, refs); err != nil {
			return fmt.Errorf("ledger: %w", err)
		}
	}
	return nil
}

// cleanRelative says p names a file inside the workspace as the file tools
// record it: relative, clean, not the workspace itself, not above it.
func cleanRelative(p string) bool {
	return p != "" && p != "." && p != ".." && !path.IsAbs(p) && path.Clean(p) == p && !strings.HasPrefix(p, "../")
}
