package gateway

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// TestBrowserMonitorCluster: the Monitor shows the cluster from GET
// /api/cluster (nodes, the leader, chats per node, a node refusing the
// tools, each node's breakers) at desktop and phone sizes, and hides the
// section on a single gateway.
func TestBrowserMonitorCluster(t *testing.T) {
	const status = `{"node":"n1","ready":true,"leader":"n2","replicas":3,"nodes":[
	 {"name":"n1","http":"127.0.0.1:8081","leader":false,"chats":3,"breakers":[{"id":"provider:openai/gpt","kind":"provider","scope":"openai/gpt","state":"open","reason":"5 failures"}]},
	 {"name":"n2","http":"127.0.0.1:8082","leader":true,"chats":1},
	 {"name":"n3","http":"127.0.0.1:8083","leader":false,"chats":0,"workspace_refused":"the workspace is not shared by every node of the cluster"}]}`
	tests := []struct {
		name    string
		cluster bool
	}{
		{"single gateway", false},
		{"cluster node", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := newStack(t, nil)
			opts := Options{Config: base.srv.opt.Config, Chats: base.svc, Token: testToken}
			if tt.cluster {
				opts.Routes = []Route{ClusterRoute(func(context.Context) (any, error) { return json.RawMessage(status), nil })}
			}
			hs := httptest.NewUnstartedServer(nil)
			opts.Addr = hs.Listener.Addr().String()
			srv := New(opts)
			hs.Config.Handler = srv.Handler()
			hs.Start()
			t.Cleanup(func() {
				srv.Close()
				hs.Close()
			})
			ctx := browser(t)
			do(t, ctx, chromedp.Navigate(hs.URL+"/monitor"),
				chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)),
				chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), testToken),
				chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
				chromedp.WaitVisible(chromedp.CSS("#chat-list")),
				chromedp.Navigate(hs.URL+"/monitor"))
			until(t, ctx, "the page", `document.readyState === 'complete'`)
			if !tt.cluster {
				// The page asked and got 404: the section stays hidden.
				until(t, ctx, "the cluster asked", `performance.getEntriesByType('resource').some(e => e.name.endsWith('/api/cluster'))`)
				if !js[bool](t, ctx, `document.querySelector('#cluster-section').hidden`) {
					t.Fatal("the cluster section shows on a single gateway")
				}
				return
			}
			check := func(size string) {
				t.Helper()
				until(t, ctx, "the cluster section ("+size+")", `!document.querySelector('#cluster-section').hidden && document.querySelectorAll('.cluster-node').length === 3`)
				got := js[string](t, ctx, `[document.querySelector('#cluster-leader').textContent,
				  document.querySelector('.cluster-node.leader').dataset.name,
				  document.querySelector('.cluster-node[data-name="n1"] .chats').textContent,
				  document.querySelector('.cluster-node[data-name="n1"] .node-breaker').dataset.state,
				  document.querySelector('.cluster-node[data-name="n1"] .node-breaker').textContent,
				  !!document.querySelector('.cluster-node[data-name="n2"] .workspace'),
				  document.querySelector('.cluster-node[data-name="n3"] .workspace').textContent].join('|')`)
				want := "n2|n2|3|open|openai/gpt: open (5 failures)|false|the workspace is not shared by every node of the cluster"
				if got != want {
					t.Fatalf("%s: the Monitor shows %q, want %q", size, got, want)
				}
				if js[bool](t, ctx, `document.documentElement.scrollWidth > window.innerWidth`) {
					t.Errorf("%s: the Monitor scrolls sideways", size)
				}
				shot(t, ctx, "monitor-cluster-"+size)
			}
			check("desktop")
			phone := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				_, err := cdp.Call(ctx, tg, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{Width: 390, Height: 844, DeviceScaleFactor: 2, Mobile: true})
				return err
			})
			if err := chromedp.Do(ctx, phone, chromedp.Navigate(hs.URL+"/monitor")); err != nil {
				t.Fatal(err)
			}
			check("phone")
		})
	}
}
