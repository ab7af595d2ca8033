package openai

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// BenchmarkStreamRead decodes a streamed answer of 24 content chunks, the
// shape of a usual reply, as the client reads it off the wire.
func BenchmarkStreamRead(b *testing.B) {
	var body bytes.Buffer
	for i := range 24 {
		fmt.Fprintf(&body, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"piece %d of the answer \"},\"finish_reason\":null}]}\n\n", i)
	}
	body.WriteString("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":80}}\n\ndata: [DONE]\n\n")
	raw := body.Bytes()
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		var s stream
		if err := s.read(bytes.NewReader(raw), func(provider.Delta) error { return nil }); err != nil || !s.done {
			b.Fatal(err)
		}
	}
}
