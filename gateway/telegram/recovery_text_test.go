package telegram

import (
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/runtime/provider"
)

// The recovery question says whether the call's process was still running
// when the gateway came back (and was stopped), or had ended.
func TestRecoveryTextSaysWhatBecameOfTheProcess(t *testing.T) {
	call := provider.ToolCall{Name: "shell", Arguments: `{"command":"sleep 300"}`}
	cases := []struct{ process, want string }{
		{chats.ProcStopped, "was still running when the gateway came back; it was stopped"},
		{chats.ProcEnded, "was no longer running when the gateway came back"},
		{"", "was running. Repeat it, or skip it?"},
	}
	for _, tc := range cases {
		got := recoveryText(&chats.Recovery{Call: call, Process: tc.process})
		if !strings.Contains(got, tc.want) || !strings.HasSuffix(got, "Repeat it, or skip it?") {
			t.Errorf("process %q: %q", tc.process, got)
		}
	}
}
