package chats

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config/datadir"
	bolt "go.etcd.io/bbolt"
)

func blobEnv(t *testing.T) *env {
	data, err := datadir.Prepare(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, path: filepath.Join(t.TempDir(), "mirror.db"), gate: newGate(true), dataDir: data}
	e.start()
	t.Cleanup(e.stop)
	return e
}

func forgetUpload(t testing.TB, store *Store, sum string) {
	t.Helper()
	err := store.Write(bg, func(tx *bolt.Tx) error { return tx.Bucket(bucketUploads).Delete([]byte(sum)) })
	if err != nil {
		t.Fatal(err)
	}
}

// BlobRefs finds a blob through a live upload or any stored row naming it,
// with the names they give it, and nothing else.
func TestBlobRefs(t *testing.T) {
	e := blobEnv(t)
	img := pngBytes(t, 3, 3)
	a, err := e.svc.Upload(bg, bytes.NewReader(img), "image/png", "a.png")
	if err != nil {
		t.Fatal(err)
	}
	ref, found, err := e.svc.BlobRefs(bg, a.SHA256, "")
	if err != nil || !found || ref.Type != "image/png" || !slices.Equal(ref.Names, []string{"a.png"}) {
		t.Fatalf("a live upload: %+v %v %v", ref, found, err)
	}
	// Sent in two chats under two names; the upload entry then goes.
	c1, c2 := e.chat(), e.chat()
	if _, err := e.svc.SendAttached(bg, c1.ID, "one", "1", "", []string{a.SHA256}, Origin{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Upload(bg, bytes.NewReader(img), "image/png", "b.png"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.SendAttached(bg, c2.ID, "two", "2", "", []string{a.SHA256}, Origin{}); err != nil {
		t.Fatal(err)
	}
	forgetUpload(t, e.store, a.SHA256)
	for _, want := range []string{"a.png", "b.png"} {
		ref, found, err = e.svc.BlobRefs(bg, a.SHA256, want)
		if err != nil || !found || ref.Type != "image/png" || len(ref.Names) == 0 || ref.Names[0] != want {
			t.Fatalf("named by rows, asking for %s: %+v %v %v", want, ref, found, err)
		}
	}
	ref, _, _ = e.svc.BlobRefs(bg, a.SHA256, "c.png") // no row says c.png: every name is read
	if slices.Sort(ref.Names); !slices.Equal(ref.Names, []string{"a.png", "b.png"}) {
		t.Fatalf("names %v", ref.Names)
	}
	// Stored, but named by nothing; a hash never stored; not a hash.
	orphan, err := e.blobs.Put(strings.NewReader("orphan"), "text/plain", "o.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, sum := range []string{orphan.SHA256, strings.Repeat("0", 64), "../../token", strings.ToUpper(a.SHA256)} {
		if _, found, err := e.svc.BlobRefs(bg, sum, ""); found || err != nil {
			t.Fatalf("%s: found %v, %v", sum, found, err)
		}
	}
}

// BenchmarkBlobRefs measures what GET /api/blobs pays to check access in a
// store of 100 chats of 100 rows of 1 KB each (10 MB of rows): a blob
// named by one row of the last chat scanned (the worst case of a found
// one) and a hash nothing names (a full scan, what a probe costs).
func BenchmarkBlobRefs(b *testing.B) {
	dir := b.TempDir()
	data, err := datadir.Prepare(filepath.Join(dir, "data"))
	if err != nil {
		b.Fatal(err)
	}
	db, err := OpenDB(filepath.Join(dir, "mirror.db"), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	store, err := NewStore(db)
	if err != nil {
		b.Fatal(err)
	}
	blobs, err := OpenBlobs(data, BlobLimits{Image: 1 << 20, Document: 1 << 20, Audio: 1 << 20}, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	svc := New(Options{Store: store, Blobs: blobs})
	a, err := svc.Upload(bg, bytes.NewReader(pngBytes(b, 2, 2)), "image/png", "p.png")
	if err != nil {
		b.Fatal(err)
	}
	forgetUpload(b, store, a.SHA256)
	text := strings.Repeat("x", 1000)
	err = store.Write(bg, func(tx *bolt.Tx) error {
		for c := range 100 {
			cb, err := tx.Bucket(bucketRecords).CreateBucketIfNotExists(fmt.Appendf(nil, "chat-%03d", c))
			if err != nil {
				return err
			}
			for i := range 100 {
				m := &Message{ID: fmt.Sprint(i), Role: "assistant", Text: text}
				ev := NewEvent("", uint64(i+1), time.Time{}, &TurnFinished{Message: m})
				if c == 99 && i == 50 {
					m.Attachments = []Attachment{a}
				}
				if err := cb.Put(seqKey(uint64(i+1)), Marshal(ev)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name  string
		sum   string
		found bool
	}{{"named-by-the-last-chat", a.SHA256, true}, {"named-by-nothing", fmt.Sprintf("%x", sha256.Sum256([]byte("nothing"))), false}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, found, err := svc.BlobRefs(bg, bc.sum, "p.png"); err != nil || found != bc.found {
					b.Fatal(found, err)
				}
			}
		})
	}
}
