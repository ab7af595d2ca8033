package runtime

import (
	"context"
	"sync"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// conversations is a model that answers "ok" and notes the conversation
// each request names.
type conversations struct {
	mu    sync.Mutex
	names []string
}

func (c *conversations) Stream(_ context.Context, req provider.Request, _ func(provider.Delta) error) (provider.Result, error) {
	c.mu.Lock()
	c.names = append(c.names, req.Conversation)
	c.mu.Unlock()
	return provider.Result{Text: "ok", FinishReason: "stop"}, nil
}

// A turn's request names its chat as the conversation, so that an adapter
// can reuse what it built for the chat's last request.
func TestTurnRequestNamesItsChat(t *testing.T) {
	for _, chat := range []string{"chat-1", "chat-2"} {
		t.Run(chat, func(t *testing.T) {
			p := &conversations{}
			e := piecesEngine(t, p)
			in := TurnInput{Chat: chat, Turn: 1, Chain: "default", History: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}}
			if _, err := e.Run(context.Background(), in, func(string) error { return nil }); err != nil {
				t.Fatal(err)
			}
			if len(p.names) != 1 || p.names[0] != chat {
				t.Fatalf("the requests named %q, want [%q]", p.names, chat)
			}
		})
	}
}
