package tools

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

func openDB(t *testing.T) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "mirror.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newLedger(t *testing.T, db *bolt.DB) *Ledger {
	t.Helper()
	l, err := NewLedger(db)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// turnCall runs one call as part of chat's turn and fails the test on an
// error result.
func turnCall(t *testing.T, r *Registry, chat string, turn uint64, name, args string) {
	t.Helper()
	res := r.Run(context.Background(), callOf(name, args), CallMeta{Chat: chat, Turn: turn, CallID: "call_x"})
	if res.IsError {
		t.Fatalf("turn %d %s: %s", turn, name, res.Content)
	}
}

// snapshot is every regular file of the workspace with its bytes.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRewindRestoresExactBytes(t *testing.T) {
	ws := t.TempDir()
	l := newLedger(t, openDB(t))
	r := newTestRegistry(t, ws, l)
	binary := "\x00\xff\r\n exact \t bytes \xc3\x28" // not UTF-8: restored as is
	if err := os.WriteFile(filepath.Join(ws, "keep.bin"), []byte(binary), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "old.txt"), []byte("old v0\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	turnCall(t, r, "c", 1, "write_file", jsonArgs("path", "old.txt", "content", "old v1\n"))
	before2 := snapshot(t, ws)

	// Turn 2: a file created then edited twice; an existing file replaced
	// and edited; a binary file overwritten.
	turnCall(t, r, "c", 2, "write_file", jsonArgs("path", "new/made.txt", "content", "alpha\nbeta\n"))
	turnCall(t, r, "c", 2, "edit_file", jsonArgs("path", "new/made.txt", "old", "alpha", "new", "ALPHA"))
	turnCall(t, r, "c", 2, "write_file", jsonArgs("path", "old.txt", "content", "old v2\n"))
	turnCall(t, r, "c", 2, "write_file", jsonArgs("path", "keep.bin", "content", "text now"))
	before3 := snapshot(t, ws)
	turnCall(t, r, "c", 3, "edit_file", jsonArgs("path", "new/made.txt", "old", "beta", "new", "BETA"))
	turnCall(t, r, "c", 3, "edit_file", jsonArgs("path", "old.txt", "old", "v2", "new", "v3"))
	// Another chat's changes are its own.
	turnCall(t, r, "other", 1, "write_file", jsonArgs("path", "other.txt", "content", "mine"))

	changes, err := l.Changes("c")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range changes {
		got = append(got, strings.Join([]string{c.Path, c.Status, itoa(c.Turn), itoa(uint64(c.BytesBefore)), itoa(uint64(c.BytesAfter))}, " "))
		if c.Time.IsZero() || c.Hidden {
			t.Errorf("change %+v", c)
		}
	}
	want := []string{
		"old.txt modified 1 7 7",
		"new/made.txt created 2 0 11",
		"new/made.txt modified 2 11 11",
		"old.txt modified 2 7 7",
		"keep.bin modified 2 21 8",
		"new/made.txt modified 3 11 11",
		"old.txt modified 3 7 7",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("changes:\n got %q\nwant %q", got, want)
	}

	rep, err := l.Rewind("c", 3, r.Workspace())
	if err != nil {
		t.Fatal(err)
	}
	before3["other.txt"] = "mine" // the other chat's file stays
	if s := snapshot(t, ws); !reflect.DeepEqual(s, before3) {
		t.Errorf("after rewind to 3:\n got %q\nwant %q", s, before3)
	}
	if rep.String() != "rewound to before turn 3: 2 restored, 0 deleted, 0 failed" {
		t.Errorf("report %s", rep)
	}

	rep, err = l.Rewind("c", 2, r.Workspace())
	if err != nil {
		t.Fatal(err)
	}
	wantWS := before2
	wantWS["other.txt"] = "mine"
	if s := snapshot(t, ws); !reflect.DeepEqual(s, wantWS) {
		t.Errorf("after rewind to 2:\n got %q\nwant %q", s, wantWS)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "keep.bin")); !bytes.Equal(b, []byte(binary)) {
		t.Errorf("binary bytes not exact: %q", b)
	}
	if fi, _ := os.Stat(filepath.Join(ws, "keep.bin")); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode not restored: %v", fi.Mode())
	}
	wantRep := RewindReport{Turn: 2, Restored: 2, Deleted: 1, Files: []RewoundFile{
		{Path: "keep.bin", Outcome: RewoundRestored, Changes: 1},
		{Path: "new/made.txt", Outcome: RewoundDeleted, Changes: 2},
		{Path: "old.txt", Outcome: RewoundRestored, Changes: 1},
	}}
	if !reflect.DeepEqual(rep, wantRep) {
		t.Errorf("report\n got %+v\nwant %+v", rep, wantRep)
	}
	changes, _ = l.Changes("c")
	if len(changes) != 1 || changes[0].Turn != 1 {
		t.Errorf("changes after rewind: %+v", changes)
	}
	// Rewinding again finds nothing to do.
	if rep, err := l.Rewind("c", 2, r.Workspace()); err != nil || len(rep.Files) != 0 {
		t.Errorf("second rewind: %+v %v", rep, err)
	}
	if rep, err := l.Rewind("nobody", 0, r.Workspace()); err != nil || len(rep.Files) != 0 {
		t.Errorf("unknown chat: %+v %v", rep, err)
	}
}

// Blobs are shared by content and freed when nothing uses them.
func TestLedgerBlobs(t *testing.T) {
	ws := t.TempDir()
	db := openDB(t)
	l := newLedger(t, db)
	r := newTestRegistry(t, ws, l)
	for _, chat := range []string{"a", "b"} {
		if err := os.WriteFile(filepath.Join(ws, chat+".txt"), []byte("same bytes"), 0o600); err != nil {
			t.Fatal(err)
		}
		turnCall(t, r, chat, 1, "write_file", jsonArgs("path", chat+".txt", "content", "changed"))
	}
	blobs := func() (n, refs int) {
		db.View(func(tx *bolt.Tx) error {
			top := tx.Bucket(bucketChanges)
			n = top.Bucket(bucketBlobs).Stats().KeyN
			refs = int(count(top.Bucket(bucketRefs), func() []byte { k, _ := top.Bucket(bucketRefs).Cursor().First(); return k }()))
			return nil
		})
		return
	}
	if n, refs := blobs(); n != 1 || refs != 2 {
		t.Fatalf("blobs %d refs %d, want one blob used twice", n, refs)
	}
	if err := l.Drop("a"); err != nil {
		t.Fatal(err)
	}
	if n, refs := blobs(); n != 1 || refs != 1 {
		t.Fatalf("after drop: blobs %d refs %d", n, refs)
	}
	if _, err := l.Rewind("b", 1, ws); err != nil {
		t.Fatal(err)
	}
	if n, _ := blobs(); n != 0 {
		t.Fatalf("after rewind: %d blobs left", n)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "b.txt")); string(b) != "same bytes" {
		t.Errorf("b.txt = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "changed" {
		t.Errorf("drop touched the workspace: a.txt = %q", b)
	}
}

// Changes and reports never show contents, hashes or secret-looking paths.
func TestLedgerSanitized(t *testing.T) {
	ws := t.TempDir()
	l := newLedger(t, openDB(t))
	r := newTestRegistry(t, ws, l)
	turnCall(t, r, "c", 1, "write_file", jsonArgs("path", ".env", "content", "API_KEY=sk-SECRET"))
	turnCall(t, r, "c", 1, "write_file", jsonArgs("path", "keys/server.pem", "content", "-----BEGIN SECRET-----"))
	turnCall(t, r, "c", 1, "write_file", jsonArgs("path", "notes.md", "content", "hello"))
	turnCall(t, r, "c", 2, "write_file", jsonArgs("path", "notes.md", "content", "hello again"))
	changes, err := l.Changes("c")
	if err != nil {
		t.Fatal(err)
	}
	dump := func(v any) string { return strings.ToLower(fmtAll(v)) }
	if s := dump(changes); strings.Contains(s, "secret") || strings.Contains(s, ".env") || strings.Contains(s, "pem") || strings.Contains(s, "hello") {
		t.Errorf("changes show too much: %s", s)
	}
	if !changes[0].Hidden || !changes[1].Hidden || changes[2].Hidden || changes[2].Path != "notes.md" {
		t.Errorf("hidden flags: %+v", changes)
	}
	rep, err := l.Rewind("c", 1, ws)
	if err != nil {
		t.Fatal(err)
	}
	if s := dump(rep); strings.Contains(s, "secret") || strings.Contains(s, ".env") || strings.Contains(s, "hello") {
		t.Errorf("report shows too much: %s", s)
	}
	if rep.Deleted != 3 || len(snapshot(t, ws)) != 0 {
		t.Errorf("report %+v, workspace %v", rep, snapshot(t, ws))
	}
}

// A rewind never follows a symlink planted where a changed file was.
func TestRewindRefusesPlantedSymlink(t *testing.T) {
	base := t.TempDir()
	ws, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
	if err := os.MkdirAll(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	l := newLedger(t, openDB(t))
	r := newTestRegistry(t, ws, l)
	if err := os.WriteFile(filepath.Join(ws, "f.txt"), []byte("before"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "target"), []byte("outside"), 0o600); err != nil {
		t.Fatal(err)
	}
	turnCall(t, r, "c", 1, "write_file", jsonArgs("path", "f.txt", "content", "after"))
	turnCall(t, r, "c", 1, "write_file", jsonArgs("path", "g.txt", "content", "new"))
	// Someone swaps the files for symlinks out of the workspace.
	for _, name := range []string{"f.txt", "g.txt"} {
		os.Remove(filepath.Join(ws, name))
		if err := os.Symlink(filepath.Join(outside, "target"), filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := l.Rewind("c", 1, ws)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed != 2 || rep.Files[0].Reason != "outside_workspace" {
		t.Errorf("report %+v", rep)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "target")); string(b) != "outside" {
		t.Errorf("rewind wrote outside: %q", b)
	}
	// The failed changes are kept for a later try.
	if c, _ := l.Changes("c"); len(c) != 2 {
		t.Errorf("changes %+v", c)
	}
}

// Without a chat the ledger cannot record, so nothing is changed.
func TestLedgerNeedsChat(t *testing.T) {
	ws := t.TempDir()
	r := newTestRegistry(t, ws, newLedger(t, openDB(t)))
	res := r.Run(context.Background(), callOf("write_file", jsonArgs("path", "a", "content", "x")), CallMeta{})
	if !res.IsError || !strings.Contains(res.Content, "could not record the change for /rewind, so the file was not changed") {
		t.Errorf("got %+v", res)
	}
	if len(snapshot(t, ws)) != 0 {
		t.Error("file written without a ledger record")
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

func fmtAll(v any) string { return fmt.Sprintf("%+v", v) }
