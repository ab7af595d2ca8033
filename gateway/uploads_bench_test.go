package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/config/datadir"
)

// BenchmarkUpload10MB posts a 10 MB file to POST /api/uploads over real
// HTTP on 127.0.0.1, into the blob store (written, fsynced, renamed) and
// its upload row. It reports throughput (MB/s) and the peak growth of the
// live heap during the uploads (peak-heap-MB): streamed, it stays far
// below the file's size.
func BenchmarkUpload10MB(b *testing.B) {
	cfg := config.Default()
	db, err := chats.OpenDB(filepath.Join(b.TempDir(), "mirror.db"), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	store, err := chats.NewStore(db)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	data, err := datadir.Prepare(filepath.Join(b.TempDir(), "data"))
	if err != nil {
		b.Fatal(err)
	}
	blobs, err := chats.OpenBlobs(data, chats.BlobLimits{Image: 20 << 20, Document: 20 << 20, Audio: 20 << 20}, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	svc := chats.New(chats.Options{Store: store, Blobs: blobs})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		svc.Close(ctx)
	}()
	hs := httptest.NewUnstartedServer(nil)
	srv := New(Options{Config: cfg, Chats: svc, Token: testToken, Addr: hs.Listener.Addr().String()})
	defer srv.Close()
	hs.Config.Handler = srv.Handler()
	hs.Start()
	defer hs.Close()

	const size = 10 << 20
	bodies := make([][]byte, b.N) // each upload a new blob, not a dedup hit
	for i := range bodies {
		bodies[i] = make([]byte, size)
		rand.Read(bodies[i])
	}
	// The bodies are the client's, allocated before the baseline: what
	// grows after it is the server's.
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() int64 { metrics.Read(sample); return int64(sample[0].Value.Uint64()) }
	stop := make(chan struct{})
	var peak atomic.Int64
	var wg sync.WaitGroup
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	base := read()
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	for i := 0; i < b.N; i++ {
		req, _ := http.NewRequest("POST", hs.URL+"/api/uploads?name=big.bin", bytes.NewReader(bodies[i]))
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	b.StopTimer()
	close(stop)
	wg.Wait()
	b.ReportMetric(float64(max(peak.Load()-base, 0))/(1<<20), "peak-heap-MB")
}
