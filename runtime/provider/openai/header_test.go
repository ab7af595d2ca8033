package openai

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// TestHeadersBuiltOnce: the headers a client builds once and every
// request shares arrive with each of many requests, sent at once, and
// nothing sending them writes to them.
func TestHeadersBuiltOnce(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	})
	c := f.client(testKey)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if _, err := c.Stream(context.Background(), hello(), func(provider.Delta) error { return nil }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	reqs := f.requests()
	if len(reqs) != 16 {
		t.Fatalf("%d requests", len(reqs))
	}
	for i, r := range reqs {
		for h, v := range map[string]string{"Authorization": "Bearer " + testKey, "Content-Type": "application/json", "Accept": "text/event-stream"} {
			if got := r.Header.Values(h); len(got) != 1 || got[0] != v {
				t.Errorf("request %d: header %s = %q, want %q", i, h, got, v)
			}
		}
	}
	if len(c.header) != 1 || len(c.header["Authorization"]) != 1 || c.header.Get("Authorization") != "Bearer "+testKey {
		t.Errorf("the client's headers became %q", c.header)
	}
}
