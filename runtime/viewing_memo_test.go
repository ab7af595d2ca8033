package runtime

import (
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/builtin"
	"github.com/mirror-gateway/mirror/runtime/tokens"
	"github.com/mirror-gateway/mirror/runtime/view"
)

// A model's counter is one func value turn after turn (a view memo keeps
// what it built only for the same counter), one per encoding, and counts
// as the encoding does.
func TestCountForIsStable(t *testing.T) {
	id := func(f func(string) int) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&f)) }
	o1, o2, cl := countFor("gpt-4o"), countFor("openai/gpt-4o-mini"), countFor("gpt-4")
	if id(o1) != id(o2) {
		t.Fatal("two models of one encoding got two count funcs")
	}
	if id(o1) == id(cl) {
		t.Fatal("two encodings share a count func")
	}
	const text = "Mirror counts tokens as each model's encoding does: 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 too."
	if o1(text) != tokens.For("gpt-4o").Count(text) || cl(text) != tokens.For("gpt-4").Count(text) {
		t.Fatal("a count func counts otherwise than its encoding")
	}
}

// A chat's views extend the last one from turn to turn through the
// engine (its sizer's counter is the same each turn), and each is the
// view built without the memo.
func TestViewMemoExtendsAcrossTurns(t *testing.T) {
	e, err := NewEngine([]*Model{{Name: "m", ProvName: "builtin", Provider: builtin.New(0), Remote: "echo", Window: 128000}},
		map[string][]string{"default": {"m"}}, config.Roles{Chat: "default"}, 4)
	if err != nil {
		t.Fatal(err)
	}
	memo := &view.Memo{}
	var hist []provider.Message
	for turn := range 6 {
		hist = append(hist, provider.Message{Role: provider.RoleUser, Content: fmt.Sprintf("question %d", turn), Tokens: 3})
		prepare := func(m *view.Memo) *Prepared {
			in := TurnInput{Chat: "c", Turn: uint64(turn + 1), Chain: "default", History: hist, Picked: len(hist) - 1, Host: &journal{}, ViewMemo: m}
			e.Prepare(&in)
			if in.Prepared == nil || in.Prepared.Err != nil {
				t.Fatalf("turn %d: not prepared: %+v", turn, in.Prepared)
			}
			return in.Prepared
		}
		want, got := prepare(nil), prepare(memo)
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("turn %d: the view with the chat's memo differs:\n%+v\n%+v", turn, want.View.Messages, got.View.Messages)
		}
		if !reflect.DeepEqual(got.View.Request[0], systemLead[0]) || &got.View.Request[1] != &got.View.Messages[0] {
			t.Fatalf("turn %d: the view's request is not the prompt before its messages", turn)
		}
		hist = append(hist, provider.Message{Role: provider.RoleAssistant, Content: fmt.Sprintf("answer %d", turn), Tokens: 3})
	}
	if n := memo.Extended(); n < 5 {
		t.Fatalf("%d of 5 later views extended the last one", n)
	}
}

// A request is the view's own array while the turn's conversation runs on
// in it, and a copy once it moved; either way the prompt, then conv, and
// no room for an adapter's append to write into conv's array.
func TestRequestSharesTheView(t *testing.T) {
	arr := make([]provider.Message, 3, 8)
	arr[0] = systemLead[0]
	arr[1] = provider.Message{Role: provider.RoleUser, Content: "hi", Tokens: 1}
	arr[2] = provider.Message{Role: provider.RoleAssistant, Content: "hello", Tokens: 1}
	tr := &turn{v: view.View{Request: arr[:3], Messages: arr[1:3]}}
	tr.conv = append(tr.v.Messages, provider.Message{Role: provider.RoleUser, Content: "more", Tokens: 1})
	check := func(name string, shared bool) {
		t.Helper()
		got := tr.withLead()
		want := append([]provider.Message{systemLead[0]}, tr.conv...)
		if !reflect.DeepEqual(got, want) || cap(got) != len(got) {
			t.Fatalf("%s: request %+v (cap %d), want %+v", name, got, cap(got), want)
		}
		if (&got[0] == &arr[0]) != shared {
			t.Fatalf("%s: shares the view's array %v, want %v", name, !shared, shared)
		}
	}
	check("appended in place", true)
	tr.conv = append(tr.conv[:len(tr.conv):len(tr.conv)], provider.Message{Role: provider.RoleAssistant, Content: "moved", Tokens: 1})
	check("moved", false)
}
