package provider

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// TestHTTPClientKeepsConnectionsOfConcurrentStreams: after a wave of
// concurrent streams to one server, the next wave reuses their
// connections instead of dialling (the pool kept 16, so 100 chats at once
// dialled and closed a connection per turn past 16).
func TestHTTPClientKeepsConnectionsOfConcurrentStreams(t *testing.T) {
	const streams = 100
	var dials atomic.Int64
	var arrived sync.WaitGroup
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		<-release // every stream of the wave is open at once
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	client := NewHTTPClient(0)
	defer client.CloseIdleConnections()
	wave := func() {
		arrived.Add(streams)
		release = make(chan struct{})
		var done sync.WaitGroup
		errs := make(chan error, streams)
		for range streams {
			done.Add(1)
			go func() {
				defer done.Done()
				resp, err := client.Get(srv.URL)
				if err != nil {
					errs <- err
					return
				}
				// Reading to EOF returns once the connection is back in the pool.
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil {
					errs <- err
				}
			}()
		}
		arrived.Wait()
		close(release)
		done.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	wave()
	first := dials.Load()
	wave()
	if again := dials.Load() - first; first != streams || again != 0 {
		t.Fatalf("first wave opened %d connections, the second %d more; want %d and 0", first, again, streams)
	}
}
