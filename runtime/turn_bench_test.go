package runtime

import (
	"context"
	"fmt"
	"testing"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/builtin"
	"github.com/mirror-gateway/mirror/runtime/view"
)

// BenchmarkTurn is one turn of a 40-message conversation against the
// builtin provider: the runtime's own cost per turn (the opening, the view,
// the phases), without the network or the chat's store.
func BenchmarkTurn(b *testing.B) {
	e, err := NewEngine([]*Model{{Name: "m", ProvName: "builtin", Provider: builtin.New(0), Remote: "echo", Window: 128000}},
		map[string][]string{"default": {"m"}}, config.Roles{Chat: "default"}, 4)
	if err != nil {
		b.Fatal(err)
	}
	var hist []provider.Message
	for i := range 40 {
		role := provider.RoleUser
		if i%2 == 1 {
			role = provider.RoleAssistant
		}
		text := fmt.Sprintf("message %d: a sentence of ordinary length about the work at hand", i)
		hist = append(hist, provider.Message{Role: role, Content: text, Tokens: 16})
	}
	// memo: with the chat's view memo, as a chat's turns run (each view
	// then extends the last one).
	for _, c := range []struct {
		name       string
		host, memo bool
	}{{"host=false", false, false}, {"host=true", true, false}, {"host=true/memo", true, true}} {
		host := c.host
		var memo *view.Memo
		if c.memo {
			memo = &view.Memo{}
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				in := TurnInput{Chat: "c", Turn: 1, Chain: "default", History: hist, Picked: len(hist) - 1, ViewMemo: memo}
				if host {
					in.Host = &journal{}
					e.Prepare(&in)
				}
				if _, err := e.Run(context.Background(), in, func(string) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTurnChat is a chat's turns as they come: the rows as a chat
// hands them (its stored runtime context among them), a turn more each
// time (the context the last turn stored, a request, the answer), Prepare
// then Run with the chat's view memo; every 50 turns the chat is back to
// its start, as after a boundary.
func BenchmarkTurnChat(b *testing.B) { benchTurnChat(b, 128000, 10, 100) }

// BenchmarkTurnChatLong is BenchmarkTurnChat for longer chats (100 and
// 1,000 turns before the chat is back to its start): what a turn costs as
// the history grows, which a view extended from the last one keeps flat.
func BenchmarkTurnChatLong(b *testing.B) { benchTurnChat(b, 1000000, 100, 1000) }

// BenchmarkTurnChatGoroutine is BenchmarkTurnChat with each Run on a
// goroutine of its own, as the chats actor starts a turn: what a turn's
// stack costs to grow is in it.
func BenchmarkTurnChatGoroutine(b *testing.B) { benchTurnChatOn(b, true, 128000, 10, 100) }

// benchTurnChat runs BenchmarkTurnChat's chat with a model of window
// tokens, once for each history length (in turns) given.
func benchTurnChat(b *testing.B, window int, histories ...int) {
	benchTurnChatOn(b, false, window, histories...)
}

// benchTurnChatOn is benchTurnChat, each Run on a new goroutine when
// fresh says so.
func benchTurnChatOn(b *testing.B, fresh bool, window int, histories ...int) {
	e, err := NewEngine([]*Model{{Name: "m", ProvName: "builtin", Provider: builtin.New(0), Remote: "echo", Window: window}},
		map[string][]string{"default": {"m"}}, config.Roles{Chat: "default"}, 4)
	if err != nil {
		b.Fatal(err)
	}
	for _, turns := range histories {
		b.Run(fmt.Sprintf("turns=%d", turns), func(b *testing.B) {
			var rows []view.Row
			seq := uint64(0)
			add := func(kind view.Kind, text string, secs []view.Section) {
				seq++
				rows = append(rows, view.Row{Seq: seq, Kind: kind, Text: text, Sections: secs, Tokens: 16})
			}
			turn := func(i int) {
				add(view.KindContext, "", []view.Section{{Key: ContextKey, Text: fmt.Sprintf("Context: %d tokens used", 100+i)}})
				add(view.KindUser, fmt.Sprintf("message %d: a sentence of ordinary length about the work at hand", i), nil)
				add(view.KindAssistant, fmt.Sprintf("answer %d: a sentence of ordinary length about the work at hand", i), nil)
			}
			for i := range turns {
				turn(i)
			}
			start := len(rows)
			memo := &view.Memo{}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if i%50 == 0 {
					rows = rows[:start:start]
				}
				turn(turns + i%50)
				in := TurnInput{Chat: "c", Turn: seq, Chain: "default", Rows: rows[:len(rows)-1], Picked: len(rows) - 2, Last: seq - 1,
					Host: &journal{}, ViewMemo: memo}
				e.Prepare(&in)
				run := func() error {
					_, err := e.Run(context.Background(), in, func(string) error { return nil })
					return err
				}
				if fresh {
					done := make(chan error, 1)
					go func() { done <- run() }()
					err = <-done
				} else {
					err = run()
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
