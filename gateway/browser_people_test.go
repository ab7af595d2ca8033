package gateway

import (
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/mirror-gateway/mirror/chats/people"
	"github.com/mirror-gateway/mirror/config"
)

// TestBrowserRevokedPersonIsSignedOut: bob is signed in in a real browser;
// an owner revokes him; his page is signed out at once (its socket closed
// with 4401), lands on the sign-in form, and the cookie he keeps no longer opens the app.
func TestBrowserRevokedPersonIsSignedOut(t *testing.T) {
	e := newEdge(t, edgeOpts{people: true})
	_, tok, err := e.people.Add("bob", people.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	do(t, ctx, chromedp.Navigate(e.http.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), tok),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS("#chat-list")))
	until(t, ctx, "connected", `document.querySelector('#status').dataset.state === 'connected'`)
	if code, body := (&folks{edge: e}).ask("POST", "/api/people/bob/revoke", testToken, ""); code != http.StatusOK {
		t.Fatalf("revoke: %d %s", code, body)
	}
	// The page navigates to the sign-in form: wait for the form itself
	// (a poll inside the page would die with the navigation).
	do(t, ctx, chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)))
	if path := js[string](t, ctx, `location.pathname`); path != "/login" {
		t.Fatalf("signed out to %s, want /login", path)
	}
	// The cookie the browser keeps no longer opens the app.
	do(t, ctx, chromedp.Navigate(e.http.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)))
	if js[bool](t, ctx, `!!document.querySelector('#chat-list')`) {
		t.Fatal("the app opened with the revoked cookie")
	}
}

// TestBrowserMonitorShowsCostPerPerson: the Monitor's people usage lists
// what each person's requests cost, from the ledger's person key.
func TestBrowserMonitorShowsCostPerPerson(t *testing.T) {
	e := newEdge(t, edgeOpts{people: true, mutate: func(c *config.Config) {
		c.Models[0].Prices = config.Prices{Input: 2, Output: 10}
	}})
	bob, _, err := e.people.Add("bob", people.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.mon.RecordCostBy("c_1", bob.ID, e.cfg.Models[0].Name, 1_000_000, 100_000, 0); err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	login(t, ctx, e.stack)
	do(t, ctx, chromedp.Navigate(e.http.URL+"/monitor"))
	until(t, ctx, "bob's cost", `[...document.querySelectorAll('#usage li')].some(li => li.textContent.includes('bob (member)') && li.textContent.includes('1 requests, $3.0000'))`)
}
