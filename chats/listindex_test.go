package chats

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/runtime/ids"
	bolt "go.etcd.io/bbolt"
)

// indexValues maps each list index entry's chat id to its value.
func indexValues(t *testing.T, db *bolt.DB) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketByUpdate).ForEach(func(k, v []byte) error { out[string(k[8:])] = string(v); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// listIDs walks the whole list, pages of limit, and returns its chats.
func listIDs(t *testing.T, e *env, limit int) []Chat {
	t.Helper()
	var out []Chat
	after := ""
	for range 100 {
		p, err := e.svc.ListPage(bg, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Chats...)
		if after = p.Next; after == "" {
			return out
		}
	}
	t.Fatal("the list did not end")
	return nil
}

// A store written when the list index held a copy of each chat's metadata
// opens as it is (no pass over it at start), lists its chats as stored, in
// order, by pages, with its records and search intact; a chat written
// afterwards gets a bare entry, and the list stays right.
func TestListIndexOfCopies(t *testing.T) {
	e := manageEnv(t, time.Hour)
	var made []Chat
	for i := range 6 {
		c := e.chat()
		e.talk(c.ID, fmt.Sprintf("needle%d of the old layout", i))
		made = append(made, c)
	}
	for id, v := range indexValues(t, e.db) {
		if v != "" {
			t.Fatalf("chat %s: the list index holds %q, want a bare entry", id, v)
		}
	}
	before := listIDs(t, e, 4)
	e.stop()

	// Make it the layout of before: each entry a copy of its chat's
	// metadata as it was then (its title a stale one, which nothing may show).
	db, err := OpenDB(e.path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		idx, metas := tx.Bucket(bucketByUpdate), tx.Bucket(bucketChats)
		var keys [][]byte
		_ = idx.ForEach(func(k, _ []byte) error { keys = append(keys, slices.Clone(k)); return nil })
		for _, k := range keys {
			var c Chat
			if err := json.Unmarshal(metas.Get(k[8:]), &c); err != nil {
				return err
			}
			c.Title = "a copy"
			v, _ := json.Marshal(c)
			if err := idx.Put(k, v); err != nil {
				return err
			}
		}
		return nil
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	e.start()

	for _, limit := range []int{1, 4, 50} {
		if got := listIDs(t, e, limit); !sameList(got, before) {
			t.Fatalf("pages of %d over the old layout listed %v, want %v", limit, got, before)
		}
	}
	if n := len(e.durable(made[2].ID)); n < 3 {
		t.Fatalf("chat's record holds %d rows after the reopen", n)
	}
	hits, err := e.svc.Search(bg, "needle2", 10)
	if err != nil || len(hits) == 0 || slices.ContainsFunc(hits, func(h SearchHit) bool { return h.Chat != made[2].ID || h.Title != "test" }) {
		t.Fatalf("search over the old layout: %+v, %v", hits, err)
	}

	// The oldest chat, written now, comes first, with a bare entry; the
	// others keep their copies until they are written.
	e.talk(made[0].ID, "written again")
	vals := indexValues(t, e.db)
	if vals[made[0].ID] != "" || vals[made[1].ID] == "" {
		t.Fatalf("entries after a write: %q", vals)
	}
	want := append([]Chat{}, before...)
	i := slices.IndexFunc(want, func(c Chat) bool { return c.ID == made[0].ID })
	want = append(append([]Chat{want[i]}, want[:i]...), want[i+1:]...)
	if got := listIDs(t, e, 4); !sameList(got, want) {
		t.Fatalf("list after a write: %v, want %v", got, want)
	}
	checkIndexes(t, e.db)
}

// sameList says a and b list the same chats in the same order, with the
// same titles.
func sameList(a, b []Chat) bool {
	return slices.EqualFunc(a, b, func(x, y Chat) bool { return x.ID == y.ID && x.Title == y.Title })
}

// A metadata write that keeps the chat's UpdatedAt leaves its bare list
// entry as it is: the index's pages are not written again.
func TestListEntryKeptWhenItsKeyIs(t *testing.T) {
	e := newEnv(t, newGate(true))
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	var all []Chat
	put := func(tx *bolt.Tx, prev time.Time, c *Chat) error {
		meta, _ := json.Marshal(c)
		return putMeta(tx, prev, c, meta)
	}
	// Enough chats that the index is a page of its own, not inline in
	// its parent's.
	err := e.db.Update(func(tx *bolt.Tx) error {
		for i := range 200 {
			c := Chat{ID: ids.NewChat(), Title: "t", State: StateIdle, CreatedAt: at, UpdatedAt: at.Add(time.Duration(i)), Seq: 1}
			if err := put(tx, time.Time{}, &c); err != nil {
				return err
			}
			all = append(all, c)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	root := func() (pg uint64) {
		_ = e.db.View(func(tx *bolt.Tx) error { pg = uint64(tx.Bucket(bucketByUpdate).Root()); return nil })
		return pg
	}
	for _, tc := range []struct {
		name    string
		change  func(c *Chat)
		written bool
	}{
		{"title only", func(c *Chat) { c.Title = "renamed" }, false},
		{"updated", func(c *Chat) { c.UpdatedAt = c.UpdatedAt.Add(time.Hour) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r0 := root()
			c := all[len(all)/2]
			prev := c.UpdatedAt
			tc.change(&c)
			if err := e.db.Update(func(tx *bolt.Tx) error { return put(tx, prev, &c) }); err != nil {
				t.Fatal(err)
			}
			if got := root() != r0; got != tc.written {
				t.Fatalf("index written: %v, want %v", got, tc.written)
			}
			checkIndexes(t, e.db)
			p, err := e.svc.ListPage(bg, "", MaxListPage)
			if err != nil || p.Total != len(all) {
				t.Fatalf("list: %d chats, %v", p.Total, err)
			}
			i := slices.IndexFunc(p.Chats, func(x Chat) bool { return x.ID == c.ID })
			if i < 0 || p.Chats[i].Title != c.Title {
				t.Fatalf("the list shows %+v for the chat written", p.Chats)
			}
		})
	}
}

// Entries are added at the end of the index, one commit at a time, as
// chats are written: its pages are filled, not left half empty by each
// split, so it spans as few pages as its keys need.
func TestListIndexPagesFull(t *testing.T) {
	e := newEnv(t, newGate(true))
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	const chats = 500
	for i := range chats {
		err := e.db.Update(func(tx *bolt.Tx) error {
			c := Chat{ID: ids.NewChat(), Title: "t", State: StateIdle, CreatedAt: at, UpdatedAt: at.Add(time.Duration(i)), Seq: 1}
			meta, _ := json.Marshal(c)
			return putMeta(tx, time.Time{}, &c, meta)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var st bolt.BucketStats
	_ = e.db.View(func(tx *bolt.Tx) error { st = tx.Bucket(bucketByUpdate).Stats(); return nil })
	need := (st.LeafInuse + e.db.Info().PageSize - 1) / e.db.Info().PageSize
	if st.KeyN != chats || st.LeafPageN > need+1 {
		t.Fatalf("%d entries on %d pages, %d bytes: %d pages would hold them", st.KeyN, st.LeafPageN, st.LeafInuse, need)
	}
}
