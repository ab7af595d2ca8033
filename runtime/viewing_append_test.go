package runtime

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/builtin"
	"github.com/mirror-gateway/mirror/runtime/view"
)

// A chat with a memo hands its rows append-only, here in one array with
// room after them (the runtime's own rows may land there). Through turns
// that settle a call the record left open (the runtime appends its result
// in that room, where the chat then stores its own row), a pin and a
// transcript (the chat changes them in a new array) and a clear, each
// view the chat's memo prepares is the view built without it.
func TestViewMemoAppendOnlyRows(t *testing.T) {
	e, err := NewEngine([]*Model{{Name: "m", ProvName: "builtin", Provider: builtin.New(0), Remote: "echo", Window: 128000}},
		map[string][]string{"default": {"m"}}, config.Roles{Chat: "default"}, 4)
	if err != nil {
		t.Fatal(err)
	}
	memo := &view.Memo{}
	rows := make([]view.Row, 0, 1024)
	seq := uint64(0)
	add := func(r view.Row) {
		seq++
		r.Seq = seq
		rows = append(rows, r)
	}
	prepared := 0
	for turn := range 14 {
		picked := len(rows)
		switch turn {
		case 5:
			// A step whose call the record left open: the turn settles it
			// before its view, and picks nothing up.
			add(view.Row{Kind: view.KindAssistant, ToolCalls: []provider.ToolCall{{ID: "open1", Name: "shell", Arguments: "{}"}}, Tokens: 5})
			picked = len(rows)
		case 8:
			// A pin, as the chat makes it: in a new array.
			rows = append(make([]view.Row, 0, cap(rows)), rows...)
			rows[1].Pinned = true
		case 10:
			// A transcript put in a new array.
			rows = slices.Clone(rows)
			rows[len(rows)-1].Text += " (heard: hello)"
		case 12:
			add(view.Row{Kind: view.KindClear})
		}
		if picked != len(rows) || turn != 5 {
			picked = len(rows)
			add(view.Row{Kind: view.KindUser, Text: fmt.Sprintf("question %d", turn), Tokens: 3})
		}
		prepare := func(m *view.Memo) TurnInput {
			in := TurnInput{Chat: "c", Turn: seq, Chain: "default", Rows: rows, Picked: picked, Last: seq - 1, Host: &journal{seq: seq},
				ViewMemo: m, Settle: map[string]string{"open1": Skip}}
			e.Prepare(&in)
			return in
		}
		want, got := prepare(nil), prepare(memo)
		if !reflect.DeepEqual(want.Prepared, got.Prepared) {
			t.Fatalf("turn %d: the view with the chat's memo differs:\n%+v\n%+v", turn, want.Prepared, got.Prepared)
		}
		if got.Prepared != nil {
			prepared++
		}
		if _, err := e.Run(context.Background(), got, func(string) error { return nil }); err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		// The chat stores the turn: the settled call's result (its own
		// row, where the runtime's landed) and the answer.
		if turn == 5 {
			add(view.Row{Kind: view.KindTool, ToolCallID: "open1", ToolName: "shell", Text: "skipped, as the chat says", IsError: true, Tokens: 6})
		}
		add(view.Row{Kind: view.KindAssistant, Text: fmt.Sprintf("answer %d", turn), Tokens: 3})
	}
	if prepared < 12 || memo.Extended() < 8 {
		t.Fatalf("%d turns prepared, %d views extended the last", prepared, memo.Extended())
	}
}
