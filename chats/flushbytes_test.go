package chats

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// storedRows is chat's record as stored, row by row.
func storedRows(t *testing.T, db *bolt.DB, chat string) (rows [][]byte, meta []byte) {
	t.Helper()
	err := db.View(func(tx *bolt.Tx) error {
		meta = bytes.Clone(tx.Bucket(bucketChats).Get([]byte(chat)))
		return tx.Bucket(bucketRecords).Bucket([]byte(chat)).ForEach(func(_, v []byte) error {
			rows = append(rows, bytes.Clone(v))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows, meta
}

// A flush encoded before its commit (encodeFlush, as the actor does)
// stores the bytes it stores when encoded in the commit (as a replica
// does), and those are the bytes the actor's own commits stored: rows
// that name another row's text included.
func TestEncodedFlushStoresTheSameBytes(t *testing.T) {
	e := newEnv(t, newGate(true))
	c := e.chat()
	e.talk(c.ID, "a question whose text a later row names")
	want, wantMeta := storedRows(t, e.db, c.ID)
	var meta Chat
	if err := json.Unmarshal(wantMeta, &meta); err != nil {
		t.Fatal(err)
	}
	f := &Flush{Chat: c.ID, Events: e.durable(c.ID), Meta: meta}
	if !bytes.Contains(bytes.Join(want, nil), textRef) {
		t.Fatal("no row names another's text: the case is not covered")
	}
	for _, tc := range []struct {
		name string
		enc  *flushBytes
	}{{"in the commit", nil}, {"before it", encodeFlush(f)}} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := OpenDB(filepath.Join(t.TempDir(), "m.db"), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			st, err := NewStore(db)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if err := st.Write(bg, func(tx *bolt.Tx) error {
				return writeFlush(tx, st, time.Time{}, f, &localWrites{enc: tc.enc})
			}); err != nil {
				t.Fatal(err)
			}
			got, gotMeta := storedRows(t, db, c.ID)
			if !bytes.Equal(gotMeta, wantMeta) {
				t.Errorf("metadata stored as %s, want %s", gotMeta, wantMeta)
			}
			if len(got) != len(want) {
				t.Fatalf("%d rows stored, want %d", len(got), len(want))
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i]) {
					t.Errorf("row %d stored as %s, want %s", i, got[i], want[i])
				}
			}
		})
	}
}
