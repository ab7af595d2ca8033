package telegram

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
)

// TestChatsPages: /chats offers the newest chatsPerPage chats and a "More
// chats" button; each press of it sends the next page, until every chat
// was offered exactly once, newest first.
func TestChatsPages(t *testing.T) {
	st := testStack(t, time.Millisecond, nil)
	var want []string
	for i := range 2*chatsPerPage + 3 {
		c, err := st.svc.Create(context.Background(), fmt.Sprintf("chat %d", i), "", chats.Origin{})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, c.ID)
	}
	slices.Reverse(want)

	// buttons returns the callback data of the message with text sub,
	// once it is there.
	buttons := func(sub string, n int) []string {
		var markup string
		st.fake.waitFor(sub, func() bool {
			k := 0
			for _, m := range st.fake.msgs[111] {
				if strings.Contains(m.Text, sub) {
					if k++; k == n {
						markup = m.Markup
						return true
					}
				}
			}
			return false
		})
		var kb struct {
			Rows [][]struct {
				Data string `json:"callback_data"`
			} `json:"inline_keyboard"`
		}
		if err := json.Unmarshal([]byte(markup), &kb); err != nil {
			t.Fatalf("markup %q: %v", markup, err)
		}
		var out []string
		for _, r := range kb.Rows {
			for _, b := range r {
				out = append(out, b.Data)
			}
		}
		return out
	}
	var got []string
	var sizes []int
	st.fake.pushText(111, 111, "/chats")
	data := buttons("Your chats, most recent first", 1)
	for page := 1; ; page++ {
		n := 0
		more := ""
		for _, d := range data {
			switch {
			case strings.HasPrefix(d, verbSwitch+":"):
				got = append(got, strings.TrimPrefix(d, verbSwitch+":"))
				n++
			case strings.HasPrefix(d, verbMore+":"):
				more = d
			default:
				t.Fatalf("button %q", d)
			}
		}
		sizes = append(sizes, n)
		if more == "" {
			break
		}
		if page > 5 {
			t.Fatal("more pages than chats")
		}
		st.fake.pushCallback(111, 111, 1, more)
		data = buttons("More chats, most recent first", page)
	}
	if !slices.Equal(got, want) || !slices.Equal(sizes, []int{chatsPerPage, chatsPerPage, 3}) {
		t.Fatalf("pages %v offered %q, want %q", sizes, got, want)
	}
}
