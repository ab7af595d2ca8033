package main

// Benchmarks of issue 2, described in docs/benchmarks.md. Run them with
//
//	go test -run '^$' -bench . -benchtime=3s ./cmd/mirror/
//
// Every one talks to the real stack over real WebSocket/HTTP on 127.0.0.1,
// with the builtin model set to answer at once (runtime.yaml
// `providers: [{name: builtin, kind: builtin, delay: 0s}]`). Turn benchmarks
// run `mirror serve` in this process (so -cpuprofile sees the server); the
// memory and start benchmarks run it as a child process.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// turnBench measures message.send → turn.finished with nChats chats in a
// closed loop: b.N turns in all, each chat with one message in flight.
func turnBench(b *testing.B, nChats int) {
	dir := b.TempDir()
	addr, logs := startInProc(b, dir)
	f := newFleet(b, addr, nChats)
	// Warm up: one turn per chat (loads the token tables, grows the file).
	if _, _, err := f.runTurns(len(f.chats)); err != nil {
		b.Fatalf("warm-up: %v; log %s", err, logs)
	}
	commits := measureCommit(b, dir, 100)
	commit := pct(commits, 50)
	b.ResetTimer()
	lats, wall, err := f.runTurns(b.N)
	b.StopTimer()
	if err != nil {
		b.Fatalf("%v; log %s", err, logs)
	}
	slices.Sort(lats)
	p50, p99 := pct(lats, 50), pct(lats, 99)
	b.ReportMetric(ms(p50), "p50_ms")
	b.ReportMetric(ms(p99), "p99_ms")
	b.ReportMetric(ms(commit), "commit_ms")
	b.ReportMetric(float64(p50)/float64(commit), "ratio")
	b.ReportMetric(float64(len(lats))/wall.Seconds(), "turns/s")
}

// BenchmarkTurnLatency is (a): the latency a turn adds, at 1, 100 and 1000
// parallel chats, next to one bare bbolt commit measured in the same run.
func BenchmarkTurnLatency(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("chats=%d", n), func(b *testing.B) { turnBench(b, n) })
	}
}

// BenchmarkTurnThroughput is (b): sustained turns per second with 1000 chats.
func BenchmarkTurnThroughput(b *testing.B) {
	turnBench(b, 1000)
}

// BenchmarkIdleRSS is (c), first half: the resident memory of `mirror serve`
// on an empty data dir, just started, after one /healthz and a short settle.
// Each op is one process; the metric is the median.
func BenchmarkIdleRSS(b *testing.B) {
	dir := b.TempDir()
	cfg := writeBenchConfig(b, dir)
	client := &http.Client{Timeout: benchWait, Transport: &http.Transport{DisableKeepAlives: true}}
	var rss, anon []float64
	for i := range b.N {
		c := startChild(b, cfg, filepath.Join(dir, fmt.Sprintf("data%d", i)), "MIRROR_AS_MAIN=1")
		if err := healthz(client, c.addr); err != nil {
			b.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		st, err := procStatus(c.cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		rss = append(rss, float64(st["VmRSS"])/1024)
		anon = append(anon, float64(st["RssAnon"])/1024)
		c.stop(b)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(median(rss), "rss_MiB")
	b.ReportMetric(median(anon), "anon_MiB")
}

// BenchmarkHeapPerIdleChat is (c), second half: heap in use of a fresh
// `mirror serve` process with 100k stored chats, just started and after one
// hello, minus the same on an empty store, per chat.
func BenchmarkHeapPerIdleChat(b *testing.B) {
	const n = 100_000
	dir := b.TempDir()
	cfg := writeBenchConfig(b, dir)
	full := filepath.Join(dir, "full")
	t0 := time.Now()
	fillChats(b, full, n)
	fill := time.Since(t0)
	if fi, err := os.Stat(filepath.Join(full, DBFile)); err == nil {
		b.ReportMetric(float64(fi.Size())/(1<<20), "db_MiB")
	}
	b.ResetTimer()
	var empty, stored heapStats
	var hello time.Duration
	for i := range b.N {
		empty, _ = heapOf(b, cfg, filepath.Join(dir, fmt.Sprintf("empty%d", i)))
		stored, hello = heapOf(b, cfg, full)
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(int64(stored.HeapInuse)-int64(empty.HeapInuse))/n, "heap_B/chat")
	b.ReportMetric(float64(empty.HeapInuse)/(1<<20), "empty_heap_MiB")
	b.ReportMetric(float64(stored.HeapInuse)/(1<<20), "100k_heap_MiB")
	b.ReportMetric(float64(stored.RSSKiB)/1024, "100k_rss_MiB")
	b.ReportMetric(ms(hello), "hello_ms")
	b.ReportMetric(fill.Seconds(), "fill_s")
}

// heapOf starts the heap child on data, says hello once over WebSocket
// (watch off), settles and reads its heap; it also returns the hello's time.
func heapOf(b *testing.B, cfg, data string) (heapStats, time.Duration) {
	b.Helper()
	c := startChild(b, cfg, data, "MIRROR_BENCH_CHILD=heap")
	t0 := time.Now()
	s, err := dialBench(b.Context(), c.addr)
	if err != nil {
		b.Fatalf("hello: %v; stderr %s", err, c.stderr)
	}
	hello := time.Since(t0)
	defer s.c.Close()
	time.Sleep(300 * time.Millisecond)
	if _, err := c.stdin.Write([]byte("measure\n")); err != nil {
		b.Fatal(err)
	}
	var st heapStats
	select {
	case l, ok := <-c.lines:
		js, found := strings.CutPrefix(l, "heap ")
		if !ok || !found || json.Unmarshal([]byte(js), &st) != nil {
			b.Fatalf("heap child said %q; stderr %s", l, c.stderr)
		}
	case <-time.After(benchWait):
		b.Fatalf("heap child did not answer; stderr %s", c.stderr)
	}
	s.c.Close()
	c.stdin.Close() // the child shuts down at EOF
	select {
	case err := <-c.waited:
		c.waited <- err
		if err != nil {
			b.Fatalf("heap child: %v; stderr %s", err, c.stderr)
		}
	case <-time.After(benchWait):
		b.Fatal("heap child did not exit")
	}
	return st, hello
}

// BenchmarkStartToFirstConn is (d): from exec of `mirror serve` (empty data
// dir) to the first successful TCP connect and GET /healthz 200, polling
// every 200µs. Each op is one process; the metrics are the median and max.
func BenchmarkStartToFirstConn(b *testing.B) {
	dir := b.TempDir()
	cfg := writeBenchConfig(b, dir)
	var times []float64
	for i := range b.N {
		addr := freeAddr(b)
		cmd := newServeCmd(cfg, filepath.Join(dir, fmt.Sprintf("data%d", i)), addr)
		client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		c := &child{cmd: cmd, waited: make(chan error, 1), stderr: cmd.Stderr.(*lockedBuffer)}
		go func() { c.waited <- cmd.Wait() }()
		deadline := time.Now().Add(benchWait)
		for {
			if err := healthz(client, addr); err == nil {
				break
			}
			if time.Now().After(deadline) {
				c.kill()
				b.Fatalf("no /healthz in %s; stderr %s", benchWait, c.stderr)
			}
			time.Sleep(200 * time.Microsecond)
		}
		times = append(times, ms(time.Since(t0)))
		c.stop(b)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(median(times), "start_ms")
	b.ReportMetric(slices.Max(times), "max_ms")
}

func newServeCmd(cfg, data, addr string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "serve", "--config", cfg, "--data", data, "--addr", addr)
	cmd.Env = append(os.Environ(), "MIRROR_AS_MAIN=1", "MIRROR_TOKEN="+benchToken)
	cmd.Stderr = &lockedBuffer{}
	return cmd
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
