package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats/cluster"
	"github.com/mirror-gateway/mirror/runtime/tokens"
)

// TestClusterQuota is test 7: quotas hold across the cluster: a fake
// provider never sees more than the learned quota plus one request; after
// the leader is killed the new leader's window is within 5 % of the old
// one. The fake model reports a per-minute token quota in its rate-limit
// headers; one answer teaches it; then chats on all three nodes send a
// large message each at once, more than the quota lets through in a minute.
func TestClusterQuota(t *testing.T) {
	const quota, perNode = 40000, 6
	c := startE2E(t, e2eOpts{})
	c.llm.mu.Lock()
	c.llm.limit = quota
	c.llm.mu.Unlock()
	st := c.waitReady(e2eWait, 3)
	leader := c.node(st.Leader)

	s := dialNode(t, c.nodes[0])
	chat := s.create("learn")
	s.must(map[string]any{"type": "chat.open", "chat": chat})
	s.must(map[string]any{"type": "message.send", "chat": chat, "text": "m-learn", "client_id": "learn"})
	s.wait("the first answer", e2eWait, answered(chat, "m-learn"))
	waitQuotaRow(t, leader, "the leader learns the quota", func(q quotaRow) bool { return q.Quota.Limit == quota && q.Quota.Active })

	pad := strings.Repeat("The quick brown fox jumps over the lazy dog near the riverbank. ", 300)
	size := tokens.Count(pad)
	type sent struct {
		sock *e2eSock
		chat string
	}
	var all []sent
	for _, nd := range c.nodes {
		sk := dialNode(t, nd)
		for range perNode {
			id := sk.create("blast")
			sk.must(map[string]any{"type": "chat.open", "chat": id})
			all = append(all, sent{sk, id})
		}
	}
	for i, x := range all {
		x.sock.send(map[string]any{"type": "message.send", "chat": x.chat, "text": fmt.Sprintf("m-b%d %s", i, pad), "client_id": "b"})
	}
	// Every message is either sent to the model, or refused a wait past
	// the limit (turn.failed), or waits for the window at the leader
	// (in cluster mode the nodes ask the leader, which does the waiting,
	// so the clients hear no quota.wait: its book counts them instead).
	settled := func() (bool, string) {
		done := 0
		var open []string
		for i, x := range all {
			c.llm.mu.Lock()
			asked := c.llm.asked[fmt.Sprintf("m-b%d", i)] > 0
			c.llm.mu.Unlock()
			if asked || hasType(ofChat(x.sock.snapshot(), x.chat), "turn.failed") {
				done++
			} else {
				open = append(open, fmt.Sprintf("m-b%d", i))
			}
		}
		q := quotaRowOf(t, leader)
		return done+q.Waiting == len(all), fmt.Sprintf("sent or failed %d, waiting at the leader %d, of %d; open %v", done, q.Waiting, len(all), open)
	}
	deadline := time.Now().Add(e2eWait)
	for {
		ok, why := settled()
		if ok {
			t.Logf("settled: %s", why)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the blast never settled: %s%s", why, c.logs())
		}
		time.Sleep(50 * time.Millisecond) // polling clients, the fake and the leader, bounded
	}
	seen := func() (int, int, int) {
		c.llm.mu.Lock()
		defer c.llm.mu.Unlock()
		total, most := 0, 0
		for _, b := range c.llm.bills {
			total += b.tokens
			most = max(most, b.tokens)
		}
		return total, most, len(c.llm.bills)
	}
	total, most, n := seen()
	t.Logf("quota %d, messages of %d tokens: the model saw %d requests, %d tokens (the largest %d) of %d messages", quota, size, n, total, most, len(all)+1)
	if total > quota+most {
		t.Fatalf("the model saw %d tokens in a minute, over the quota %d plus one request (%d)", total, quota, most)
	}
	if n >= len(all)+1 {
		t.Fatalf("every one of %d requests went through: the quota held nothing back", n)
	}

	// Read once no request runs: a running request's estimate becomes its
	// billed amount when it ends, which would move the window between
	// this reading and the kill (seen in CI: 5.4 % apart).
	before := waitQuotaRow(t, leader, "the leader's window, no request running", func(q quotaRow) bool { return q.Usage > 0 && q.Reserved == 0 })
	killed := time.Now()
	c.kill9(leader)
	var survivor *clusterNode
	for _, nd := range c.nodes {
		if nd != leader {
			survivor = nd
			break
		}
	}
	st2 := waitStatus(t, survivor, e2eWait, "a new leader", func(s cluster.Status) bool { return s.Leader != "" && s.Leader != leader.name })
	after := waitQuotaRow(t, c.node(st2.Leader), "the new leader's window", func(q quotaRow) bool { return q.Quota.Limit == quota && q.Usage > 0 })
	t.Logf("window: %d tokens at the old leader %s, %d at the new %s (%v after kill -9)", before.Usage, leader.name, after.Usage, st2.Leader, time.Since(killed).Round(time.Millisecond))
	if d := math.Abs(float64(after.Usage - before.Usage)); d > 0.05*float64(before.Usage) {
		t.Fatalf("the new leader's window holds %d tokens, the old one's %d: more than 5 %% apart", after.Usage, before.Usage)
	}
	if total2, _, n2 := seen(); total2 > quota+most {
		t.Fatalf("after the new leader took the book the model saw %d tokens (%d requests), over %d plus one request", total2, n2, quota)
	}
}

// quotaRow is the row of GET /api/quotas for the fake model.
type quotaRow struct {
	Provider, Model string
	Quota           struct {
		Limit  int
		Active bool
	}
	Usage, Reserved, Budget, Waiting int
}

// quotaRowOf is the fake model's row of nd's GET /api/quotas (zero when
// there is none yet).
func quotaRowOf(t *testing.T, nd *clusterNode) quotaRow {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+nd.p.addr+"/api/quotas", nil)
	req.Header.Set("Authorization", "Bearer "+e2eToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return quotaRow{}
	}
	defer resp.Body.Close()
	var body struct{ Quotas []quotaRow }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	for _, q := range body.Quotas {
		if q.Provider == "fake" && q.Model == "fake-model" {
			return q
		}
	}
	return quotaRow{}
}

// waitQuotaRow polls nd's GET /api/quotas until the fake model's row
// satisfies ok, within e2eWait.
func waitQuotaRow(t *testing.T, nd *clusterNode, what string, ok func(quotaRow) bool) quotaRow {
	t.Helper()
	deadline := time.Now().Add(e2eWait)
	for {
		q := quotaRowOf(t, nd)
		if ok(q) {
			return q
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s: not within %v; last row %+v", nd.name, what, e2eWait, q)
		}
		time.Sleep(100 * time.Millisecond) // polling a route, bounded
	}
}
