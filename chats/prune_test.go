package chats

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config/datadir"
	"github.com/mirror-gateway/mirror/runtime/boundary"
	bolt "go.etcd.io/bbolt"
)

// pruneEnv is a tool env whose chats keep their handoff folders in a data
// dir, with two chats that ran a turn writing a file (so each has a
// record, a file-change ledger and data_dir/workstreams/<chat>/handoff.md)
// and a third that asks.
func pruneEnv(t *testing.T) (e *env, old, recent, asking Chat) {
	t.Helper()
	data, err := datadir.Prepare(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	e = &env{t: t, path: filepath.Join(t.TempDir(), "mirror.db"), tools: true, workspace: filepath.Join(t.TempDir(), "ws"), dataDir: data}
	e.start()
	t.Cleanup(e.stop)
	old, recent, asking = e.chat(), e.chat(), e.chat()
	for i, c := range []Chat{old, recent} {
		s := newSub()
		if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Send(bg, c.ID, fmt.Sprintf(`/tool write_file {"path":"notes%d.txt","content":"first\n"}`, i), "1", "", Origin{}); err != nil {
			t.Fatal(err)
		}
		s.waitFor(t, "turn", has(EvTurnFinished, 1))
		if _, err := boundary.ReadHandoff(data, c.ID); err != nil {
			t.Fatalf("the turn left no handoff file: %v", err)
		}
		if ch, err := e.ledger.Changes(c.ID); err != nil || len(ch) == 0 {
			t.Fatalf("the turn left no ledger entry: %v %v", ch, err)
		}
	}
	return e, old, recent, asking
}

// age makes a stored chat look inactive for 40 days.
func (e *env) age(id string) {
	e.t.Helper()
	err := e.db.Update(func(tx *bolt.Tx) error {
		c, _, err := loadChat(tx, id)
		if err != nil {
			return err
		}
		c.UpdatedAt = time.Now().Add(-40 * 24 * time.Hour)
		v, _ := json.Marshal(c)
		return tx.Bucket(bucketChats).Put([]byte(id), v)
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// /prune-sessions removes everything of a pruned chat, its handoff folder
// included, and the folders an earlier prune left behind; it keeps the
// active and the recent chats whole, and its report names categories,
// never a path.
func TestPruneRemovesAllOfAChat(t *testing.T) {
	e, old, recent, asking := pruneEnv(t)
	ws := filepath.Join(e.dataDir, boundary.WorkstreamsDir)
	// A folder an earlier prune left behind: its chat is gone.
	if err := boundary.WriteHandoff(e.dataDir, "c_0123456789abcdef", "# Handoff\nold\n"); err != nil {
		t.Fatal(err)
	}
	e.restart() // the chats must not be in memory for their rows to go
	e.age(old.ID)
	e.age(asking.ID)
	out, err := e.svc.Command(bg, asking.ID, "/prune-sessions", Origin{})
	if err != nil {
		t.Fatal(err)
	}
	want := "Pruned chats inactive for more than 30 days: 1 removed, 1 skipped as active, 1 leftover handoff folders of deleted chats removed."
	if out != want {
		t.Fatalf("report %q, want %q", out, want)
	}
	for id, kept := range map[string]bool{old.ID: false, "c_0123456789abcdef": false, recent.ID: true} {
		_, err := os.Lstat(filepath.Join(ws, id))
		if kept != (err == nil) {
			t.Fatalf("handoff folder of %s: %v; want kept %v", id, err, kept)
		}
	}
	if ch, err := e.ledger.Changes(old.ID); err != nil || len(ch) != 0 {
		t.Fatalf("pruned chat kept its ledger: %v %v", ch, err)
	}
	if ch, _ := e.ledger.Changes(recent.ID); len(ch) == 0 {
		t.Fatal("the recent chat lost its ledger")
	}
	err = e.db.View(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketChats, bucketRecords, bucketPending, bucketClientIDs, bucketOutputs, bucketArchive} {
			p := tx.Bucket(b)
			if p == nil {
				continue
			}
			if p.Get([]byte(old.ID)) != nil || p.Bucket([]byte(old.ID)) != nil {
				return fmt.Errorf("bucket %s still holds the pruned chat", b)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if evs := e.durable(recent.ID); len(evs) == 0 {
		t.Fatal("the recent chat lost its record")
	}
}

// A link where the workstreams folder should be is never followed: the
// chats' rows go, their folders are counted as left alone, and what the
// link points at is untouched.
func TestPruneLeavesALinkedWorkstreamsAlone(t *testing.T) {
	e, old, _, asking := pruneEnv(t)
	ws := filepath.Join(e.dataDir, boundary.WorkstreamsDir)
	elsewhere := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.Rename(ws, elsewhere); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, ws); err != nil {
		t.Fatal(err)
	}
	e.restart()
	e.age(old.ID)
	out, err := e.svc.Command(bg, asking.ID, "/prune-sessions", Origin{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "0 removed") || !strings.Contains(out, "1 left alone as unsafe") || !strings.Contains(out, "not removed (unsafe)") || strings.Contains(out, e.dataDir) {
		t.Fatalf("report %q", out)
	}
	if _, err := os.Stat(filepath.Join(elsewhere, old.ID, boundary.HandoffName)); err != nil {
		t.Fatalf("the link was followed: %v", err)
	}
	if _, err := e.svc.Get(bg, old.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the pruned chat's rows stayed: %v", err)
	}
}

// Each failure lands in its bounded category, however it is wrapped.
func TestPruneReportCategories(t *testing.T) {
	perm := &fs.PathError{Op: "unlinkat", Path: "/data/workstreams/c_1/handoff.md", Err: syscall.EACCES}
	tests := []struct {
		name string
		errs []error
		want string
	}{
		{"all removed", []error{nil, nil}, "2 removed."},
		{"permission", []error{fmt.Errorf("remove: %w", perm)}, "0 removed, 1 permission denied."},
		{"unsafe", []error{&datadir.UnsafeError{Kind: "data dir", Path: "/data/workstreams", Problem: "is a symlink"}}, "0 removed, 1 left alone as unsafe (a link or foreign file in the way)."},
		{"gone", []error{fs.ErrNotExist}, "0 removed, 1 not found."},
		{"other", []error{errors.New("disk on fire"), nil}, "1 removed, 1 failed."},
	}
	for _, tt := range tests {
		r := PruneReport{Days: 30}
		for _, err := range tt.errs {
			r.count(err)
		}
		got := r.String()
		if !strings.HasSuffix(got, tt.want) || strings.Contains(got, "/data") || strings.Contains(got, "fire") {
			t.Errorf("%s: %q, want it to end %q and name no path or error", tt.name, got, tt.want)
		}
	}
}
