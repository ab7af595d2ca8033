package chats

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/runtime/tools"
	bolt "go.etcd.io/bbolt"
)

// TestClusterLedgerTravelsWithTheChat: in cluster mode the file changes a
// chat's tools made on one node are in the chat's record: another node
// that adopts the chat lists them (/changes) and rewinds them (/rewind),
// in the workspace every node shares; the rewind's forgetting reaches
// the first node with the record when it adopts the chat back, so both
// ledgers end the same.
func TestClusterLedgerTravelsWithTheChat(t *testing.T) {
	log := newMemLog()
	a, chat, _ := clusterEnv(t, log)
	b := &env{t: t, path: filepath.Join(t.TempDir(), "mirror.db"), tools: true, workspace: a.workspace, log: log, undo: time.Millisecond}
	b.start()
	t.Cleanup(b.stop)
	var turns []uint64 // turn.started seqs, as /rewind names turns
	send := func(k, text string) {
		t.Helper()
		s := newSub()
		if err := a.svc.Open(bg, chat, nil, s, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := a.svc.Send(bg, chat, text, k, "", Origin{}); err != nil {
			t.Fatal(err)
		}
		for _, ev := range s.waitFor(t, "turn "+k, has(EvTurnFinished, 1)) {
			if ev.Type == EvTurnStarted {
				turns = append(turns, ev.Seq)
			}
		}
		if err := a.svc.Unsubscribe(bg, chat, s); err != nil {
			t.Fatal(err)
		}
	}
	send("1", `/tool write_file {"path":"notes.txt","content":"first\n"}`)
	send("2", `/tool write_file {"path":"notes.txt","content":"second, longer\n"}`)
	send("3", `/tool write_file {"path":"docs/new.txt","content":"made on A\n"}`)
	send("4", `/tool edit_file {"path":"notes.txt","old":"second","new":"third"}`)
	if len(turns) != 4 || turns[0] >= turns[1] {
		t.Fatalf("turns %v", turns)
	}
	onA, err := a.svc.Command(bg, chat, "/changes", Origin{})
	if err != nil || !strings.Contains(onA, "notes.txt") || !strings.Contains(onA, "docs/new.txt") {
		t.Fatalf("/changes on A %q %v", onA, err)
	}

	move := func(from, to *env) {
		t.Helper()
		from.svc.Disown(chat)
		if err := to.svc.Adopt(bg, chat, &switchFence{}, log.claim(chat)); err != nil {
			t.Fatal(err)
		}
	}
	move(a, b)
	onB, err := b.svc.Command(bg, chat, "/changes", Origin{})
	if err != nil || onB != onA {
		t.Fatalf("/changes on B after it adopted the chat:\n%s (%v)\nwant, as on A:\n%s", onB, err, onA)
	}
	if d, w := ledgerDump(t, b.db, chat), ledgerDump(t, a.db, chat); d != w {
		t.Fatalf("B's ledger:\n%s\nA's:\n%s", d, w)
	}
	// Back to before the second turn, on B: notes.txt as the first turn
	// left it, the file the third turn made gone.
	out, err := b.svc.Command(bg, chat, "/rewind "+uintText(turns[1]), Origin{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(a.workspace, "notes.txt")); string(got) != "first\n" {
		t.Fatalf("notes.txt after the rewind on B: %q (%s)", got, out)
	}
	if _, err := os.Stat(filepath.Join(a.workspace, "docs", "new.txt")); !os.IsNotExist(err) {
		t.Fatalf("docs/new.txt after the rewind on B: %v (%s)", err, out)
	}
	left, err := b.svc.Command(bg, chat, "/changes", Origin{})
	if err != nil || strings.Contains(left, "docs/new.txt") || !strings.Contains(left, "notes.txt") {
		t.Fatalf("/changes on B after the rewind %q %v", left, err)
	}

	// A follows the chat again: the rewind's forgetting comes with it.
	move(b, a)
	if again, err := a.svc.Command(bg, chat, "/changes", Origin{}); err != nil || again != left {
		t.Fatalf("/changes on A after the rewind on B:\n%s (%v)\nwant:\n%s", again, err, left)
	}
	if d, w := ledgerDump(t, a.db, chat), ledgerDump(t, b.db, chat); d != w {
		t.Fatalf("A's ledger:\n%s\nB's:\n%s", d, w)
	}
	// A change A makes now goes after every change B's ledger holds.
	send("5", `/tool write_file {"path":"notes.txt","content":"fifth\n"}`)
	move(a, b)
	if d, w := ledgerDump(t, b.db, chat), ledgerDump(t, a.db, chat); d != w || strings.Count(d, "\n") != 2 {
		t.Fatalf("B's ledger:\n%s\nA's:\n%s", d, w)
	}

	// Deleted and purged on B: A applies the purge and drops the chat's
	// ledger with the rest of it, the bytes it kept included.
	if _, err := b.svc.DeleteChat(bg, chat); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the purge on B", func() bool { _, err := b.svc.Get(bg, chat); return errors.Is(err, ErrNotFound) })
	b.svc.Disown(chat)
	if err := a.svc.Adopt(bg, chat, &switchFence{}, log.claim(chat)); err != nil {
		t.Fatal(err)
	}
	for name, db := range map[string]*bolt.DB{"A": a.db, "B": b.db} {
		if d := ledgerDump(t, db, chat) + ledgerBytes(t, db); d != "" {
			t.Fatalf("%s's ledger after the purge:\n%s", name, d)
		}
	}
}

// ledgerBytes lists the previous bytes db's ledger keeps, of any chat.
func ledgerBytes(t *testing.T, db *bolt.DB) string {
	t.Helper()
	var out strings.Builder
	if err := db.View(func(tx *bolt.Tx) error {
		for _, name := range []string{"blobs", "refs"} {
			if err := tx.Bucket([]byte("changes")).Bucket([]byte(name)).ForEach(func(k, v []byte) error {
				fmt.Fprintf(&out, "%s %x %q\n", name, k, v)
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestSingleNodeFlushCarriesNoLedger: without a log the ledger commits its
// own rows as it always did, and no flush the actor commits carries any.
func TestSingleNodeFlushCarriesNoLedger(t *testing.T) {
	e := newToolEnv(t)
	c := e.chat()
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Send(bg, c.ID, `/tool write_file {"path":"a.txt","content":"x"}`, "1", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "turn", has(EvTurnFinished, 1))
	if d := ledgerDump(t, e.db, c.ID); strings.Count(d, "\n") != 1 || !strings.Contains(d, `"path":"a.txt"`) {
		t.Fatalf("ledger %q", d)
	}
}

// ledgerDump is every row bbolt's ledger holds of chat, with the blobs
// and counts they use, one per line.
func ledgerDump(t *testing.T, db *bolt.DB, chat string) string {
	t.Helper()
	var out strings.Builder
	if err := db.View(func(tx *bolt.Tx) error {
		top := tx.Bucket([]byte("changes"))
		b := top.Bucket([]byte("chats")).Bucket([]byte(chat))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var e struct {
				Blob []byte `json:"blob"`
			}
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			fmt.Fprintf(&out, "%x %s", k, v)
			if e.Blob != nil {
				fmt.Fprintf(&out, " blob %d bytes, refs %x", len(top.Bucket([]byte("blobs")).Get(e.Blob)), top.Bucket([]byte("refs")).Get(e.Blob))
			}
			out.WriteString("\n")
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestFlushLedgerGolden pins the log's bytes of a flush's ledger writes
// (testdata/flush/ledger.json; -update rewrites it): every node
// of a cluster, whatever its version, must read what another wrote. It
// decodes back to the same flush.
func TestFlushLedgerGolden(t *testing.T) {
	f := &Flush{Chat: "c_f", Meta: Chat{ID: "c_f", Seq: 4}, Ledger: &tools.LedgerWrites{
		Put: []tools.LedgerRow{
			{Key: 7, Turn: 3, CallID: "call_1", Path: "docs/a.txt", Status: tools.StatusModified, SizeBefore: 5, SizeAfter: 9,
				Mode: 0o640, Time: time.Unix(1700000000, 0).UTC(), Prior: []byte("\x00old\n")},
			{Key: 8, Turn: 3, CallID: "call_2", Path: "b.txt", Status: tools.StatusCreated, SizeAfter: 2, Time: time.Unix(1700000001, 0).UTC()},
		},
		Forget: []uint64{2, 5},
	}}
	got := append(Marshal(f.Ledger), '\n') // the flush's "ledger" value: its other fields have goldens of their own
	path := filepath.Join("testdata", "flush", "ledger.json")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if string(got) != string(want) {
		t.Fatalf("flush bytes changed\n got %s\nwant %s", got, want)
	}
	back, err := DecodeFlush("c_f", []byte(`{"chat":"c_f","meta":{"id":"c_f","seq":4},"ledger":`+string(want)+`}`))
	if err != nil || fmt.Sprint(back.Ledger) != fmt.Sprint(f.Ledger) {
		t.Fatalf("decoded %+v %v", back.Ledger, err)
	}
}
