package tools

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Change statuses: what a file was before the change the ledger recorded.
const (
	StatusCreated  = "created"  // the file did not exist
	StatusModified = "modified" // the file existed; its bytes are kept
)

// Rewind outcomes of one file.
const (
	RewoundRestored = "restored" // written back to its bytes before the turn
	RewoundDeleted  = "deleted"  // removed: it did not exist before the turn
	RewoundFailed   = "failed"   // left as it is; its entries stay in the ledger
)

// maxSnapshot bounds the file a write or edit may replace: its previous
// bytes are kept whole in the database for /rewind.
const maxSnapshot = 8 << 20

// Bucket layout, all under the one top-level bucket the ledger owns:
//
//	changes/chats/<chat>/<seq: 8-byte big-endian> -> entry (JSON)
//	changes/blobs/<sha256 of the bytes>           -> previous bytes of a file
//	changes/refs/<sha256>                         -> 8-byte count of entries using the blob
//
// Blobs are shared by content so a file saved many times costs its bytes
// once; the count lets a rewind or a dropped chat free what nothing uses.
var (
	bucketChanges = []byte("changes")
	bucketChats   = []byte("chats")
	bucketBlobs   = []byte("blobs")
	bucketRefs    = []byte("refs")
)

// Ledger is the file-tool change ledger: before write_file or edit_file
// changes a file it records, per chat, the file's previous bytes (or that it
// did not exist), so /changes can list what a chat changed and /rewind can
// put the workspace back as it was before a turn. It owns the bbolt bucket
// "changes". Safe for concurrent use; changes and rewinds are serialised so a
// snapshot always matches the bytes it replaces.
//
// The ledger knows only what the file tools did: a file the shell changed is
// neither listed nor restored.
type Ledger struct {
	db *bolt.DB
	mu sync.Mutex // held across snapshot + write, and across a rewind
}

// entry is one recorded change. Blob is internal: the key of the previous
// bytes, never shown.
type entry struct {
	Turn       uint64    `json:"turn"`
	CallID     string    `json:"call_id"`
	Path       string    `json:"path"` // slash-separated, relative to the workspace
	Status     string    `json:"status"`
	SizeBefore int64     `json:"size_before"`
	SizeAfter  int64     `json:"size_after"`
	Mode       uint32    `json:"mode,omitempty"` // permission bits before; 0 when created
	Blob       []byte    `json:"blob,omitempty"`
	Time       time.Time `json:"time"`
}

// ChangeInfo is one change as /changes shows it: sanitized metadata only, no
// bytes, no diffs, no hashes.
type ChangeInfo struct {
	Turn   uint64
	Path   string // relative to the workspace; "" when Hidden
	Hidden bool   // the path looks like it holds a secret, so it is not shown
	Status string // StatusCreated or StatusModified
	// BytesBefore and BytesAfter are the file's sizes around the change.
	BytesBefore int64
	BytesAfter  int64
	Time        time.Time
}

// RewindReport says what a rewind did, sanitized like ChangeInfo, for the
// caller to append as the chat's rewind event.
type RewindReport struct {
	Turn  uint64 // the workspace is as it was before this turn
	Files []RewoundFile
	// Counts of Files by outcome.
	Restored, Deleted, Failed int
}

// RewoundFile is one file a rewind touched.
type RewoundFile struct {
	Path    string // relative to the workspace; "" when Hidden
	Hidden  bool
	Outcome string // RewoundRestored, RewoundDeleted or RewoundFailed
	// Reason is a bounded category when Outcome is failed: outside_workspace,
	// permission_denied, is_directory or io_error.
	Reason string `json:",omitempty"`
	// Changes is how many recorded changes to the file were undone.
	Changes int
}

// String is a one-line sanitized summary, such as
// "rewound to before turn 3: 2 restored, 1 deleted, 0 failed".
func (r RewindReport) String() string {
	return fmt.Sprintf("rewound to before turn %d: %d restored, %d deleted, %d failed", r.Turn, r.Restored, r.Deleted, r.Failed)
}

// NewLedger opens the ledger in db, creating its buckets.
func NewLedger(db *bolt.DB) (*Ledger, error) {
	if db == nil {
		return nil, errors.New("tools: ledger needs a database")
	}
	err := db.Update(func(tx *bolt.Tx) error {
		top, err := tx.CreateBucketIfNotExists(bucketChanges)
		if err != nil {
			return err
		}
		for _, name := range [][]byte{bucketChats, bucketBlobs, bucketRefs} {
			if _, err := top.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tools: create ledger buckets: %w", err)
	}
	return &Ledger{db: db}, nil
}

// record stores e for chat, with prior as the previous bytes when the file
// existed. It commits before returning: the file is changed only after.
// With journal set (cluster mode) the change is the journal's to store,
// in the chat's flush, which applies it to every node's ledger.
func (l *Ledger) record(chat string, e entry, prior []byte, journal func(LedgerRow) error) error {
	if chat == "" {
		return errors.New("the change ledger needs the chat the call belongs to")
	}
	e.Time = e.Time.UTC()
	if journal != nil {
		r := LedgerRow{Turn: e.Turn, CallID: e.CallID, Path: e.Path, Status: e.Status, SizeBefore: e.SizeBefore,
			SizeAfter: e.SizeAfter, Mode: e.Mode, Time: e.Time}
		if e.Status == StatusModified {
			r.Prior = prior
		}
		return journal(r)
	}
	if e.Status == StatusModified {
		sum := sha256.Sum256(prior)
		e.Blob = sum[:]
	}
	return l.db.Update(func(tx *bolt.Tx) error {
		top := tx.Bucket(bucketChanges)
		chats, err := top.Bucket(bucketChats).CreateBucketIfNotExists([]byte(chat))
		if err != nil {
			return fmt.Errorf("ledger: %w", err)
		}
		if e.Blob != nil {
			blobs, refs := top.Bucket(bucketBlobs), top.Bucket(bucketRefs)
			if blobs.Get(e.Blob) == nil {
				if err := blobs.Put(e.Blob, prior); err != nil {
					return fmt.Errorf("ledger: %w", err)
				}
			}
			if err := refs.Put(e.Blob, u64(count(refs, e.Blob)+1)); err != nil {
				return fmt.Errorf("ledger: %w", err)
			}
		}
		seq, err := chats.NextSequence()
		if err != nil {
			return fmt.Errorf("ledger: %w", err)
		}
		val, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("ledger: %w", err)
		}
		return chats.Put(u64(seq), val)
	})
}

// Changes lists the recorded changes of chat, oldest first; none for a chat
// the ledger never saw.
func (l *Ledger) Changes(chat string) ([]ChangeInfo, error) {
	var out []ChangeInfo
	err := l.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketChanges).Bucket(bucketChats).Bucket([]byte(chat))
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, v []byte) error {
			var e entry
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("ledger: bad entry: %w", err)
			}
			ci := ChangeInfo{Turn: e.Turn, Status: e.Status, BytesBefore: e.SizeBefore, BytesAfter: e.SizeAfter, Time: e.Time}
			ci.Path, ci.Hidden = shown(e.Path)
			out = append(out, ci)
			return nil
		})
	})
	return out, err
}

// Rewind puts every file chat changed in turns >= turn back to its exact
// bytes before that turn (deleting files that did not exist then) in
// workspace, and forgets those changes. A file that cannot be restored is
// reported failed and its changes are kept, so a later rewind can try again.
// Paths are confined to workspace exactly as the tools' are.
func (l *Ledger) Rewind(chat string, turn uint64, workspace string) (RewindReport, error) {
	rep, _, err := l.rewind(chat, turn, workspace, false)
	return rep, err
}

// RewindJournaled is Rewind for cluster mode: the files are put back the
// same way, but the ledger is left as it is; the changes to forget are
// returned for the chat's flush to carry, so every node forgets them
// when it applies the flush (ApplyLedgerTx).
func (l *Ledger) RewindJournaled(chat string, turn uint64, workspace string) (RewindReport, LedgerWrites, error) {
	return l.rewind(chat, turn, workspace, true)
}

func (l *Ledger) rewind(chat string, turn uint64, workspace string, journaled bool) (RewindReport, LedgerWrites, error) {
	rep := RewindReport{Turn: turn}
	var w LedgerWrites
	ws, err := openWorkspace(workspace)
	if err != nil {
		return rep, w, err
	}
	root, err := ws.root()
	if err != nil {
		return rep, w, err
	}
	defer root.Close()

	l.mu.Lock()
	defer l.mu.Unlock()
	txn := l.db.Update
	if journaled {
		txn = l.db.View // the flush that carries w forgets them
	}
	err = txn(func(tx *bolt.Tx) error {
		top := tx.Bucket(bucketChanges)
		b := top.Bucket(bucketChats).Bucket([]byte(chat))
		if b == nil {
			return nil
		}
		// The first change of each path at or after turn holds the state
		// before it; every later one is undone along with it.
		type target struct {
			first entry
			keys  [][]byte
		}
		targets := map[string]*target{}
		var order []string
		err := b.ForEach(func(k, v []byte) error {
			var e entry
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("ledger: bad entry: %w", err)
			}
			if e.Turn < turn {
				return nil
			}
			t := targets[e.Path]
			if t == nil {
				t = &target{first: e}
				targets[e.Path] = t
				order = append(order, e.Path)
			}
			t.keys = append(t.keys, bytes.Clone(k))
			return nil
		})
		if err != nil {
			return err
		}
		sort.Strings(order)
		blobs, refs := top.Bucket(bucketBlobs), top.Bucket(bucketRefs)
		for _, p := range order {
			t := targets[p]
			f := RewoundFile{Changes: len(t.keys)}
			f.Path, f.Hidden = shown(p)
			if err := restore(ws, root, t.first, blobs); err != nil {
				f.Outcome, f.Reason = RewoundFailed, reason(err)
				rep.Failed++
				rep.Files = append(rep.Files, f)
				continue
			}
			if t.first.Status == StatusCreated {
				f.Outcome = RewoundDeleted
				rep.Deleted++
			} else {
				f.Outcome = RewoundRestored
				rep.Restored++
			}
			rep.Files = append(rep.Files, f)
			for _, k := range t.keys {
				if journaled {
					w.Forget = append(w.Forget, binary.BigEndian.Uint64(k))
					continue
				}
				if err := forget(b, k, blobs, refs); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return RewindReport{Turn: turn}, LedgerWrites{}, fmt.Errorf("rewind: %w", err)
	}
	slices.Sort(w.Forget)
	return rep, w, nil
}

// Drop forgets every change of chat and frees the bytes nothing else
// uses, for when the chat itself is deleted. The workspace is not touched.
func (l *Ledger) Drop(chat string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.db.Update(func(tx *bolt.Tx) error { return l.DropTx(tx, chat) })
}

// DropTx is Drop inside tx, a write transaction on the ledger's database,
// so that the chat's other rows go in the same commit. The caller makes
// sure no call of chat runs or is rewound meanwhile (a chat not loaded has
// none); bbolt's one writer orders it with every other ledger change.
func (l *Ledger) DropTx(tx *bolt.Tx, chat string) error {
	top := tx.Bucket(bucketChanges)
	if top == nil {
		return nil
	}
	chats := top.Bucket(bucketChats)
	b := chats.Bucket([]byte(chat))
	if b == nil {
		return nil
	}
	blobs, refs := top.Bucket(bucketBlobs), top.Bucket(bucketRefs)
	var keys [][]byte
	if err := b.ForEach(func(k, _ []byte) error { keys = append(keys, bytes.Clone(k)); return nil }); err != nil {
		return err
	}
	for _, k := range keys {
		if err := forget(b, k, blobs, refs); err != nil {
			return err
		}
	}
	return chats.DeleteBucket([]byte(chat))
}

// forget deletes one entry and releases its blob.
func forget(b *bolt.Bucket, key []byte, blobs, refs *bolt.Bucket) error {
	var e entry
	if err := json.Unmarshal(b.Get(key), &e); err != nil {
		return fmt.Errorf("ledger: bad entry: %w", err)
	}
	if err := b.Delete(key); err != nil {
		return err
	}
	if e.Blob == nil {
		return nil
	}
	switch n := count(refs, e.Blob); {
	case n > 1:
		return refs.Put(e.Blob, u64(n-1))
	default:
		if err := refs.Delete(e.Blob); err != nil {
			return err
		}
		return blobs.Delete(e.Blob)
	}
}

// restore puts one file back to the state e recorded before its change.
func restore(ws workspace, root *os.Root, e entry, blobs *bolt.Bucket) error {
	rel, err := ws.resolve(e.Path)
	if err != nil {
		return err
	}
	if rel != path.Clean(e.Path) {
		// A symlink now stands where the file was: restoring through it
		// would change some other file.
		return outside("path %s is now reached through a symlink", quote(e.Path))
	}
	if e.Status == StatusCreated {
		fi, err := root.Lstat(rel)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return fmt.Errorf("%s is now a directory: %w", quote(e.Path), errIsDir)
		}
		return root.Remove(rel)
	}
	prior := blobs.Get(e.Blob)
	if prior == nil {
		return errors.New("ledger: the previous bytes are missing")
	}
	if dir := path.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	mode := fs.FileMode(e.Mode).Perm()
	if mode == 0 {
		mode = 0o600
	}
	if err := writeFile(root, rel, prior, mode); err != nil {
		return err
	}
	return root.Chmod(rel, mode)
}

var errIsDir = errors.New("is a directory")

// reason maps a restore failure to a bounded category: the report never
// carries OS error text or absolute paths.
func reason(err error) string {
	switch {
	case errors.Is(err, ErrOutside):
		return "outside_workspace"
	case errors.Is(err, fs.ErrPermission):
		return "permission_denied"
	case errors.Is(err, errIsDir), strings.Contains(err.Error(), "is a directory"):
		return "is_directory"
	}
	return "io_error"
}

// secretWords mark a path component as secret-looking; its path is then
// left out of /changes and rewind reports (the change itself still counts).
var secretWords = []string{"secret", "token", "password", "passwd", "credential", "apikey", "api_key", "private"}

// secretNames are files that hold keys by convention.
var secretNames = []string{".env", ".netrc", ".npmrc", ".pypirc", ".pgpass", ".htpasswd", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", ".ssh", ".aws", ".gnupg", ".docker"}

// secretExts are extensions of key and certificate files.
var secretExts = []string{".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".asc", ".gpg"}

// shown returns the path to show for p, or "" and true when it looks secret.
func shown(p string) (string, bool) {
	if looksSecret(p) {
		return "", true
	}
	return p, false
}

func looksSecret(p string) bool {
	for _, c := range strings.Split(strings.ToLower(p), "/") {
		for _, n := range secretNames {
			if c == n || strings.HasPrefix(c, n+".") || strings.HasPrefix(c, n+"_") {
				return true
			}
		}
		for _, w := range secretWords {
			if strings.Contains(c, w) {
				return true
			}
		}
		for _, x := range secretExts {
			if strings.HasSuffix(c, x) {
				return true
			}
		}
	}
	return false
}

func u64(n uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	return b[:]
}

func count(refs *bolt.Bucket, key []byte) uint64 {
	v := refs.Get(key)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}
