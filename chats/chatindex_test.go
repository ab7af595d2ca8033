package chats

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/runtime/ids"
	bolt "go.etcd.io/bbolt"
)

// checkIndexes compares both indexes with what a full scan of the chats
// says they must hold.
func checkIndexes(t *testing.T, db *bolt.DB) {
	t.Helper()
	err := db.View(func(tx *bolt.Tx) error {
		var wantUpd, wantWork, gotUpd, gotWork []string
		n := 0
		err := tx.Bucket(bucketChats).ForEach(func(k, v []byte) error {
			var c Chat
			if err := json.Unmarshal(v, &c); err != nil {
				return err
			}
			n++
			wantUpd = append(wantUpd, string(updateKey(c.UpdatedAt, c.ID)))
			if hasWork(&c) {
				wantWork = append(wantWork, c.ID)
			}
			return nil
		})
		if err != nil {
			return err
		}
		idx := tx.Bucket(bucketByUpdate)
		_ = idx.ForEach(func(k, _ []byte) error { gotUpd = append(gotUpd, string(k)); return nil })
		_ = tx.Bucket(bucketWork).ForEach(func(k, _ []byte) error { gotWork = append(gotWork, string(k)); return nil })
		slices.Sort(wantUpd)
		slices.Sort(wantWork)
		if !slices.Equal(gotUpd, wantUpd) {
			return fmt.Errorf("index by update holds %q, want %q", gotUpd, wantUpd)
		}
		if !slices.Equal(gotWork, wantWork) {
			return fmt.Errorf("work index holds %q, want %q", gotWork, wantWork)
		}
		if int(idx.Sequence()) != n {
			return fmt.Errorf("index counts %d chats, %d are stored", idx.Sequence(), n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The indexes follow every change of a chat's metadata: creation, a
// message waiting, a turn running, the turn done, a prune.
func TestIndexesFollowMetadata(t *testing.T) {
	g := newGate(false)
	e := newEnv(t, g)
	a, b, c := e.chat(), e.chat(), e.chat()
	checkIndexes(t, e.db)
	if _, err := e.svc.Send(bg, a.ID, "one", "1", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	recvStarted(t, g)
	if _, err := e.svc.Send(bg, a.ID, "two", "2", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	checkIndexes(t, e.db)
	if got := workIDs(t, e.db); !slices.Equal(got, []string{a.ID}) {
		t.Fatalf("work index %q while chat a runs, want only a", got)
	}
	g.release <- struct{}{}
	recvStarted(t, g)
	g.release <- struct{}{}
	waitIdle(t, e, a.ID)
	checkIndexes(t, e.db)
	if got := workIDs(t, e.db); len(got) != 0 {
		t.Fatalf("work index %q once every turn finished, want empty", got)
	}
	// The chat list is the index: newest first, a busy chat on top.
	list, err := e.svc.List(bg)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, ch := range list {
		order = append(order, ch.ID)
	}
	if want := []string{a.ID, c.ID, b.ID}; !slices.Equal(order, want) {
		t.Fatalf("list %q, want %q", order, want)
	}
	e.restart()
	checkIndexes(t, e.db)
}

func workIDs(t *testing.T, db *bolt.DB) []string {
	t.Helper()
	var out []string
	_ = db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketWork).ForEach(func(k, _ []byte) error { out = append(out, string(k)); return nil })
	})
	return out
}

// A data dir from before the indexes gets them at its first start, and the
// chat whose turn a stop interrupted is resumed from them.
func TestIndexesBuiltForOlderDataDir(t *testing.T) {
	g := newGate(false)
	e := newEnv(t, g)
	var all []Chat
	for range 5 {
		all = append(all, e.chat())
	}
	busy := all[2]
	if _, err := e.svc.Send(bg, busy.ID, "hello", "1", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	recvStarted(t, g)
	e.stop()
	// Make it the layout of before: no indexes, and an empty process
	// journal bucket of a chat whose commands all ended.
	db, err := OpenDB(e.path, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketByUpdate, bucketWork} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		_, err := tx.Bucket(bucketProcs).CreateBucket([]byte(all[0].ID))
		return err
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	e.start()
	checkIndexes(t, e.db)
	_ = e.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketProcs).Bucket([]byte(all[0].ID)) != nil {
			t.Error("the empty process journal bucket was kept")
		}
		return nil
	})
	n, err := e.svc.Resume(bg)
	if err != nil || n != 1 {
		t.Fatalf("resume: %d chats, %v; want the one interrupted", n, err)
	}
	if got := recvStarted(t, g); got != "hello" {
		t.Fatalf("the resumed turn read %q", got)
	}
	g.release <- struct{}{}
	waitIdle(t, e, busy.ID)
	p, err := e.svc.ListPage(bg, "", 0)
	if err != nil || p.Total != 5 || len(p.Chats) != 5 || p.Chats[0].ID != busy.ID {
		t.Fatalf("list after migration: %+v, %v", p, err)
	}
}

// Pages walk the list newest first, each exactly once, and end with no
// cursor; a cursor no page gave is refused.
func TestListPages(t *testing.T) {
	e := newEnv(t, newGate(true))
	var want []string
	for range 7 {
		want = append(want, e.chat().ID)
	}
	slices.Reverse(want)
	for _, tc := range []struct {
		limit int
		pages []int
	}{{3, []int{3, 3, 1}}, {7, []int{7}}, {1, []int{1, 1, 1, 1, 1, 1, 1}}, {0, []int{7}}, {-1, []int{7}}} {
		t.Run(fmt.Sprint(tc.limit), func(t *testing.T) {
			var got []string
			var sizes []int
			after := ""
			for {
				p, err := e.svc.ListPage(bg, after, tc.limit)
				if err != nil {
					t.Fatal(err)
				}
				if p.Total != 7 {
					t.Fatalf("total %d", p.Total)
				}
				sizes = append(sizes, len(p.Chats))
				for _, c := range p.Chats {
					got = append(got, c.ID)
				}
				if p.Next == "" {
					break
				}
				after = p.Next
			}
			if !slices.Equal(got, want) || !slices.Equal(sizes, tc.pages) {
				t.Fatalf("pages %v gave %q, want pages %v of %q", sizes, got, tc.pages, want)
			}
		})
	}
	for _, bad := range []string{"!!", "AAAA", "*"} {
		if _, err := e.svc.ListPage(bg, bad, 3); !errors.Is(err, ErrBadInput) {
			t.Errorf("cursor %q: %v, want ErrBadInput", bad, err)
		}
	}
}

// Chats updated at the same instant keep one order (newest first, then by
// id, descending): pages of any size over them list each chat once, none
// skipped, none twice.
func TestListPagesWithTiedTimes(t *testing.T) {
	e := newEnv(t, newGate(true))
	base := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	var all []Chat
	err := e.db.Update(func(tx *bolt.Tx) error {
		for i := range 12 {
			at := base.Add(time.Duration(i/4) * time.Nanosecond) // three instants, four chats each
			c := Chat{ID: ids.NewChat(), Title: fmt.Sprint("tied ", i), State: StateIdle, CreatedAt: at, UpdatedAt: at, Seq: 1}
			meta, err := json.Marshal(c)
			if err != nil {
				return err
			}
			if err := putMeta(tx, time.Time{}, &c, meta); err != nil {
				return err
			}
			all = append(all, c)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(all, func(a, b Chat) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	var want []string
	for _, c := range all {
		want = append(want, c.ID)
	}
	for _, limit := range []int{1, 2, 3, 4, 5, 7, 12} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			var got []string
			after := ""
			for range len(want) + 1 {
				p, err := e.svc.ListPage(bg, after, limit)
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range p.Chats {
					got = append(got, c.ID)
				}
				if after = p.Next; after == "" {
					break
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("pages of %d listed %q, want %q", limit, got, want)
			}
		})
	}
}
