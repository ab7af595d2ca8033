package cluster

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"
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
