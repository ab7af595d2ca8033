package openai

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
)

// A 10 MB voice file is streamed into the transcription request: the
// bytes allocated per call stay far below the file's size.
func BenchmarkTranscribe10MB(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"text":"ok"}`)
	}))
	defer srv.Close()
	c := New(Config{Name: "stt", BaseURL: srv.URL + "/v1"})
	audio := bytes.Repeat([]byte{0x4f}, 10<<20)
	b.SetBytes(int64(len(audio)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Transcribe(context.Background(), "whisper-1", bytes.NewReader(audio), "audio/ogg", "v.ogg"); err != nil {
			b.Fatal(err)
		}
	}
}

// Encoding a request with a 4 MiB image: what one request body costs.
func BenchmarkEncodeImage4MiB(b *testing.B) {
	data := bytes.Repeat([]byte{0x89}, 4<<20)
	p := providertest.NewPart(provider.PartImage, "image/png", "big.png", data)
	req := provider.Request{Model: "gpt-4o", Messages: []provider.Message{{Role: provider.RoleUser, Content: "look", Parts: []provider.Part{p}}}}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodeRequest(req, false); err != nil {
			b.Fatal(err)
		}
	}
}
