package provider

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// pooledBody is a body from the pool holding raw, whose last release
// closes the returned channel.
func pooledBody(raw []byte) (*Body, chan struct{}) {
	b := NewBody()
	b.Buffer().Write(raw)
	done := make(chan struct{})
	b.released = func() { close(done) }
	return b, done
}

// waitReleased waits, bounded, for a body's last holder to let go.
func waitReleased(t *testing.T, what string, done chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the body was never given back", what)
	}
}

// TestBodyHolds: a pooled body goes back only when the poster and every
// reader let go, a reader closed during a read lets go when the read
// ends, and a closed reader reads nothing (its bytes may be another
// request's).
func TestBodyHolds(t *testing.T) {
	b, done := pooledBody([]byte("0123456789"))
	released := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	r1, r2 := newPooledBody(b), newPooledBody(b)
	b.Release() // the poster's hold
	if !r1.enter() {
		t.Fatal("an open reader refused a read")
	}
	r1.Close() // while a read is under way
	r1.Close() // twice, as transports may
	if released() {
		t.Fatal("given back during a read")
	}
	r1.leave()
	if released() {
		t.Fatal("given back while a second reader holds it")
	}
	got, err := io.ReadAll(r2)
	if err != nil || string(got) != "0123456789" {
		t.Fatalf("second reader read %q, %v", got, err)
	}
	r2.Close()
	if !released() {
		t.Fatal("not given back after every holder let go")
	}
	if n, err := r1.Read(make([]byte, 4)); n != 0 || !errors.Is(err, errBodyClosed) {
		t.Fatalf("a closed reader read %d bytes, %v", n, err)
	}
	if n, err := r2.WriteTo(io.Discard); n != 0 || !errors.Is(err, errBodyClosed) {
		t.Fatalf("a closed reader wrote %d bytes, %v", n, err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a release past the last hold went unnoticed")
		}
	}()
	b.Release()
}

// bodyServer checks each request's body against the SHA-256 in its X-Sum
// header (and, when h2, that it came over HTTP/2). /redirect/N answers 307 to /redirect/N-1 (reading the body
// first, or not at all when ?early), and a request with X-Drop-Once has
// its connection closed without an answer the first time it arrives, so
// that the client's transport retries it.
func bodyServer(t *testing.T, h2 bool) (*httptest.Server, *atomic.Int64) {
	var bad atomic.Int64
	var dropped sync.Map
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h2 && r.ProtoMajor != 2 {
			bad.Add(1) // not the protocol under test
		}
		var n int
		fmt.Sscanf(r.URL.Path, "/redirect/%d", &n)
		if n > 0 && r.URL.Query().Has("early") {
			http.Redirect(w, r, fmt.Sprintf("/redirect/%d?early", n-1), http.StatusTemporaryRedirect)
			return
		}
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != r.Header.Get("X-Sum") {
			bad.Add(1)
		}
		if id := r.Header.Get("X-Drop-Once"); id != "" {
			if _, seen := dropped.LoadOrStore(id, true); !seen {
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					conn.Close()
				}
				return
			}
		}
		if n > 0 {
			http.Redirect(w, r, fmt.Sprintf("/redirect/%d", n-1), http.StatusTemporaryRedirect)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	if h2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, &bad
}

// TestPooledBodySendsItsBytes: a pooled body arrives as written, also when
// it is sent again (redirects, with the body read or not; a retry after a
// dropped connection), from many requests at once whose buffers the pool
// hands from one to the next; and each body goes back once it was sent.
// Under -race, a buffer given back while a transport still read it shows.
func TestPooledBodySendsItsBytes(t *testing.T) {
	srv, bad := bodyServer(t, false)
	p := Poster{Name: "t", Client: NewHTTPClient(0)}
	defer p.Client.CloseIdleConnections()
	testPooledBody(t, p, srv, bad, true)
}

// TestPooledBodyOverHTTP2: the same over HTTP/2, whose transport writes
// a body from a goroutine of its own and may close it during a read.
func TestPooledBodyOverHTTP2(t *testing.T) {
	srv, bad := bodyServer(t, true)
	p := Poster{Name: "t", Client: srv.Client()}
	defer p.Client.CloseIdleConnections()
	testPooledBody(t, p, srv, bad, false)
}

// testPooledBody sends pooled bodies through p to a bodyServer; retry
// says whether a dropped connection is retried (HTTP/1.1's transport).
func testPooledBody(t *testing.T, p Poster, srv *httptest.Server, bad *atomic.Int64, retry bool) {
	send := func(path string, raw []byte, h http.Header) error {
		sum := sha256.Sum256(raw)
		h.Set("X-Sum", hex.EncodeToString(sum[:]))
		b, done := pooledBody(raw)
		resp, err := p.PostBody(context.Background(), srv.URL+path, h, b)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Close()
		waitReleased(t, path, done)
		return nil
	}
	bodyOf := func(i, n int) []byte {
		unit := fmt.Sprintf("body %d|", i)
		return bytes.Repeat([]byte(unit), n/len(unit)+1)[:n]
	}
	sizes := []int{1, 4095, 4097, 70000, 1 << 20}
	t.Run("redirects and retries", func(t *testing.T) {
		for _, n := range sizes {
			for _, path := range []string{"/", "/redirect/2", "/redirect/2?early"} {
				if err := send(path, bodyOf(n, n), http.Header{}); err != nil {
					t.Fatalf("%s, %d bytes: %v", path, n, err)
				}
			}
			if !retry {
				continue
			}
			// A kept connection, then one the server drops: the
			// transport retries an idempotent request on a new one.
			send("/", []byte("warm"), http.Header{})
			h := http.Header{"Idempotency-Key": {"k"}, "X-Drop-Once": {strconv.Itoa(n)}}
			if err := send("/", bodyOf(n, n), h); err != nil {
				t.Fatalf("retry, %d bytes: %v", n, err)
			}
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for g := range 8 {
			wg.Go(func() {
				for i := range 8 {
					path := []string{"/", "/redirect/1", "/redirect/1?early"}[i%3]
					if err := send(path, bodyOf(g*8+i, sizes[(g+i)%len(sizes)]), http.Header{}); err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
	if n := bad.Load(); n > 0 {
		t.Fatalf("the server read other bytes than were sent, %d times", n)
	}
}
