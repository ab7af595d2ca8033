package chats

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/runtime/tools/pgroup"
	bolt "go.etcd.io/bbolt"
)

// runningShell sends a shell call, allows it, and waits until the command
// runs (it creates marker in the workspace). It returns the approval.
func runningShell(t *testing.T, e *env, chat string, s *sub, command string) *Approval {
	t.Helper()
	if _, err := e.svc.Send(bg, chat, `/tool shell {"command":`+jsonText(command)+`}`, "1", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	ap := approvalOf(t, s, 1)
	if err := e.svc.AnswerApproval(bg, ap.ID, true, Origin{}); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "approved", has(EvApprovalResolved, 1))
	return ap
}

func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// journal returns the chat's journaled tool processes, read from the file.
func (e *env) journal(chat string) map[string]procEntry {
	e.t.Helper()
	var out map[string]procEntry
	err := e.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = journaledProcs(tx, chat)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// recoveryAfter opens the chat on a fresh subscriber and returns its one
// recovery.
func recoveryAfter(t *testing.T, e *env, chat string) Recovery {
	t.Helper()
	s := newSub()
	if err := e.svc.Open(bg, chat, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	snap := s.got[0].Snapshot
	s.mu.Unlock()
	if snap == nil || len(snap.Recoveries) != 1 || len(snap.Approvals) != 0 {
		t.Fatalf("snapshot: %+v", snap)
	}
	return snap.Recoveries[0]
}

// TestAJournaledProcessStillRunningIsStopped: the process group of a running
// shell call is journaled while it runs; when the gateway comes back and a
// group journaled for an unfinished call still runs, it is stopped before
// anything can repeat the call, and the recovery says so. A group already
// gone is reported as ended. Either way the journal row goes.
func TestAJournaledProcessStillRunningIsStopped(t *testing.T) {
	for _, survived := range []bool{true, false} {
		name := map[bool]string{true: "still running", false: "ended"}[survived]
		t.Run(name, func(t *testing.T) {
			e := newToolEnv(t)
			c := e.chat()
			s := newSub()
			if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
				t.Fatal(err)
			}
			runningShell(t, e, c.ID, s, "touch started; sleep 300")
			waitFile(t, filepath.Join(e.workspace, "started"))
			j := e.journal(c.ID)
			if len(j) != 1 {
				t.Fatalf("journal while the call runs: %+v", j)
			}
			var call string
			for k := range j {
				call = k
			}

			// The shutdown kills the command and leaves the call open. In
			// the "still running" case a live group takes its place in the
			// journal, as if the command had outlived a crash.
			e.stop()
			want := ProcEnded
			var survivor *pgroup.Cmd
			if survived {
				survivor = pgroup.Command("sleep 300")
				if err := survivor.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { survivor.Kill(); _ = survivor.Wait() })
				rewriteJournal(t, e.path, c.ID, call, procEntry{Group: survivor.Group(), Owner: "a previous process"})
				want = ProcStopped
			}
			e.start()
			if _, err := e.svc.Resume(bg); err != nil {
				t.Fatal(err)
			}
			rec := recoveryAfter(t, e, c.ID)
			if rec.Process != want || rec.Call.ID != call || rec.ProcessNote() == "" {
				t.Fatalf("recovery %+v, want process %q", rec, want)
			}
			if survived {
				done := make(chan struct{})
				go func() { _ = survivor.Wait(); close(done) }()
				select {
				case <-done: // the leader, this test's child, was killed
				case <-waitTimer():
					t.Fatal("the surviving command was not stopped")
				}
			}
			if j := e.journal(c.ID); len(j) != 0 {
				t.Fatalf("journal after the recovery: %+v", j)
			}
		})
	}
}

// TestAFinishedCallLeavesNoJournal: the row goes in the commit that stores
// the result.
func TestAFinishedCallLeavesNoJournal(t *testing.T) {
	e := newToolEnv(t)
	c := e.chat()
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	runningShell(t, e, c.ID, s, "echo hi")
	s.waitFor(t, "finished", has(EvTurnFinished, 1))
	if j := e.journal(c.ID); len(j) != 0 {
		t.Fatalf("journal after the result: %+v", j)
	}
}

// TestAPendingApprovalIsAskedAgainAfterRestart: a call that waited for the
// person's answer when the gateway stopped never started. After the restart
// it is the same question, still answerable (by the same id, so an old card
// or button works), not a recovery of a call "running when the gateway
// died"; allowed, it runs once.
func TestAPendingApprovalIsAskedAgainAfterRestart(t *testing.T) {
	e := newToolEnv(t)
	c := e.chat()
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Send(bg, c.ID, `/tool shell {"command":"echo once >> ran"}`, "1", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	ap := approvalOf(t, s, 1)
	e.restart()
	if _, err := e.svc.Resume(bg); err != nil {
		t.Fatal(err)
	}
	s2 := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s2, ""); err != nil {
		t.Fatal(err)
	}
	var again *Approval
	for again == nil {
		s2.mu.Lock()
		if sn := s2.got[0].Snapshot; sn != nil && len(sn.Approvals) == 1 {
			again = &sn.Approvals[0]
		}
		s2.mu.Unlock()
		if again == nil {
			again = approvalOf(t, s2, 1)
		}
	}
	if again.ID != ap.ID || again.Call.ID != ap.Call.ID {
		t.Fatalf("asked again as %+v, want approval %s of call %s", again, ap.ID, ap.Call.ID)
	}
	if err := e.svc.AnswerApproval(bg, ap.ID, true, Origin{}); err != nil {
		t.Fatal(err)
	}
	s2.waitFor(t, "finished", has(EvTurnFinished, 1))
	stored := e.durable(c.ID)
	if n := count(stored, EvRecoveryRequested); n != 0 {
		t.Fatalf("%d recovery.requested rows for a call that never started", n)
	}
	if n := count(stored, EvToolCall); n != 1 {
		t.Fatalf("%d tool.call rows", n)
	}
	for _, ev := range stored {
		if r := pay[*ApprovalResolved](ev); r != nil && (r.Approval.Allow == nil || !*r.Approval.Allow) {
			t.Fatalf("the approval was resolved without the person: %+v", r.Approval)
		}
	}
	b, err := os.ReadFile(filepath.Join(e.workspace, "ran"))
	if err != nil || string(b) != "once\n" {
		t.Fatalf("the call ran %q (%v)", b, err)
	}
}

// rewriteJournal puts entry in the journal of the database at path, closed.
func rewriteJournal(t *testing.T, path, chat, call string, entry procEntry) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	v, _ := json.Marshal(entry)
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := subBucket(tx, bucketProcs, chat, true)
		if err != nil {
			return err
		}
		return b.Put([]byte(call), v)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitFile waits, bounded, until path exists: a command has reached it.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(5 * time.Millisecond) // polling a file a process writes, bounded
	}
}

func waitTimer() <-chan time.Time { return time.After(wait) }
