package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
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
	_, url := benchUploadServer(b, chats.Options{})

	const size = 10 << 20
	bodies := make([][]byte, b.N) // each upload a new blob, not a dedup hit
	for i := range bodies {
		bodies[i] = make([]byte, size)
		rand.Read(bodies[i])
	}
	// The bodies are the client's, allocated before the baseline: what
	// grows after it is the server's.
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	peakMB := heapPeak()
	for i := 0; i < b.N; i++ {
		if err := postUpload(url, bytes.NewReader(bodies[i]), size); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(peakMB(), "peak-heap-MB")
}

// benchUploadServer is a gateway on 127.0.0.1 over a fresh bbolt file and
// blob store (20 MB per kind), its chats service made with opts (Store and
// Blobs filled in). It returns the service and the gateway's URL; both
// close when b ends.
func benchUploadServer(b *testing.B, opts chats.Options) (*chats.Service, string) {
	b.Helper()
	db, err := chats.OpenDB(filepath.Join(b.TempDir(), "mirror.db"), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	store, err := chats.NewStore(db)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	data, err := datadir.Prepare(filepath.Join(b.TempDir(), "data"))
	if err != nil {
		b.Fatal(err)
	}
	blobs, err := chats.OpenBlobs(data, chats.BlobLimits{Image: 20 << 20, Document: 20 << 20, Audio: 20 << 20}, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	opts.Store, opts.Blobs = store, blobs
	svc := chats.New(opts)
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		svc.Close(ctx)
	})
	hs := httptest.NewUnstartedServer(nil)
	srv := New(Options{Config: config.Default(), Chats: svc, Token: testToken, Addr: hs.Listener.Addr().String()})
	b.Cleanup(srv.Close)
	hs.Config.Handler = srv.Handler()
	hs.Start()
	b.Cleanup(hs.Close)
	return svc, hs.URL
}

// postUpload posts size bytes of r to POST /api/uploads as big.bin and
// wants 201.
func postUpload(url string, r io.Reader, size int64) error {
	req, err := http.NewRequest("POST", url+"/api/uploads?name=big.bin", r)
	if err != nil {
		return err
	}
	req.ContentLength = size
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("upload status %d", resp.StatusCode)
	}
	return nil
}

// heapPeak samples the live heap every millisecond from now on; the func
// it returns stops the sampling and gives the peak growth over the heap
// at the start, in MB.
func heapPeak() func() float64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() int64 { metrics.Read(sample); return int64(sample[0].Value.Uint64()) }
	base := read()
	var peak atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
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
	})
	return func() float64 {
		close(stop)
		wg.Wait()
		return float64(max(peak.Load()-base, 0)) / (1 << 20)
	}
}
