package cluster

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
)

// BenchmarkLeaseRenew is one chat lease's renewal on three in-process
// servers (R3: a compare-and-set write synced on a majority), round robin
// over 100 held leases, as the keeper renews them. Besides the time it
// reports the CPU the whole process (the three servers and the node)
// spent per renewal: a node renews each chat it holds every third of the
// lease TTL, so a chat costs 3/TTL renewals a second (0.6 with the
// default 5 s, 1 with 3 s).
func BenchmarkLeaseRenew(b *testing.B) {
	// A long TTL: the keeper's own renewals (every third of it) stay out
	// of the measurement.
	tc := startCluster(b, 3, time.Minute, 16, func(*testCluster, int) func(string) { return func(string) {} })
	nd := tc.nodes[0]
	var claims []*Claim
	for i := range 100 {
		c, _, err := nd.ClaimChat(context.Background(), fmt.Sprintf("c_renew%d", i))
		if err != nil {
			b.Fatal(err)
		}
		claims = append(claims, c)
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	i := 0
	start := cpu()
	for b.Loop() {
		if err := claims[i%len(claims)].lease.Renew(context.Background()); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64((cpu()-start).Microseconds())/float64(i), "cpu-µs/op")
}

// BenchmarkIdleLeaseRenewals is the chat-lease renewals a node sends a
// second while it holds chats nobody uses: n chats created on node 1 of
// three (each loaded, then left alone), counted over each iteration's
// window of one lease TTL once they are idle. kept: chats stay in memory
// for an hour (limits.chat_idle 1h), so the node holds every lease, as
// before idle chats gave theirs up; released: chat_idle 200ms, after
// which each idle chat gives its lease up (Router.ReleaseIdle). Run with
// -benchtime=1x (each iteration waits a whole window).
func BenchmarkIdleLeaseRenewals(b *testing.B) {
	const ttl = 3 * time.Second
	for _, n := range []int{200} {
		for _, bc := range []struct {
			name string
			idle time.Duration
		}{{"kept", time.Hour}, {"released", 200 * time.Millisecond}} {
			b.Run(fmt.Sprintf("%s/chats=%d", bc.name, n), func(b *testing.B) {
				sv := startServicesTTL(b, 3, newModel(true), false, ttl, func(_ int, o *chats.Options) { o.Idle = bc.idle })
				nd := sv.nodes[0]
				for i := range n {
					if _, err := sv.svcs[0].Create(context.Background(), fmt.Sprintf("idle %d", i), "", chats.Origin{}); err != nil {
						b.Fatal(err)
					}
				}
				held := func() int {
					nd.mu.Lock()
					defer nd.mu.Unlock()
					return len(nd.claims)
				}
				// Idle for longer than chat_idle (or, kept, once the
				// creates' renewals settle): then counted.
				deadline := time.Now().Add(time.Minute)
				for bc.idle < time.Minute && held() > 0 && time.Now().Before(deadline) {
					time.Sleep(50 * time.Millisecond)
				}
				var renewals int64
				var window, used time.Duration
				for b.Loop() {
					start, at, c0 := nd.renewals.Load(), time.Now(), processCPU()
					time.Sleep(ttl)
					renewals += nd.renewals.Load() - start
					window += time.Since(at)
					used += processCPU() - c0
				}
				b.ReportMetric(float64(renewals)/window.Seconds(), "renewals/s")
				// The three servers' and the nodes' CPU a second, idle
				// chats' renewals (and their replication) included.
				b.ReportMetric(float64(used.Milliseconds())/window.Seconds(), "cpu-ms/s")
				b.ReportMetric(float64(held()), "leases")
			})
		}
	}
}

// processCPU is the CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
