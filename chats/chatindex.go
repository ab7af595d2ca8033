package chats

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Two indexes of the chats bucket, kept in the transactions that change a
// chat's metadata (putMeta, deleteMeta), so that start and the chat list
// read only what they need instead of every chat:
//
//   - bucketByUpdate: UpdatedAt (8 bytes, big-endian Unix nanoseconds) +
//     chat id → nothing. A cursor walks it newest first for the chat list,
//     which reads each listed chat's metadata from the chats bucket (a
//     page of the list is at most MaxListPage lookups, whatever the store
//     holds). Its bucket sequence counts the chats. Keys alone keep it
//     small: at a hundred chats it is one page, which every commit of a
//     group shares, where a copy of each chat's metadata made it as large
//     as the chats bucket, and a turn's commit rewrote a page of it for
//     the entry it dropped besides the one it added (listindex.go says
//     how a store that holds such copies is read).
//   - bucketWork: chat id → nothing, for exactly the chats with work left
//     (hasWork), which Resume loads at start.
//
// A data dir from before the indexes gets them built once, at NewStore
// (buildIndexes).
//
// Three more sets (chat id → nothing), kept the same way, so that nothing
// that runs at start, or grows with what it finds rather than with the
// store, reads every chat (buildSets builds them once):
//
//   - bucketDeleting: the chats deleted and awaiting their purge
//     (DeleteAt set), which resumeDeletes schedules at start.
//   - bucketEmpty: the chats never written to (reusable), among which
//     CreateReusing looks for one to reuse.
//   - bucketSearch: the chats changed since the search indexer last caught
//     up with them (index.go): every metadata write, a chat's removal
//     included, puts its chat here; the indexer takes it out once the
//     search index holds the chat as stored. At start the indexer reads
//     only these (when the search index was closed cleanly).
var (
	bucketByUpdate = []byte("chats_by_update")
	bucketWork     = []byte("chats_work")
	bucketDeleting = []byte("chats_deleting")
	bucketEmpty    = []byte("chats_empty")
	bucketSearch   = []byte("chats_search")
)

// reusable says chat c was never written to: the empty chat "New chat"
// reuses (CreateReusing adds the chain and the asker).
func reusable(c *Chat) bool {
	return c.Seq <= 1 && c.Title == DefaultTitle && c.Pending == 0 && c.Turn == "" && !c.Archived && c.DeleteAt == nil
}

// keepIn puts id in set when in, and takes it out when not, writing only
// what changes (a Delete of a missing key changes nothing in bbolt).
func keepIn(tx *bolt.Tx, set []byte, id string, in bool) error {
	b := tx.Bucket(set)
	if in {
		if b.Get([]byte(id)) != nil {
			return nil
		}
		return b.Put([]byte(id), nil)
	}
	return b.Delete([]byte(id))
}

// markSets keeps c's entries in the three sets current.
func markSets(tx *bolt.Tx, c *Chat) error {
	if err := keepIn(tx, bucketDeleting, c.ID, c.DeleteAt != nil); err != nil {
		return err
	}
	if err := keepIn(tx, bucketEmpty, c.ID, reusable(c)); err != nil {
		return err
	}
	return keepIn(tx, bucketSearch, c.ID, true)
}

// buildSets creates the sets a database written before them lacks, from
// one pass over every chat (once: afterwards they are kept current). The
// search set starts empty: the indexer's first start with it checks every
// chat anyway (the search index was not closed by a version that keeps it).
func buildSets(tx *bolt.Tx) error {
	var missing [][]byte
	for _, name := range [][]byte{bucketDeleting, bucketEmpty, bucketSearch} {
		if tx.Bucket(name) == nil {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	for _, name := range missing {
		if _, err := tx.CreateBucket(name); err != nil {
			return err
		}
	}
	has := func(name []byte) bool {
		return slices.ContainsFunc(missing, func(b []byte) bool { return bytes.Equal(b, name) })
	}
	del, empty := has(bucketDeleting), has(bucketEmpty)
	if !del && !empty {
		return nil
	}
	var dels, empties [][]byte
	err := tx.Bucket(bucketChats).ForEach(func(k, v []byte) error {
		var c Chat
		if json.Unmarshal(v, &c) != nil {
			return nil
		}
		if del && c.DeleteAt != nil {
			dels = append(dels, bytes.Clone(k))
		}
		if empty && reusable(&c) {
			empties = append(empties, bytes.Clone(k))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, set := range []struct {
		name []byte
		ids  [][]byte
	}{{bucketDeleting, dels}, {bucketEmpty, empties}} {
		for _, k := range set.ids { // in key order, as ForEach gave them
			if err := tx.Bucket(set.name).Put(k, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// hasWork says a chat must be loaded at start: messages wait, a turn was
// running when the previous process stopped, or an interrupted turn's
// conversation waits for an answer.
func hasWork(c *Chat) bool { return c.Pending > 0 || c.Turn != "" || c.Resume }

func updateKey(t time.Time, id string) []byte {
	k := make([]byte, 8, 8+len(id))
	binary.BigEndian.PutUint64(k, uint64(t.UnixNano()))
	return append(k, id...)
}

// putMeta stores chat c's metadata (metaJSON, its encoding) and keeps both
// indexes current. prev is the UpdatedAt stored before (zero for a new
// chat).
func putMeta(tx *bolt.Tx, prev time.Time, c *Chat, metaJSON []byte) error {
	id := []byte(c.ID)
	if err := tx.Bucket(bucketChats).Put(id, metaJSON); err != nil {
		return err
	}
	if err := putEntry(tx.Bucket(bucketByUpdate), prev, c); err != nil {
		return err
	}
	if err := markSets(tx, c); err != nil {
		return err
	}
	return markWork(tx, c)
}

// markWork puts c in the work index when it has work left, and takes it
// out when not.
func markWork(tx *bolt.Tx, c *Chat) error {
	w := tx.Bucket(bucketWork)
	if hasWork(c) {
		if w.Get([]byte(c.ID)) != nil {
			return nil // most commits of a busy chat: nothing to write
		}
		return w.Put([]byte(c.ID), nil)
	}
	return w.Delete([]byte(c.ID))
}

// dropEntry removes chat id's entry, filed under t, from the index by
// update. An entry not found there (the metadata was written by other means
// than putMeta) is looked for in the whole index, so the list never keeps a
// chat at a time it no longer has; that walk costs as much as the index,
// and only ever happens after such a write.
func dropEntry(idx *bolt.Bucket, t time.Time, id string) error {
	k := updateKey(t, id)
	// One search: the cursor that finds the entry deletes it.
	c := idx.Cursor()
	if found, _ := c.Seek(k); bytes.Equal(found, k) {
		return c.Delete()
	}
	var stale [][]byte
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if len(k) > 8 && string(k[8:]) == id {
			stale = append(stale, bytes.Clone(k))
		}
	}
	for _, k := range stale {
		if err := idx.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// deleteMeta removes chat c's metadata and its index entries.
func deleteMeta(tx *bolt.Tx, c *Chat) error {
	if err := tx.Bucket(bucketChats).Delete([]byte(c.ID)); err != nil {
		return err
	}
	idx := tx.Bucket(bucketByUpdate)
	if err := dropEntry(idx, c.UpdatedAt, c.ID); err != nil {
		return err
	}
	if n := idx.Sequence(); n > 0 {
		if err := idx.SetSequence(n - 1); err != nil {
			return err
		}
	}
	for _, set := range [][]byte{bucketDeleting, bucketEmpty} {
		if err := tx.Bucket(set).Delete([]byte(c.ID)); err != nil {
			return err
		}
	}
	// The search indexer drops its documents, and then this entry.
	if err := keepIn(tx, bucketSearch, c.ID, true); err != nil {
		return err
	}
	return tx.Bucket(bucketWork).Delete([]byte(c.ID))
}

// buildIndexes creates the indexes for a database that has none yet (one
// written before they existed), from one pass over every chat. It runs
// once: afterwards the buckets exist and are kept current. It also drops
// the empty process-journal buckets older versions left, so Resume's walk
// of that journal stays as small as the commands actually running.
func buildIndexes(tx *bolt.Tx) error {
	if tx.Bucket(bucketByUpdate) != nil && tx.Bucket(bucketWork) != nil {
		return nil
	}
	for _, name := range [][]byte{bucketByUpdate, bucketWork} {
		if tx.Bucket(name) != nil {
			if err := tx.DeleteBucket(name); err != nil {
				return err
			}
		}
	}
	idx, err := tx.CreateBucket(bucketByUpdate)
	if err != nil {
		return err
	}
	work, err := tx.CreateBucket(bucketWork)
	if err != nil {
		return err
	}
	// Keys are put in order: bbolt inserts into a node by moving what
	// follows, so a bucket filled in random order costs quadratic time.
	type entry struct{ k, v []byte }
	var upd []entry
	var busy [][]byte
	err = tx.Bucket(bucketChats).ForEach(func(k, v []byte) error {
		var c Chat
		if err := json.Unmarshal(v, &c); err != nil {
			// Listed and loaded like any chat, where its damage is
			// reported; resumed so that happens at start, as before.
			c = Chat{Resume: true}
		}
		c.ID = string(k)
		upd = append(upd, entry{updateKey(c.UpdatedAt, c.ID), nil})
		if hasWork(&c) {
			busy = append(busy, bytes.Clone(k)) // k lives only as long as tx
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(upd, func(a, b entry) int { return bytes.Compare(a.k, b.k) })
	for _, e := range upd {
		if err := idx.Put(e.k, e.v); err != nil {
			return err
		}
	}
	for _, k := range busy { // ForEach gave them in key order
		if err := work.Put(k, nil); err != nil {
			return err
		}
	}
	if err := idx.SetSequence(uint64(len(upd))); err != nil {
		return err
	}
	if pb := tx.Bucket(bucketProcs); pb != nil {
		var empty [][]byte
		_ = pb.ForEachBucket(func(chat []byte) error {
			if first, _ := pb.Bucket(chat).Cursor().First(); first == nil {
				empty = append(empty, bytes.Clone(chat))
			}
			return nil
		})
		for _, k := range empty {
			if err := pb.DeleteBucket(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// ChatPage is one page of the chat list, most recently updated first.
type ChatPage struct {
	Chats []Chat `json:"chats"`
	// Next is the cursor of the following page ("" when this is the last).
	Next string `json:"next,omitempty"`
	// Total is how many chats are stored.
	Total int `json:"total"`
}

// Bounds of a list page.
const (
	DefaultListPage = 50
	MaxListPage     = 500
)

// listPage reads up to limit chats updated before cursor after (""
// starts at the newest) from the index alone: what it costs depends on the
// page, not on how many chats are stored.
func listPage(tx *bolt.Tx, after string, limit int, keep func(*Chat) bool) (ChatPage, error) {
	var p ChatPage
	if limit <= 0 {
		limit = DefaultListPage
	}
	idx := tx.Bucket(bucketByUpdate)
	metas := tx.Bucket(bucketChats)
	p.Total = int(idx.Sequence())
	c := idx.Cursor()
	var k []byte
	if after == "" {
		k, _ = c.Last()
	} else {
		from, err := base64.RawURLEncoding.DecodeString(after)
		if err != nil || len(from) < 8 {
			return p, fmt.Errorf("%w: the list cursor %q is not one a page gave", ErrBadInput, after)
		}
		if k, _ = c.Seek(from); k == nil {
			k, _ = c.Last()
		} else {
			k, _ = c.Prev()
		}
	}
	var last []byte // the entry of the page's last chat: where the next page starts
	for ; k != nil; k, _ = c.Prev() {
		if len(p.Chats) == limit {
			p.Next = base64.RawURLEncoding.EncodeToString(last)
			break
		}
		if len(k) <= 8 {
			continue // never written so; not a chat
		}
		v := metas.Get(k[8:])
		if v == nil {
			continue // an entry its chat outlived: listed nowhere
		}
		var ch Chat
		if err := json.Unmarshal(v, &ch); err != nil {
			return p, fmt.Errorf("chat %s: corrupt metadata: %w", k[8:], err)
		}
		if ch.DeleteAt != nil {
			continue // deleted, until the undo window passes: listed nowhere
		}
		if keep != nil && !keep(&ch) {
			continue // not the asker's to see
		}
		listState(&ch)
		p.Chats = append(p.Chats, ch)
		last = append(last[:0], k...) // k lives only as long as tx
	}
	return p, nil
}

// listState sets the State a list shows for stored metadata.
func listState(c *Chat) {
	c.State = StateIdle
	if c.Turn != "" {
		c.State = StateRunning
	}
}
