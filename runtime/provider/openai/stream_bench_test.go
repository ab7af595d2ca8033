package openai

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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

// BenchmarkClientTurnLongChat is the adapter's whole share of a late turn
// of a long chat, against a local server streaming the external
// benchmark's answer (33 chunks, then usage): encoding the request (its
// history cached), posting it, reading the stream. The server runs in the
// benchmark's process, so its costs are counted too.
func BenchmarkClientTurnLongChat(b *testing.B) {
	srv := benchServer(false)
	defer srv.Close()
	c := New(Config{Name: "bench", BaseURL: srv.URL})
	req := longRequest()
	b.ReportAllocs()
	for b.Loop() {
		res, err := c.Stream(context.Background(), req, func(provider.Delta) error { return nil })
		if err != nil || res.Usage.InputTokens != 100 {
			b.Fatal(err, res.Usage)
		}
	}
}

// benchAnswer is the external benchmark's fake model's answer: 33 content
// events (each a chunk a streaming server flushes), then tail: the finish,
// the usage and [DONE].
func benchAnswer() (chunks [][]byte, tail []byte) {
	for i := range 33 {
		chunks = append(chunks, fmt.Appendf(nil, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"words %d and more \"},\"finish_reason\":null}]}\n\n", i))
	}
	tail = []byte("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake\",\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":80,\"total_tokens\":180}}\n\ndata: [DONE]\n\n")
	return chunks, tail
}

// benchServer serves benchAnswer to every request, once the request's body
// is read: each chunk flushed on its own when flushed, else the whole
// answer in one write.
func benchServer(flushed bool) *httptest.Server {
	chunks, tail := benchAnswer()
	answer := append(bytes.Join(chunks, nil), tail...)
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		if !flushed {
			w.Write(answer)
			return
		}
		for _, c := range chunks {
			w.Write(c)
			w.(http.Flusher).Flush()
		}
		w.Write(tail)
	}))
}
