// Package clustertest holds what the cluster's tests in several packages
// share: addresses for embedded NATS servers' route listeners.
package clustertest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"testing"
)

// RouteAddr returns a loopback address nobody listens on now, for a NATS
// server's routes, which the other nodes must know before it starts (so it
// cannot listen on port 0). The port is drawn from below Linux's
// ephemeral range (32768–60999): a port from the kernel's :0 could be
// handed to some outgoing connection before the server listens on it, and
// the server would then never accept connections.
//
// The port stays reserved for tb until it ends (reserve): the test
// processes of several packages draw from the same range at once, and a
// port free when drawn was once taken by another test's server before
// this one's listened.
func RouteAddr(tb testing.TB) string {
	tb.Helper()
	for range 200 {
		port := 20000 + rand.IntN(12000)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue // taken: draw again
		}
		ln.Close()
		if !reserve(tb, port) {
			continue // another test holds it
		}
		return addr
	}
	tb.Fatal("no free loopback port between 20000 and 32000")
	return ""
}
