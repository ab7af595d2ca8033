package chats

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestNotIn: checkAll writes only the chats bucketSearch does not hold
// yet (a start with none to add commits nothing), so notIn must tell a
// held id from one it only prefixes or follows.
func TestNotIn(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "set.db"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	held := []string{"c1", "c12", "c3"}
	if err := db.Update(func(tx *bolt.Tx) error {
		set, err := tx.CreateBucket(bucketSearch)
		if err != nil {
			return err
		}
		for _, id := range held {
			if err := set.Put([]byte(id), nil); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ ids, want []string }{
		{nil, nil},
		{[]string{"c1", "c12", "c3"}, nil},
		{[]string{"c3", "c1"}, nil},
		{[]string{"c11", "c1", "c2", "c123", "c4", "c0"}, []string{"c11", "c2", "c123", "c4", "c0"}},
		{[]string{"c"}, []string{"c"}},
	} {
		var got []string
		if err := db.View(func(tx *bolt.Tx) error {
			got = notIn(tx.Bucket(bucketSearch), tc.ids)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("notIn(%q) = %q; want %q", tc.ids, got, tc.want)
		}
	}
}
