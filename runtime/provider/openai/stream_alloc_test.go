package openai

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"testing"
)

// TestStreamAllocationBound: a streamed answer of 24 chunks allocates no
// large object of its own, such as the two 64 KiB read buffers each stream used to
// allocate (the body's reader and the SSE scanner's), which were a third
// of a turn's garbage under load.
func TestStreamAllocationBound(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		for i := range 24 {
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"piece %d \"},\"finish_reason\":null}]}\n\n", i)
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	})
	c := f.client(testKey)
	stream := func() {
		var got []string
		if _, err := c.Stream(context.Background(), hello(), collect(&got)); err != nil || len(got) != 24 {
			t.Fatalf("%d pieces, %v", len(got), err)
		}
	}
	stream() // the connection and the caches
	const n = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		stream()
	}
	runtime.ReadMemStats(&after)
	// Objects over 32 KiB are not in BySize: what TotalAlloc has beyond
	// the size classes is large objects, such as those buffers. (The
	// total varies with the race detector; the large objects do not.)
	small := func(m *runtime.MemStats) (b uint64) {
		for _, c := range m.BySize {
			b += uint64(c.Size) * c.Mallocs
		}
		return b
	}
	total := (after.TotalAlloc - before.TotalAlloc) / n
	large := (after.TotalAlloc - before.TotalAlloc - (small(&after) - small(&before))) / n
	t.Logf("%d bytes allocated per stream, %d of them in objects over 32 KiB", total, large)
	// Under the race detector sync.Pool keeps nothing, so the HTTP
	// server's pooled 32 KiB copy buffers show here: bound well below one
	// 64 KiB buffer rather than at zero.
	if large > 40<<10 {
		t.Fatalf("%d bytes per stream in objects over 32 KiB, want under %d", large, 40<<10)
	}
}
