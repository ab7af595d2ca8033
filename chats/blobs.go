package chats

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"image"
	_ "image/gif" // DecodeConfig reads the pixel size of these formats
	_ "image/jpeg"
	_ "image/png"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mirror-gateway/mirror/config/datadir"
	"github.com/mirror-gateway/mirror/runtime/provider"
	bolt "go.etcd.io/bbolt"
	"golang.org/x/sync/singleflight"
	"golang.org/x/sys/unix"
)

// bucketUploads holds what was uploaded and not yet collected: sha256 →
// upload (the attachment and when it came). A send names an upload by its
// sha256; the entry is what makes it known and keeps its blob alive until
// a message row names it.
var bucketUploads = []byte("uploads")

// ErrUnknownAttachment refuses a message naming an attachment that was
// never uploaded, or whose upload was collected before a message named it.
var ErrUnknownAttachment = errors.New("unknown attachment")

// Attachment is a file attached to a message: a reference to its blob,
// which is stored once under data_dir/blobs, named by its SHA-256.
type Attachment struct {
	SHA256 string `json:"sha256"`
	// Type is the media type without parameters ("image/png").
	Type string `json:"type"`
	Size int64  `json:"size"`
	// Name is the file's name as the person gave it (no directories).
	Name string `json:"name,omitempty"`
	// Width and Height are an image's pixel size (PNG, JPEG, GIF); 0 when
	// unknown.
	Width  int `json:"width,omitempty"`
	Height int `json:"height,omitempty"`
	// Transcript is what a voice note or audio file says, once the
	// transcribe role has read it (message.transcribed).
	Transcript string `json:"transcript,omitempty"`
}

// Attachment kinds, by media type; each has its own size limit.
const (
	KindImage    = "image"
	KindAudio    = "audio"
	KindDocument = "document"
)

// KindOf returns the kind of a media type: image/*, audio/*, or document.
func KindOf(mediaType string) string {
	switch {
	case strings.HasPrefix(mediaType, "image/"):
		return KindImage
	case strings.HasPrefix(mediaType, "audio/"):
		return KindAudio
	}
	return KindDocument
}

// BlobLimits are the size limits of one attachment, by kind.
type BlobLimits struct {
	Image, Document, Audio int64
}

// For returns the limit of a media type's kind.
func (l BlobLimits) For(mediaType string) int64 {
	switch KindOf(mediaType) {
	case KindImage:
		return l.Image
	case KindAudio:
		return l.Audio
	}
	return l.Document
}

// MaxAttachments caps the attachments of one message (a Telegram album
// holds ten).
const MaxAttachments = 20

// MaxAttachmentName caps an attachment's name, in bytes.
const MaxAttachmentName = 255

// upload is a bucketUploads entry.
type upload struct {
	Attachment Attachment `json:"attachment"`
	Time       time.Time  `json:"time"`
	// By are the people who uploaded it (ids; see Scope.Upload): while it
	// is live, only they fetch it.
	By []string `json:"by,omitempty"`
}

// Blobs is the attachment store: data_dir/blobs/ab/abcdef… (the first two
// hex digits of the SHA-256 name a folder, so no folder grows huge). It
// keeps the data dir's trust rules: folders 0700, files 0600, owned by
// this user, and nothing is opened through a symlink; an unsafe entry is
// refused (datadir.ErrUnsafe), never followed or repaired.
//
// A blob is written to a temp file in data_dir/blobs (the same filesystem),
// synced, renamed to its name, and its folders synced, all before Put
// returns: a row that names a blob is committed only after that.
type Blobs struct {
	dir    string
	limits BlobLimits
	// ttl is how long an upload no row names is kept (and how young a
	// blob is never collected).
	ttl time.Duration
	// mu orders collection (stat, then unlink) against Put finding an
	// existing blob (stat, then touch): a blob Put found is never
	// collected, as its fresh mtime keeps it.
	mu  sync.Mutex
	now func() time.Time
	// shared is the cluster's store (Share); nil on a single node.
	shared SharedBlobs
	// fetching joins concurrent fetches of one blob from shared.
	fetching singleflight.Group
}

// tmpPrefix names temp files; startup removes those a crash left.
const tmpPrefix = datadir.TempPrefix

// OpenBlobs opens (creating 0700 if needed) dataDir/blobs and removes the
// temp files a crash left in it.
func OpenBlobs(dataDir string, limits BlobLimits, ttl time.Duration) (*Blobs, error) {
	b := &Blobs{dir: filepath.Join(dataDir, "blobs"), limits: limits, ttl: ttl, now: time.Now}
	if err := os.Mkdir(b.dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("create %s: %w", b.dir, err)
	}
	dfd, err := datadir.OpenDirAt(unix.AT_FDCWD, b.dir, b.dir)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	names, err := readDirNames(dfd)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", b.dir, err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, tmpPrefix) {
			if err := unix.Unlinkat(dfd, n, 0); err != nil && !errors.Is(err, unix.ENOENT) {
				return nil, fmt.Errorf("remove leftover %s: %w", filepath.Join(b.dir, n), err)
			}
		}
	}
	return b, nil
}

// Limits returns the size limits the store enforces.
func (b *Blobs) Limits() BlobLimits { return b.limits }

// Put stores what r yields as a blob of the declared media type, streaming
// it (never held whole in memory) into a temp file while hashing it. It
// refuses, storing nothing, a body past the kind's limit (ErrTooLarge, read
// no further than the limit), a declared type the content contradicts
// (http.DetectContentType), and an image whose header cannot be read
// (ErrBadInput). When it returns, the blob is durable.
func (b *Blobs) Put(r io.Reader, declared, name string) (Attachment, error) {
	mt, err := mediaType(declared)
	if err != nil {
		return Attachment{}, err
	}
	name = cleanName(name)
	limit := b.limits.For(mt)
	var a Attachment
	err = b.writeBlob(func(f *os.File) (string, error) {
		h := sha256.New()
		// The first bytes decide the sniffed type; copying them through a
		// buffer of their own keeps the rest streaming.
		head := make([]byte, 512)
		lr := io.LimitReader(r, limit+1)
		n, err := io.ReadFull(lr, head)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("read upload: %w", err)
		}
		head = head[:n]
		if n == 0 {
			return "", fmt.Errorf("%w: the file is empty", ErrBadInput)
		}
		sniffed := http.DetectContentType(head)
		if !sniffOK(mt, sniffed) {
			return "", fmt.Errorf("%w: the file was declared %s but its content is %s", ErrBadInput, mt, baseType(sniffed))
		}
		h.Write(head)
		if _, err := f.Write(head); err != nil {
			return "", fmt.Errorf("write blob: %w", err)
		}
		rest, err := copyBlob(f, h, lr, int64(n))
		if err != nil {
			return "", err
		}
		size := int64(n) + rest
		if size > limit {
			return "", fmt.Errorf("%w: a %s attachment may be at most %s; this one is larger", ErrTooLarge, KindOf(mt), byteSize(limit))
		}
		a = Attachment{SHA256: hex.EncodeToString(h.Sum(nil)), Type: mt, Size: size, Name: name}
		if a.Type == "image/png" || a.Type == "image/jpeg" || a.Type == "image/gif" {
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return "", fmt.Errorf("read blob: %w", err)
			}
			cfg, _, err := image.DecodeConfig(f)
			if err != nil {
				return "", fmt.Errorf("%w: the image cannot be read (%s is corrupt or truncated)", ErrBadInput, a.Type)
			}
			a.Width, a.Height = cfg.Width, cfg.Height
		}
		return a.SHA256, nil
	})
	if err != nil {
		return Attachment{}, err
	}
	return a, nil
}

// writeBlob writes a blob through a temp file in the store's folder: fill
// writes it and returns its SHA-256, then the file is synced, closed and
// placed under that name (place). On any error nothing is left behind.
// An upload (Put) and a copy fetched from a cluster's store both land
// this way.
func (b *Blobs) writeBlob(fill func(f *os.File) (sum string, err error)) error {
	dfd, err := datadir.OpenDirAt(unix.AT_FDCWD, b.dir, b.dir)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	tmp, f, err := datadir.CreateTemp(dfd, b.dir, "")
	if err != nil {
		return err
	}
	sum, err := fill(f)
	if err == nil {
		if err = f.Sync(); err != nil {
			err = fmt.Errorf("sync blob: %w", err)
		}
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close blob: %w", cerr)
	}
	if err == nil {
		err = b.place(dfd, tmp, sum)
	}
	if err != nil {
		unix.Unlinkat(dfd, tmp, 0) // gone already when place renamed it
	}
	return err
}

// copyBuffers are copyBlob's buffers, reused: an upload allocates none.
var copyBuffers = sync.Pool{New: func() any { return new([blobChunk]byte) }}

// blobChunk is the size of copyBlob's reads and writes: 8× io.Copy's, so a
// 10 MB file takes 40 writes rather than 320.
const blobChunk = 256 << 10

// writebackEvery is how much copyBlob writes between two writeback starts.
const writebackEvery = 1 << 20

// copyBlob copies r into f (whose first off bytes are written) and h, once,
// through a pooled buffer, and starts the writeback of each megabyte as it
// is written (startWriteback), so the final sync has little left to flush:
// a 10 MB file does not hold the disk for one long flush that the chats'
// commits (their own fsyncs) would queue behind. It returns the bytes
// copied.
func copyBlob(f *os.File, h hash.Hash, r io.Reader, off int64) (int64, error) {
	buf := copyBuffers.Get().(*[blobChunk]byte)
	defer copyBuffers.Put(buf)
	var n int64
	flushed := off
	for {
		k, rerr := io.ReadFull(r, buf[:])
		if k > 0 {
			h.Write(buf[:k])
			if _, err := f.Write(buf[:k]); err != nil {
				return n, fmt.Errorf("write blob: %w", err)
			}
			n += int64(k)
			if end := off + n; end-flushed >= writebackEvery {
				startWriteback(f, flushed, end-flushed)
				flushed = end
			}
		}
		switch {
		case rerr == io.EOF || rerr == io.ErrUnexpectedEOF:
			return n, nil
		case rerr != nil:
			return n, fmt.Errorf("write blob: %w", rerr)
		}
	}
}

// place moves the synced temp file to the blob's name, or, when that blob
// is already stored, drops the temp and freshens the stored one's mtime (so
// collection leaves it for ttl, like a new one). Either way the folders
// are synced before it returns.
func (b *Blobs) place(dfd int, tmp, sum string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	sub := sum[:2]
	if err := unix.Mkdirat(dfd, sub, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("create %s: %w", filepath.Join(b.dir, sub), err)
	}
	sfd, err := datadir.OpenDirAt(dfd, sub, filepath.Join(b.dir, sub))
	if err != nil {
		return err
	}
	defer unix.Close(sfd)
	if f, err := datadir.OpenAt(sfd, filepath.Join(b.dir, sub), sum, os.O_RDONLY); err == nil {
		now := b.now()
		ts := []unix.Timespec{unix.NsecToTimespec(now.UnixNano()), unix.NsecToTimespec(now.UnixNano())}
		err := unix.UtimesNanoAt(sfd, sum, ts, unix.AT_SYMLINK_NOFOLLOW)
		f.Close()
		if err != nil {
			return fmt.Errorf("touch blob: %w", err)
		}
		unix.Unlinkat(dfd, tmp, 0)
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := unix.Renameat(dfd, tmp, sfd, sum); err != nil {
		return fmt.Errorf("store blob: %w", err)
	}
	// The rename is durable once both directory entries are.
	if err := unix.Fsync(sfd); err != nil {
		return fmt.Errorf("sync %s: %w", filepath.Join(b.dir, sub), err)
	}
	if err := unix.Fsync(dfd); err != nil {
		return fmt.Errorf("sync %s: %w", b.dir, err)
	}
	return nil
}

// Open opens the blob named by sum for reading. A missing one gives an
// error wrapping fs.ErrNotExist; an unsafe one datadir.ErrUnsafe. In a
// cluster a blob missing here is fetched first (see OpenContext), within
// fetchTimeout.
func (b *Blobs) Open(sum string) (*os.File, error) {
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	return b.OpenContext(ctx, sum)
}

// OpenContext is Open bounded by ctx: in a cluster (Share), a blob
// missing here is fetched from the shared store, its SHA-256 checked
// (ErrBlobMismatch), and placed here, so every later read is local.
func (b *Blobs) OpenContext(ctx context.Context, sum string) (*os.File, error) {
	f, err := b.openLocal(sum)
	if err == nil || b.shared == nil || !errors.Is(err, fs.ErrNotExist) {
		return f, err
	}
	if err := b.fetch(ctx, sum); err != nil {
		return nil, err
	}
	return b.openLocal(sum)
}

// openLocal opens the blob sum in this node's store.
func (b *Blobs) openLocal(sum string) (*os.File, error) {
	if !validSum(sum) {
		return nil, fmt.Errorf("%w: %q is not a sha256", ErrBadInput, sum)
	}
	dfd, err := datadir.OpenDirAt(unix.AT_FDCWD, b.dir, b.dir)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	sfd, err := datadir.OpenDirAt(dfd, sum[:2], filepath.Join(b.dir, sum[:2]))
	if err != nil {
		return nil, err
	}
	defer unix.Close(sfd)
	return datadir.OpenAt(sfd, filepath.Join(b.dir, sum[:2]), sum, os.O_RDONLY)
}

// collect removes the blobs not in keep and older than ttl, and reports
// how many went. A blob is removed only while mu is held and after its
// mtime is read again, so one Put just found (and freshened) stays.
func (b *Blobs) collect(keep map[string]bool) (int, error) {
	dfd, err := datadir.OpenDirAt(unix.AT_FDCWD, b.dir, b.dir)
	if err != nil {
		return 0, err
	}
	defer unix.Close(dfd)
	subs, err := readDirNames(dfd)
	if err != nil {
		return 0, err
	}
	removed := 0
	var firstErr error
	for _, sub := range subs {
		if len(sub) != 2 || !isHex(sub) {
			continue // temp files, and anything not ours, are left alone
		}
		sfd, err := datadir.OpenDirAt(dfd, sub, filepath.Join(b.dir, sub))
		if err != nil {
			firstErr = cmpErr(firstErr, err)
			continue
		}
		names, err := readDirNames(sfd)
		if err != nil {
			unix.Close(sfd)
			firstErr = cmpErr(firstErr, err)
			continue
		}
		for _, n := range names {
			if !validSum(n) || n[:2] != sub || keep[n] {
				continue
			}
			gone, err := b.collectOne(sfd, n)
			if gone {
				removed++
			}
			firstErr = cmpErr(firstErr, err)
		}
		unix.Close(sfd)
	}
	return removed, firstErr
}

// hasOld reports whether a blob file older than the TTL exists: one that
// collect could remove.
func (b *Blobs) hasOld() (bool, error) {
	dfd, err := datadir.OpenDirAt(unix.AT_FDCWD, b.dir, b.dir)
	if err != nil {
		return false, err
	}
	defer unix.Close(dfd)
	subs, err := readDirNames(dfd)
	if err != nil {
		return false, err
	}
	for _, sub := range subs {
		if len(sub) != 2 || !isHex(sub) {
			continue
		}
		sfd, err := datadir.OpenDirAt(dfd, sub, filepath.Join(b.dir, sub))
		if err != nil {
			return true, nil // let collect meet and report it
		}
		names, err := readDirNames(sfd)
		for _, n := range names {
			var st unix.Stat_t
			if !validSum(n) || n[:2] != sub || unix.Fstatat(sfd, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				continue
			}
			if st.Mode&unix.S_IFMT == unix.S_IFREG && b.now().Sub(time.Unix(st.Mtim.Unix())) >= b.ttl {
				unix.Close(sfd)
				return true, nil
			}
		}
		unix.Close(sfd)
		if err != nil {
			return true, nil
		}
	}
	return false, nil
}

func (b *Blobs) collectOne(sfd int, name string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var st unix.Stat_t
	if err := unix.Fstatat(sfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return false, nil // gone already
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false, nil // not a blob we wrote: left alone
	}
	if b.now().Sub(time.Unix(st.Mtim.Unix())) < b.ttl {
		return false, nil // young: an upload a send may still name
	}
	if err := unix.Unlinkat(sfd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return false, fmt.Errorf("remove blob: %w", err)
	}
	return true, nil
}

func cmpErr(first, err error) error {
	if first == nil {
		return err
	}
	return first
}

// Blobs returns the attachment store; nil when attachments are not enabled.
func (s *Service) Blobs() *Blobs { return s.opt.Blobs }

// Upload stores r as a blob (see Blobs.Put) and records the upload, so a
// message.send may name it by its sha256 within attachments'
// unreferenced_ttl. It returns once both are durable.
func (s *Service) Upload(ctx context.Context, r io.Reader, mediaType, name string) (Attachment, error) {
	return s.upload(ctx, r, mediaType, name, "")
}

// upload is Upload by the person by ("" for none).
func (s *Service) upload(ctx context.Context, r io.Reader, mediaType, name, by string) (Attachment, error) {
	b := s.opt.Blobs
	if b == nil {
		return Attachment{}, fmt.Errorf("%w: attachments are not enabled (no data dir)", ErrBadInput)
	}
	a, err := b.Put(r, mediaType, name)
	if err != nil {
		return Attachment{}, err
	}
	up := upload{Attachment: a, Time: b.now().UTC()}
	if b.shared != nil {
		// In a cluster the chat may run on another node: acknowledged only
		// once the cluster holds the blob and its upload entry.
		if err := b.share(ctx, up, by); err != nil {
			return Attachment{}, err
		}
	}
	err = s.store.Write(ctx, func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketUploads)
		if by != "" {
			// The same content uploaded by several people is theirs each.
			var old upload
			if v := bk.Get([]byte(a.SHA256)); v != nil && json.Unmarshal(v, &old) == nil {
				up.By = old.By
			}
			if !slices.Contains(up.By, by) {
				up.By = append(up.By, by)
			}
		}
		return bk.Put([]byte(a.SHA256), Marshal(up))
	})
	if err != nil {
		return Attachment{}, err
	}
	return a, nil
}

// attachments resolves the sha256s a message names to their uploads. An
// upload older than the TTL is refused like an unknown one: collection
// removes entries only a margin after that, so one a send accepted is
// still there when its row commits.
//
// In a cluster an upload made on another node is known by its entry in
// the shared store (SharedBlobs.Noted), under the same TTL.
func (s *Service) attachments(ctx context.Context, sums []string) ([]Attachment, error) {
	if len(sums) == 0 {
		return nil, nil
	}
	b := s.opt.Blobs
	if b == nil {
		return nil, fmt.Errorf("%w: attachments are not enabled (no data dir)", ErrBadInput)
	}
	if len(sums) > MaxAttachments {
		return nil, fmt.Errorf("%w: a message may carry at most %d attachments", ErrBadInput, MaxAttachments)
	}
	out := make([]Attachment, 0, len(sums))
	seen := map[string]bool{}
	var elsewhere []int // indexes in out of uploads this node has no entry of
	unknown := func(sum string) error {
		return fmt.Errorf("%w: %s was not uploaded, or too long ago; upload it again", ErrUnknownAttachment, sum)
	}
	err := s.store.db.View(func(tx *bolt.Tx) error {
		for _, sum := range sums {
			if !validSum(sum) {
				return fmt.Errorf("%w: attachment %q is not a sha256 (64 lowercase hex digits)", ErrBadInput, sum)
			}
			if seen[sum] {
				continue
			}
			seen[sum] = true
			v := tx.Bucket(bucketUploads).Get([]byte(sum))
			var u upload
			if v == nil || json.Unmarshal(v, &u) != nil || b.now().Sub(u.Time) >= b.ttl {
				if b.shared == nil {
					return unknown(sum)
				}
				elsewhere = append(elsewhere, len(out))
				u.Attachment.SHA256 = sum
			}
			out = append(out, u.Attachment)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, i := range elsewhere {
		sum := out[i].SHA256
		u, ok, err := b.sharedUpload(ctx, sum)
		if err != nil {
			return nil, fmt.Errorf("%w: look up upload %s in the cluster: %v", ErrUnavailable, sum, err)
		}
		if !ok {
			return nil, unknown(sum)
		}
		out[i] = u.Attachment
	}
	return out, nil
}

// uploadMargin is how long after its TTL an upload entry stays, so a send
// that accepted it just before the TTL commits its row before the entry
// (and with it, the blob's protection) goes.
const uploadMargin = time.Hour

// attachmentsKey marks a stored row that names attachments.
var attachmentsKey = []byte(`"attachments":[`)

// rowAttachments reads the attachments a stored row of chat names, for the
// scans over records and pending rows: a record row is an event carrying
// a message under "message"; a pending row is the bare message. msg is
// the message's attachments; result is what a tool result brought back
// into the view, kept apart because only collection counts it.
func rowAttachments(chat, v []byte) (msg, result []Attachment, err error) {
	var row struct {
		Attachments []Attachment `json:"attachments"`
		Message     *struct {
			Attachments []Attachment `json:"attachments"`
		} `json:"message"`
		Result *struct {
			Attachments []Attachment `json:"attachments"`
		} `json:"result"`
	}
	if err := json.Unmarshal(v, &row); err != nil {
		return nil, nil, fmt.Errorf("chat %s: corrupt row naming attachments: %w", chat, err)
	}
	msg = row.Attachments
	if row.Message != nil {
		msg = append(msg, row.Message.Attachments...)
	}
	if row.Result != nil {
		result = row.Result.Attachments
	}
	return msg, result, nil
}

// CollectBlobs removes the blobs no stored row and no live upload names,
// and the upload entries past their TTL. It is a reference scan, not a
// refcount: nothing is counted that a crash could leave wrong. A crash at
// any point leaves at worst blobs the next run removes, never a row
// naming a removed blob: a blob is removed only if no row committed before
// the scan names it, it is older than the TTL, and no upload entry names
// it — and a row committed after the scan can only name a blob through an
// upload entry younger than the TTL, which the scan kept.
//
// In a cluster each node collects its own copies by the same rule, and
// the leader alone also collects the shared store (collectShared).
func (s *Service) CollectBlobs(ctx context.Context) (int, error) {
	b := s.opt.Blobs
	if b == nil {
		return 0, nil
	}
	cutoff := b.now().Add(-b.ttl - uploadMargin)
	err := s.store.Write(ctx, func(tx *bolt.Tx) error {
		ub := tx.Bucket(bucketUploads)
		var old [][]byte
		err := ub.ForEach(func(k, v []byte) error {
			var u upload
			if json.Unmarshal(v, &u) != nil || u.Time.Before(cutoff) {
				old = append(old, bytes.Clone(k))
			}
			return nil
		})
		for _, k := range old {
			if err == nil {
				err = ub.Delete(k)
			}
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	// The reference scan reads every row of every chat: skipped when no
	// blob is old enough to be removed, which is what a start with few
	// attachments finds (the scan would decide nothing). The cluster's
	// leader also scans when a blob of the shared store is that old.
	old, err := b.hasOld()
	if err != nil {
		return 0, err
	}
	var stored map[string]time.Time
	lead := b.shared != nil && b.shared.Leading()
	if lead {
		if stored, err = b.shared.Stored(ctx); err != nil {
			return 0, fmt.Errorf("list the cluster's attachments: %w", err)
		}
		lead = b.anyOld(stored)
	}
	if !old && !lead {
		return 0, nil
	}
	keep := map[string]bool{}
	err = s.store.db.View(func(tx *bolt.Tx) error {
		tx.Bucket(bucketUploads).ForEach(func(k, _ []byte) error { keep[string(k)] = true; return nil })
		for _, parent := range [][]byte{bucketRecords, bucketPending} {
			err := tx.Bucket(parent).ForEachBucket(func(chat []byte) error {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return tx.Bucket(parent).Bucket(chat).ForEach(func(_, v []byte) error {
					if !bytes.Contains(v, attachmentsKey) {
						return nil
					}
					msg, result, err := rowAttachments(chat, v)
					if err != nil {
						return err
					}
					for _, a := range msg {
						keep[a.SHA256] = true
					}
					for _, a := range result {
						keep[a.SHA256] = true
					}
					return nil
				})
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err // a scan that could not finish removes nothing
	}
	removed := 0
	if old {
		if removed, err = b.collect(keep); err != nil && !lead {
			return removed, err
		}
	}
	if lead {
		n, serr := b.collectShared(ctx, keep, cutoff, stored)
		removed += n
		err = cmpErr(err, serr)
	}
	return removed, err
}

// mediaType checks a declared media type and returns it without parameters.
func mediaType(declared string) (string, error) {
	mt, _, err := mime.ParseMediaType(declared)
	if err != nil || !strings.Contains(mt, "/") {
		return "", fmt.Errorf("%w: declare the file's media type (Content-Type), such as image/png or application/pdf", ErrBadInput)
	}
	return mt, nil
}

func baseType(t string) string {
	mt, _, _ := strings.Cut(t, ";")
	return strings.TrimSpace(mt)
}

// sniffOK reports whether content sniffed as sniffed may be stored as
// declared. An image must be what it says (it may be shown inline), and
// nothing else may be an image or a web page in disguise; formats the
// sniffer does not know (most audio, office files) pass as long as the
// content is not a known other kind.
func sniffOK(declared, sniffed string) bool {
	d, s := declared, baseType(sniffed)
	switch {
	case d == s:
		return true
	case strings.HasPrefix(d, "image/"), strings.HasPrefix(s, "image/"):
		return false
	case s == "text/html", s == "text/xml", d == "application/pdf", s == "application/pdf":
		return false
	case strings.HasPrefix(d, "audio/"):
		return strings.HasPrefix(s, "audio/") || s == "application/ogg" || s == "video/webm" || s == "video/mp4" || s == "application/octet-stream"
	case strings.HasPrefix(d, "text/"), d == "application/json", d == "application/x-yaml", d == "application/yaml":
		return s == "text/plain"
	}
	return s == "application/octet-stream" || s == "application/zip" || s == "text/plain"
}

// cleanName keeps the last element of a file name, valid UTF-8, without
// control characters, within MaxAttachmentName.
func cleanName(name string) string {
	name = strings.ToValidUTF8(name, "")
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, name)
	for len(name) > MaxAttachmentName {
		name = strings.ToValidUTF8(name[:MaxAttachmentName], "")
	}
	return name
}

func validSum(s string) bool { return len(s) == 64 && isHex(s) }

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func byteSize(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// readDirNames lists the directory dfd without closing it.
func readDirNames(dfd int) ([]string, error) {
	fd, err := unix.Dup(dfd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "dir")
	defer f.Close()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return f.Readdirnames(-1)
}

// keepAttachments returns the attachments of have that keep names, in
// their order; a name have does not carry is refused.
func keepAttachments(have []Attachment, keep []string) ([]Attachment, error) {
	want := map[string]bool{}
	for _, k := range keep {
		want[k] = true
	}
	out := []Attachment{}
	for _, a := range have {
		if want[a.SHA256] {
			out = append(out, a)
			delete(want, a.SHA256)
		}
	}
	for k := range want {
		return nil, fmt.Errorf("%w: the message has no attachment %.64q", ErrBadInput, k)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// blobSource opens one blob when an adapter encodes a request: a row's
// parts hold only this reference, so rows are cheap to build every turn
// and a blob is read only while the body that carries it is written.
type blobSource struct {
	b   *Blobs
	sum string
}

// Open opens the blob.
func (s blobSource) Open() (io.ReadCloser, error) {
	if s.b == nil {
		return nil, fmt.Errorf("%w: attachments are not enabled (no data dir)", ErrBadInput)
	}
	return s.b.Open(s.sum)
}

// parts is a message's attachments as the parts a request carries: the
// stored metadata (so sizing a request opens no file) and a Source over the
// blob, which Part.Bytes checks against the stored size and sha256. The
// same attachments always give the same parts, so a reloaded chat sends
// the same bytes. An audio attachment's transcript goes in place of the
// audio; one not heard for the reason unheard goes as a note saying so.
func (s *Service) parts(atts []Attachment, unheard string) []provider.Part {
	if len(atts) == 0 {
		return nil
	}
	out := make([]provider.Part, len(atts))
	for i, a := range atts {
		out[i] = provider.Part{Kind: provider.KindOf(a.Type, a.Name), MediaType: a.Type, Name: a.Name, Size: a.Size,
			SHA256: a.SHA256, Width: a.Width, Height: a.Height, Transcript: a.Transcript, Source: blobSource{b: s.opt.Blobs, sum: a.SHA256}}
		if out[i].Kind == provider.PartAudio && a.Transcript == "" {
			out[i].Withheld = unheard
		}
	}
	return out
}
