package provider

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"
)

// postServer answers every POST with an empty event stream and reports
// the hash and length of each body it read.
func postServer(t *testing.T) (*httptest.Server, chan [32]byte) {
	t.Helper()
	got := make(chan [32]byte, 64)
	// Its copy buffers are kept in a channel, not a sync.Pool, which drops
	// some of what it is given under the race detector.
	bufs := make(chan []byte, 4)
	for range cap(bufs) {
		bufs <- make([]byte, 32<<10)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		buf := <-bufs
		defer func() { bufs <- buf }()
		if _, err := io.CopyBuffer(h, r.Body, buf); err != nil {
			return
		}
		var sum [32]byte
		h.Sum(sum[:0])
		got <- sum
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func post(t *testing.T, p Poster, url string, body []byte) {
	t.Helper()
	resp, err := p.Post(context.Background(), url, nil, body)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	resp.Close()
}

// Every body arrives whole over the client's connections, whichever way
// the transport hands it to them: taken by its buffered writer alone,
// split across that buffer and the connection, or far larger than both.
func TestRequestBodyArrivesWhole(t *testing.T) {
	srv, got := postServer(t)
	p := Poster{Name: "t", Client: NewHTTPClient(0)}
	defer p.Client.CloseIdleConnections()
	for _, n := range []int{0, 1, 3000, 4095, 4096, 4097, 5000, 32 << 10, 70000, 1 << 20} {
		body := bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]
		for range 2 { // a new connection, then a kept one
			post(t, p, srv.URL, body)
			select {
			case sum := <-got:
				if sum != sha256.Sum256(body) {
					t.Fatalf("%d bytes: the server read other bytes", n)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%d bytes: no request arrived", n)
			}
		}
	}
}

// A body given to another reader (not a requestBody) is copied through
// the pool's buffer and arrives whole too.
func TestBodyConnCopiesOtherReaders(t *testing.T) {
	srv, got := postServer(t)
	client := NewHTTPClient(0)
	defer client.CloseIdleConnections()
	body := bytes.Repeat([]byte("xyz"), 50000)
	req, err := http.NewRequest(http.MethodPost, srv.URL, io.MultiReader(bytes.NewReader(body[:7]), bytes.NewReader(body[7:])))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(body))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if sum := <-got; sum != sha256.Sum256(body) {
		t.Fatal("the server read other bytes")
	}
}

// A request's body is written from its own bytes: the connection's
// ReadFrom copied a body of known length through a new buffer of up to
// 32 KiB each time (net/http hides the body's WriteTo behind a
// LimitedReader).
func TestRequestBodyIsNotCopied(t *testing.T) {
	srv, got := postServer(t)
	p := Poster{Name: "t", Client: NewHTTPClient(0)}
	defer p.Client.CloseIdleConnections()
	body := bytes.Repeat([]byte("a"), 200<<10)
	post(t, p, srv.URL, body) // dials
	<-got
	const n = 20
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for range n {
		post(t, p, srv.URL, body)
		<-got
	}
	runtime.ReadMemStats(&m1)
	per := (m1.TotalAlloc - m0.TotalAlloc) / n
	t.Logf("%d bytes allocated per request", per)
	if raceEnabled {
		t.Skip("allocation is not comparable under the race detector (its sync.Pools keep little)")
	}
	// Client and server together: the request, its headers, the
	// response; about 12 KB. With the copy it was above 40 KB.
	if per > 24<<10 {
		t.Fatalf("%d bytes allocated per request of %d bytes; want under 24 KiB", per, len(body))
	}
}
