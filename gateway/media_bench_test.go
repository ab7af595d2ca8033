package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/provider/builtin"
)

// turnWaiter is a chat's subscriber that hands each turn.finished to the
// chat's closed loop.
type turnWaiter struct{ done chan struct{} }

func (w *turnWaiter) Deliver(d chats.Delivery) {
	if d.Event != nil && (d.Event.Type == chats.EvTurnFinished || d.Event.Type == chats.EvTurnFailed) {
		select {
		case w.done <- struct{}{}:
		default:
		}
	}
}

// BenchmarkTurnsDuringUpload measures the turn latency of 100 chats, each
// in a closed loop (the next message as soon as turn.finished arrives),
// answered by the built-in model with no delay, with and without a
// concurrent stream of 10 MB uploads posted one after another to POST
// /api/uploads over real HTTP (each a new blob: streamed, hashed,
// fsynced, renamed, its upload row committed). One iteration is one round
// of 100 turns, one per chat. It reports the turns' p50 and p99, the
// uploads that ran meanwhile, and the peak growth of the live heap per
// upload in flight (one at a time here): an upload is streamed, never
// held whole.
func BenchmarkTurnsDuringUpload(b *testing.B) {
	// none: no upload; paced: one 10 MB upload at a time, a second apart
	// (a person sending a big file now and then; 10 MB/s at most);
	// stream: one after another, as fast as they go.
	for _, mode := range []string{"none", "paced", "stream"} {
		b.Run("uploads="+mode, func(b *testing.B) { benchTurnsDuringUpload(b, 100, mode) })
	}
}

func benchTurnsDuringUpload(b *testing.B, nchats int, mode string) {
	uploads := mode != "none"
	eng, err := runtime.NewEngine([]*runtime.Model{{Name: "default", ProvName: "builtin", ProvKind: config.KindBuiltin, Provider: builtin.New(0),
		Remote: "echo", Window: 128000}}, map[string][]string{"default": {"default"}}, config.Roles{Chat: "default", Reflect: "default"}, 64)
	if err != nil {
		b.Fatal(err)
	}
	svc, url := benchUploadServer(b, chats.Options{Turner: eng, Idle: time.Minute})

	ctx := context.Background()
	ids := make([]string, nchats)
	waiters := make([]*turnWaiter, nchats)
	for i := range ids {
		c, err := svc.Create(ctx, "bench", "", chats.Origin{})
		if err != nil {
			b.Fatal(err)
		}
		ids[i], waiters[i] = c.ID, &turnWaiter{done: make(chan struct{}, 1)}
		if err := svc.Open(ctx, c.ID, nil, waiters[i], ""); err != nil {
			b.Fatal(err)
		}
	}
	var sent atomic.Int64
	turn := func(i int) time.Duration {
		start := time.Now()
		n := sent.Add(1)
		if _, err := svc.Send(ctx, ids[i], "hello there, how are you?", "c"+strconv.FormatInt(n, 10), "", chats.Origin{}); err != nil {
			b.Error(err)
			return 0
		}
		select {
		case <-waiters[i].done:
		case <-time.After(30 * time.Second):
			b.Error("a turn took more than 30 s")
		}
		return time.Since(start)
	}
	round := func() []time.Duration {
		out := make([]time.Duration, nchats)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Go(func() { out[i] = turn(i) })
		}
		wg.Wait()
		return out
	}
	round() // warm: every chat loaded and answered once

	// The upload stream: 10 MB bodies made unique by a prefix, read from
	// one shared buffer, so the client holds no copy per upload.
	const size = 10 << 20
	body := make([]byte, size)
	rand.Read(body)
	stop := make(chan struct{})
	var uploaded atomic.Int64
	var upWG sync.WaitGroup
	if uploads {
		upWG.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				r := io.MultiReader(strings.NewReader(fmt.Sprintf("%020d", n)), bytes.NewReader(body[20:]))
				if err := postUpload(url, r, size); err != nil {
					b.Error(err)
					return
				}
				uploaded.Add(1)
				if mode == "paced" {
					select {
					case <-stop:
						return
					case <-time.After(time.Second):
					}
				}
			}
		})
	}
	peakMB := heapPeak()
	var lat []time.Duration
	b.ResetTimer()
	for b.Loop() {
		lat = append(lat, round()...)
	}
	b.StopTimer()
	elapsed := b.Elapsed()
	peak := peakMB()
	close(stop)
	upWG.Wait()
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1e6 }
	b.ReportMetric(pct(0.50), "p50_ms")
	b.ReportMetric(pct(0.99), "p99_ms")
	b.ReportMetric(float64(uploaded.Load())/elapsed.Seconds(), "uploads/s")
	b.ReportMetric(peak, "peak-heap-MB")
}
