package chats

import (
	"time"

	bolt "go.etcd.io/bbolt"
)

// The list index's entries are keys only (bucketByUpdate, chatindex.go). A
// store written before held each chat's metadata as the entry's value;
// nothing reads those values, so such a store needs no pass at open (start
// stays independent of its size): listPage reads the chats bucket, and
// putEntry replaces an entry that holds a copy with a bare one the next
// time its chat is written, so the index shrinks as chats are used.

// putEntry files chat c's entry in idx, the index by update, under
// c.UpdatedAt; prev is the time it was filed under before (zero for a new
// chat, which the index's count then takes in). An entry already filed
// under the right key is left alone, unless it still holds a copy of the
// metadata: most metadata writes change UpdatedAt, but those that do not
// write nothing here.
func putEntry(idx *bolt.Bucket, prev time.Time, c *Chat) error {
	// Entries are added at the end (the newest), as rows are to a record:
	// full pages, not the half-empty ones a split leaves by default, so a
	// group commit's dropped entries fall in fewer of them.
	idx.FillPercent = 1.0
	switch {
	case prev.IsZero():
		if err := idx.SetSequence(idx.Sequence() + 1); err != nil {
			return err
		}
	case !prev.Equal(c.UpdatedAt):
		if err := dropEntry(idx, prev, c.ID); err != nil {
			return err
		}
	}
	k := updateKey(c.UpdatedAt, c.ID)
	// A bare entry read from its page is empty, not nil (nil is no entry,
	// or one put by this transaction, which is written anyway).
	if v := idx.Get(k); v != nil && len(v) == 0 {
		return nil // filed already, bare
	}
	return idx.Put(k, nil)
}
