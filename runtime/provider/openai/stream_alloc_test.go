package openai

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"testing"
)

// TestStreamAllocationBound: a streamed answer of 24 chunks costs the
// client (and this in-process fake server) well under the 64 KiB read
// buffers each stream used to allocate on its own (the body's reader and
// the SSE scanner's), which were most of a turn's garbage under load.
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
	per := (after.TotalAlloc - before.TotalAlloc) / n
	t.Logf("%d bytes allocated per stream", per)
	if per > 48<<10 {
		t.Fatalf("%d bytes allocated per stream, want at most %d", per, 48<<10)
	}
}
