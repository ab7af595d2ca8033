package dbcheck_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats/dbcheck"
	bolt "go.etcd.io/bbolt"
)

// build makes a real bbolt file shaped like Mirror's: top buckets with a
// sub-bucket per chat, small rows packed many to a page (so branches),
// large rows in overflow pages, empty (inline) buckets, and returns its bytes.
func build(t testing.TB, opt *bolt.Options, chats, rows, big int) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db")
	db, err := bolt.Open(path, 0o600, opt)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		recs, _ := tx.CreateBucketIfNotExists([]byte("records"))
		pend, _ := tx.CreateBucketIfNotExists([]byte("pending"))
		for c := 0; c < chats; c++ {
			id := []byte(fmt.Sprintf("c_%08x", c))
			b, err := recs.CreateBucketIfNotExists(id)
			if err != nil {
				return err
			}
			if _, err := pend.CreateBucketIfNotExists(id); err != nil { // inline, empty
				return err
			}
			for r := 0; r < rows; r++ {
				var k [8]byte
				binary.BigEndian.PutUint64(k[:], uint64(r+1))
				v := bytes.Repeat([]byte{byte('a' + r%26)}, 40+r%200)
				if r < big {
					v = bytes.Repeat(v[:1], 20000)
				}
				if err := b.Put(k[:], v); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err == nil {
		// A second transaction, so both meta pages are in use and some
		// pages are free.
		err = db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("records")).Bucket([]byte("c_00000000")).Delete([]byte{0, 0, 0, 0, 0, 0, 0, 1})
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var mirrorOptions = &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType}

func check(b []byte) *dbcheck.Report { return dbcheck.Check(bytes.NewReader(b), int64(len(b))) }

func TestHealthyFilesAreSound(t *testing.T) {
	cases := []struct {
		name             string
		opt              *bolt.Options
		chats, rows, big int
	}{
		{"mirror's options", mirrorOptions, 5, 400, 3},
		{"a written freelist", &bolt.Options{}, 5, 400, 3},
		{"empty buckets only", mirrorOptions, 3, 1, 0},
		{"big values", mirrorOptions, 2, 20, 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := build(t, tc.opt, tc.chats, tc.rows, tc.big)
			rep := check(b)
			if !rep.Sound() || len(rep.Notes) > 0 {
				t.Fatalf("problems %v notes %v", rep.Problems, rep.Notes)
			}
			if want := 2 + tc.chats*2; rep.Buckets != want {
				t.Fatalf("buckets %d, want %d", rep.Buckets, want)
			}
			if rep.Pages < 4 || rep.Pages > rep.HighWater {
				t.Fatalf("pages %d of %d", rep.Pages, rep.HighWater)
			}
		})
	}
}

// Layout helpers for the damage below (little-endian machines, as bbolt's
// layout is native).
var ne = binary.NativeEndian

const pageSize = 4096

func metaTxid(b []byte, i int) uint64 { return ne.Uint64(b[i*pageSize+16+48:]) }

// newest is the meta page bbolt uses in a sound file.
func newest(b []byte) int {
	if metaTxid(b, 1) > metaTxid(b, 0) {
		return 1
	}
	return 0
}

func resum(b []byte, i int) {
	m := b[i*pageSize+16:]
	h := fnv.New64a()
	h.Write(m[:56])
	ne.PutUint64(m[56:], h.Sum64())
}

// forge sets a u64 field of the newest meta page and fixes its checksum.
func forge(off int) func([]byte) []byte {
	return func(b []byte) []byte {
		i := newest(b)
		ne.PutUint64(b[i*pageSize+16+off:], 0xfffff)
		resum(b, i)
		return b
	}
}

func rootPage(b []byte) uint64 { return ne.Uint64(b[newest(b)*pageSize+16+16:]) }

// findPage returns the first tree page with flags whose page id is > 1.
func findPage(b []byte, flags uint16) int {
	for id := 2; (id+1)*pageSize <= len(b); id++ {
		p := b[id*pageSize:]
		if ne.Uint64(p) == uint64(id) && ne.Uint16(p[8:]) == flags && ne.Uint16(p[10:]) > 1 {
			return id
		}
	}
	return -1
}

func TestDamageIsFound(t *testing.T) {
	healthy := build(t, mirrorOptions, 5, 400, 3)
	cases := []struct {
		name   string
		damage func([]byte) []byte
		want   string
	}{
		{"cut in half", func(b []byte) []byte { return b[:len(b)/2] }, "cut short"},
		{"shorter than a page", func(b []byte) []byte { return b[:100] }, "cut short"},
		{"zeros", func(b []byte) []byte { return make([]byte, len(b)) }, "neither meta page"},
		{"both metas' magic", func(b []byte) []byte { b[16] ^= 0xff; b[pageSize+16] ^= 0xff; return b }, "magic"},
		{"hwm past the end", forge(40), "cut short"},
		{"root out of range", forge(16), "root"},
		{"freelist out of range", forge(32), "freelist"},
		{"freelist at a leaf", func(b []byte) []byte {
			i := newest(b)
			ne.PutUint64(b[i*pageSize+16+32:], uint64(findPage(b, 0x02)))
			resum(b, i)
			return b
		}, "leaf page"},
		{"root page overwritten", func(b []byte) []byte {
			r := rootPage(b)
			for j := range pageSize {
				b[int(r)*pageSize+j] = byte(j*7 + 3)
			}
			return b
		}, "says it is page"},
		{"branch child out of range", func(b []byte) []byte {
			p := findPage(b, 0x01)
			ne.PutUint64(b[p*pageSize+16+8:], 1<<40)
			return b
		}, "outside the pages"},
		{"branch child is itself", func(b []byte) []byte {
			p := findPage(b, 0x01)
			ne.PutUint64(b[p*pageSize+16+8:], uint64(p))
			return b
		}, "used twice"},
		{"leaf key past the page", func(b []byte) []byte {
			p := findPage(b, 0x02)
			ne.PutUint32(b[p*pageSize+16+16+4:], 1<<30)
			return b
		}, "past the end"},
		{"leaf keys out of order", func(b []byte) []byte {
			p := findPage(b, 0x02)
			e := b[p*pageSize+16+16:] // element 1
			k := b[p*pageSize+16+16+int(ne.Uint32(e[4:])):]
			k[0] = 0 // before element 0's key
			for j := 1; j < int(ne.Uint32(e[8:])); j++ {
				k[j] = 0
			}
			return b
		}, "sort"},
		{"page flags", func(b []byte) []byte {
			p := findPage(b, 0x02)
			ne.PutUint16(b[p*pageSize+8:], 0x10)
			return b
		}, "freelist page where"},
		{"overflow past the end", func(b []byte) []byte {
			p := findPage(b, 0x02)
			ne.PutUint32(b[p*pageSize+12:], 1<<31)
			return b
		}, "runs on"},
		// Found by FuzzCheck: bbolt's open takes them, tx.Check asserts, and
		// code that expects a bucket at the top gets nil.
		{"meta page header", func(b []byte) []byte { ne.PutUint64(b[pageSize:], 1<<42); return b }, "header is damaged"},
		{"a value in the root bucket", func(b []byte) []byte {
			r := rootPage(b)
			ne.PutUint32(b[int(r)*pageSize+16:], 0) // element 0 loses its bucket flag
			return b
		}, "holds only buckets"},
		{"element count", func(b []byte) []byte {
			p := findPage(b, 0x02)
			ne.PutUint16(b[p*pageSize+10:], 0xffff)
			return b
		}, "elements"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.damage(bytes.Clone(healthy))
			rep := check(b)
			if rep.Sound() || !strings.Contains(strings.Join(rep.Problems, "\n"), tc.want) {
				t.Fatalf("problems %q, want one with %q", rep.Problems, tc.want)
			}
		})
	}
}

// A torn newest meta page is what a crash during a commit leaves: bbolt
// falls back to the other one, and so does the check, with a note.
func TestTornMetaFallsBack(t *testing.T) {
	b := build(t, mirrorOptions, 2, 50, 0)
	i := newest(b)
	b[i*pageSize+16+50] ^= 0x55
	rep := check(b)
	if !rep.Sound() || rep.Meta != 1-i || len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "checksum") {
		t.Fatalf("meta %d problems %v notes %v", rep.Meta, rep.Problems, rep.Notes)
	}
}

func TestOpenRefusesAndLeavesTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mirror.db")
	b := build(t, mirrorOptions, 2, 50, 0)
	b = b[:len(b)/2]
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true, OpenFile: dbcheck.OpenFile(time.Second)})
	var d *dbcheck.Damage
	if !errors.As(err, &d) || !errors.Is(err, dbcheck.ErrDamaged) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "mirror backup") {
		t.Fatalf("err %v", err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(after, b) {
		t.Fatal("the file changed")
	}
	// A new (empty) file is a new database.
	db, err := bolt.Open(filepath.Join(dir, "new.db"), 0o600, &bolt.Options{OpenFile: dbcheck.OpenFile(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
}

// The lock is held while checking: a second exclusive open waits and times
// out as bbolt would, while the first is open.
func TestOpenHoldsTheLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mirror.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{OpenFile: dbcheck.OpenFile(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, _, err = dbcheck.Open(path, os.O_RDONLY, 0, 100*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("err %v", err)
	}
}

// FuzzCheck mutates real files. Check must never panic; whatever it finds
// sound, bbolt must open (walking the tree to rebuild the freelist, where a
// bad page crashes the process), every key must be readable, and bbolt's
// own tx.Check must find nothing, unless the report notes an invalid meta
// page: bbolt's open falls back from it, its tx.Check asserts on both.
func FuzzCheck(f *testing.F) {
	// Small seeds (bbolt pads files; a copy ends at the last page) keep
	// the fuzzer fast.
	trim := func(b []byte) []byte { return b[:ne.Uint64(b[newest(b)*pageSize+16+40:])*pageSize] }
	small := trim(build(f, mirrorOptions, 2, 25, 1))
	f.Add(small)
	f.Add(trim(build(f, &bolt.Options{}, 1, 20, 0)))
	torn := bytes.Clone(small)
	torn[16+50] ^= 1
	f.Add(torn)
	f.Fuzz(func(t *testing.T, b []byte) {
		rep := check(b)
		if !rep.Sound() {
			return
		}
		path := filepath.Join(t.TempDir(), "db")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
		if err != nil {
			t.Fatalf("sound to the check, bbolt refused it: %v", err)
		}
		defer db.Close()
		err = db.View(func(tx *bolt.Tx) error {
			for err := range tx.Check() {
				if len(rep.Notes) == 0 {
					return fmt.Errorf("tx.Check: %w", err)
				}
			}
			return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
				if b == nil {
					return fmt.Errorf("%q in the root bucket is not a bucket", name)
				}
				return visit(b)
			})
		})
		if err != nil {
			t.Fatalf("sound to the check (%s): %v", rep.Summary(), err)
		}
	})
}

func visit(b *bolt.Bucket) error {
	return b.ForEach(func(k, v []byte) error {
		if v == nil {
			if sub := b.Bucket(k); sub != nil {
				return visit(sub)
			}
		}
		return nil
	})
}
