package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/quota"
)

// TestQuotaAcrossNodes is the test 7 at the library level: three
// nodes share one learned quota through the leader's book. A fake
// provider (real HTTP) counts the input tokens it is sent; across all the
// nodes it never sees more than the quota's share (the quota less the
// headroom) plus one request. When the leader's node stops, the next
// leader rebuilds the window from the journal: its usage is within 5 % of
// the old leader's, and it still refuses what the window has no room for.
func TestQuotaAcrossNodes(t *testing.T) {
	tc := newCluster(t, 3)
	books := make([]*QuotaBook, 3)
	for i, nd := range tc.nodes {
		books[i] = nd.Quotas(quota.Options{MaxWait: 300 * time.Millisecond})
	}
	t.Cleanup(func() {
		for _, b := range books {
			if b != nil {
				b.Close()
			}
		}
	})
	leading := func() int {
		at := -1
		for i, b := range books {
			if b != nil && b.Leading() {
				if at >= 0 {
					return -2 // two at once: wait for the old one to resign
				}
				at = i
			}
		}
		return at
	}
	// leader waits until exactly one node keeps the book and says which
	// (leadership may move between two reads, so never index by a fresh
	// leading()).
	leader := func(within time.Duration, what string) int {
		at := -1
		eventually(t, within, what, func() bool { at = leading(); return at >= 0 })
		return at
	}
	first := leader(20*testTTL, "one node keeps the quota book")

	var seen atomic.Int64 // input tokens the provider was sent
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		seen.Add(int64(n))
		fmt.Fprint(w, `{"ok":true}`)
	}))
	defer fake.Close()

	const limit, per = 1000, 100
	key := quota.Key{Provider: "openai", Model: "gpt-test", Fingerprint: "k1"}
	// The provider teaches the quota to one node (its headers); the leader
	// learns it through the bucket.
	books[(first+1)%3].ObserveLimits(key, &provider.RateLimits{InputTokens: &provider.RateWindow{Limit: limit, Remaining: -1}})
	budget := 0
	eventually(t, 20*testTTL, "the leader learned the quota", func() bool {
		l := leading()
		if l < 0 {
			return false
		}
		for _, s := range books[l].Snapshot() {
			if s.Key == key && s.Budget > 0 {
				budget = s.Budget
				return true
			}
		}
		return false
	})

	send := func(nodes []int, each int) (granted, refused int) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, i := range nodes {
			for range each {
				wg.Go(func() {
					c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					rel, err := books[i].Reserve(c, key, per, nil)
					mu.Lock()
					defer mu.Unlock()
					if errors.Is(err, quota.ErrWaitTooLong) {
						refused++
						return
					}
					if err != nil {
						t.Errorf("node %d: %v", i, err)
						return
					}
					granted++
					resp, err := http.Post(fake.URL, "text/plain", strings.NewReader(strconv.Itoa(per)))
					if err != nil {
						t.Error(err)
						rel(quota.KeepEstimate)
						return
					}
					resp.Body.Close()
					rel(quota.Usage{Input: per})
				})
			}
		}
		wg.Wait()
		return granted, refused
	}
	granted, refused := send([]int{0, 1, 2}, 8)
	t.Logf("budget %d of quota %d: %d granted, %d refused; the provider saw %d tokens", budget, limit, granted, refused, seen.Load())
	if got := seen.Load(); got > int64(budget+per) {
		t.Fatalf("the provider saw %d input tokens in one window; the share is %d plus one request of %d", got, budget, per)
	}
	if refused == 0 || granted == 0 {
		t.Fatalf("%d granted, %d refused: the quota was not enforced across nodes", granted, refused)
	}

	old := leader(20*testTTL, "one node keeps the quota book")
	usage := func(i int) int {
		for _, s := range books[i].Snapshot() {
			if s.Key == key {
				return s.Usage
			}
		}
		return 0
	}
	before := usage(old)
	books[old].Close()
	books[old] = nil
	tc.stop(old)
	now := leader(30*testTTL, "another node keeps the quota book")
	after := usage(now)
	t.Logf("window: %d tokens on the old leader, %d on the new", before, after)
	if d := float64(after - before); d > 0.05*float64(before) || -d > 0.05*float64(before) {
		t.Fatalf("the new leader's window holds %d tokens, the old one's %d: more than 5%% apart", after, before)
	}
	var rest []int
	for i, b := range books {
		if b != nil {
			rest = append(rest, i)
		}
	}
	s0 := seen.Load()
	if g, _ := send(rest, 3); g > 1 || seen.Load()-s0 > per {
		t.Fatalf("after the failover %d more grants (the provider saw %d more tokens) in a full window", g, seen.Load()-s0)
	}
}
