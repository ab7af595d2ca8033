package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats/cluster"
	"github.com/mirror-gateway/mirror/chats/cluster/clustertest"
)

// BenchmarkClusterTurns: turn latency (p50, p99) and turns/s through one
// node on bbolt and through a cluster of three `mirror serve` processes on
// NATS JetStream, in the same run, both asking the same in-process fake
// OpenAI model (it answers at once). Every process is a real child on
// 127.0.0.1; the client is the turn benchmarks' fleet (closed loop: one
// message in flight per chat, latency from writing message.send to reading
// turn.finished). In the cluster the chats are dealt evenly over the nodes,
// each created (so owned) by the node its socket talks to: "routed" sends
// each chat's messages through the next node instead, so every frame and
// every event crosses to the owner and back. One iteration is one turn:
// run with -benchtime=Nx.
func BenchmarkClusterTurns(pb *testing.B) {
	const chats = 30
	cases := []struct {
		name   string
		nodes  int
		routed bool
	}{
		{"bbolt", 1, false},
		{"cluster=3", 3, false},
		{"cluster=3/routed", 3, true},
	}
	// The processes outlive each call of a case's function (b.N grows),
	// so they belong to the parent.
	started := map[int][]*child{}
	for _, tc := range cases {
		pb.Run(tc.name, func(b *testing.B) {
			kids, ok := started[tc.nodes]
			if !ok {
				kids = startBenchNodes(pb, tc.nodes, newFakeLLM(pb))
				started[tc.nodes] = kids
			}
			var addrs []string
			for _, k := range kids {
				addrs = append(addrs, k.addr)
			}
			logs := func() string {
				var b strings.Builder
				for i, k := range kids {
					fmt.Fprintf(&b, "\n--- stderr of n%d:\n%s", i+1, tail(k.stderr.String(), 4000))
				}
				return b.String()
			}
			all := &fleet{}
			for i, addr := range addrs {
				f := newFleet(b, addr, chats/len(addrs))
				if tc.routed {
					// The same chats, driven through the next node.
					g := newFleetFor(b, addrs[(i+1)%len(addrs)], f)
					f = g
				}
				all.chats = append(all.chats, f.chats...)
			}
			if _, _, err := all.runTurns(2 * len(all.chats)); err != nil {
				b.Fatalf("warm-up: %v%s", err, logs())
			}
			b.ResetTimer()
			lats, wall, err := all.runTurns(b.N)
			b.StopTimer()
			if err != nil {
				b.Fatalf("%v%s", err, logs())
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(percentile(lats, 50).Microseconds())/1000, "p50_ms")
			b.ReportMetric(float64(percentile(lats, 99).Microseconds())/1000, "p99_ms")
			b.ReportMetric(float64(len(lats))/wall.Seconds(), "turns/s")
		})
	}
}

// startBenchNodes starts n `mirror serve` children asking llm: one on
// bbolt when n is 1, else a cluster of n (cluster.enabled in runtime.yaml),
// ready. They end with the benchmark.
func startBenchNodes(b *testing.B, n int, llm *fakeLLM) []*child {
	b.Helper()
	routes := make([]string, n)
	for i := range routes {
		routes[i] = clustertest.RouteAddr(b)
	}
	var kids []*child
	var first struct{ cfg, data string }
	for i := range n {
		dir := b.TempDir()
		name := fmt.Sprintf("n%d", i+1)
		y := fmt.Sprintf("providers: [{name: fake, kind: openai, base_url: %s}]\n"+
			"models: [{name: default, provider: fake, model: fake-model, window: 128000}]\n"+
			"chains: {default: [default]}\n"+
			"limits: {messages_per_minute: 100000000}\n", llm.url(name))
		if n > 1 {
			var peers []string
			for j, r := range routes {
				if j != i {
					peers = append(peers, r)
				}
			}
			y += fmt.Sprintf("cluster:\n  enabled: true\n  name: %s\n  listen: 127.0.0.1:0\n  routes: %s\n  peers: [%s]\n  lease_ttl: 5s\n",
				name, routes[i], strings.Join(peers, ", "))
		}
		cfg := filepath.Join(dir, "runtime.yaml")
		if err := os.WriteFile(cfg, []byte(y), 0o600); err != nil {
			b.Fatal(err)
		}
		data := filepath.Join(dir, "data")
		c := startChild(b, cfg, data, "MIRROR_AS_MAIN=1")
		kids = append(kids, c)
		if i == 0 {
			first.cfg, first.data = cfg, data
		}
	}
	if n > 1 {
		deadline := time.Now().Add(benchWait * 2)
		for {
			var out, errb bytes.Buffer
			getenv := func(k string) string {
				if k == "MIRROR_TOKEN" {
					return benchToken
				}
				return ""
			}
			var st cluster.Status
			code := run(context.Background(), []string{"cluster", "status", "--json", "--config", first.cfg, "--data", first.data}, &out, &errb, getenv)
			if code == 0 && json.Unmarshal(out.Bytes(), &st) == nil && st.Ready && st.Leader != "" && len(st.Nodes) == n {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("the cluster did not form: %s %s", out.String(), errb.String())
			}
			time.Sleep(100 * time.Millisecond) // polling the status, bounded
		}
	}
	return kids
}

// newFleetFor is a fleet on addr driving the chats of f (made elsewhere),
// opened on one socket there.
func newFleetFor(b *testing.B, addr string, f *fleet) *fleet {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), benchWait)
	defer cancel()
	s, err := dialBench(ctx, addr)
	if err != nil {
		b.Fatal(err)
	}
	g := &fleet{socks: []*benchSock{s}}
	b.Cleanup(g.close)
	for _, old := range f.chats {
		ch := &benchChat{sock: s, fin: make(chan error, 1)}
		ch.setID(old.id)
		s.mu.Lock()
		s.chats[old.id] = ch
		s.mu.Unlock()
		if err := s.write(fmt.Appendf(nil, `{"type":"chat.open","chat":%q,"req":"o"}`, old.id)); err != nil {
			b.Fatal(err)
		}
		if _, err := s.await("chat.snapshot"); err != nil {
			b.Fatal(err)
		}
		g.chats = append(g.chats, ch)
	}
	return g
}
