// Package barecommit times the reference the store's benchmarks are read
// against: one bare bbolt commit on this machine's disk, measured in the
// same run (issue 20: "a lone turn within two bare commits"). The disk's
// speed swings between runs, so a figure is only read beside its own
// reference.
package barecommit

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Measure opens a fresh bbolt file in dir with default options and times n
// commits that each put one 200-byte value. It returns them sorted.
func Measure(tb testing.TB, dir string, n int) []time.Duration {
	tb.Helper()
	path := filepath.Join(dir, fmt.Sprintf("commit-probe-%d.db", time.Now().UnixNano()))
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer os.Remove(path)
	defer db.Close()
	bucket := []byte("probe")
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket(bucket); return err }); err != nil {
		tb.Fatal(err)
	}
	val := bytes.Repeat([]byte("v"), 200)
	out := make([]time.Duration, n)
	for i := range n {
		var k [8]byte
		binary.BigEndian.PutUint64(k[:], uint64(i))
		t0 := time.Now()
		if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put(k[:], val) }); err != nil {
			tb.Fatal(err)
		}
		out[i] = time.Since(t0)
	}
	slices.Sort(out)
	return out
}
