package chats

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/runtime/ids"
	"github.com/mirror-gateway/mirror/runtime/provider"
	bolt "go.etcd.io/bbolt"
)

// setIDs lists the chat ids in one of the sets of chatindex.go.
func setIDs(t *testing.T, db *bolt.DB, set []byte) []string {
	t.Helper()
	var out []string
	if err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(set).ForEach(func(k, _ []byte) error { out = append(out, string(k)); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSearchStartReadsOnlyChangedChats (issue 20, item 3): after a clean
// stop the indexer's start reads only the chats changed since it caught up
// (bucketSearch), not every chat; after a crash (the index not closed
// cleanly) it checks every chat against its mark. The probe is a row
// written behind the service's back (no metadata write puts its chat in
// the set): found after a crash, not after a clean stop.
func TestSearchStartReadsOnlyChangedChats(t *testing.T) {
	for _, tc := range []struct {
		name  string
		crash bool
	}{{"clean stop", false}, {"crash", true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := manageEnv(t, time.Hour)
			a, b := e.chat(), e.chat()
			e.talk(a.ID, "the aardvark question")
			e.talk(b.ID, "the badger question")
			if hits, err := e.svc.Search(bg, "badger", 10); err != nil || len(hits) != 2 {
				t.Fatalf("hits %+v %v", hits, err)
			}
			e.stop()
			db, err := OpenDB(e.path, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if got := setIDs(t, db, bucketSearch); len(got) != 0 {
				t.Errorf("after a clean stop the set of chats to index holds %q; want none", got)
			}
			err = db.Update(func(tx *bolt.Tx) error {
				c, _, err := loadChat(tx, b.ID)
				if err != nil {
					return err
				}
				seq := c.Seq + 1
				m := &Message{ID: ids.Message(seq), Seq: seq, Role: provider.RoleAssistant, Text: "a zebra crossing", State: MsgDone}
				ev := NewEvent(b.ID, seq, time.Now().UTC(), &TurnFinished{Turn: "probe", Reply: m.Text, Message: m})
				if err := writeRows(tx, b.ID, []*Event{ev}); err != nil {
					return err
				}
				c.Seq = seq
				v, _ := json.Marshal(c)
				return tx.Bucket(bucketChats).Put([]byte(b.ID), v) // not putMeta: the set is not told
			})
			db.Close()
			if err != nil {
				t.Fatal(err)
			}
			if tc.crash {
				if err := os.Remove(filepath.Join(e.searchDir, "mirror-closed-cleanly")); err != nil {
					t.Fatal(err)
				}
			}
			e.start()
			hits, err := e.svc.Search(bg, "zebra", 10)
			if err != nil {
				t.Fatal(err)
			}
			if found := len(hits) == 1; found != tc.crash {
				t.Fatalf("the row written behind the service's back found: %v (hits %+v); want %v", found, hits, tc.crash)
			}
			// The chats written through the service are found either way.
			for _, q := range []string{"aardvark", "badger"} {
				if hits, err := e.svc.Search(bg, q, 10); err != nil || len(hits) != 2 {
					t.Fatalf("%s: %+v %v", q, hits, err)
				}
			}
		})
	}
}

// TestSetsFollowTheChats: the sets of chats awaiting deletion, never
// written to and changed since indexed follow a chat's life, and a store
// written before them gets them built at open.
func TestSetsFollowTheChats(t *testing.T) {
	e := manageEnv(t, time.Hour)
	var a, b Chat
	for _, c := range []*Chat{&a, &b} {
		var err error
		if *c, err = e.svc.Create(bg, "", "", Origin{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := setIDs(t, e.db, bucketEmpty); !sameSet(got, a.ID, b.ID) {
		t.Fatalf("never written to: %q; want both", got)
	}
	e.talk(a.ID, "hello")
	if got := setIDs(t, e.db, bucketEmpty); !sameSet(got, b.ID) {
		t.Fatalf("never written to, after a turn: %q; want b", got)
	}
	if c, reused, err := e.svc.CreateReusing(bg, "", Origin{}); err != nil || !reused || c.ID != b.ID {
		t.Fatalf("CreateReusing = %s, %v, %v; want b reused", c.ID, reused, err)
	}
	if _, err := e.svc.DeleteChat(bg, a.ID); err != nil {
		t.Fatal(err)
	}
	if got := setIDs(t, e.db, bucketDeleting); !sameSet(got, a.ID) {
		t.Fatalf("awaiting deletion: %q; want a", got)
	}
	if _, err := e.svc.RestoreChat(bg, a.ID); err != nil {
		t.Fatal(err)
	}
	if got := setIDs(t, e.db, bucketDeleting); len(got) != 0 {
		t.Fatalf("awaiting deletion after the restore: %q; want none", got)
	}
	if _, err := e.svc.DeleteChat(bg, b.ID); err != nil {
		t.Fatal(err)
	}
	if got := setIDs(t, e.db, bucketEmpty); len(got) != 0 {
		t.Fatalf("never written to, after b's deletion: %q; want none (a deleted chat is not reused)", got)
	}

	// A store from before the sets: built at open from the chats.
	e.stop()
	db, err := OpenDB(e.path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, set := range [][]byte{bucketDeleting, bucketEmpty, bucketSearch} {
			if err := tx.DeleteBucket(set); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	e.start()
	if got := setIDs(t, e.db, bucketDeleting); !sameSet(got, b.ID) {
		t.Fatalf("awaiting deletion, built: %q; want b", got)
	}
	if got := setIDs(t, e.db, bucketEmpty); len(got) != 0 {
		t.Fatalf("never written to, built: %q; want none", got)
	}
}

func sameSet(got []string, want ...string) bool {
	slices.Sort(got)
	slices.Sort(want)
	return slices.Equal(got, want)
}
