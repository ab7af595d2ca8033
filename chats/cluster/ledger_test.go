package cluster

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
)

// TestLedgerMovesWithTheChat: file changes a chat's tool made on node A
// reach node B through the records stream: once B owns the chat, its
// /changes lists them and its /rewind puts the shared workspace back.
func TestLedgerMovesWithTheChat(t *testing.T) {
	tc := newSvcCluster(t)
	ws := t.TempDir()
	a := newSvcNodeAt(t, tc.nodes[0], tc.nodes[0].Records(), ws)
	b := newSvcNodeAt(t, tc.nodes[1], tc.nodes[1].Records(), ws)
	chat := a.create("ledger", nil)
	bg := ctx(t)
	a.model.open.Store(true)
	for i, text := range []string{`/tool write_file {"path":"a.txt","content":"one"}`, `/tool write_file {"path":"a.txt","content":"two"}`} {
		if _, err := a.svc.Send(bg, chat, text, "k"+strconv.Itoa(i), "", chats.Origin{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "the tool turn's answer on A", func() bool { return a.finished(chat) == i+1 })
	}
	var second string // the second turn's turn.started seq
	for _, f := range a.frames(chat) {
		if seq, ok := strings.CutSuffix(f, " "+chats.EvTurnStarted); ok {
			second = seq
		}
	}
	a.let(chat)
	b.take(chat, nil)
	changes, err := b.svc.Command(bg, chat, "/changes", chats.Origin{})
	if err != nil || strings.Count(changes, "a.txt") != 2 {
		t.Fatalf("/changes on B: %q %v", changes, err)
	}
	out, err := b.svc.Command(bg, chat, "/rewind "+second, chats.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(ws, "a.txt")); err != nil || string(data) != "one" {
		t.Fatalf("a.txt after the rewind on B: %q %v (%s)", data, err, out)
	}
}
