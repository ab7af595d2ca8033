package runtime

import (
	"context"
	"fmt"
	"testing"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/provider/builtin"
	"github.com/mirror-gateway/mirror/runtime/view"
)

// BenchmarkTurnChatLong is BenchmarkTurnChat for longer chats (100 and
// 1,000 turns before the chat is back to its start): what a turn costs as
// the history grows, which a view extended from the last one keeps flat.
func BenchmarkTurnChatLong(b *testing.B) {
	e, err := NewEngine([]*Model{{Name: "m", ProvName: "builtin", Provider: builtin.New(0), Remote: "echo", Window: 1000000}},
		map[string][]string{"default": {"m"}}, config.Roles{Chat: "default"}, 4)
	if err != nil {
		b.Fatal(err)
	}
	for _, turns := range []int{100, 1000} {
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
				if _, err := e.Run(context.Background(), in, func(string) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
