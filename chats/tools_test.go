package chats

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// approvalOf waits for the chat's next approval.requested.
func approvalOf(t *testing.T, s *sub, n int) *Approval {
	t.Helper()
	evs := s.waitFor(t, "approval.requested", has(EvApprovalRequested, n))
	var last *Approval
	for _, ev := range evs {
		if ev.Type == EvApprovalRequested {
			last = pay[*ApprovalRequested](ev).Approval
		}
	}
	return last
}

func TestRedirectIsReadAtTheToolBoundary(t *testing.T) {
	e := newToolEnv(t)
	c := e.chat()
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Send(bg, c.ID, `/tool shell {"command":"echo hi"}`, "1", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	ap := approvalOf(t, s, 1) // the turn waits inside its tool call
	red, err := e.svc.Send(bg, c.ID, "use the other file instead", "2", ModeRedirect, Origin{})
	if err != nil {
		t.Fatal(err)
	}
	queued, err := e.svc.Send(bg, c.ID, "and afterwards, a summary", "3", ModeQueue, Origin{})
	if err != nil {
		t.Fatal(err)
	}
	// Still pending: editable.
	if _, err := e.svc.Edit(bg, c.ID, red.ID, "use the other file, please", Origin{}); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.AnswerApproval(bg, ap.ID, true, Origin{}); err != nil {
		t.Fatal(err)
	}
	evs := s.waitFor(t, "first turn finished", has(EvTurnFinished, 1))
	var pickedInTurn []string
	var finTurn string
	for _, ev := range evs {
		if ev.Type == EvMessagePicked && ev.Turn() == ap.Turn {
			pickedInTurn = append(pickedInTurn, ev.Message().Text)
		}
		if ev.Type == EvTurnFinished && finTurn == "" {
			finTurn = ev.Turn()
			if !strings.Contains(pay[*TurnFinished](ev).Reply, "use the other file, please") {
				t.Fatalf("the model did not read the redirect last: %q", pay[*TurnFinished](ev).Reply)
			}
		}
	}
	if len(pickedInTurn) != 2 || pickedInTurn[1] != "use the other file, please" || finTurn != ap.Turn {
		t.Fatalf("picked in the turn: %q", pickedInTurn)
	}
	// Picked: deleting it now says so.
	if err := e.svc.Delete(bg, c.ID, red.ID, Origin{}); !errors.Is(err, ErrInUse) {
		t.Fatalf("delete of a picked redirect: %v", err)
	}
	// The queued message waited for the turn's end, then got its own turn.
	evs = s.waitFor(t, "second turn", has(EvTurnFinished, 2))
	for _, ev := range evs {
		if ev.Type == EvMessagePicked && ev.Message().ID == queued.ID && ev.Turn() == ap.Turn {
			t.Fatal("a queued message was read at the tool boundary")
		}
	}
}

func TestDoubleApprovalRunsTheCallOnce(t *testing.T) {
	e := newToolEnv(t)
	c := e.chat()
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Send(bg, c.ID, `/tool shell {"command":"echo once >> count.txt"}`, "1", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	ap := approvalOf(t, s, 1)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = e.svc.AnswerApproval(bg, ap.ID, true, Origin{}) }()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		} else if !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d answers accepted, want 1", ok)
	}
	s.waitFor(t, "finished", has(EvTurnFinished, 1))
	b, err := os.ReadFile(filepath.Join(e.workspace, "count.txt"))
	if err != nil || string(b) != "once\n" {
		t.Fatalf("the call ran %q (%v)", b, err)
	}
	if n := count(e.durable(c.ID), EvToolCall); n != 1 {
		t.Fatalf("%d tool.call rows", n)
	}
}

func TestDenialIsToldToTheModel(t *testing.T) {
	e := newToolEnv(t)
	c := e.chat()
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Send(bg, c.ID, `/tool shell {"command":"touch nope"}`, "1", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	ap := approvalOf(t, s, 1)
	if err := e.svc.AnswerApproval(bg, ap.ID, false, Origin{}); err != nil {
		t.Fatal(err)
	}
	evs := s.waitFor(t, "finished", has(EvTurnFinished, 1))
	var res *ToolOutcome
	for _, ev := range evs {
		if ev.Type == EvToolResult {
			res = pay[*ToolResult](ev).Result
		}
	}
	if res == nil || !res.IsError || !strings.Contains(res.Content, "denied") {
		t.Fatalf("result %+v", res)
	}
	if _, err := os.Stat(filepath.Join(e.workspace, "nope")); err == nil {
		t.Fatal("a denied call ran")
	}
}

func TestStopCancelsAWaitingApproval(t *testing.T) {
	e := newToolEnv(t)
	c := e.chat()
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Send(bg, c.ID, `/tool shell {"command":"true"}`, "1", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	ap := approvalOf(t, s, 1)
	if err := e.svc.Stop(bg, c.ID, Origin{}); err != nil {
		t.Fatal(err)
	}
	evs := s.waitFor(t, "finished", has(EvTurnFinished, 1))
	var resolved *Approval
	for _, ev := range evs {
		if ev.Type == EvApprovalResolved {
			resolved = pay[*ApprovalResolved](ev).Approval
		}
	}
	if resolved == nil || resolved.ID != ap.ID || resolved.Reason != "stopped" || *resolved.Allow {
		t.Fatalf("resolved %+v", resolved)
	}
	if err := e.svc.AnswerApproval(bg, ap.ID, true, Origin{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("late answer: %v", err)
	}
}

func TestPathEscapesAreRefusedAndRewindRestoresBytes(t *testing.T) {
	e := newToolEnv(t)
	c := e.chat()
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	send := func(k, text string, turns int) {
		t.Helper()
		if _, err := e.svc.Send(bg, c.ID, text, k, "", Origin{}); err != nil {
			t.Fatal(err)
		}
		s.waitFor(t, "turn", has(EvTurnFinished, turns))
	}
	send("1", `/tool write_file {"path":"../outside.txt","content":"x"}`, 1)
	send("2", `/tool write_file {"path":"notes.txt","content":"first\n"}`, 2)
	evs := s.events()
	var escape *ToolOutcome
	var secondTurn uint64
	for _, ev := range evs {
		if ev.Type == EvToolResult && escape == nil {
			escape = pay[*ToolResult](ev).Result
		}
		if ev.Type == EvTurnStarted {
			secondTurn = ev.Seq
		}
	}
	if escape == nil || !escape.IsError {
		t.Fatalf("escape result %+v", escape)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(e.workspace), "outside.txt")); err == nil {
		t.Fatal("a path escaped the workspace")
	}
	send("3", `/tool write_file {"path":"notes.txt","content":"second, longer\n"}`, 3)
	send("4", `/tool edit_file {"path":"notes.txt","old":"second","new":"third"}`, 4)
	got, _ := os.ReadFile(filepath.Join(e.workspace, "notes.txt"))
	if string(got) != "third, longer\n" {
		t.Fatalf("before rewind %q", got)
	}
	changes, err := e.svc.Command(bg, c.ID, "/changes", Origin{})
	if err != nil || !strings.Contains(changes, "notes.txt") || strings.Contains(changes, "third") {
		t.Fatalf("/changes %q %v", changes, err)
	}
	// Back to before the turn that changed "first" into "second".
	out, err := e.svc.Command(bg, c.ID, "/rewind "+uintText(secondTurn+1), Origin{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ = os.ReadFile(filepath.Join(e.workspace, "notes.txt"))
	if string(got) != "first\n" {
		t.Fatalf("after rewind %q (%s)", got, out)
	}
	if n := count(e.durable(c.ID), EvRewind); n != 1 {
		t.Fatalf("%d rewind events", n)
	}
	for _, bad := range []string{"/rewind", "/rewind x", "/frobnicate"} {
		if _, err := e.svc.Command(bg, c.ID, bad, Origin{}); !errors.Is(err, ErrBadInput) {
			t.Fatalf("%s: %v", bad, err)
		}
	}
}

func uintText(n uint64) string { return strconv.FormatUint(n, 10) }

// TestRecoveryAnswerIsHeldUntilTheChatIsBack: a call interrupted by a
// shutdown becomes a recovery; an answer that arrives while its chat cannot
// take it is held (delivered false) and applied when the chat is back.
func TestRecoveryAnswerIsHeldUntilTheChatIsBack(t *testing.T) {
	e := newToolEnv(t)
	c := e.chat()
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Send(bg, c.ID, `/tool shell {"command":"sleep 30"}`, "1", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	ap := approvalOf(t, s, 1)
	if err := e.svc.AnswerApproval(bg, ap.ID, true, Origin{}); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "approved", has(EvApprovalResolved, 1))
	e.restart() // the running call is cut short and left open

	s2 := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s2, ""); err != nil {
		t.Fatal(err)
	}
	s2.mu.Lock()
	snap := s2.got[0].Snapshot
	s2.mu.Unlock()
	if snap == nil || len(snap.Recoveries) != 1 {
		t.Fatalf("snapshot recoveries: %+v", snap)
	}
	rec := snap.Recoveries[0]

	// The chat goes away (shutdown begins); the answer is held.
	ctx, cancel := context.WithTimeout(bg, 2*time.Second)
	e.svc.Close(ctx)
	cancel()
	delivered, err := e.svc.AnswerRecovery(bg, rec.ID, "repeat", Origin{})
	if err != nil || delivered {
		t.Fatalf("answer while away: delivered=%v err=%v", delivered, err)
	}
	e.store.Close()
	e.db.Close()
	e.svc = nil
	e.start()
	if _, err := e.svc.Resume(bg); err != nil {
		t.Fatal(err)
	}
	s3 := newSub()
	if err := e.svc.Open(bg, c.ID, &snap.Seq, s3, ""); err != nil {
		t.Fatal(err)
	}
	// Repeat asks permission again; deny it to end the turn quickly.
	ap2 := approvalOf(t, s3, 1)
	if ap2.Call.ID != rec.Call.ID {
		t.Fatalf("approval for %s, want the recovered call %s", ap2.Call.ID, rec.Call.ID)
	}
	if err := e.svc.AnswerApproval(bg, ap2.ID, false, Origin{}); err != nil {
		t.Fatal(err)
	}
	s3.waitFor(t, "finished", has(EvTurnFinished, 1))
	stored := e.durable(c.ID)
	if n := count(stored, EvToolCall); n != 1 {
		t.Fatalf("%d tool.call rows", n)
	}
	if n := count(stored, EvRecoveryRequested); n != 1 {
		t.Fatalf("%d recovery.requested rows", n)
	}
	var action string
	for _, ev := range stored {
		if ev.Type == EvRecoveryResolved {
			action = pay[*RecoveryResolved](ev).Recovery.Action
		}
	}
	if action != "repeat" {
		t.Fatalf("resolved with %q", action)
	}
}
