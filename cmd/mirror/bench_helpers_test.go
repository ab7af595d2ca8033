package main

// Helpers of the benchmarks in bench_test.go (see docs/benchmarks.md): an
// in-process `mirror serve`, `mirror serve` as a child process, a small
// WebSocket client that drives many chats over few sockets and the 100k-chat
// fill (the bare bbolt commit is chats/barecommit). Nothing here runs in a plain
// `go test`: every entry point is called from a Benchmark function, or from
// init when the test binary is re-executed with MIRROR_BENCH_CHILD set.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/config/datadir"
	mruntime "github.com/mirror-gateway/mirror/runtime"
)

const (
	benchToken = "bench-token-0123456789abcdef"
	// benchYAML is the runtime.yaml of every benchmark: the builtin model
	// answering at once, one token sending as fast as it can (the default
	// message rate is a person's), everything else the defaults.
	benchYAML = "providers: [{name: builtin, kind: builtin, delay: 0s}]\nlimits: {messages_per_minute: 100000000}\n"
	// benchWait bounds every single wait of the benchmarks.
	benchWait = 30 * time.Second
)

// writeBenchConfig writes benchYAML into dir and returns its path.
func writeBenchConfig(tb testing.TB, dir string) string {
	tb.Helper()
	p := filepath.Join(dir, "runtime.yaml")
	if err := os.WriteFile(p, []byte(benchYAML), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// lockedBuffer collects a server's log for error messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startInProc runs the real `mirror serve` (the serve function of this
// package) in this process, on a data dir under dir, and returns its address.
// Running it in-process puts the server in -cpuprofile.
func startInProc(tb testing.TB, dir string) (addr string, logs *lockedBuffer) {
	tb.Helper()
	cfg := writeBenchConfig(tb, dir)
	data := filepath.Join(dir, "data")
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	logs = &lockedBuffer{}
	getenv := func(k string) string {
		if k == "MIRROR_TOKEN" {
			return benchToken
		}
		return ""
	}
	done := make(chan error, 1)
	go func() {
		err := serve(ctx, []string{"--config", cfg, "--data", data, "--addr", "127.0.0.1:0"}, pw, logs, getenv)
		pw.Close()
		done <- err
	}()
	tb.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				tb.Errorf("serve: %v", err)
			}
		case <-time.After(benchWait):
			tb.Errorf("serve did not stop")
		}
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(pr).ReadString('\n')
		line <- s
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case s := <-line:
		a, ok := strings.CutPrefix(strings.TrimSpace(s), "mirror: listening on http://")
		if !ok {
			tb.Fatalf("first line %q; log %s", s, logs)
		}
		return a, logs
	case err := <-done:
		tb.Fatalf("serve ended: %v; log %s", err, logs)
	case <-time.After(benchWait):
		tb.Fatalf("no listening line; log %s", logs)
	}
	return "", nil
}

// child is `mirror serve` (this test binary re-executed) as a process.
type child struct {
	cmd    *exec.Cmd
	addr   string
	stdin  io.WriteCloser
	lines  chan string // stdout lines after the listening line
	stderr *lockedBuffer
	waited chan error
}

// startChild starts the test binary as `mirror serve` with env added (it must
// choose the mode: MIRROR_AS_MAIN=1 or MIRROR_BENCH_CHILD=heap) and waits for
// its listening line.
func startChild(tb testing.TB, cfg, data string, env ...string) *child {
	tb.Helper()
	bin := os.Args[0]
	if slices.Contains(env, "MIRROR_AS_MAIN=1") {
		bin = serveBinary()
	}
	cmd := exec.Command(bin, "serve", "--config", cfg, "--data", data, "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), append([]string{"MIRROR_TOKEN=" + benchToken}, env...)...)
	c := &child{cmd: cmd, stderr: &lockedBuffer{}, lines: make(chan string, 16), waited: make(chan error, 1)}
	cmd.Stderr = c.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { c.waited <- cmd.Wait() }()
	tb.Cleanup(func() { c.kill() })
	go func() {
		r := bufio.NewReader(out)
		for {
			s, err := r.ReadString('\n')
			if s != "" {
				select {
				case c.lines <- strings.TrimSpace(s):
				default:
				}
			}
			if err != nil {
				close(c.lines)
				return
			}
		}
	}()
	select {
	case s := <-c.lines:
		a, ok := strings.CutPrefix(s, "mirror: listening on http://")
		if !ok {
			tb.Fatalf("first line %q; stderr %s", s, c.stderr)
		}
		c.addr = a
	case <-time.After(benchWait):
		tb.Fatalf("no listening line; stderr %s", c.stderr)
	}
	return c
}

// serveBinary is the binary run as `mirror serve` by the process benchmarks:
// this test binary (MIRROR_AS_MAIN=1 makes it mirror), or the binary
// $MIRROR_BENCH_BIN names, to measure a real `go build` instead.
func serveBinary() string {
	if b := os.Getenv("MIRROR_BENCH_BIN"); b != "" {
		return b
	}
	return os.Args[0]
}

// stop sends SIGTERM and waits (bounded) for the exit.
func (c *child) stop(tb testing.TB) {
	tb.Helper()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-c.waited:
		c.waited <- err
		if err != nil {
			tb.Fatalf("exit after SIGTERM: %v; stderr %s", err, c.stderr)
		}
	case <-time.After(benchWait):
		tb.Fatalf("did not exit after SIGTERM; stderr %s", c.stderr)
	}
}

// kill ends the process if it still runs.
func (c *child) kill() {
	select {
	case err := <-c.waited:
		c.waited <- err
		return
	default:
	}
	_ = c.cmd.Process.Kill()
	select {
	case err := <-c.waited:
		c.waited <- err
	case <-time.After(benchWait):
	}
}

// procStatus returns the fields of /proc/PID/status in KiB (VmRSS, RssAnon...).
func procStatus(pid int) (map[string]int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 2 && f[1] == "kB" {
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err == nil {
				out[k] = n
			}
		}
	}
	return out, nil
}

// healthz does one GET /healthz.
func healthz(client *http.Client, addr string) error {
	resp, err := client.Get("http://" + addr + "/healthz")
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthz: %s", resp.Status)
	}
	return nil
}

// ---- the WebSocket client ----

// benchSock is one client socket carrying several chats.
type benchSock struct {
	c     *websocket.Conn
	wmu   sync.Mutex
	setup chan sockFrame // welcome, chat.created, chat.snapshot, unattributed errors

	mu    sync.Mutex
	chats map[string]*benchChat

	closed chan struct{}
	rerr   error // why the reader stopped, once closed is closed

	rotMu sync.Mutex // one chat replacement at a time (see rotate)
	rots  int

	welcomeBytes int // size of the welcome frame
}

// sockFrame is what the client decodes of a frame.
type sockFrame struct {
	Type string          `json:"type"`
	Chat json.RawMessage `json:"chat"` // an id on events, an object on chat.created
	Req  string          `json:"req"`
	Code string          `json:"code"`
	raw  []byte
}

func (f sockFrame) chatID() string {
	var id string
	if json.Unmarshal(f.Chat, &id) == nil {
		return id
	}
	var obj struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(f.Chat, &obj)
	return obj.ID
}

// benchChat is one chat driven by the client: one message in flight at a time.
type benchChat struct {
	id   string
	sock *benchSock
	fin  chan error // turn.finished (nil) or what went wrong instead
	sent int
	pre  []byte // the message.send frame up to the client_id value
}

// Frames the client never needs to decode: the bulk of every turn.
var skipPrefixes = [][]byte{
	[]byte(`{"type":"reply.delta"`),
	[]byte(`{"type":"message.accepted"`),
	[]byte(`{"type":"message.picked"`),
	[]byte(`{"type":"turn.started"`),
}

func dialBench(ctx context.Context, addr string) (*benchSock, error) {
	d := websocket.Dialer{HandshakeTimeout: benchWait, ReadBufferSize: 16 << 10, WriteBufferSize: 4 << 10}
	h := http.Header{"Authorization": {"Bearer " + benchToken}}
	c, _, err := d.DialContext(ctx, "ws://"+addr+"/ws", h)
	if err != nil {
		return nil, err
	}
	s := &benchSock{c: c, setup: make(chan sockFrame, 4096), chats: map[string]*benchChat{}, closed: make(chan struct{})}
	go s.read()
	if err := s.write([]byte(`{"type":"hello","client":"bench","watch":false,"req":"h"}`)); err != nil {
		c.Close()
		return nil, err
	}
	w, err := s.await("welcome")
	if err != nil {
		c.Close()
		return nil, err
	}
	s.welcomeBytes = len(w.raw)
	return s, nil
}

func (s *benchSock) write(b []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.c.SetWriteDeadline(time.Now().Add(benchWait))
	return s.c.WriteMessage(websocket.TextMessage, b)
}

func (s *benchSock) read() {
	defer close(s.closed)
	for {
		_, data, err := s.c.ReadMessage()
		if err != nil {
			s.rerr = err
			return
		}
		skip := false
		for _, p := range skipPrefixes {
			if bytes.HasPrefix(data, p) {
				skip = true
				break
			}
		}
		if skip {
			continue
		}
		var f sockFrame
		if err := json.Unmarshal(data, &f); err != nil {
			s.rerr = fmt.Errorf("bad frame %.200q: %v", data, err)
			s.c.Close()
			return
		}
		f.raw = data
		switch f.Type {
		case "turn.finished", "turn.failed", "error":
			var ch *benchChat
			if f.Type != "error" || f.Req == "" {
				s.mu.Lock()
				ch = s.chats[f.chatID()]
				s.mu.Unlock()
			}
			if ch == nil {
				if f.Type == "error" {
					s.toSetup(f)
				}
				continue
			}
			var res error
			if f.Type != "turn.finished" {
				res = fmt.Errorf("chat %s: %.300s", f.chatID(), data)
			}
			select {
			case ch.fin <- res:
			default:
				// More answers than messages in flight: say so on the next wait.
				select {
				case <-ch.fin:
				default:
				}
				ch.fin <- fmt.Errorf("chat %s: unexpected %s", f.chatID(), f.Type)
			}
		case "welcome", "chat.created", "chat.snapshot":
			s.toSetup(f)
		}
	}
}

func (s *benchSock) toSetup(f sockFrame) {
	select {
	case s.setup <- f:
	default:
	}
}

// await waits for the next setup frame, which must be of type typ.
func (s *benchSock) await(typ string) (sockFrame, error) {
	t := time.NewTimer(benchWait)
	defer t.Stop()
	select {
	case f := <-s.setup:
		if f.Type != typ {
			return f, fmt.Errorf("waiting for %s: got %.300s", typ, f.raw)
		}
		return f, nil
	case <-s.closed:
		return sockFrame{}, fmt.Errorf("waiting for %s: socket closed: %v", typ, s.rerr)
	case <-t.C:
		return sockFrame{}, fmt.Errorf("no %s in %s", typ, benchWait)
	}
}

// addChats creates n chats on the socket and opens them (pipelined).
func (s *benchSock) addChats(n, base int) ([]*benchChat, error) {
	for i := range n {
		if err := s.write(fmt.Appendf(nil, `{"type":"chat.create","title":"bench %d","req":"c%d"}`, base+i, base+i)); err != nil {
			return nil, err
		}
	}
	out := make([]*benchChat, 0, n)
	for range n {
		f, err := s.await("chat.created")
		if err != nil {
			return nil, err
		}
		id := f.chatID()
		ch := &benchChat{sock: s, fin: make(chan error, 1)}
		ch.setID(id)
		s.mu.Lock()
		s.chats[id] = ch
		s.mu.Unlock()
		out = append(out, ch)
	}
	for _, ch := range out {
		if err := s.write(fmt.Appendf(nil, `{"type":"chat.open","chat":%q,"req":"o"}`, ch.id)); err != nil {
			return nil, err
		}
	}
	for range out {
		if _, err := s.await("chat.snapshot"); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (ch *benchChat) setID(id string) {
	ch.id, ch.sent = id, 0
	ch.pre = fmt.Appendf(nil, `{"type":"message.send","chat":%q,"text":"hello from a benchmark, how are you today?","client_id":"`, id)
}

// maxTurnsPerChat is how many turns a chat has before the client replaces it
// with a fresh one on the same socket (outside the measured latency). A turn
// copies the chat's whole history (see docs/benchmarks.md), so without this
// the figures would depend on how long the benchmark ran.
const maxTurnsPerChat = 100

// rotate replaces the chat by a new one, created and opened on its socket.
func (ch *benchChat) rotate() error {
	s := ch.sock
	s.rotMu.Lock()
	defer s.rotMu.Unlock()
	s.rots++
	if err := s.write(fmt.Appendf(nil, `{"type":"chat.create","title":"bench","req":"r%d"}`, s.rots)); err != nil {
		return err
	}
	f, err := s.await("chat.created")
	if err != nil {
		return err
	}
	old, id := ch.id, f.chatID()
	if err := s.write(fmt.Appendf(nil, `{"type":"chat.open","chat":%q,"req":"o"}`, id)); err != nil {
		return err
	}
	if _, err := s.await("chat.snapshot"); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.chats, old)
	s.chats[id] = ch
	s.mu.Unlock()
	ch.setID(id)
	return s.write(fmt.Appendf(nil, `{"type":"chat.close","chat":%q}`, old))
}

// turn sends one message (a fresh client_id) and waits for turn.finished.
func (ch *benchChat) turn(timer *time.Timer) (time.Duration, error) {
	if ch.sent >= maxTurnsPerChat {
		if err := ch.rotate(); err != nil {
			return 0, err
		}
	}
	ch.sent++
	frame := append(append(slices.Clip(ch.pre), "k"+strconv.Itoa(ch.sent)...), `"}`...)
	t0 := time.Now()
	if err := ch.sock.write(frame); err != nil {
		return 0, err
	}
	timer.Reset(benchWait)
	defer timer.Stop()
	select {
	case err := <-ch.fin:
		return time.Since(t0), err
	case <-ch.sock.closed:
		return 0, fmt.Errorf("chat %s: socket closed: %v", ch.id, ch.sock.rerr)
	case <-timer.C:
		return 0, fmt.Errorf("chat %s: no turn.finished in %s", ch.id, benchWait)
	}
}

// fleet is a set of chats spread over sockets.
type fleet struct {
	socks []*benchSock
	chats []*benchChat
}

// maxSockets is how many sockets carry the chats: chats are dealt round-robin
// over min(chats, maxSockets) sockets (1000 chats: 50 sockets of 20).
// MIRROR_BENCH_SOCKETS overrides it, to see what sharing a socket costs.
var maxSockets = func() int {
	if n, err := strconv.Atoi(os.Getenv("MIRROR_BENCH_SOCKETS")); err == nil && n > 0 {
		return n
	}
	return 50
}()

func newFleet(tb testing.TB, addr string, nChats int) *fleet {
	tb.Helper()
	nSocks := min(nChats, maxSockets)
	f := &fleet{socks: make([]*benchSock, nSocks)}
	ctx, cancel := context.WithTimeout(context.Background(), benchWait)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, nSocks)
	per := make([][]*benchChat, nSocks)
	for i := range nSocks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := dialBench(ctx, addr)
			if err != nil {
				errs[i] = err
				return
			}
			f.socks[i] = s
			n := nChats / nSocks
			if i < nChats%nSocks {
				n++
			}
			per[i], errs[i] = s.addChats(n, i*1000000)
		}()
	}
	wg.Wait()
	tb.Cleanup(f.close)
	if err := errors.Join(errs...); err != nil {
		tb.Fatal(err)
	}
	for _, p := range per {
		f.chats = append(f.chats, p...)
	}
	return f
}

func (f *fleet) close() {
	for _, s := range f.socks {
		if s != nil {
			s.c.Close()
		}
	}
}

// runTurns drives the chats in a closed loop (one message in flight per chat)
// until `total` turns have finished (the warm-up), and returns every turn's
// latency and the wall time.
func (f *fleet) runTurns(total int) ([]time.Duration, time.Duration, error) {
	var left atomic.Int64
	left.Store(int64(total))
	lats := make([][]time.Duration, len(f.chats))
	errs := make([]error, len(f.chats))
	var failed atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	for i, ch := range f.chats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			timer := time.NewTimer(benchWait)
			timer.Stop()
			for !failed.Load() && left.Add(-1) >= 0 {
				d, err := ch.turn(timer)
				if err != nil {
					errs[i] = err
					failed.Store(true)
					return
				}
				lats[i] = append(lats[i], d)
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	return all, wall, errors.Join(errs...)
}

// turnRec is one finished turn: when it finished and how long it took.
type turnRec struct {
	end time.Time
	lat time.Duration
}

// drive runs every chat in a closed loop (one message in flight per chat)
// until stop is closed, signalling done once per finished turn. With period
// > 0 each chat also paces itself: it sends at most one message per period,
// the chats' schedules spread evenly over the period (an offered load of
// chats/period turns per second). The first failure goes to failed; drive
// returns once every chat has ended its turn in flight (each bounded by
// benchWait).
func (f *fleet) drive(stop <-chan struct{}, done chan<- struct{}, failed chan<- error, period time.Duration) ([]turnRec, error) {
	recs := make([][]turnRec, len(f.chats))
	errs := make([]error, len(f.chats))
	var wg sync.WaitGroup
	t0 := time.Now()
	for i, ch := range f.chats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			timer := time.NewTimer(benchWait)
			timer.Stop()
			next := t0.Add(period * time.Duration(i) / time.Duration(len(f.chats)))
			for {
				if period > 0 {
					if wait := time.Until(next); wait > 0 {
						timer.Reset(wait)
						select {
						case <-timer.C:
						case <-stop:
							return
						}
					}
					next = next.Add(period)
					if now := time.Now(); next.Before(now) {
						next = now // behind: no burst to catch up
					}
				}
				select {
				case <-stop:
					return
				default:
				}
				d, err := ch.turn(timer)
				if err != nil {
					errs[i] = err
					select {
					case failed <- err:
					default:
					}
					return
				}
				recs[i] = append(recs[i], turnRec{time.Now(), d})
				select {
				case done <- struct{}{}:
				case <-stop:
					return
				}
			}
		}()
	}
	wg.Wait()
	var all []turnRec
	for _, r := range recs {
		all = append(all, r...)
	}
	return all, errors.Join(errs...)
}

// pct returns the p-th percentile (0..100) of sorted durations.
func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// cpuTime is the user+system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// hostBusy is the CPU time every process of the machine has used, from
// /proc/stat (user, nice, system, irq, softirq, steal; USER_HZ 100), so a
// benchmark can tell how much of the machine others used meanwhile.
func hostBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var ticks int64
	for i, v := range f {
		if i == 0 || i == 4 || i == 5 || i > 8 { // "cpu", idle, iowait, guest*
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ---- 100k chats and the heap child ----

// fillChats creates n chats in the data dir through the public chats API
// (Service.Create, many at once, so the store folds them into group commits).
func fillChats(tb testing.TB, data string, n int) {
	tb.Helper()
	dir, err := datadir.Prepare(data)
	if err != nil {
		tb.Fatal(err)
	}
	db, err := chats.OpenDB(filepath.Join(dir, DBFile), time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	store, err := chats.NewStore(db)
	if err != nil {
		tb.Fatal(err)
	}
	defer store.Close()
	cfg := config.Default()
	zero := time.Duration(0)
	cfg.Providers[0].Delay = &zero
	eng, err := mruntime.New(cfg, func(string) string { return "" })
	if err != nil {
		tb.Fatal(err)
	}
	svc := chats.New(chats.Options{Store: store, Turner: eng, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer svc.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, 1024)
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if _, err := svc.Create(ctx, fmt.Sprintf("Bench chat %d", i), "", chats.Origin{}); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		tb.Fatal(err)
	}
}

// heapStats is what the heap child prints.
type heapStats struct {
	HeapInuse, HeapAlloc, Sys        uint64
	RSSKiB, AnonKiB, FileKiB, HWMKiB int64
}

// When the benchmark re-executes the test binary with MIRROR_BENCH_CHILD=heap,
// it is `mirror serve` that also answers "measure" lines on stdin with its
// heap after two full GCs, as one JSON line on stdout.
func init() {
	if os.Getenv("MIRROR_BENCH_CHILD") == "heap" {
		os.Exit(heapChild(os.Args[1:]))
	}
}

func heapChild(args []string) int {
	if len(args) == 0 || args[0] != "serve" {
		fmt.Fprintln(os.Stderr, "heap child: want serve ARGS")
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncWriter{w: os.Stdout}
	done := make(chan int, 1)
	go func() {
		err := serve(ctx, args[1:], out, os.Stderr, os.Getenv)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mirror:", err)
			done <- 1
			return
		}
		done <- 0
	}()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	for {
		select {
		case code := <-done:
			return code
		case l, ok := <-lines:
			if !ok {
				cancel()
				select {
				case code := <-done:
					return code
				case <-time.After(benchWait):
					return 1
				}
			}
			if l == "measure" {
				runtime.GC()
				runtime.GC()
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				st := heapStats{HeapInuse: m.HeapInuse, HeapAlloc: m.HeapAlloc, Sys: m.Sys}
				if ps, err := procStatus(os.Getpid()); err == nil {
					st.RSSKiB, st.AnonKiB, st.FileKiB, st.HWMKiB = ps["VmRSS"], ps["RssAnon"], ps["RssFile"], ps["VmHWM"]
				}
				b, _ := json.Marshal(st)
				fmt.Fprintf(out, "heap %s\n", b)
			}
		}
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// freeAddr returns a loopback address nobody listens on (just now).
func freeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	a := ln.Addr().String()
	ln.Close()
	return a
}
