package main

// Helpers of the big-chat benchmarks (issue 14, item 10): a chat of many
// large messages written through the public chats API, and the bytes of text
// it holds, to compare with the database file.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/config/datadir"
	mruntime "github.com/mirror-gateway/mirror/runtime"
	bolt "go.etcd.io/bbolt"
)

// bigText is size bytes of text as people paste it: prose in lines and
// paragraphs, with some code (quotes, <, >, &, backslashes) and some
// non-ASCII, seeded by i so every message differs.
func bigText(i, size int) string {
	r := rand.New(rand.NewPCG(uint64(i), 14))
	words := strings.Fields("the a of to and in is it that for on with as was by at be this from or an are not have but one all were when there can more which their if will each about how up out them then she many some so these would other into has her two like him see time could no make than first been its who now people my made over did down only way find use may water long little very after words called just where most know")
	code := []string{`if (a < b && c > d) { return "x"; }`, `fmt.Printf("%q\n", s)`, `<div class="note">Tom & Jerry</div>`, `path = "C:\\Users\\me"`, `naïve café — déjà vu`}
	var b strings.Builder
	b.Grow(size + 64)
	line := 0
	for b.Len() < size {
		if r.IntN(12) == 0 {
			b.WriteString(code[r.IntN(len(code))])
		} else {
			w := words[r.IntN(len(words))]
			if line == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			}
			b.WriteString(w)
		}
		line++
		switch {
		case line > 12 && r.IntN(6) == 0:
			b.WriteString(".\n")
			if r.IntN(4) == 0 {
				b.WriteString("\n")
			}
			line = 0
		default:
			b.WriteByte(' ')
		}
	}
	s := b.String()[:size]
	for !utf8.ValidString(s) { // cut inside a character
		s = s[:len(s)-1]
	}
	return s
}

// turnWaiter is a chats.Subscriber that signals each turn's end.
type turnWaiter struct {
	done chan struct{}
}

func (w *turnWaiter) Deliver(d chats.Delivery) {
	if d.Event != nil && (d.Event.Type == chats.EvTurnFinished || d.Event.Type == chats.EvTurnFailed) {
		select {
		case w.done <- struct{}{}:
		default:
		}
	}
}

// fillBigChat writes one chat of n messages of size bytes into the data dir
// through chats.Service, each answered by the builtin model before the next
// is sent, and returns the chat's id and the bytes of text sent.
func fillBigChat(tb testing.TB, data string, n, size int) (string, int64) {
	tb.Helper()
	svc, done := benchService(tb, data)
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c, err := svc.Create(ctx, "Big chat", "", chats.Origin{})
	if err != nil {
		tb.Fatal(err)
	}
	w := &turnWaiter{done: make(chan struct{}, 1)}
	if err := svc.Open(ctx, c.ID, nil, w, ""); err != nil {
		tb.Fatal(err)
	}
	var text int64
	for i := range n {
		t := bigText(i, size)
		text += int64(len(t))
		if _, err := svc.Send(ctx, c.ID, t, fmt.Sprintf("k%d", i), "", chats.Origin{}); err != nil {
			tb.Fatal(err)
		}
		select {
		case <-w.done:
		case <-time.After(benchWait):
			tb.Fatalf("message %d: no turn end in %s", i, benchWait)
		}
	}
	return c.ID, text
}

// fillLongChat writes one chat of at least events rows into the data dir
// through chats.Service: short messages, each answered by the builtin model
// before the next is sent. It returns the chat's id and its last seq.
func fillLongChat(tb testing.TB, data string, events uint64) (string, uint64) {
	tb.Helper()
	svc, done := benchService(tb, data)
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c, err := svc.Create(ctx, "Long chat", "", chats.Origin{})
	if err != nil {
		tb.Fatal(err)
	}
	w := &turnWaiter{done: make(chan struct{}, 1)}
	if err := svc.Open(ctx, c.ID, nil, w, ""); err != nil {
		tb.Fatal(err)
	}
	for i := 0; ; i++ {
		if i%32 == 0 {
			if got, err := svc.Get(ctx, c.ID); err != nil {
				tb.Fatal(err)
			} else if got.Seq >= events {
				return c.ID, got.Seq
			}
		}
		if _, err := svc.Send(ctx, c.ID, bigText(i, 200+i%400), fmt.Sprintf("k%d", i), "", chats.Origin{}); err != nil {
			tb.Fatal(err)
		}
		select {
		case <-w.done:
		case <-time.After(benchWait):
			tb.Fatalf("message %d: no turn end in %s", i, benchWait)
		}
	}
}

// benchService opens the data dir's database with the default
// configuration (the builtin model answering at once) and returns the chats
// service and what closes it all.
func benchService(tb testing.TB, data string) (*chats.Service, func()) {
	tb.Helper()
	dir, err := datadir.Prepare(data)
	if err != nil {
		tb.Fatal(err)
	}
	db, err := chats.OpenDB(filepath.Join(dir, DBFile), time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	store, err := chats.NewStore(db)
	if err != nil {
		db.Close()
		tb.Fatal(err)
	}
	cfg := config.Default()
	zero := time.Duration(0)
	cfg.Providers[0].Delay = &zero
	eng, err := mruntime.New(cfg, func(string) string { return "" })
	if err != nil {
		tb.Fatal(err)
	}
	svc := chats.New(chats.Options{Store: store, Turner: eng, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return svc, func() {
		svc.Close(context.Background())
		store.Close()
		db.Close()
	}
}

// benchSize is an integer from the environment variable name, or def.
func benchSize(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// BenchmarkBigChat (issue 14, item 10): one chat of 200 messages of 200 KiB
// (MIRROR_BENCH_BIG_MESSAGES changes the count), written once through the
// chats API with the default configuration. "db" reports the database
// against the text it holds; "open=N" starts `mirror serve` as a child
// process on that data dir, lets N sockets say hello, then has all N open
// the chat at once, and reports how far memory rose above where it stood
// before the opens, until every snapshot had arrived. Each iteration is a
// fresh process; the metrics are medians.
func BenchmarkBigChat(b *testing.B) {
	dir := b.TempDir()
	data := filepath.Join(dir, "data")
	n := benchSize("MIRROR_BENCH_BIG_MESSAGES", 200)
	t0 := time.Now()
	id, text := fillBigChat(b, data, n, 200<<10)
	fill := time.Since(t0)
	cfg := writeBenchConfig(b, dir)
	b.Run("db", func(b *testing.B) {
		var file, used int64
		for b.Loop() {
			file, used = dbSize(b, filepath.Join(data, DBFile))
		}
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(float64(text)/(1<<20), "text_MiB")
		b.ReportMetric(float64(file)/(1<<20), "db_MiB")
		b.ReportMetric(float64(used)/(1<<20), "used_MiB")
		b.ReportMetric(float64(file)/float64(text), "db/text")
		b.ReportMetric(float64(used)/float64(text), "used/text")
		b.ReportMetric(fill.Seconds(), "fill_s")
	})
	for _, socks := range []int{1, 8} {
		b.Run(fmt.Sprintf("open=%d", socks), func(b *testing.B) { openBench(b, cfg, data, id, socks) })
	}
}

// dbSize is the database file's size and the part of it in use (the file
// less its free pages).
func dbSize(tb testing.TB, path string) (file, used int64) {
	tb.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	st := db.Stats()
	return fi.Size(), fi.Size() - int64(st.FreePageN+st.PendingPageN)*int64(db.Info().PageSize)
}

func openBench(b *testing.B, cfg, data, chat string, socks int) {
	var anon, rss, hwm, snap, took []float64
	for b.Loop() {
		c := startChild(b, cfg, data, "MIRROR_BENCH_CHILD=heap")
		client := &http.Client{Timeout: benchWait, Transport: &http.Transport{DisableKeepAlives: true}}
		if err := healthz(client, c.addr); err != nil {
			b.Fatal(err)
		}
		ss := make([]*benchSock, socks)
		for i := range ss {
			s, err := dialBench(b.Context(), c.addr)
			if err != nil {
				b.Fatalf("hello: %v; stderr %s", err, c.stderr)
			}
			ss[i] = s
		}
		idle := measureChild(b, c)
		// Sample the process while the opens run: VmHWM also counts the
		// database pages the load maps in (file pages, the kernel's to
		// drop), so the anonymous peak is sampled too.
		stop, peak := make(chan struct{}), make(chan [2]int64, 1)
		go func() {
			var maxAnon, maxRSS int64
			t := time.NewTicker(time.Millisecond)
			defer t.Stop()
			for {
				if st, err := procStatus(c.cmd.Process.Pid); err == nil {
					maxAnon, maxRSS = max(maxAnon, st["RssAnon"]), max(maxRSS, st["VmRSS"])
				}
				select {
				case <-stop:
					peak <- [2]int64{maxAnon, maxRSS}
					return
				case <-t.C:
				}
			}
		}()
		t0 := time.Now()
		for _, s := range ss {
			if err := s.write(fmt.Appendf(nil, `{"type":"chat.open","chat":%q,"req":"o"}`, chat)); err != nil {
				b.Fatal(err)
			}
		}
		size := 0
		for _, s := range ss {
			f, err := s.await("chat.snapshot")
			if err != nil {
				b.Fatalf("%v; stderr %s", err, c.stderr)
			}
			size = len(f.raw)
		}
		took = append(took, ms(time.Since(t0)))
		close(stop)
		p := <-peak
		after := measureChild(b, c)
		anon = append(anon, float64(p[0]-idle.AnonKiB)/1024)
		rss = append(rss, float64(max(p[1], after.HWMKiB)-idle.RSSKiB)/1024)
		hwm = append(hwm, float64(after.HWMKiB)/1024)
		snap = append(snap, float64(size)/1024)
		for _, s := range ss {
			s.c.Close()
		}
		c.stdin.Close() // the child shuts down at EOF
		select {
		case err := <-c.waited:
			c.waited <- err
			if err != nil {
				b.Fatalf("child: %v; stderr %s", err, c.stderr)
			}
		case <-time.After(benchWait):
			b.Fatal("child did not exit")
		}
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(median(anon), "peak_anon_MiB")
	b.ReportMetric(median(rss), "peak_rss_MiB")
	b.ReportMetric(median(hwm), "hwm_MiB")
	b.ReportMetric(median(snap), "snapshot_KiB")
	b.ReportMetric(median(took), "open_ms")
}

// measureChild asks the heap child for its memory (after two GCs).
func measureChild(b *testing.B, c *child) heapStats {
	b.Helper()
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
	return st
}

// BenchmarkReplay (issue 14, item 10): a chat of 25,000 events
// (MIRROR_BENCH_REPLAY_EVENTS changes it) written through the chats API,
// then `mirror serve` in this process; each iteration opens the chat with
// since 0 on a fresh socket and reads until chat.resumed. A socket closed
// on the way is opened again with since the last seq it got, and counted.
func BenchmarkReplay(b *testing.B) {
	dir := b.TempDir()
	want := uint64(benchSize("MIRROR_BENCH_REPLAY_EVENTS", 25_000))
	t0 := time.Now()
	chat, last := fillLongChat(b, filepath.Join(dir, "data"), want)
	fill := time.Since(t0)
	addr, logs := startInProc(b, dir)
	var events, reconnects int
	var bytes int64
	start := time.Now()
	for b.Loop() {
		n, r, size, err := replayOnce(b.Context(), addr, chat, last)
		if err != nil {
			b.Fatalf("%v; log %s", err, logs)
		}
		events, reconnects, bytes = events+n, reconnects+r, bytes+size
	}
	wall := time.Since(start)
	b.ReportMetric(float64(last), "chat_events")
	b.ReportMetric(float64(events)/wall.Seconds(), "events/s")
	b.ReportMetric(float64(bytes)/(1<<20)/wall.Seconds(), "MiB/s")
	b.ReportMetric(float64(reconnects)/float64(b.N), "reconnects/op")
	b.ReportMetric(fill.Seconds(), "fill_s")
}

// replayOnce reads chat from since 0 to chat.resumed, reconnecting (with
// since) whenever the socket closes, and checks that the seqs are 1..last,
// each once.
func replayOnce(ctx context.Context, addr, chat string, last uint64) (events, reconnects int, size int64, err error) {
	var seq uint64
	for {
		d := websocket.Dialer{HandshakeTimeout: benchWait, ReadBufferSize: 64 << 10}
		c, _, err := d.DialContext(ctx, "ws://"+addr+"/ws", http.Header{"Authorization": {"Bearer " + benchToken}})
		if err != nil {
			return 0, 0, 0, err
		}
		_ = c.WriteMessage(websocket.TextMessage, []byte(`{"type":"hello","client":"bench","watch":false}`))
		_ = c.WriteMessage(websocket.TextMessage, fmt.Appendf(nil, `{"type":"chat.open","chat":%q,"since":%d}`, chat, seq))
		for {
			_ = c.SetReadDeadline(time.Now().Add(benchWait))
			_, b, err := c.ReadMessage()
			if err != nil {
				c.Close()
				if reconnects++; reconnects > 100 {
					return 0, 0, 0, fmt.Errorf("replay: %d reconnects, the last after seq %d: %v", reconnects, seq, err)
				}
				break
			}
			size += int64(len(b))
			var f struct {
				Type string `json:"type"`
				Seq  uint64 `json:"seq"`
			}
			if err := json.Unmarshal(b, &f); err != nil {
				c.Close()
				return 0, 0, 0, fmt.Errorf("frame %.200q: %v", b, err)
			}
			switch {
			case f.Type == "welcome":
			case f.Type == "chat.resumed":
				c.Close()
				if seq != last {
					return 0, 0, 0, fmt.Errorf("resumed at seq %d, want %d", seq, last)
				}
				return events, reconnects, size, nil
			case f.Seq == seq+1:
				seq, events = f.Seq, events+1
			default:
				c.Close()
				return 0, 0, 0, fmt.Errorf("%s with seq %d after seq %d", f.Type, f.Seq, seq)
			}
		}
	}
}
