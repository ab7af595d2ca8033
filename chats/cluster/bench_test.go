package cluster

import (
	"context"
	"fmt"
	"testing"
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
