package telegram

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/chats/cluster"
	"github.com/mirror-gateway/mirror/chats/cluster/clustertest"
	"github.com/mirror-gateway/mirror/config"
)

// clusterNodes starts n in-process cluster nodes (embedded NATS, routed
// on loopback, a one-second lease) and waits until they are ready; closed
// when the test ends unless the test closed them (close(i)).
type clusterNodes struct {
	mu    sync.Mutex
	nodes []*cluster.Node
}

func startNodes(t testing.TB, n int) *clusterNodes {
	t.Helper()
	routes := make([]string, n)
	for i := range routes {
		routes[i] = clustertest.RouteAddr(t)
	}
	cn := &clusterNodes{}
	base := t.TempDir()
	for i := range n {
		var peers []string
		for j, r := range routes {
			if j != i {
				peers = append(peers, r)
			}
		}
		nd, err := cluster.Start(context.Background(), cluster.Options{Name: fmt.Sprintf("n%d", i+1), Listen: "127.0.0.1:0",
			Routes: routes[i], Peers: peers, StoreDir: filepath.Join(base, fmt.Sprintf("n%d", i+1)), Replicas: min(n, 3),
			LeaseTTL: time.Second, Secret: cluster.RouteSecret("test"), Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		cn.nodes = append(cn.nodes, nd)
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for i := range cn.nodes {
			wg.Go(func() { cn.close(i) })
		}
		wg.Wait()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, nd := range cn.nodes {
		if err := nd.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return cn
}

// close closes node i (once).
func (cn *clusterNodes) close(i int) {
	cn.mu.Lock()
	nd := cn.nodes[i]
	cn.nodes[i] = nil
	cn.mu.Unlock()
	if nd != nil {
		nd.Close()
	}
}

// pollCounter counts the getUpdates requests in flight across every bot
// whose client it made, from before a request is sent until its answer
// was read (or it failed), and the most at once.
type pollCounter struct {
	active, most atomic.Int32
}

func (pc *pollCounter) client() *http.Client {
	return &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		if !strings.HasSuffix(r.URL.Path, "/getUpdates") {
			return http.DefaultTransport.RoundTrip(r)
		}
		n := pc.active.Add(1)
		for m := pc.most.Load(); n > m && !pc.most.CompareAndSwap(m, n); m = pc.most.Load() {
		}
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err != nil {
			pc.active.Add(-1)
			return nil, err
		}
		resp.Body = &doneBody{ReadCloser: resp.Body, done: func() { pc.active.Add(-1) }}
		return resp, nil
	})}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type doneBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *doneBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}

// clusterBots starts a bot on each node, all on one fake Bot API, each
// with its own chats service.
func clusterBots(t *testing.T, cn *clusterNodes, fake *fakeAPI, pc *pollCounter, mutate func(*config.Config)) []*stack {
	var stacks []*stack
	for _, nd := range cn.nodes {
		tg := nd.Telegram()
		t.Cleanup(tg.Close) // after the bot stops (cleanups run last first)
		so := stackOpts{delay: time.Millisecond, fake: fake, leader: tg, offsets: tg, replica: tg, mutate: mutate}
		if pc != nil {
			so.client = pc.client()
		}
		stacks = append(stacks, newStackWith(t, so))
	}
	return stacks
}

// nodesPassedOn counts, over every node's chats, the person's messages by
// text (stored or queued): what the bots passed on.
func nodesPassedOn(t testing.TB, stacks []*stack) map[string]int {
	out := map[string]int{}
	ctx := context.Background()
	for _, st := range stacks {
		list, err := st.svc.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range list {
			got := make(chan *chats.Snapshot, 1)
			sub := &subFunc{f: func(d chats.Delivery) {
				if d.Snapshot != nil {
					select {
					case got <- d.Snapshot:
					default:
					}
				}
			}}
			if err := st.svc.Open(ctx, c.ID, nil, sub, ""); err != nil {
				t.Fatal(err)
			}
			_ = st.svc.Unsubscribe(ctx, c.ID, sub)
			sn := <-got
			for _, m := range append(sn.Messages, sn.Pending...) {
				if m.Role == "user" {
					out[m.Text]++
				}
			}
		}
	}
	return out
}

// TestClusterOnePoller: three nodes' bots share one Bot API; only the
// leader polls. Its node is closed while it handles a stream of updates:
// another node polls on from the offset the first committed, and every
// update is handled exactly once, none lost; at no moment do two bots
// poll at once.
func TestClusterOnePoller(t *testing.T) {
	cn := startNodes(t, 3)
	fake := newFake(t, fakeInterval, fakeGlobal)
	pc := &pollCounter{}
	stacks := clusterBots(t, cn, fake, pc, nil)
	fake.waitFor("a bot polling", func() bool { return fake.calls["getUpdates"] > 0 })

	want := map[string]int{}
	push := func(from, to int) {
		for k := from; k <= to; k++ {
			txt := fmt.Sprintf("u%d", k)
			fake.pushText(111, 111, txt)
			want[txt] = 1
		}
	}
	total := func() int {
		n := 0
		for _, c := range nodesPassedOn(t, stacks) {
			n += c
		}
		return n
	}
	push(1, 12)
	fake.waitFor("some updates handled", func() bool { return total() >= 3 })
	leader := -1
	for i, st := range stacks {
		if st.bot.leading() {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("updates were handled but no bot leads")
	}
	cn.close(leader) // its bot stops polling before the lease is given up
	push(13, 15)
	fake.waitFor("every update handled", func() bool { return total() >= len(want) })
	fake.waitFor("another bot leads", func() bool {
		for i, st := range stacks {
			if i != leader && st.bot.leading() {
				return true
			}
		}
		return false
	})

	got := nodesPassedOn(t, stacks)
	for txt := range want {
		if got[txt] != 1 {
			t.Errorf("%s handled %d times, want once", txt, got[txt])
		}
	}
	if len(got) != len(want) {
		t.Errorf("handled %v, want %v", got, want)
	}
	if n := pc.most.Load(); n != 1 {
		t.Fatalf("%d getUpdates at once, want 1", n)
	}
	fake.mu.Lock()
	offsets := append([]int(nil), fake.offsets...)
	fake.mu.Unlock()
	for i := 1; i < len(offsets); i++ {
		if offsets[i] < offsets[i-1] {
			t.Fatalf("getUpdates offsets went back: %v", offsets)
		}
	}
}

// TestClusterWebhookForward: in webhook mode every node is posted
// updates; one posted to a node that does not lead is forwarded to the
// leader and handled there once; the same update posted again, to any
// node, is recognised as handled.
func TestClusterWebhookForward(t *testing.T) {
	cn := startNodes(t, 3)
	fake := newFake(t, fakeInterval, fakeGlobal)
	stacks := clusterBots(t, cn, fake, nil, func(c *config.Config) {
		c.Telegram.Mode = config.ModeWebhook
		c.Telegram.WebhookURL = "https://bot.example.com/telegram/webhook"
	})
	var leader int
	fake.waitFor("a bot leading", func() bool {
		for i, st := range stacks {
			if st.bot.leading() {
				leader = i
				return true
			}
		}
		return false
	})
	post := func(i int, update string) int {
		req := httptest.NewRequest("POST", "/telegram/webhook", strings.NewReader(update))
		req.Header.Set(SecretHeader, "s3cret")
		rec := httptest.NewRecorder()
		stacks[i].bot.WebhookHandler().ServeHTTP(rec, req)
		return rec.Code
	}
	other := (leader + 1) % 3
	for k, at := range []int{other, (leader + 2) % 3, leader, other} {
		update := `{"update_id":7,"message":{"message_id":1,"from":{"id":111,"is_bot":false,"first_name":"A"},"chat":{"id":111,"type":"private"},"date":1,"text":"once"}}`
		if k == 3 {
			update = strings.ReplaceAll(update, `"update_id":7`, `"update_id":8`)
			update = strings.ReplaceAll(update, `"message_id":1`, `"message_id":2`)
			update = strings.ReplaceAll(update, "once", "again")
		}
		if code := post(at, update); code != http.StatusOK {
			t.Fatalf("post %d to node %d: %d", k, at, code)
		}
	}
	if got := nodesPassedOn(t, stacks); got["once"] != 1 || got["again"] != 1 || len(got) != 2 {
		t.Fatalf("passed on %v, want each once", got)
	}
	if got := nodesPassedOn(t, stacks[leader:leader+1]); len(got) != 2 {
		t.Fatalf("the leader passed on %v, want both", got)
	}
	if code := post(other, `{"update_id":9}`); code != http.StatusOK {
		t.Fatalf("an update without content: %d", code)
	}
	if code := post(other, `not json`); code != http.StatusBadRequest {
		t.Fatalf("not an update: %d, want 400", code)
	}
}
