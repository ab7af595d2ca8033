package chats

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats/dbcheck"
	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// holeAt says where f's first hole at or after off is (its end when none).
func holeAt(t *testing.T, f *os.File, off int64) int64 {
	t.Helper()
	h, err := unix.Seek(int(f.Fd()), off, unix.SEEK_HOLE)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func fileSize(t *testing.T, f *os.File) int64 {
	t.Helper()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// mark is bbolt's high-water mark: the bytes of the file in use.
func mark(t *testing.T, db *bolt.DB) int64 {
	t.Helper()
	var m int64
	if err := db.View(func(tx *bolt.Tx) error { m = tx.Size(); return nil }); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestAheadKeepsNewPagesOffHoles grows a store commit by commit (3 KB of
// rows each, as a turn adds) and checks that every page a commit put past
// the mark landed on blocks written before it (no hole below the new mark
// when the commit began), except where bbolt grew the file in that commit;
// that the fills never changed the file's size; that what the store holds
// is intact; and that a store opened again fills only its holes.
func TestAheadKeepsNewPagesOffHoles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.db")
	probe, err := os.Create(filepath.Join(dir, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	if err := probe.Truncate(1 << 20); err != nil {
		t.Fatal(err)
	}
	if holeAt(t, probe, 0) != 0 {
		t.Skip("the file system reports no holes: ahead has nothing to fill")
	}
	probe.Close()

	db, err := OpenDB(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	store, err := NewStore(db)
	if err != nil {
		t.Fatal(err)
	}
	if store.ahead.f == nil {
		store.Close()
		db.Close()
		t.Skip("ahead is off on this file system (tmpfs)")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	val := bytes.Repeat([]byte("row "), 750)
	put := func(st *Store, i int) {
		t.Helper()
		err := st.Write(bg, func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("rows"))
			if err != nil {
				return err
			}
			b.FillPercent = 1
			return b.Put(seqKey(uint64(i)), val)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	const n = 600 // 1.8 MB: the file grows past its first mebibyte
	var grown, moved, inHoles int
	for i := range n {
		size, hole, before := fileSize(t, f), holeAt(t, f, 0), mark(t, db)
		put(store, i)
		after := mark(t, db)
		if fileSize(t, f) != size {
			grown++ // bbolt truncated the file longer in this commit
			continue
		}
		if after > before {
			moved++
		}
		if after > hole {
			inHoles++
		}
	}
	if moved < n/4 {
		t.Fatalf("the mark moved in %d commits of %d: the test no longer grows the store", moved, n)
	}
	if inHoles > 0 {
		t.Errorf("%d commits of %d (%d moved the mark, %d grew the file) wrote pages into holes", inHoles, n, moved, grown)
	}
	if store.ahead.wrote == 0 {
		t.Error("no zeros written")
	}
	if end := mark(t, db) + aheadMax; fileSize(t, f) > end {
		t.Errorf("file is %d bytes, past the mark and the largest window (%d)", fileSize(t, f), end)
	}

	// A store opened again: only the holes in its window are filled.
	store.Close()
	if err := CloseDB(db); err != nil {
		t.Fatal(err)
	}
	if rep := dbcheck.Check(f, fileSize(t, f)); !rep.Sound() {
		t.Fatalf("damaged: %s", rep.Summary())
	}
	db, err = OpenDB(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store, err = NewStore(db)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	m := mark(t, db)
	written := holeAt(t, f, m) - m
	put(store, n)
	if most := max(0, aheadMin-written); store.ahead.wrote > most {
		t.Errorf("reopened: %d bytes of zeros written, %d were written already, so at most %d holes", store.ahead.wrote, written, most)
	}
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("rows"))
		for i := range n + 1 {
			if v := b.Get(seqKey(uint64(i))); !bytes.Equal(v, val) {
				t.Fatalf("row %d: %d bytes, want %d", i, len(v), len(val))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
