package cluster

import (
	"context"
	"fmt"
	"testing"

	"github.com/mirror-gateway/mirror/chats"
)

// BenchmarkAppend is one flush (4 events) appended through the fence:
// on one server (R1) and on three in-process servers (R3, each write
// synced on a majority before it is acknowledged).
func BenchmarkAppend(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("R%d", n), func(b *testing.B) {
			tc := newCluster(b, n)
			nd := tc.nodes[0]
			chat := "c_bench"
			_, pos, err := nd.ClaimChat(context.Background(), chat)
			if err != nil {
				b.Fatal(err)
			}
			seq := uint64(1)
			b.ResetTimer()
			for b.Loop() {
				if pos, err = nd.Records().Append(context.Background(), chat, pos, flushOf(chat, seq, seq+3)); err != nil {
					b.Fatal(err)
				}
				seq += 4
			}
		})
	}
}

// BenchmarkRoutedSend is one message sent to a chat of node A on two
// nodes: through A's own Service (the op still goes through the router,
// encoded, as every op in cluster mode) and through B's (a NATS request
// to A). Each send is one fenced append; a turn waits, so the messages
// queue.
func BenchmarkRoutedSend(b *testing.B) {
	sv := newServices(b, 2, newModel(false))
	for _, via := range []struct {
		name string
		i    int
	}{{"owner", 0}, {"other", 1}} {
		b.Run(via.name, func(b *testing.B) {
			var chat string
			for i := 0; i < b.N; i++ {
				if i%500 == 0 { // a fresh chat: the queue has room
					b.StopTimer()
					c, err := sv.svcs[0].Create(context.Background(), "bench", "", chats.Origin{})
					if err != nil {
						b.Fatal(err)
					}
					chat = c.ID
					b.StartTimer()
				}
				if _, err := sv.svcs[via.i].Send(context.Background(), chat, "hello", fmt.Sprint("b", i), "", chats.Origin{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
