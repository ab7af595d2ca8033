package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/chats/search"
	"github.com/mirror-gateway/mirror/config/datadir"
	"github.com/mirror-gateway/mirror/runtime/ids"
	bolt "go.etcd.io/bbolt"
)

// BenchmarkStartWithStore (issue 20, item 3): from exec of `mirror serve`
// to the first accepted connection (TCP connect and GET /healthz 200,
// polled every 200 µs) and to the first welcome (a WebSocket hello), the
// RSS just after that first connection, and how long the first page of the
// chat list takes (GET /api/chats?limit=50), on an empty store and on one
// of 100,000 chats. The 100k store is written once per run straight into
// bbolt (writeChatsStore: the rows Create writes, in the layout of before
// the indexes, and a search index holding every title, closed cleanly, as
// the indexer leaves it once caught up), and each binary gets its own copy, started and stopped
// cleanly once before the timed starts (for this code, that first start
// builds the indexes: reported as migrate_ms). With MIRROR_BENCH_BASE_BIN
// naming another build (say, of main), every iteration starts it too, on
// the same kind of stores, interleaved, and its figures are reported with
// the prefix base_. Each iteration is one start per binary and store,
// stopped with SIGTERM; one more start of this code follows a kill -9
// (reported as killed_100k_*), where the whole tree is checked.
func BenchmarkStartWithStore(b *testing.B) {
	const n = 100_000
	dir := b.TempDir()
	cfg := writeBenchConfig(b, dir)
	tmpl := filepath.Join(dir, "template")
	t0 := time.Now()
	writeChatsStore(b, tmpl, n)
	// Reported at the end: b.Loop drops what is reported before it.
	setup := map[string]float64{"fill_s": time.Since(t0).Seconds()}
	if fi, err := os.Stat(filepath.Join(tmpl, DBFile)); err == nil {
		setup["db_MiB"] = float64(fi.Size()) / (1 << 20)
	}
	type target struct {
		prefix, bin, data string
		results           []startFigures
	}
	var targets []*target
	bins := [][2]string{{"", serveBinary()}}
	if base := os.Getenv("MIRROR_BENCH_BASE_BIN"); base != "" {
		bins = append(bins, [2]string{"base_", base})
	}
	for _, bin := range bins {
		for _, store := range []string{"empty", "100k"} {
			data := filepath.Join(dir, bin[0]+store)
			if store == "100k" {
				copyDataDir(b, tmpl, data)
			}
			first := startOnce(b, bin[1], cfg, data, false)
			if store == "100k" {
				setup[bin[0]+"migrate_ms"] = first.conn
			}
			targets = append(targets, &target{prefix: bin[0] + store + "_", bin: bin[1], data: data})
		}
	}
	for b.Loop() {
		for _, t := range targets {
			t.results = append(t.results, startOnce(b, t.bin, cfg, t.data, false))
		}
	}
	b.StopTimer()
	// A kill -9, then the start after it (this code, 100k store).
	own := targets[1]
	startOnce(b, own.bin, cfg, own.data, true)
	killed := startOnce(b, own.bin, cfg, own.data, false)
	b.ReportMetric(0, "ns/op")
	for _, t := range targets {
		var conn, hello, rss, list []float64
		for _, r := range t.results {
			conn, hello, rss, list = append(conn, r.conn), append(hello, r.hello), append(rss, r.rss), append(list, r.list)
		}
		b.ReportMetric(median(conn), t.prefix+"conn_ms")
		b.ReportMetric(median(hello), t.prefix+"hello_ms")
		b.ReportMetric(median(rss), t.prefix+"rss_MiB")
		b.ReportMetric(median(list), t.prefix+"list_ms")
	}
	for k, v := range setup {
		b.ReportMetric(v, k)
	}
	b.ReportMetric(killed.conn, "killed_100k_conn_ms")
	b.ReportMetric(killed.hello, "killed_100k_hello_ms")
}

// startFigures are one start's measurements, in ms and MiB.
type startFigures struct{ conn, hello, rss, list float64 }

// startOnce starts bin as `mirror serve` on data, measures, and stops it
// with SIGTERM, or with SIGKILL when kill.
func startOnce(b *testing.B, bin, cfg, data string, kill bool) startFigures {
	b.Helper()
	addr := freeAddr(b)
	cmd := exec.Command(bin, "serve", "--config", cfg, "--data", data, "--addr", addr)
	cmd.Env = append(os.Environ(), "MIRROR_AS_MAIN=1", "MIRROR_TOKEN="+benchToken)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	client := &http.Client{Timeout: benchWait, Transport: &http.Transport{DisableKeepAlives: true}}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &child{cmd: cmd, waited: make(chan error, 1), stderr: stderr}
	go func() { c.waited <- cmd.Wait() }()
	defer c.kill()
	deadline := time.Now().Add(benchWait)
	for healthz(client, addr) != nil {
		if time.Now().After(deadline) {
			b.Fatalf("no /healthz in %s; stderr %s", benchWait, stderr)
		}
		time.Sleep(200 * time.Microsecond)
	}
	var f startFigures
	f.conn = ms(time.Since(t0))
	s, err := dialBench(b.Context(), addr)
	if err != nil {
		b.Fatalf("hello: %v; stderr %s", err, stderr)
	}
	f.hello = ms(time.Since(t0))
	s.c.Close()
	if st, err := procStatus(cmd.Process.Pid); err == nil {
		f.rss = float64(st["VmRSS"]) / 1024
	}
	req, _ := http.NewRequest("GET", "http://"+addr+"/api/chats?limit=50", nil)
	req.Header.Set("Authorization", "Bearer "+benchToken)
	t1 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	f.list = ms(time.Since(t1))
	if resp.StatusCode != 200 {
		b.Fatalf("list: %d", resp.StatusCode)
	}
	if kill {
		_ = cmd.Process.Kill()
	} else {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case err := <-c.waited:
		c.waited <- err
		if err != nil && !kill {
			b.Fatalf("exit after SIGTERM: %v; stderr %s", err, stderr)
		}
	case <-time.After(stopWait):
		b.Fatalf("did not exit in %s; stderr %s", stopWait, stderr)
	}
	return f
}

// stopWait bounds a stop: main (47a909d and later, before the set of chats
// to index) stops only once its search indexer has looked up every chat's
// mark, which takes tens of seconds with 100,000 chats on a busy machine.
const stopWait = 5 * time.Minute

// writeChatsStore writes n chats into a new data dir straight through
// bbolt, in transactions of 10,000: what chats.Service.Create stores for
// each (its metadata, and its record with the chat.created row), with
// creation times a second apart, and nothing else, so the first start of
// this code finds a data dir of before the indexes.
func writeChatsStore(tb testing.TB, data string, n int) {
	tb.Helper()
	dir, err := datadir.Prepare(data)
	if err != nil {
		tb.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(dir, DBFile), 0o600, &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	// The search index holds every chat's title, as the indexer leaves it
	// once caught up, closed cleanly (so this code trusts its marks).
	index, err := search.Open(filepath.Join(dir, "search"))
	if err != nil {
		tb.Fatal(err)
	}
	defer func() {
		if err := index.Close(); err != nil {
			tb.Fatal(err)
		}
	}()
	base := time.Now().UTC().Add(-time.Duration(n) * time.Second)
	var seq1 [8]byte
	binary.BigEndian.PutUint64(seq1[:], 1)
	for from := 0; from < n; from += 10_000 {
		var titles []search.Update
		err := db.Update(func(tx *bolt.Tx) error {
			cb, err := tx.CreateBucketIfNotExists([]byte("chats"))
			if err != nil {
				return err
			}
			rb, err := tx.CreateBucketIfNotExists([]byte("records"))
			if err != nil {
				return err
			}
			for i := from; i < min(n, from+10_000); i++ {
				t := base.Add(time.Duration(i) * time.Second)
				c := chats.Chat{ID: ids.NewChat(), Title: fmt.Sprintf("Bench chat %d", i), Chain: "default", State: chats.StateIdle,
					CreatedAt: t, UpdatedAt: t, Seq: 1}
				meta, _ := json.Marshal(c)
				if err := cb.Put([]byte(c.ID), meta); err != nil {
					return err
				}
				row, _ := json.Marshal(struct { // an event row: "type" first, as rowType reads it
					Type  string    `json:"type"`
					Chat  string    `json:"chat"`
					Seq   uint64    `json:"seq"`
					Time  time.Time `json:"time"`
					Title string    `json:"title"`
				}{"chat.created", c.ID, 1, t, c.Title})
				r, err := rb.CreateBucket([]byte(c.ID))
				if err != nil {
					return err
				}
				if err := r.Put(seq1[:], row); err != nil {
					return err
				}
				titles = append(titles, search.Update{Chat: c.ID, Title: &c.Title, Mark: 1})
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
		if err := index.ApplyAll(titles); err != nil {
			tb.Fatal(err)
		}
	}
}

// copyDataDir makes a new data dir holding a copy of from's database and
// search index.
func copyDataDir(tb testing.TB, from, to string) {
	tb.Helper()
	dir, err := datadir.Prepare(to)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(from, DBFile))
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, DBFile), b, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(dir, "search"), os.DirFS(filepath.Join(from, "search"))); err != nil {
		tb.Fatal(err)
	}
}
