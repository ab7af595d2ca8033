package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats/cluster"
)

// pollWatch wraps the fake Bot API of the cluster tests: each node asks it
// under its own path prefix (/NODE/bot…), and it records which nodes poll
// (getUpdates) and whether two ever poll at once, which Telegram itself
// refuses (409 Conflict) and which would hand an update to two nodes.
type pollWatch struct {
	f *tgFake

	mu      sync.Mutex
	active  map[string]int
	polled  map[string]int // getUpdates asked, by node
	overlap []string       // "n1+n2" each time two nodes polled at once
	// sentBy are the nodes that sent or edited a message, by its text
	// (sendMessage and editMessageText).
	sentBy map[string][]string
}

// newClusterTGFake is a tgFake whose requests pass through a pollWatch.
func newClusterTGFake(t *testing.T) (*tgFake, *pollWatch) {
	f := &tgFake{changed: make(chan struct{}), nextMsg: 500}
	pw := &pollWatch{f: f, active: map[string]int{}, polled: map[string]int{}, sentBy: map[string][]string{}}
	f.srv = httptest.NewServer(pw)
	t.Cleanup(f.srv.Close)
	return f, pw
}

func (pw *pollWatch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	node, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if strings.HasSuffix(r.URL.Path, "/getUpdates") {
		pw.mu.Lock()
		pw.polled[node]++
		for other, k := range pw.active {
			if k > 0 && other != node {
				pw.overlap = append(pw.overlap, other+"+"+node)
			}
		}
		pw.active[node]++
		pw.mu.Unlock()
		defer func() {
			pw.mu.Lock()
			pw.active[node]--
			pw.mu.Unlock()
		}()
	}
	if m := path.Base(r.URL.Path); m == "sendMessage" || m == "editMessageText" {
		_ = r.ParseForm() // kept in r.Form for the fake
		pw.mu.Lock()
		pw.sentBy[r.Form.Get("text")] = append(pw.sentBy[r.Form.Get("text")], node)
		pw.mu.Unlock()
	}
	r.URL.Path = "/" + rest
	pw.f.serve(w, r)
}

// senders are the nodes that sent or edited a text containing sub.
func (pw *pollWatch) senders(sub string) []string {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	var out []string
	for text, nodes := range pw.sentBy {
		if strings.Contains(text, sub) {
			out = append(out, nodes...)
		}
	}
	return out
}

// pollers are the nodes that asked getUpdates so far, and the overlaps.
func (pw *pollWatch) pollers() (map[string]int, []string) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	p := map[string]int{}
	for k, v := range pw.polled {
		p[k] = v
	}
	return p, append([]string(nil), pw.overlap...)
}

// TestClusterTelegramPoller is test 8: exactly one Telegram poller at any
// time; after a kill no update is lost or handled twice and each final text
// lands once. Three nodes have Telegram on, with the same bot; the leader
// polls. It is killed with SIGKILL while a reply streams into Telegram and
// while an update waits at Telegram; a new leader polls from the stored
// offset and every update is stored and answered exactly once. The reply
// the kill interrupted is finished in Telegram by the new leader (its
// copy of the bot's state, replicated through the cluster, has the
// follower that streamed it), its final text in one message, and every
// message, before the kill and after, goes to the same Mirror chat.
func TestClusterTelegramPoller(t *testing.T) {
	tg, pw := newClusterTGFake(t)
	c := startE2E(t, e2eOpts{
		env: []string{tgToken},
		extra: func(node string) string {
			return fmt.Sprintf("telegram:\n  enabled: true\n  api_endpoint: %s/%s/bot%%s/%%s\n  allowed_users: [111]\n", tg.srv.URL, node)
		},
	})
	st := c.waitReady(e2eWait, 3)
	finals := func(marker string) int { return len(tg.withLocked("echo " + marker)) }
	for i := range 3 {
		m := fmt.Sprintf("m-t%d", i)
		tg.push(m)
		tg.waitFor(t, m+" answered", func() bool { return finals(m) == 1 })
	}
	polled, overlap := pw.pollers()
	if len(polled) != 1 || polled[st.Leader] == 0 || len(overlap) > 0 {
		t.Fatalf("getUpdates by node %v (leader %s), overlapping polls %v; want the leader only", polled, st.Leader, overlap)
	}

	// A reply streams into Telegram (its first text sent, the rest held
	// at the model) when the leader dies; another update waits at Telegram.
	c.llm.setGate(false)
	defer c.llm.setGate(true)
	tg.push("m-t3 HOLD")
	tg.waitFor(t, "the first text of m-t3's reply", func() bool { return len(tg.withLocked("partial m-t3")) == 1 })
	leader := c.node(st.Leader)
	killed := time.Now()
	c.kill9(leader)
	tg.push("m-t4")
	c.llm.setGate(true)
	var survivor *clusterNode
	for _, nd := range c.nodes {
		if nd != leader {
			survivor = nd
			break
		}
	}
	st2 := waitStatus(t, survivor, e2eWait, "a new leader", func(s cluster.Status) bool { return s.Leader != "" && s.Leader != leader.name })
	// The update that waited at Telegram through the kill is polled by
	// the new leader and answered.
	if !tgWithin(tg, e2eWait, func() bool { return finals("m-t4") >= 1 }) {
		c.llm.mu.Lock()
		asked := fmt.Sprintf("asked m-t4 %d, answered m-t4 %d", c.llm.asked["m-t4"], c.llm.answered["m-t4"])
		c.llm.mu.Unlock()
		t.Fatalf("m-t4 not answered within %v of the kill of %s; the model %s%s", e2eWait, leader.name, asked, c.logs())
	}
	t.Logf("new leader %s; m-t4 answered %v after kill -9 of %s", st2.Leader, time.Since(killed).Round(time.Millisecond), leader.name)
	// One more, so a late duplicate of anything before it would be seen.
	tg.push("m-t5")
	tg.waitFor(t, "m-t5 answered", func() bool { return finals("m-t5") >= 1 })

	tg.mu.Lock()
	var texts []string
	for _, m := range tg.msgs {
		texts = append(texts, fmt.Sprintf("%d:%.80q", m.ID, m.Text))
	}
	tg.mu.Unlock()
	for _, i := range []int{0, 1, 2, 4, 5} {
		m := fmt.Sprintf("m-t%d", i)
		if n := finals(m); n != 1 {
			t.Fatalf("the final text answering %s is in %d messages, want one: %v", m, n, texts)
		}
	}
	polled, overlap = pw.pollers()
	if len(overlap) > 0 || polled[st2.Leader] == 0 {
		t.Fatalf("getUpdates by node %v, overlapping polls %v; want one poller at a time, the new leader %s after the kill", polled, overlap, st2.Leader)
	}
	for p, k := range polled {
		if p != leader.name && p != st2.Leader && k > 0 {
			t.Fatalf("%s polled (%d) though it never led", p, k)
		}
	}

	// No update lost or handled twice: across the chats' records each
	// message is stored once, all in one chat (the Telegram chat's
	// current chat survived the kill), and m-t3's interrupted turn is
	// answered.
	stored, chatOf := map[string]int{}, map[string]string{}
	for _, id := range clusterChatIDs(t, survivor) {
		rec := readRecord(t, survivor.name, survivor.p.addr, id)
		checkSeqs(t, survivor.name, rec)
		for _, e := range rec {
			if e.typ() == "message.accepted" {
				m := strings.Fields(e.obj("message").str("text"))[0]
				stored[m]++
				chatOf[m] = id
			}
		}
	}
	for i := range 6 {
		if m := fmt.Sprintf("m-t%d", i); stored[m] != 1 {
			t.Fatalf("update %s stored %d times: %v", m, stored[m], stored)
		}
		if m := fmt.Sprintf("m-t%d", i); chatOf[m] != chatOf["m-t0"] {
			t.Fatalf("%s went to chat %s, m-t0 to %s: the next message after the kill must continue the same chat (%v)", m, chatOf[m], chatOf["m-t0"], chatOf)
		}
	}
	// The reply the kill interrupted lands once, sent by the new leader.
	if !tgWithin(tg, e2eWait, func() bool { return finals("m-t3") >= 1 }) {
		t.Fatalf("the final text of m-t3's reply, interrupted by the kill, never landed in Telegram: %v%s", texts, c.logs())
	}
	if n := finals("m-t3"); n != 1 {
		t.Fatalf("the final text answering m-t3 is in %d messages, want one: %v", n, texts)
	}
	by := pw.senders("echo m-t3")
	for _, nd := range by {
		if nd != st2.Leader {
			t.Fatalf("the final text of m-t3 was sent or edited by %v; want the new leader %s only", by, st2.Leader)
		}
	}
}

// tgWithin waits until cond, run under f's lock, holds; false after limit.
func tgWithin(f *tgFake, limit time.Duration, cond func() bool) bool {
	deadline := time.After(limit)
	for {
		f.mu.Lock()
		ok, ch := cond(), f.changed
		f.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-deadline:
			return false
		}
	}
}

// clusterChatIDs lists the chat ids nd's GET /api/chats answers.
func clusterChatIDs(t *testing.T, nd *clusterNode) []string {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+nd.p.addr+"/api/chats", nil)
	req.Header.Set("Authorization", "Bearer "+e2eToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Chats []struct{ ID string } }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /api/chats: %d %v", resp.StatusCode, err)
	}
	var ids []string
	for _, ch := range list.Chats {
		ids = append(ids, ch.ID)
	}
	return ids
}
