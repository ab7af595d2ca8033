package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
)

// TestApprovalFramesOverTheSocket: an edit_file approval carries its diff;
// approval.answer with for_chat allows the call and the tool for the chat
// (tool.allowed, then approval.resolved with for_chat), so the next call
// is not asked; tool.revoke brings the question back; message.regenerate
// queues the question again naming the original; and frames that miss a
// field are refused.
func TestApprovalFramesOverTheSocket(t *testing.T) {
	e := newEdge(t, edgeOpts{mutate: func(c *config.Config) { c.Tools.Policies.EditFile = config.PolicyAsk }})
	if err := os.MkdirAll(e.cfg.Tools.Workspace, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.cfg.Tools.Workspace, "plan.md"), []byte("one\ntwo\nthree\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cl := e.connect()
	cl.send(map[string]any{"type": "chat.create", "req": "c"})
	chat := cl.expect("chat.created")["chat"].(map[string]any)["id"].(string)
	cl.send(map[string]any{"type": "chat.open", "chat": chat})
	cl.expect("chat.snapshot")
	n := 0
	send := func(text string) {
		n++
		cl.send(map[string]any{"type": "message.send", "chat": chat, "text": text, "client_id": fmt.Sprint(n)})
	}

	send(`/tool edit_file {"path":"plan.md","old":"two","new":"TWO"}`)
	ap := cl.expect("approval.requested")["approval"].(map[string]any)
	change, _ := ap["change"].(map[string]any)
	if change["diff"] != "@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n" || change["status"] != "modified" {
		t.Fatalf("change %v", change)
	}
	cl.send(map[string]any{"type": "approval.answer", "approval": ap["id"], "allow": false, "for_chat": true, "req": "bad"})
	if m := cl.expect("error"); m["code"] != "bad_frame" || m["req"] != "bad" {
		t.Fatalf("for_chat with allow false: %v", m)
	}
	cl.send(map[string]any{"type": "approval.answer", "approval": ap["id"], "allow": true, "for_chat": true})
	if m := cl.expect("tool.allowed"); m["tool"] != "edit_file" || m["allowed"] != true || m["approval"] != ap["id"] {
		t.Fatalf("tool.allowed %v", m)
	}
	if m := cl.expect("approval.resolved")["approval"].(map[string]any); m["for_chat"] != true || m["allow"] != true {
		t.Fatalf("approval.resolved %v", m)
	}
	cl.expect("turn.finished")

	send(`/tool edit_file {"path":"plan.md","old":"three","new":"3"}`)
	if m := cl.expect2("approval.requested", "tool.result"); m["type"] != "tool.result" {
		t.Fatalf("an allowed tool was asked about: %v", m)
	}
	cl.expect("turn.finished")
	if b, _ := os.ReadFile(filepath.Join(e.cfg.Tools.Workspace, "plan.md")); string(b) != "one\nTWO\n3\n" {
		t.Fatalf("plan.md %q", b)
	}

	cl.send(map[string]any{"type": "tool.revoke", "chat": chat, "tool": "edit_file", "req": "rv"})
	if m := cl.expect("tool.allowed"); m["allowed"] != false || m["tool"] != "edit_file" {
		t.Fatalf("revoke event %v", m)
	}
	if m := cl.expect("tool.revoked"); m["req"] != "rv" || m["allowed_tools"] != nil {
		t.Fatalf("tool.revoked %v", m)
	}
	send(`/tool edit_file {"path":"plan.md","old":"one","new":"1"}`)
	ap = cl.expect("approval.requested")["approval"].(map[string]any)
	cl.send(map[string]any{"type": "approval.answer", "approval": ap["id"], "allow": false})
	cl.expect("turn.finished")

	// Regenerate the first question: a new message naming it.
	first := ""
	cl.send(map[string]any{"type": "chat.open", "chat": chat})
	for _, m := range cl.expect("chat.snapshot")["messages"].([]any) {
		if mm := m.(map[string]any); mm["role"] == "user" && first == "" {
			first = mm["id"].(string)
		}
	}
	cl.send(map[string]any{"type": "message.regenerate", "chat": chat, "message": first, "client_id": "again"})
	acc := cl.expect("message.accepted")["message"].(map[string]any)
	if acc["regenerates"] != first || !strings.Contains(acc["text"].(string), "edit_file") {
		t.Fatalf("regenerated %v", acc)
	}
	for _, tc := range []struct {
		frame map[string]any
		code  string
	}{
		{map[string]any{"type": "message.regenerate", "chat": chat, "message": first}, "bad_frame"},
		{map[string]any{"type": "message.regenerate", "chat": chat, "message": "m99999", "client_id": "x"}, "not_found"},
		{map[string]any{"type": "tool.revoke", "chat": chat}, "bad_frame"},
	} {
		tc.frame["req"] = "t"
		cl.send(tc.frame)
		if m := cl.expect("error"); m["code"] != tc.code {
			t.Errorf("%v: %v, want %s", tc.frame, m, tc.code)
		}
	}
}

// TestAllowForChatIsBoundByTheAnswerersRole: an owner whose role denies
// shell (people.policies) cannot allow it for a chat, though they may
// allow the one call.
func TestAllowForChatIsBoundByTheAnswerersRole(t *testing.T) {
	pols := map[string]map[string]string{"owner": {"shell": "deny"}}
	f := newFolksWith(t, edgeOpts{people: true, chatsOpt: func(o *chats.Options) { o.RolePolicies = pols }})
	owner, _ := f.connectAs(testToken)
	owner.send(map[string]any{"type": "approval.answer", "approval": f.approval, "allow": true, "for_chat": true, "req": "fc"})
	if m := owner.expect("error"); m["code"] != "bad_frame" || !strings.Contains(m["message"].(string), "denied for your role") {
		t.Fatalf("allow for chat past the role: %v", m)
	}
	owner.send(map[string]any{"type": "approval.answer", "approval": f.approval, "allow": true, "req": "one"})
	if m := f.aliceSock.expect("approval.resolved")["approval"].(map[string]any); m["allow"] != true || m["for_chat"] != nil {
		t.Fatalf("resolved %v", m)
	}
	ch, err := f.svc.Get(t.Context(), f.aliceChat.ID)
	if err != nil || len(ch.AllowedTools) != 0 {
		t.Fatalf("allowed tools %v %v", ch.AllowedTools, err)
	}
}
