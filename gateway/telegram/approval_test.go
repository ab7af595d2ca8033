package telegram

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tools"
)

// TestApprovalsShowTheChangeAndAllowForChat: an edit_file approval shows
// its diff as code, a shell one its command; "Allow for this chat" runs the
// call and the next call of the tool is not asked about.
func TestApprovalsShowTheChangeAndAllowForChat(t *testing.T) {
	st := testStack(t, time.Millisecond, func(c *config.Config) { c.Tools.Policies.EditFile = config.PolicyAsk })
	if err := os.MkdirAll(st.cfg.Tools.Workspace, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(st.cfg.Tools.Workspace, "plan.md"), []byte("one\ntwo\nthree\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	st.fake.pushText(111, 111, `/tool edit_file {"path":"plan.md","old":"two","new":"TWO"}`)
	st.fake.waitFor("approval", func() bool { return st.fake.hasTextLocked(111, "wants to run edit_file") })
	st.fake.mu.Lock()
	ask := st.fake.msgWithLocked(111, "wants to run edit_file")
	b := buttons(t, ask)
	st.fake.mu.Unlock()
	if !strings.Contains(ask.Raw, `<pre><code class="language-diff">@@ -1,3 +1,3 @@`+"\n one\n-two\n+TWO\n") || !strings.Contains(ask.Text, "plan.md modified (+1 −1)") {
		t.Fatalf("approval raw %q text %q", ask.Raw, ask.Text)
	}
	if len(b) != 3 || !strings.HasPrefix(b[2], "a:") {
		t.Fatalf("buttons %q", b)
	}
	if ans := st.press(t, 111, ask.ID, b[2]); ans != "Allowed for this chat." {
		t.Fatalf("allow for chat: %q", ans)
	}
	st.waitText(t, 111, ask.ID, "edit_file is allowed for this chat from now on")
	st.fake.pushText(111, 111, `/tool edit_file {"path":"plan.md","old":"three","new":"3"}`)
	st.fake.waitFor("second edit", func() bool {
		got, _ := os.ReadFile(filepath.Join(st.cfg.Tools.Workspace, "plan.md"))
		return string(got) == "one\nTWO\n3\n"
	})
	if n := strings.Count(strings.Join(st.fake.texts(111), "\n"), "wants to run edit_file"); n != 1 {
		t.Fatalf("%d edit_file approvals asked, want 1", n)
	}

	st.fake.pushText(111, 111, `/tool shell {"command":"echo <b>hi</b> && ls"}`)
	st.fake.waitFor("shell approval", func() bool { return st.fake.hasTextLocked(111, "wants to run shell") })
	st.fake.mu.Lock()
	sh := st.fake.msgWithLocked(111, "wants to run shell")
	st.fake.mu.Unlock()
	if !strings.Contains(sh.Raw, "<pre>echo &lt;b&gt;hi&lt;/b&gt; &amp;&amp; ls</pre>") {
		t.Fatalf("shell approval %q", sh.Raw)
	}
}

func TestApprovalMessage(t *testing.T) {
	long := strings.Repeat("line\n", 1000)
	tests := []struct {
		name string
		ap   chats.Approval
		html []string // substrings the HTML must hold
	}{
		{"other tool", chats.Approval{Call: provider.ToolCall{Name: "srv__x", Arguments: `{"q":"<a>"}`}},
			[]string{`srv__x {"q":"&lt;a&gt;"}`, "Allow it?"}},
		{"new file", chats.Approval{Call: provider.ToolCall{Name: "write_file"}, Change: &tools.Proposal{Path: "a.md", Status: "created", Content: "# Hi\n", Added: 1}},
			[]string{`a.md created (+1 −0)`, `<code class="language-text"># Hi`}},
		{"a long diff is cut with a count", chats.Approval{Call: provider.ToolCall{Name: "write_file"}, Change: &tools.Proposal{Path: "b", Status: "modified", Diff: long, Omitted: 5}},
			[]string{"more lines: the browser shows them all"}},
		{"hidden", chats.Approval{Call: provider.ToolCall{Name: "write_file"}, Change: &tools.Proposal{Path: ".env", Status: "modified", Added: 1, Removed: 1, Hidden: true}},
			[]string{".env modified (+1 −1)"}},
		{"would fail", chats.Approval{Call: provider.ToolCall{Name: "edit_file"}, Change: &tools.Proposal{Path: "c", Error: `"old" was not found`}},
			[]string{"which would fail now: \"old\"", "was not found"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			html, text := approvalMessage(&tc.ap, true)
			for _, s := range tc.html {
				if !strings.Contains(html, s) {
					t.Errorf("html %q lacks %q", html, s)
				}
			}
			if len([]rune(text)) > 2200 || len([]rune(html)) > 3000 {
				t.Errorf("%d characters: past one compact message", len([]rune(text)))
			}
		})
	}
}
