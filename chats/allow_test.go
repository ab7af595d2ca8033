package chats

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tools"
)

// An edit_file approval carries the diff the edit would make, a write_file
// of a new file the file's head, and a shell approval none.
func TestFileApprovalsCarryTheirChange(t *testing.T) {
	tests := []struct {
		name, call string
		check      func(t *testing.T, c *tools.Proposal)
	}{
		{"edit_file", `/tool edit_file {"path":"plan.md","old":"two","new":"TWO"}`, func(t *testing.T, c *tools.Proposal) {
			if c == nil || c.Diff != "@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n" {
				t.Fatalf("change %+v", c)
			}
		}},
		{"write_file", `/tool write_file {"path":"new.md","content":"fresh\n"}`, func(t *testing.T, c *tools.Proposal) {
			if c == nil || c.Status != tools.StatusCreated || c.Content != "fresh\n" {
				t.Fatalf("change %+v", c)
			}
		}},
		{"shell", `/tool shell {"command":"echo hi"}`, func(t *testing.T, c *tools.Proposal) {
			if c != nil {
				t.Fatalf("change %+v", c)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := &env{t: t, path: filepath.Join(t.TempDir(), "mirror.db"), tools: true, workspace: filepath.Join(t.TempDir(), "ws"),
				policies: map[string]tools.Policy{"edit_file": tools.Ask, "write_file": tools.Ask}}
			if err := os.MkdirAll(e.workspace, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(e.workspace, "plan.md"), []byte("one\ntwo\nthree\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			e.start()
			t.Cleanup(e.stop)
			c := e.chat()
			s := newSub()
			if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
				t.Fatal(err)
			}
			if _, err := e.svc.Send(bg, c.ID, tc.call, "1", "", Origin{}); err != nil {
				t.Fatal(err)
			}
			ap := approvalOf(t, s, 1)
			tc.check(t, ap.Change)
			// A fresh snapshot and the stored row carry it too.
			for _, ev := range e.durable(c.ID) {
				if p, ok := ev.Payload.(*ApprovalRequested); ok {
					tc.check(t, p.Approval.Change)
				}
			}
			s2 := newSub()
			if err := e.svc.Open(bg, c.ID, nil, s2, ""); err != nil {
				t.Fatal(err)
			}
			sn := s2.snapshot(t)
			if len(sn.Approvals) != 1 {
				t.Fatalf("snapshot approvals %+v", sn.Approvals)
			}
			tc.check(t, sn.Approvals[0].Change)
		})
	}
}

// "Allow for this chat" runs the call, and the next call of the tool is
// not asked about, also after a restart; revoking brings the question back.
func TestAllowForChatAndRevoke(t *testing.T) {
	e := newToolEnv(t)
	c := e.chat()
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	send := func(id string) {
		t.Helper()
		if _, err := e.svc.Send(bg, c.ID, `/tool shell {"command":"echo x >> n.txt"}`, id, "", Origin{}); err != nil {
			t.Fatal(err)
		}
	}
	lines := func() int {
		b, _ := os.ReadFile(filepath.Join(e.workspace, "n.txt"))
		return strings.Count(string(b), "\n")
	}
	send("1")
	ap := approvalOf(t, s, 1)
	if err := e.svc.AllowForChat(bg, ap.ID, Origin{}); err != nil {
		t.Fatal(err)
	}
	evs := s.waitFor(t, "first turn", has(EvTurnFinished, 1))
	var allowed *ToolAllowed
	var resolved *Approval
	for _, ev := range evs {
		switch p := ev.Payload.(type) {
		case *ToolAllowed:
			allowed = p
		case *ApprovalResolved:
			resolved = p.Approval
		}
	}
	if allowed == nil || allowed.Tool != "shell" || !allowed.Allowed || allowed.Approval != ap.ID {
		t.Fatalf("tool.allowed %+v", allowed)
	}
	if resolved == nil || resolved.Allow == nil || !*resolved.Allow || !resolved.ForChat {
		t.Fatalf("approval.resolved %+v", resolved)
	}
	if err := e.svc.AnswerApproval(bg, ap.ID, true, Origin{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a second answer: %v", err)
	}

	e.restart() // the allowance is the chat's, kept
	s = newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	if sn := s.snapshot(t); !slices.Equal(sn.Chat.AllowedTools, []string{"shell"}) {
		t.Fatalf("allowed tools %v", sn.Chat.AllowedTools)
	}
	send("2")
	evs = s.waitFor(t, "second turn", has(EvTurnFinished, 1))
	if n := count(evs, EvApprovalRequested); n != 0 || lines() != 2 {
		t.Fatalf("%d approvals asked, %d runs; want 0 and 2", n, lines())
	}

	ch, err := e.svc.RevokeTool(bg, c.ID, "shell", Origin{})
	if err != nil || len(ch.AllowedTools) != 0 {
		t.Fatalf("revoke: %+v %v", ch.AllowedTools, err)
	}
	send("3")
	ap = approvalOf(t, s, 1)
	if ap.Tool != "shell" || lines() != 2 {
		t.Fatalf("after revoke: approval %+v, %d runs", ap, lines())
	}
	var revoked bool
	for _, ev := range e.durable(c.ID) {
		if p, ok := ev.Payload.(*ToolAllowed); ok && !p.Allowed && p.Tool == "shell" {
			revoked = true
		}
	}
	if !revoked {
		t.Fatal("no tool.allowed row recorded the revoke")
	}
	// Revoking what is not allowed changes nothing.
	before := len(e.durable(c.ID))
	if _, err := e.svc.RevokeTool(bg, c.ID, "shell", Origin{}); err != nil || len(e.durable(c.ID)) != before {
		t.Fatalf("a second revoke: %v, %d rows (was %d)", err, len(e.durable(c.ID)), before)
	}
}

// Regenerate queues the question again, naming the original; both answers
// stay in the record, and a repeated client_id makes no third.
func TestRegenerateKeepsBothAnswers(t *testing.T) {
	e := newToolEnv(t)
	c := e.chat()
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	first, err := e.svc.Send(bg, c.ID, "what is the plan?", "1", "", Origin{})
	if err != nil {
		t.Fatal(err)
	}
	var answer string
	for _, ev := range s.waitFor(t, "first answer", has(EvTurnFinished, 1)) {
		if ev.Type == EvTurnFinished {
			answer = ev.Message().ID
		}
	}
	if _, err := e.svc.Regenerate(bg, c.ID, answer, "r1", Origin{}); !errors.Is(err, ErrBadInput) {
		t.Fatalf("regenerating an answer: %v", err)
	}
	again, err := e.svc.Regenerate(bg, c.ID, first.ID, "r2", Origin{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Regenerates != first.ID || again.Text != first.Text || again.ID == first.ID {
		t.Fatalf("regenerated %+v", again)
	}
	if same, err := e.svc.Regenerate(bg, c.ID, first.ID, "r2", Origin{}); err != nil || same.ID != again.ID {
		t.Fatalf("repeated client_id: %+v %v", same, err)
	}
	evs := s.waitFor(t, "second answer", func(evs []*Event) bool { return count(evs, EvTurnFinished) >= 2 })
	var answers []string
	for _, ev := range evs {
		if ev.Type == EvTurnFinished {
			answers = append(answers, ev.Message().Text)
		}
	}
	if len(answers) < 2 || answers[0] == "" || answers[1] == "" {
		t.Fatalf("answers %q", answers)
	}
	e.restart()
	s = newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	var users, assistants int
	var regen *Message
	for _, m := range s.snapshot(t).Messages {
		switch m.Role {
		case provider.RoleUser:
			users++
			if m.Regenerates != "" {
				regen = &m
			}
		case provider.RoleAssistant:
			assistants++
		}
	}
	if users != 2 || assistants != 2 || regen == nil || regen.Regenerates != first.ID {
		t.Fatalf("transcript: %d user, %d assistant messages, regenerated %+v", users, assistants, regen)
	}
	for _, tc := range []struct{ msg, want string }{{"m999", "not found"}, {"nonsense", "not found"}} {
		if _, err := e.svc.Regenerate(bg, c.ID, tc.msg, "x", Origin{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("regenerate %s: %v", tc.msg, err)
		}
	}
	if _, err := e.svc.Regenerate(bg, c.ID, first.ID, "", Origin{}); !errors.Is(err, ErrBadInput) {
		t.Errorf("no client_id: %v", err)
	}
}

// The answer names the model that wrote it, and one a later model of the
// chain wrote is marked a fallback, in the event and the stored message.
func TestAnswerNamesItsModelAndFallback(t *testing.T) {
	for _, overloaded := range []bool{false, true} {
		e := &env{t: t, path: filepath.Join(t.TempDir(), "mirror.db"), tools: true, workspace: filepath.Join(t.TempDir(), "ws"), overloaded: overloaded}
		e.start()
		c := e.chat()
		s := newSub()
		if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Send(bg, c.ID, "hello", "1", "", Origin{}); err != nil {
			t.Fatal(err)
		}
		var fin *TurnFinished
		for _, ev := range s.waitFor(t, "answer", has(EvTurnFinished, 1)) {
			if ev.Type == EvTurnFinished {
				fin = pay[*TurnFinished](ev)
			}
		}
		if fin.Model != "m" || fin.Fallback != overloaded || fin.Message.Model != "m" || fin.Message.Fallback != overloaded {
			t.Fatalf("overloaded %v: finished %+v, message model %q fallback %v", overloaded, fin, fin.Message.Model, fin.Message.Fallback)
		}
		e.restart()
		s = newSub()
		if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
			t.Fatal(err)
		}
		msgs := s.snapshot(t).Messages
		if last := msgs[len(msgs)-1]; last.Model != "m" || last.Fallback != overloaded {
			t.Fatalf("overloaded %v: stored answer %+v", overloaded, last)
		}
		e.stop()
	}
}
