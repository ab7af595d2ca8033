package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/mirror-gateway/mirror/chats"
)

// TestChatListPages: chat.list over the socket and GET /api/chats with
// limit and after walk every chat once, newest first, in pages; a bad
// cursor or limit is refused; GET /api/chats without them lists all, as
// before.
func TestChatListPages(t *testing.T) {
	st := newStack(t, nil)
	var want []string
	for i := range 7 {
		c, err := st.svc.Create(context.Background(), fmt.Sprintf("chat %d", i), "", chats.Origin{})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, c.ID)
	}
	slices.Reverse(want)
	ids := func(list []any) (out []string) {
		for _, c := range list {
			out = append(out, c.(map[string]any)["id"].(string))
		}
		return out
	}

	cl := st.connect()
	var got []string
	var sizes []int
	after := ""
	for range 10 {
		f := map[string]any{"type": "chat.list", "limit": 3, "req": "l"}
		if after != "" {
			f["after"] = after
		}
		cl.send(f)
		p := cl.expect("chat.list")
		if p["req"] != "l" || p["total"] != float64(7) {
			t.Fatalf("page %v", p)
		}
		page := ids(p["chats"].([]any))
		got, sizes = append(got, page...), append(sizes, len(page))
		next, _ := p["next"].(string)
		if next == "" {
			break
		}
		after = next
	}
	if !slices.Equal(got, want) || !slices.Equal(sizes, []int{3, 3, 1}) {
		t.Fatalf("socket pages %v gave %q, want %q", sizes, got, want)
	}
	for _, bad := range []map[string]any{{"after": "*"}, {"limit": -1}} {
		bad["type"], bad["req"] = "chat.list", "bad"
		cl.send(bad)
		if e := cl.expect("error"); e["code"] != "bad_frame" || e["req"] != "bad" {
			t.Fatalf("%v answered %v", bad, e)
		}
	}

	get := func(q string) (int, chats.ChatPage) {
		req, _ := http.NewRequest("GET", st.http.URL+"/api/chats"+q, nil)
		req.Header = bearer()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var p chats.ChatPage
		_ = json.NewDecoder(resp.Body).Decode(&p)
		return resp.StatusCode, p
	}
	got, sizes, after = nil, nil, ""
	for range 10 {
		code, p := get("?limit=4&after=" + url.QueryEscape(after))
		if code != 200 || p.Total != 7 {
			t.Fatalf("page: %d %+v", code, p)
		}
		for _, c := range p.Chats {
			got = append(got, c.ID)
		}
		sizes = append(sizes, len(p.Chats))
		if p.Next == "" {
			break
		}
		after = p.Next
	}
	if !slices.Equal(got, want) || !slices.Equal(sizes, []int{4, 3}) {
		t.Fatalf("HTTP pages %v gave %q, want %q", sizes, got, want)
	}
	for _, q := range []string{"?limit=x", "?limit=-2", "?after=*"} {
		if code, _ := get(q); code != http.StatusBadRequest {
			t.Fatalf("%s: %d", q, code)
		}
	}
	if code, p := get(""); code != 200 || len(p.Chats) != 7 || p.Next != "" {
		t.Fatalf("the whole list: %d %+v", code, p)
	}
}
