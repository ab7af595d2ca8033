package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// dumpLedger is everything db's ledger holds: each chat's entries (their
// times left out when noTime), the blobs and their counts.
func dumpLedger(t *testing.T, db *bolt.DB, noTime bool) string {
	t.Helper()
	var out strings.Builder
	err := db.View(func(tx *bolt.Tx) error {
		top := tx.Bucket(bucketChanges)
		err := top.Bucket(bucketChats).ForEach(func(chat, _ []byte) error {
			b := top.Bucket(bucketChats).Bucket(chat)
			fmt.Fprintf(&out, "chat %s seq %d\n", chat, b.Sequence())
			return b.ForEach(func(k, v []byte) error {
				if noTime {
					var e entry
					if err := json.Unmarshal(v, &e); err != nil {
						return err
					}
					e.Time = time.Time{}
					v, _ = json.Marshal(e)
				}
				fmt.Fprintf(&out, " %x %s\n", k, v)
				return nil
			})
		})
		if err != nil {
			return err
		}
		for _, name := range [][]byte{bucketBlobs, bucketRefs} {
			if err := top.Bucket(name).ForEach(func(k, v []byte) error {
				fmt.Fprintf(&out, "%s %x %q\n", name, k, v)
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// logged is a chat's journaled ledger writes as the log carries them:
// encoded, decoded strictly, checked, then applied to each of dbs (the
// owner's, then followers').
func logged(t *testing.T, w LedgerWrites, dbs ...*bolt.DB) {
	t.Helper()
	data, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	var got LedgerWrites
	if err := d.Decode(&got); err != nil {
		t.Fatal(err)
	}
	if err := got.Check(); err != nil {
		t.Fatalf("a journaled write fails its check: %v (%s)", err, data)
	}
	for _, db := range dbs {
		if err := db.Update(func(tx *bolt.Tx) error { return ApplyLedgerTx(tx, "c", &got) }); err != nil {
			t.Fatal(err)
		}
	}
}

// TestJournaledLedgerMatchesTheLedger: the same calls recorded by the
// ledger itself (single-node) and through a journal applied with
// ApplyLedgerTx (cluster mode, on the owner and on a follower) leave the
// same entries, blobs and counts; a journaled rewind puts the files back
// the same way and, once its forgetting is applied, the ledgers are the
// same again. The follower's is the owner's byte for byte.
func TestJournaledLedgerMatchesTheLedger(t *testing.T) {
	wsA, wsB := t.TempDir(), t.TempDir()
	dbA, dbB, dbF := openDB(t), openDB(t), openDB(t)
	lA, lB := newLedger(t, dbA), newLedger(t, dbB)
	newLedger(t, dbF)
	rA, rB := newTestRegistry(t, wsA, lA), newTestRegistry(t, wsB, lB)
	for _, ws := range []string{wsA, wsB} {
		if err := os.WriteFile(filepath.Join(ws, "empty.txt"), nil, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	journal := func(r LedgerRow) error {
		if err := dbB.View(func(tx *bolt.Tx) (err error) { r.Key, err = NextLedgerKey(tx, "c"); return err }); err != nil {
			return err
		}
		logged(t, LedgerWrites{Put: []LedgerRow{r}}, dbB, dbF)
		return nil
	}
	calls := []struct {
		turn       uint64
		name, args string
	}{
		{1, "write_file", jsonArgs("path", "a.txt", "content", "one\n")},
		{1, "write_file", jsonArgs("path", "empty.txt", "content", "was empty\n")},
		{2, "write_file", jsonArgs("path", "a.txt", "content", "two\n")},
		{2, "write_file", jsonArgs("path", "sub/b.txt", "content", "one\n")},
		{3, "edit_file", jsonArgs("path", "a.txt", "old", "two", "new", "three")},
		{3, "write_file", jsonArgs("path", "sub/b.txt", "content", "two\n")},
	}
	for _, c := range calls {
		turnCall(t, rA, "c", c.turn, c.name, c.args)
		res := rB.Run(context.Background(), callOf(c.name, c.args), CallMeta{Chat: "c", Turn: c.turn, CallID: "call_x", Journal: journal})
		if res.IsError {
			t.Fatalf("journaled %s: %s", c.name, res.Content)
		}
	}
	if a, b := dumpLedger(t, dbA, true), dumpLedger(t, dbB, true); a != b {
		t.Fatalf("the ledger's own rows:\n%s\njournaled:\n%s", a, b)
	}
	if b, f := dumpLedger(t, dbB, false), dumpLedger(t, dbF, false); b != f {
		t.Fatalf("owner:\n%s\nfollower:\n%s", b, f)
	}

	repA, err := lA.Rewind("c", 2, wsA)
	if err != nil {
		t.Fatal(err)
	}
	repB, w, err := lB.RewindJournaled("c", 2, wsB)
	if err != nil {
		t.Fatal(err)
	}
	if fmtAll(repA) != fmtAll(repB) {
		t.Fatalf("rewinds differ: %+v, journaled %+v", repA, repB)
	}
	if a, b := fmtAll(snapshot(t, wsA)), fmtAll(snapshot(t, wsB)); a != b {
		t.Fatalf("workspaces after the rewinds differ:\n%s\n%s", a, b)
	}
	if len(w.Forget) != 4 || len(w.Put) != 0 {
		t.Fatalf("journaled rewind writes %+v", w)
	}
	logged(t, w, dbB, dbF)
	logged(t, w, dbF) // applied again: nothing more goes
	if a, b := dumpLedger(t, dbA, true), dumpLedger(t, dbB, true); a != b {
		t.Fatalf("after the rewind, the ledger's:\n%s\njournaled:\n%s", a, b)
	}
	if b, f := dumpLedger(t, dbB, false), dumpLedger(t, dbF, false); b != f {
		t.Fatalf("after the rewind, owner:\n%s\nfollower:\n%s", b, f)
	}
	// A change after the rewind takes the next key on every node, past the
	// forgotten ones: the same as the ledger's own sequence.
	turnCall(t, rA, "c", 4, "write_file", jsonArgs("path", "a.txt", "content", "four\n"))
	if res := rB.Run(context.Background(), callOf("write_file", jsonArgs("path", "a.txt", "content", "four\n")),
		CallMeta{Chat: "c", Turn: 4, CallID: "call_x", Journal: journal}); res.IsError {
		t.Fatal(res.Content)
	}
	if a, b := dumpLedger(t, dbA, true), dumpLedger(t, dbB, true); a != b {
		t.Fatalf("after a change past the rewind, the ledger's:\n%s\njournaled:\n%s", a, b)
	}
}

// TestJournaledChangeRefused: a journal that fails leaves the file as it
// was and the ledger empty; a file too large for the log's message is not
// changed and the journal is not asked.
func TestJournaledChangeRefused(t *testing.T) {
	ws := t.TempDir()
	db := openDB(t)
	r := newTestRegistry(t, ws, newLedger(t, db))
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "big.txt"), bytes.Repeat([]byte("x"), maxJournaledSnapshot+1), 0o600); err != nil {
		t.Fatal(err)
	}
	asked := 0
	fail := func(LedgerRow) error { asked++; return errors.New("the log did not confirm") }
	res := r.Run(context.Background(), callOf("write_file", jsonArgs("path", "a.txt", "content", "lost")), CallMeta{Chat: "c", Turn: 1, CallID: "k", Journal: fail})
	if !res.IsError || !strings.Contains(res.Content, "the file was not changed") || asked != 1 {
		t.Fatalf("failed journal: %+v (asked %d)", res, asked)
	}
	res = r.Run(context.Background(), callOf("write_file", jsonArgs("path", "big.txt", "content", "small")), CallMeta{Chat: "c", Turn: 1, CallID: "k", Journal: fail})
	if !res.IsError || !strings.Contains(res.Content, "4 MiB") || asked != 1 {
		t.Fatalf("too large for the log: %+v (asked %d)", res, asked)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(got) != "kept" {
		t.Fatalf("a.txt %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "big.txt")); len(got) != maxJournaledSnapshot+1 {
		t.Fatalf("big.txt changed to %d bytes", len(got))
	}
	if d := dumpLedger(t, db, false); d != "" {
		t.Fatalf("ledger %q", d)
	}
}

// TestLedgerWritesCheck: what a journaled ledger write must be.
func TestLedgerWritesCheck(t *testing.T) {
	row := func(key uint64, path, status string, before int64, prior string) LedgerRow {
		r := LedgerRow{Key: key, Turn: 1, CallID: "k", Path: path, Status: status, SizeBefore: before, SizeAfter: 3, Time: time.Unix(1700000000, 0).UTC()}
		if prior != "" {
			r.Prior = []byte(prior)
		}
		return r
	}
	for _, c := range []struct {
		name string
		w    LedgerWrites
		ok   bool
	}{
		{"created and modified", LedgerWrites{Put: []LedgerRow{row(1, "a.txt", StatusCreated, 0, ""), row(2, "d/b.txt", StatusModified, 2, "hi")}}, true},
		{"modified empty file", LedgerWrites{Put: []LedgerRow{row(1, "a.txt", StatusModified, 0, "")}}, true},
		{"forget", LedgerWrites{Forget: []uint64{1, 3}}, true},
		{"key zero", LedgerWrites{Put: []LedgerRow{row(0, "a.txt", StatusCreated, 0, "")}}, false},
		{"keys not increasing", LedgerWrites{Put: []LedgerRow{row(2, "a.txt", StatusCreated, 0, ""), row(2, "b.txt", StatusCreated, 0, "")}}, false},
		{"absolute path", LedgerWrites{Put: []LedgerRow{row(1, "/etc/passwd", StatusCreated, 0, "")}}, false},
		{"path above", LedgerWrites{Put: []LedgerRow{row(1, "../x", StatusCreated, 0, "")}}, false},
		{"path not clean", LedgerWrites{Put: []LedgerRow{row(1, "a//b", StatusCreated, 0, "")}}, false},
		{"the workspace", LedgerWrites{Put: []LedgerRow{row(1, ".", StatusCreated, 0, "")}}, false},
		{"no path", LedgerWrites{Put: []LedgerRow{row(1, "", StatusCreated, 0, "")}}, false},
		{"unknown status", LedgerWrites{Put: []LedgerRow{row(1, "a.txt", "deleted", 0, "")}}, false},
		{"created with bytes", LedgerWrites{Put: []LedgerRow{row(1, "a.txt", StatusCreated, 2, "hi")}}, false},
		{"size not the bytes'", LedgerWrites{Put: []LedgerRow{row(1, "a.txt", StatusModified, 5, "hi")}}, false},
		{"negative size", LedgerWrites{Put: []LedgerRow{row(1, "a.txt", StatusCreated, -1, "")}}, false},
		{"forget zero", LedgerWrites{Forget: []uint64{0}}, false},
		{"forget twice", LedgerWrites{Forget: []uint64{2, 2}}, false},
	} {
		if err := c.w.Check(); (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
