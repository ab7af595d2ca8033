package openai

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// BenchmarkClientTurnCPU is a whole turn through the adapter over a real
// loopback HTTP server, as the external benchmark's fake model answers:
// the request encoded and posted, the answer streamed as 33 events each
// flushed on its own, then the finish and usage events and [DONE]. Wall
// time on a shared machine says little, so it also reports the process's
// CPU time per turn (cpu_us/op, from getrusage: the client's and the
// in-process server's). A short chat's request is a few hundred bytes, a
// long one's about 50 KiB.
func BenchmarkClientTurnCPU(b *testing.B) {
	srv := benchServer(true)
	defer srv.Close()
	short := provider.Request{Model: "gpt-4o", Conversation: "short", Messages: []provider.Message{
		{Role: provider.RoleSystem, Content: "You are Mirror."},
		{Role: provider.RoleUser, Content: "Hello there, how are you today?"},
	}}
	long := longRequest()
	long.Conversation = "long"
	for _, tc := range []struct {
		name string
		req  provider.Request
	}{{"short", short}, {"long", long}} {
		b.Run(tc.name, func(b *testing.B) {
			c := New(Config{Name: "bench", BaseURL: srv.URL})
			defer c.hc.CloseIdleConnections()
			turn := func() {
				res, err := c.Stream(context.Background(), tc.req, func(provider.Delta) error { return nil })
				if err != nil || res.Usage.InputTokens != 100 {
					b.Fatal(err, res.Usage)
				}
			}
			turn() // the connection and the caches
			b.ReportAllocs()
			b.ResetTimer()
			before := processCPU()
			for b.Loop() {
				turn()
			}
			b.ReportMetric(float64((processCPU()-before).Microseconds())/float64(b.N), "cpu_us/op")
		})
	}
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
