package telegram

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/tools"
	"github.com/mirror-gateway/mirror/runtime/tools/mcp"
	"github.com/mirror-gateway/mirror/runtime/tools/mcp/mcptest"
)

// TestMCPToolInTelegram: an MCP tool (a real server on the same SDK, over
// loopback HTTP) asks for approval with the same buttons as a built-in;
// allowed, its progress shows as the reply's status line, and /stop
// cancels the call on the server.
func TestMCPToolInTelegram(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	ts := httptest.NewServer(mcptest.Handler(t.TempDir(), "", cancelled))
	t.Cleanup(ts.Close)
	m, err := mcp.New(mcp.Options{Servers: []config.MCPServer{{Name: "srv", URL: ts.URL, Timeout: time.Minute}}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	m.Start(context.Background())
	t.Cleanup(func() { m.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for !slices.ContainsFunc(m.Tools(), func(x tools.External) bool { return x.Name == "srv__slow" }) {
		if time.Now().After(deadline) {
			t.Fatal("the MCP tools never came")
		}
		time.Sleep(2 * time.Millisecond) // polling a condition, bounded
	}
	st := newStackWith(t, stackOpts{delay: time.Millisecond, sources: []tools.Source{m}})

	st.fake.pushText(111, 111, `/tool srv__slow {}`)
	st.fake.waitFor("approval", func() bool { return st.fake.hasTextLocked(111, "wants to run srv__slow") })
	st.fake.mu.Lock()
	ask := st.fake.msgWithLocked(111, "wants to run srv__slow")
	st.fake.mu.Unlock()
	var kb struct {
		Rows [][]struct {
			Data string `json:"callback_data"`
		} `json:"inline_keyboard"`
	}
	if err := json.Unmarshal([]byte(ask.Markup), &kb); err != nil || !strings.HasPrefix(kb.Rows[0][0].Data, "y:") {
		t.Fatalf("markup %s", ask.Markup)
	}
	st.fake.pushCallback(111, 111, ask.ID, kb.Rows[0][0].Data)
	st.fake.waitFor("the progress status", func() bool { return st.fake.hasTextLocked(111, "⏳ srv__slow: working 1/2") })
	st.fake.pushText(111, 111, "/stop")
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the server never saw the cancellation")
	}
	chat := st.bot.currentChat(111)
	st.fake.waitFor("the chat idle", func() bool {
		st.fake.mu.Unlock()
		defer st.fake.mu.Lock()
		return st.idle(t, chat)
	})
}
