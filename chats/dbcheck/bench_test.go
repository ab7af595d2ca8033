package dbcheck_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/mirror-gateway/mirror/chats/dbcheck"
	bolt "go.etcd.io/bbolt"
)

// bigFile is a database shaped like a busy Mirror's: 50 chats of 2,000
// rows of about 500 bytes (records packed many to a page) and 200 rows of
// 200 KiB (overflow pages), about 100 MB.
func bigFile(b *testing.B) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "mirror.db")
	db, err := bolt.Open(path, 0o600, mirrorOptions)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for c := range 50 {
		err := db.Update(func(tx *bolt.Tx) error {
			recs, _ := tx.CreateBucketIfNotExists([]byte("records"))
			r, err := recs.CreateBucket([]byte(fmt.Sprintf("c_%08x", c)))
			if err != nil {
				return err
			}
			r.FillPercent = 0.9
			for i := range 2000 {
				var k [8]byte
				binary.BigEndian.PutUint64(k[:], uint64(i+1))
				v := bytes.Repeat([]byte{byte(i)}, 400+i%200)
				if i < 4 {
					v = bytes.Repeat([]byte{byte(i)}, 200<<10)
				}
				if err := r.Put(k[:], v); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return path
}

// BenchmarkCheck is the check every start pays, beside BenchmarkBoltOpen,
// the walk bbolt itself makes at every start (NoFreelistSync). The file is
// in the page cache, as it is at a restart.
func BenchmarkCheck(b *testing.B) {
	path := bigFile(b)
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	b.SetBytes(fi.Size())
	b.ResetTimer()
	for b.Loop() {
		if rep := dbcheck.Check(f, fi.Size()); !rep.Sound() {
			b.Fatal(rep.Problems)
		}
	}
	rep := dbcheck.Check(f, fi.Size())
	b.ReportMetric(float64(fi.Size())/(1<<20), "file-MiB")
	b.ReportMetric(float64(rep.Pages), "pages-reached")
}

func BenchmarkBoltOpen(b *testing.B) {
	path := bigFile(b)
	fi, _ := os.Stat(path)
	b.SetBytes(fi.Size())
	b.ResetTimer()
	for b.Loop() {
		db, err := bolt.Open(path, 0o600, mirrorOptions)
		if err != nil {
			b.Fatal(err)
		}
		db.Close()
	}
}
