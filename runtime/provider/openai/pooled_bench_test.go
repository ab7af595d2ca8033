package openai

import (
	"bytes"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// BenchmarkEncodeRequestPooled is BenchmarkEncodeRequest's cached case
// the way Stream encodes: into a pooled request body, given back once
// sent.
func BenchmarkEncodeRequestPooled(b *testing.B) {
	reqs := conversationRequests(40)
	cache := newEncCache()
	b.ReportAllocs()
	for b.Loop() {
		for _, r := range reqs {
			body := provider.NewBody()
			if _, err := encodeRequestInto(body.Buffer(), r, false, cache); err != nil {
				b.Fatal(err)
			}
			body.Release()
		}
	}
}

// TestEncodeIntoPooledBody: a request encoded into a pooled body, one
// that served a longer request before, is the fresh encoding's bytes.
func TestEncodeIntoPooledBody(t *testing.T) {
	cache := newEncCache()
	long, short := longRequest(), hello()
	for i, req := range []provider.Request{long, short, long, short} {
		body := provider.NewBody()
		got, err := encodeRequestInto(body.Buffer(), req, false, cache)
		want, err2 := encodeRequest(req, false)
		if err != nil || err2 != nil || !bytes.Equal(got, want) || !bytes.Equal(body.Bytes(), want) {
			t.Fatalf("request %d: %v %v\n got %.200q\nwant %.200q", i, err, err2, got, want)
		}
		body.Release()
	}
	// Without the cache too.
	body := provider.NewBody()
	defer body.Release()
	got, err := encodeRequestInto(body.Buffer(), short, false, nil)
	if want, _ := encodeRequest(short, false); err != nil || !bytes.Equal(got, want) || !bytes.Equal(body.Bytes(), want) {
		t.Fatalf("uncached: %v %q", err, got)
	}
}
