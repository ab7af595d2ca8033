package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
)

// downloads lets the page download into a temp dir and returns a function
// that waits (bounded) for the next finished download's bytes.
func downloads(t *testing.T, ctx context.Context) func() []byte {
	t.Helper()
	dir := t.TempDir()
	done := make(chan string, 4)
	var once sync.Map
	listen := func(ev any) {
		if p, ok := ev.(*cdpbrowser.EventDownloadProgress); ok && p.State == cdpbrowser.DownloadProgressStateCompleted {
			if _, seen := once.LoadOrStore(p.GUID, true); !seen {
				done <- p.GUID
			}
		}
	}
	// The event comes on the session that allowed downloads.
	for _, l := range []func(context.Context, func(any)) error{chromedp.Listen, chromedp.ListenBrowser} {
		if err := l(ctx, listen); err != nil {
			t.Fatal(err)
		}
	}
	events := true
	allow := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
			Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: dir, EventsEnabled: &events})
		return err
	})
	do(t, ctx, allow)
	return func() []byte {
		t.Helper()
		select {
		case guid := <-done:
			b, err := os.ReadFile(filepath.Join(dir, guid))
			if err != nil {
				t.Fatal(err)
			}
			return b
		case <-time.After(20 * time.Second):
			t.Fatal("no download finished")
			return nil
		}
	}
}

// waitIdle waits, bounded, until no chat of svc works or has a message waiting.
func waitIdle(t *testing.T, svc *chats.Service) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		list, err := svc.List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		busy := 0
		for _, c := range list {
			if c.State != chats.StateIdle || c.Pending > 0 {
				busy++
			}
		}
		if busy == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d chats still busy", busy)
		}
		<-tick.C
	}
}

// TestBrowserManageChats: New chat pressed three times leaves one empty
// chat; a chat is renamed, archived (listed under Archived) and brought
// back, exported as Markdown and JSON (the JSON re-parsed equals the
// record's messages), deleted and undone, then deleted for good.
func TestBrowserManageChats(t *testing.T) {
	st := newStack(t, nil)
	ctx := browser(t)
	next := downloads(t, ctx)
	login(t, ctx, st)

	for range 3 {
		click(t, ctx, "#new-chat")
		until(t, ctx, "chat open", `!!document.querySelector('.chat-item.active')`)
	}
	if n := js[int](t, ctx, `document.querySelectorAll('#chat-list .chat-item').length`); n != 1 {
		t.Fatalf("New chat x3 left %d chats in the list", n)
	}
	if list, _ := st.svc.List(t.Context()); len(list) != 1 {
		t.Fatalf("New chat x3 stored %d chats", len(list))
	}
	chat := js[string](t, ctx, `document.querySelector('.chat-item.active').dataset.chat`)
	typeAndSend(t, ctx, "plans for the **garden** & <shed>")
	until(t, ctx, "answer", `document.querySelectorAll('.msg.assistant:not(.streaming)').length === 1`)
	typeAndSend(t, ctx, "second thought")
	until(t, ctx, "second answer", `document.querySelectorAll('.msg.assistant:not(.streaming)').length === 2`)
	click(t, ctx, "#new-chat")
	until(t, ctx, "a second chat", `document.querySelectorAll('#chat-list .chat-item').length === 2`)
	click(t, ctx, fmt.Sprintf(`.chat-item[data-chat=%q] .chat-link`, chat))
	until(t, ctx, "back", fmt.Sprintf(`document.querySelector('.chat-item.active')?.dataset.chat === %q`, chat))

	menu := func(act string) {
		t.Helper()
		until(t, ctx, "menu button", `!document.querySelector('#chat-menu-btn').hidden`)
		click(t, ctx, "#chat-menu-btn")
		until(t, ctx, "menu open", `!document.querySelector('#chat-menu').hidden`)
		click(t, ctx, fmt.Sprintf(`#chat-menu [data-act=%q]`, act))
	}

	// Rename.
	menu("rename")
	until(t, ctx, "rename dialog", `document.querySelector('#rename-dialog').open`)
	do(t, ctx, chromedp.SetValue(chromedp.CSS("#rename-input"), "Garden plans"))
	click(t, ctx, "#rename-save")
	until(t, ctx, "renamed in the list", fmt.Sprintf(`document.querySelector('.chat-item[data-chat=%q] .chat-name')?.textContent === 'Garden plans'`, chat))
	until(t, ctx, "renamed in the header", `document.querySelector('#chat-title').textContent === 'Garden plans'`)
	shot(t, ctx, "renamed")

	// Archive: gone from the list, under Archived; back with Unarchive.
	menu("archive")
	until(t, ctx, "archived", fmt.Sprintf(`!document.querySelector('#chat-list .chat-item[data-chat=%q]') && !!document.querySelector('#archived-list .archived-item[data-chat=%q]') && !document.querySelector('#archived').hidden`, chat, chat))
	if c, _ := st.svc.Get(t.Context(), chat); !c.Archived {
		t.Fatal("archived is not stored")
	}
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('#archived').open = true`))
	shot(t, ctx, "archived")
	click(t, ctx, fmt.Sprintf(`#archived-list .archived-item[data-chat=%q] .unarchive`, chat))
	until(t, ctx, "unarchived", fmt.Sprintf(`!!document.querySelector('#chat-list .chat-item[data-chat=%q]') && document.querySelector('#archived').hidden`, chat))

	// Export: Markdown and JSON downloads.
	menu("export-md")
	md := string(next())
	if !strings.HasPrefix(md, "# Garden plans\n") || !strings.Contains(md, "plans for the **garden** & <shed>") || !strings.Contains(md, "### Assistant") {
		t.Fatalf("markdown export:\n%s", md)
	}
	menu("export-json")
	var exp Export
	if err := json.Unmarshal(next(), &exp); err != nil {
		t.Fatal(err)
	}
	var record []chats.Message
	if _, err := st.svc.Export(t.Context(), chat, nil, func(m chats.Message) error { record = append(record, m); return nil }); err != nil {
		t.Fatal(err)
	}
	if exp.Chat.ID != chat || exp.Chat.Title != "Garden plans" || len(exp.Messages) != 4 {
		t.Fatalf("json export: %+v", exp)
	}
	assertSameMessages(t, exp.Messages, record)

	// Delete, then undo.
	menu("delete")
	until(t, ctx, "deleted", fmt.Sprintf(`!document.querySelector('.chat-item[data-chat=%q]') && !document.querySelector('#undo-bar').hidden`, chat))
	shot(t, ctx, "undo")
	click(t, ctx, "#undo")
	until(t, ctx, "restored", fmt.Sprintf(`document.querySelector('.chat-item.active')?.dataset.chat === %q && document.querySelector('#undo-bar').hidden`, chat))
	if c, err := st.svc.Get(t.Context(), chat); err != nil || c.DeleteAt != nil {
		t.Fatalf("after undo: %+v %v", c, err)
	}

	// Delete for good: the window passes and the chat is gone.
	menu("delete")
	until(t, ctx, "deleted again", fmt.Sprintf(`!document.querySelector('.chat-item[data-chat=%q]')`, chat))
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond) // the purge has no event: a bounded poll
	defer tick.Stop()
	for {
		_, err := st.svc.Get(t.Context(), chat)
		if errors.Is(err, chats.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the chat was not purged: %v", err)
		}
		<-tick.C
	}
	until(t, ctx, "undo bar gone", `document.querySelector('#undo-bar').hidden`)
	if n := js[int](t, ctx, `document.querySelectorAll('#chat-list .chat-item').length`); n != 1 {
		t.Fatalf("%d chats listed after the delete", n)
	}

	// A phone in dark mode: the menu fits the screen and Escape closes it;
	// the search box is in the sidebar the menu button opens.
	phone := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
			Width: 390, Height: 844, DeviceScaleFactor: 2, Mobile: true}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		return err
	})
	do(t, ctx, phone)
	until(t, ctx, "phone layout", `innerWidth <= 400 && !document.querySelector('#chat-menu-btn').hidden`)
	click(t, ctx, "#chat-menu-btn")
	until(t, ctx, "menu on the screen", `(() => { const m = document.querySelector('#chat-menu'); if (m.hidden) return false;
  const r = m.getBoundingClientRect(); return r.left >= 0 && r.right <= innerWidth && r.bottom <= innerHeight && r.height > 100 })()`)
	shot(t, ctx, "phone-menu")
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.activeElement.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape', bubbles: true}))`))
	until(t, ctx, "Escape closes the menu", `document.querySelector('#chat-menu').hidden && document.activeElement === document.querySelector('#chat-menu-btn')`)
	click(t, ctx, "#menu")
	until(t, ctx, "search box on the phone", `(() => { const r = document.querySelector('#search').getBoundingClientRect(); return r.width > 200 && r.left >= 0 && r.right <= innerWidth })()`)
	shot(t, ctx, "phone-sidebar")
}

// assertSameMessages compares messages by their JSON, the form a client
// reads them in.
func assertSameMessages(t *testing.T, got, want []chats.Message) {
	t.Helper()
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(want)
	if string(a) != string(b) {
		t.Fatalf("messages differ:\n%s\n%s", a, b)
	}
}

// TestBrowserSearchJumpsIn1000Chats: among 1,000 chats, a word said once,
// in the oldest message of a chat longer than a page, is found; its hit is
// highlighted, and picking it opens that chat, pages back and shows the
// message.
func TestBrowserSearchJumpsIn1000Chats(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 1,000 chats")
	}
	st := newStack(t, nil)
	bg := t.Context()
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	ids := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ids {
				c, err := st.svc.Create(bg, fmt.Sprintf("Chat %d", i), "", chats.Origin{})
				if err == nil {
					_, err = st.svc.Send(bg, c.ID, fmt.Sprintf("note %d about apples, pears and the weather", i), "k", "", chats.Origin{})
				}
				if err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range 999 {
		ids <- i
	}
	close(ids)
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	long, err := st.svc.Create(bg, "The long one", "", chats.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.svc.Send(bg, long.ID, "where did the quetzal nest?", "q", "", chats.Origin{}); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, st.svc)
	for b := range 3 { // more than a page of messages after it
		for i := range 80 {
			if _, err := st.svc.Send(bg, long.ID, fmt.Sprintf("filler %d-%d", b, i), fmt.Sprintf("f%d-%d", b, i), "", chats.Origin{}); err != nil {
				t.Fatal(err)
			}
		}
		waitIdle(t, st.svc)
	}
	// A search waits a few seconds for the indexer, then answers from what
	// it has: ask until the seeding is indexed (bounded).
	var hits []chats.SearchHit
	for deadline := time.Now().Add(90 * time.Second); ; {
		hits, err = st.svc.Search(bg, "quetzal", 10)
		if err != nil || len(hits) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || len(hits) == 0 || hits[0].Chat != long.ID {
		t.Fatalf("search: %+v %v", hits, err)
	}
	msg := hits[0].Message

	ctx := browser(t)
	login(t, ctx, st)
	do(t, ctx, chromedp.SetValue(chromedp.CSS("#search"), "quetzal"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#search').dispatchEvent(new Event('input', {bubbles:true}))`))
	until(t, ctx, "results", `document.querySelectorAll('.search-result').length > 0`)
	first := fmt.Sprintf(`.search-result[data-chat=%q][data-message=%q]`, long.ID, msg)
	until(t, ctx, "the hit, highlighted", fmt.Sprintf(`[...document.querySelectorAll('%s .result-snippet mark')].some(m => m.textContent.toLowerCase() === 'quetzal')`, first))
	if !js[bool](t, ctx, `document.querySelector('.chat-nav').hidden`) {
		t.Fatal("the chat list shows under the results")
	}
	shot(t, ctx, "search")
	click(t, ctx, first+" .result-link")
	until(t, ctx, "the chat opened", fmt.Sprintf(`document.querySelector('.chat-item.active')?.dataset.chat === %q`, long.ID))
	until(t, ctx, "the message shown and marked", fmt.Sprintf(`(() => {
  const m = document.querySelector('#messages [data-message=%q]');
  if (!m || !m.classList.contains('search-hit')) return false;
  const r = m.getBoundingClientRect(), s = document.querySelector('#scroller').getBoundingClientRect();
  return r.bottom > s.top && r.top < s.bottom;
})()`, msg))
	if !js[bool](t, ctx, `document.querySelectorAll('#messages .msg').length > 200`) {
		t.Fatal("the jump did not have to page back: the test chat is too short")
	}
	shot(t, ctx, "search-jump")
	// Escape clears the box and brings the list back.
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('#search').dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape', bubbles: true}))`))
	until(t, ctx, "list back", `!document.querySelector('.chat-nav').hidden && document.querySelector('#search-panel').hidden`)
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// TestManageRoutes: the routes' answers to bad input, unknown chats and
// busy ones, and the token they need.
func TestManageRoutes(t *testing.T) {
	model := newHeldModel(t)
	st := newStack(t, func(c *config.Config) {
		c.Providers = append(c.Providers, config.Provider{Name: "fake", Kind: "openai", BaseURL: model.srv.URL + "/v1"})
		c.Models[0].Provider, c.Models[0].Model = "fake", "fake-model"
	})
	idle, err := st.svc.Create(t.Context(), "idle", "", chats.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	busy, err := st.svc.Create(t.Context(), "busy", "", chats.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.svc.Send(t.Context(), busy.ID, "a question", "q", "", chats.Origin{}); err != nil {
		t.Fatal(err)
	}
	model.next(t) // held: the turn runs
	defer func() { model.release <- struct{}{} }()
	for _, tc := range []struct {
		method, path, body string
		auth               bool
		status             int
		has                string
	}{
		{"PATCH", "/api/chats/" + idle.ID, `{"title":"Renamed"}`, false, 401, ""},
		{"PATCH", "/api/chats/" + idle.ID, `{"title":"Renamed"}`, true, 200, `"title":"Renamed"`},
		{"PATCH", "/api/chats/" + idle.ID, `{"archived":true}`, true, 200, `"archived":true`},
		{"PATCH", "/api/chats/" + idle.ID, `{}`, true, 400, "title"},
		{"PATCH", "/api/chats/" + idle.ID, `{"title":"x","color":"red"}`, true, 400, "title"},
		{"PATCH", "/api/chats/" + idle.ID, `{"title":"   "}`, true, 400, "empty"},
		{"PATCH", "/api/chats/c_nope", `{"title":"x"}`, true, 404, "no such chat"},
		{"DELETE", "/api/chats/" + busy.ID, "", true, 409, "stop it"},
		{"DELETE", "/api/chats/c_nope", "", true, 404, ""},
		{"POST", "/api/chats/c_nope/restore", "", true, 404, ""},
		{"GET", "/api/chats/" + idle.ID + "/export?format=pdf", "", true, 400, "markdown or json"},
		{"GET", "/api/chats/c_nope/export?format=json", "", true, 404, ""},
		{"GET", "/api/chats/" + idle.ID + "/export?format=json", "", true, 200, `"messages":[]`},
		{"GET", "/api/search?q=", "", true, 400, "query"},
		{"GET", "/api/search?q=x&limit=0", "", true, 400, "limit"},
		{"GET", "/api/search?q=renamed", "", false, 401, ""},
		{"GET", "/api/search?q=renamed", "", true, 200, `"kind":"title"`},
		{"DELETE", "/api/chats/" + idle.ID, "", true, 200, `"undo_until":"`},
		{"GET", "/api/search?q=renamed", "", true, 200, `"hits":[]`},
		{"POST", "/api/chats/" + idle.ID + "/restore", "", true, 200, `"delete_at":null`},
	} {
		req, _ := http.NewRequest(tc.method, st.http.URL+tc.path, strings.NewReader(tc.body))
		if tc.auth {
			req.Header.Set("Authorization", "Bearer "+testToken)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.has) {
			t.Errorf("%s %s %s: %d %s", tc.method, tc.path, tc.body, resp.StatusCode, b)
		}
	}
}
