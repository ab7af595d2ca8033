package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/config/datadir"
	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/provider"
)

// partsModel is a fake model that reads the bytes of every attachment its
// requests carry (through the part's Source, as an adapter encoding the
// body does), and answers "seen".
type partsModel struct {
	mu  sync.Mutex
	got map[string][]byte // sha256 → the bytes the request carried
	err error
}

func (m *partsModel) Stream(ctx context.Context, req provider.Request, emit func(provider.Delta) error) (provider.Result, error) {
	for _, msg := range req.Messages {
		for _, p := range msg.Parts {
			b, err := p.Bytes()
			m.mu.Lock()
			if err != nil && m.err == nil {
				m.err = err
			}
			if err == nil {
				m.got[p.SHA256] = b
			}
			m.mu.Unlock()
		}
	}
	if err := emit(provider.Delta{Text: "seen"}); err != nil {
		return provider.Result{}, err
	}
	return provider.Result{Text: "seen", Usage: provider.Usage{InputTokens: 10, OutputTokens: 1}}, nil
}

func (m *partsModel) carried(sum string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.got[sum], m.err
}

// blobNodes is a cluster whose every node runs a Service with its own
// blob store shared through the node, as `mirror serve --cluster` wires
// it, and follows the records stream (so the leader's rows are all the
// chats').
type blobNodes struct {
	*testCluster
	svcs  []*chats.Service
	blobs []*chats.Blobs
	dirs  []string // each node's data dir
	shift atomic.Int64
}

const blobTTL = time.Hour

func newBlobNodes(t testing.TB, n int, m provider.Provider) *blobNodes {
	t.Helper()
	wired := make([]atomic.Pointer[Router], n)
	tc := startCluster(t, n, 10*time.Second, 1024, func(_ *testCluster, i int) func(string) {
		return func(chat string) {
			if r := wired[i].Load(); r != nil {
				r.Lost(chat)
			}
		}
	})
	bn := &blobNodes{testCluster: tc}
	now := func() time.Time { return time.Now().Add(time.Duration(bn.shift.Load())) }
	for i, nd := range tc.nodes {
		dir, err := datadir.Prepare(filepath.Join(t.TempDir(), "data"))
		if err != nil {
			t.Fatal(err)
		}
		db, err := chats.OpenDB(filepath.Join(dir, "mirror.db"), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		store, err := chats.NewStore(db)
		if err != nil {
			t.Fatal(err)
		}
		blobs, err := chats.OpenBlobs(dir, chats.BlobLimits{Image: 1 << 20, Document: 16 << 20, Audio: 1 << 20}, blobTTL)
		if err != nil {
			t.Fatal(err)
		}
		blobs.SetClock(now)
		blobs.Share(nd.SharedBlobs())
		eng, err := runtime.NewEngine([]*runtime.Model{{Name: "m", Provider: m, Remote: "fake", Window: 128000}},
			map[string][]string{"default": {"m"}}, config.Roles{Chat: "default", Reflect: "default"}, 8)
		if err != nil {
			t.Fatal(err)
		}
		local := NewLocal()
		r := nd.NewRouter(local)
		wired[i].Store(r)
		svc := chats.New(chats.Options{Store: store, Turner: eng, Idle: time.Minute, MaxPending: 1000, Log: testLog, Blobs: blobs,
			RecordLog: nd.Records(), Owners: NewOwners(r, nd.NewFanout(r))})
		local.Serve(svc)
		following := nd.Follow(svc)
		bn.svcs = append(bn.svcs, svc)
		bn.blobs = append(bn.blobs, blobs)
		bn.dirs = append(bn.dirs, dir)
		t.Cleanup(func() {
			following.Close()
			c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			svc.Close(c)
			r.Close()
			store.Close()
			db.Close()
		})
	}
	return bn
}

// has reports whether node i holds a copy of blob sum in its own store.
func (bn *blobNodes) has(i int, sum string) bool {
	_, err := os.Stat(filepath.Join(bn.dirs[i], "blobs", sum[:2], sum))
	return err == nil
}

// leader waits for a node to lead and returns its index.
func (bn *blobNodes) leader(t *testing.T) int {
	t.Helper()
	at := -1
	eventually(t, 30*time.Second, "a leader", func() bool {
		for i, nd := range bn.nodes {
			if nd.IsLeader() {
				at = i
				return true
			}
		}
		return false
	})
	return at
}

// bigFile is n bytes a sniffer takes for application/octet-stream.
func bigFile(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ seed
	}
	b[0], b[1] = 0, seed
	return b
}

func sumOf(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// TestAttachmentAcrossNodes: a 10 MB file uploaded on node A is named by
// a send made on A into a chat B owns: accepted, and B's model request
// carries its bytes (B fetched it, checked it, and keeps a copy); node C
// serves it by its sha256; the leader's collection, run past the upload
// TTL, keeps the blob a message names and removes one nothing names.
func TestAttachmentAcrossNodes(t *testing.T) {
	m := &partsModel{got: map[string][]byte{}}
	bn := newBlobNodes(t, 3, m)
	a, b, c := bn.svcs[0], bn.svcs[1], bn.svcs[2]
	chat, err := b.Create(ctx(t), "files", "", chats.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	data := bigFile(10<<20, 1)
	att, err := a.Upload(ctx(t), bytes.NewReader(data), "application/octet-stream", "big.bin")
	if err != nil {
		t.Fatal(err)
	}
	if att.SHA256 != sumOf(data) || att.Size != int64(len(data)) {
		t.Fatalf("uploaded %+v", att)
	}
	if !bn.has(0, att.SHA256) || bn.has(1, att.SHA256) || bn.has(2, att.SHA256) {
		t.Fatalf("after the upload: copies on A %v, B %v, C %v; want only A's", bn.has(0, att.SHA256), bn.has(1, att.SHA256), bn.has(2, att.SHA256))
	}
	msg, err := a.SendAttached(ctx(t), chat.ID, "what is this?", "cid-1", "", []string{att.SHA256}, chats.Origin{})
	if err != nil {
		t.Fatalf("send naming an upload made on another node than the chat's owner: %v", err)
	}
	if len(msg.Attachments) != 1 || msg.Attachments[0].SHA256 != att.SHA256 || msg.Attachments[0].Name != "big.bin" {
		t.Fatalf("the message carries %+v", msg.Attachments)
	}
	eventually(t, 60*time.Second, "the owner's model request carrying the file", func() bool {
		got, err := m.carried(att.SHA256)
		if err != nil {
			t.Fatalf("the model request could not read the file: %v", err)
		}
		return got != nil
	})
	if got, _ := m.carried(att.SHA256); !bytes.Equal(got, data) {
		t.Fatalf("the model request carried %d bytes, not the file", len(got))
	}
	if !bn.has(1, att.SHA256) {
		t.Fatal("the owner B keeps no copy of the file it sent")
	}

	// C has no copy: it serves the file by its sha once it followed the
	// message naming it, fetching it once.
	if bn.has(2, att.SHA256) {
		t.Fatal("C has a copy before anything asked it for one")
	}
	eventually(t, 30*time.Second, "C knowing the message naming the file", func() bool {
		_, found, err := c.BlobRefs(ctx(t), att.SHA256, "")
		return err == nil && found
	})
	f, err := c.Blobs().OpenContext(ctx(t), att.SHA256)
	if err != nil {
		t.Fatalf("C opening the file: %v", err)
	}
	got, err := io.ReadAll(f)
	f.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("C served %d bytes (%v), not the file", len(got), err)
	}
	if !bn.has(2, att.SHA256) {
		t.Fatal("C keeps no copy of the file it served")
	}

	// An upload no message names, and time past the TTL and its margin.
	spare := bigFile(1000, 2)
	lone, err := c.Upload(ctx(t), bytes.NewReader(spare), "application/octet-stream", "lone.bin")
	if err != nil {
		t.Fatal(err)
	}
	bn.shift.Store(int64(blobTTL + 3*time.Hour))
	for _, s := range bn.svcs {
		eventually(t, 30*time.Second, "every node following the answered message", func() bool {
			for _, e := range eventSeqs(t, s, chat.ID) {
				if strings.HasSuffix(e, " "+chats.EvTurnFinished) {
					return true
				}
			}
			return false
		})
	}
	lead := bn.leader(t)
	sh := bn.nodes[lead].SharedBlobs()
	// A node that does not lead leaves the shared store alone.
	other := (lead + 1) % 3
	if _, err := bn.svcs[other].CollectBlobs(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if stored, err := sh.Stored(ctx(t)); err != nil || len(stored) != 2 {
		t.Fatalf("after a follower's collection the cluster holds %v (%v), want both files", stored, err)
	}
	if _, err := bn.svcs[lead].CollectBlobs(ctx(t)); err != nil {
		t.Fatal(err)
	}
	// Read until the listing shows one file: a listing is an ordered
	// consumer, which on a loaded machine has once answered empty (its
	// first reading found nothing) while the named file was there. A file
	// removed stays removed, so this still fails when the named one went.
	var stored map[string]time.Time
	eventually(t, 10*time.Second, "the cluster holding the named file alone", func() bool {
		if stored, err = sh.Stored(ctx(t)); err != nil {
			t.Fatal(err)
		}
		_, ok := stored[att.SHA256]
		return ok && len(stored) == 1
	})
	if v, err := sh.Noted(ctx(t), lone.SHA256); err != nil || v != nil {
		t.Fatalf("the expired upload entry is still there: %s %v", v, err)
	}
	// A send naming the collected upload is refused.
	if _, err := a.SendAttached(ctx(t), chat.ID, "again", "cid-2", "", []string{lone.SHA256}, chats.Origin{}); !errors.Is(err, chats.ErrUnknownAttachment) {
		t.Fatalf("a send naming a collected upload: %v, want ErrUnknownAttachment", err)
	}
}

// TestFetchRefusesForeignContent: an object whose content is not what its
// name says (another file stored under the name, or a corrupt copy) is
// refused with ErrBlobMismatch and nothing is placed: the node keeps no
// copy, and a later read fails the same way rather than serving it.
func TestFetchRefusesForeignContent(t *testing.T) {
	bn := newBlobNodes(t, 1, &partsModel{got: map[string][]byte{}})
	good := bigFile(300<<10, 3)
	sum := sumOf(good)
	other := bigFile(300<<10, 4)
	corrupt := bytes.Clone(good)
	corrupt[200<<10] ^= 0xff
	for _, tc := range []struct {
		name    string
		content []byte
	}{
		{"another file", other},
		{"corrupt copy", corrupt},
		{"truncated copy", good[:len(good)-1]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs, _, err := bn.nodes[0].SharedBlobs().stores(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := obs.PutBytes(ctx(t), sum, tc.content); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				f, err := bn.blobs[0].OpenContext(ctx(t), sum)
				if err == nil {
					f.Close()
					t.Fatal("the foreign content was served")
				}
				if !errors.Is(err, chats.ErrBlobMismatch) || !strings.Contains(err.Error(), sum) {
					t.Fatalf("open: %v, want ErrBlobMismatch naming %s", err, sum)
				}
			}
			if bn.has(0, sum) {
				t.Fatal("the foreign content was placed")
			}
			ents, err := os.ReadDir(filepath.Join(bn.dirs[0], "blobs"))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), datadir.TempPrefix) {
					t.Fatalf("a temp file %s was left", e.Name())
				}
			}
		})
	}
	// A sum the cluster does not hold is not found (the gateway's 404).
	missing := sumOf([]byte("nobody uploaded this"))
	if _, err := bn.blobs[0].OpenContext(ctx(t), missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open of a sum nobody stored: %v, want fs.ErrNotExist", err)
	}
}

// BenchmarkSharedBlob: a 10 MB upload on a node of three (placed locally,
// then stored in the object store on three replicas, synced), and a
// fetch of it by a node without a copy (checked and placed there).
func BenchmarkSharedBlob(b *testing.B) {
	bn := newBlobNodes(b, 3, &partsModel{got: map[string][]byte{}})
	ctx := context.Background()
	const size = 10 << 20
	var last string
	// The same file placed in the node's own store alone, as on one
	// gateway: what sharing adds is the difference.
	b.Run("local10MB", func(b *testing.B) {
		b.SetBytes(size)
		seed := byte(100)
		for b.Loop() {
			seed++
			if _, err := bn.blobs[0].Put(bytes.NewReader(bigFile(size, seed)), "application/octet-stream", "big.bin"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("upload10MB", func(b *testing.B) {
		b.SetBytes(size)
		seed := byte(0)
		for b.Loop() {
			seed++
			a, err := bn.svcs[0].Upload(ctx, bytes.NewReader(bigFile(size, seed)), "application/octet-stream", "big.bin")
			if err != nil {
				b.Fatal(err)
			}
			last = a.SHA256
		}
	})
	b.Run("fetch10MB", func(b *testing.B) {
		b.SetBytes(size)
		path := filepath.Join(bn.dirs[2], "blobs", last[:2], last)
		for b.Loop() {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				b.Fatal(err)
			}
			f, err := bn.blobs[2].OpenContext(ctx, last)
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
}

// TestUploadEntries: upload entries written from every node at once are
// merged, none lost (compare-and-set); every node reads an entry as soon
// as it is written and stops reading it as soon as it is removed (reads
// go to the stream's leader, not a replica behind it); a removed entry
// can be written again.
func TestUploadEntries(t *testing.T) {
	tc := newCluster(t, 3)
	sum := sumOf([]byte("entries"))
	appendName := func(name string) func([]byte) []byte {
		return func(old []byte) []byte {
			if len(old) == 0 {
				return []byte(name)
			}
			return append(append(bytes.Clone(old), ','), name...)
		}
	}
	for round := range 2 {
		var wg sync.WaitGroup
		for _, nd := range tc.nodes {
			for k := range 3 {
				wg.Go(func() {
					if err := nd.SharedBlobs().Note(ctx(t), sum, appendName(nd.Name()+"."+string(rune('a'+k)))); err != nil {
						t.Error(err)
					}
				})
			}
		}
		wg.Wait()
		for _, nd := range tc.nodes {
			v, err := nd.SharedBlobs().Noted(ctx(t), sum)
			if err != nil {
				t.Fatal(err)
			}
			if names := strings.Split(string(v), ","); len(names) != 9 {
				t.Fatalf("round %d: %s reads %q, want nine names", round, nd.Name(), v)
			}
		}
		if err := tc.nodes[round].SharedBlobs().Forget(ctx(t), sum); err != nil {
			t.Fatal(err)
		}
		for _, nd := range tc.nodes {
			if v, err := nd.SharedBlobs().Noted(ctx(t), sum); err != nil || v != nil {
				t.Fatalf("round %d: after Forget %s reads %q %v", round, nd.Name(), v, err)
			}
		}
	}
}
