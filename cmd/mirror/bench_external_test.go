package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Issue 20, item 4: the gateway's CPU per turn under load, with the three
// parties in three processes, as in production: the real `mirror` binary
// (built once by the benchmark with `go build`, or $MIRROR_BENCH_BIN), a
// fake OpenAI chat-completions server streaming real SSE (this test binary
// re-executed with MIRROR_BENCH_CHILD=openai), and the load client (the
// benchmark process itself, driving chats over WebSocket as the in-process
// benchmarks do). The gateway's CPU is read from /proc/PID/stat (utime +
// stime) at the start and end of the timed window.

// fakeReply is what the fake model answers: about 400 characters in 33
// streamed pieces, the shape of the builtin model's answer.
var fakeReply = func() []string {
	words := strings.Fields(strings.Repeat("Mirror answers this benchmark with a steady stream of ordinary words. ", 6))
	var parts []string
	for i := 0; i < len(words); i += 2 {
		j := min(i+2, len(words))
		parts = append(parts, strings.Join(words[i:j], " ")+" ")
	}
	return parts
}()

func init() {
	if os.Getenv("MIRROR_BENCH_CHILD") == "openai" {
		os.Exit(fakeOpenAIChild())
	}
}

// fakeOpenAIChild serves /v1/chat/completions on 127.0.0.1 until stdin
// closes, printing "listening ADDR" first. Each answer is fakeReply, one
// SSE chunk per piece, flushed as a real server sends them, then the usage
// chunk and [DONE].
func fakeOpenAIChild() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var chunks [][]byte
	for i, p := range fakeReply {
		delta := fmt.Sprintf(`{"content":%s}`, strconv.Quote(p))
		if i == 0 {
			delta = fmt.Sprintf(`{"role":"assistant","content":%s}`, strconv.Quote(p))
		}
		chunks = append(chunks, fmt.Appendf(nil, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}]}\n\n", delta))
	}
	tail := []byte("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake\",\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":80,\"total_tokens\":180}}\n\ndata: [DONE]\n\n")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl, _ := w.(http.Flusher)
		for _, c := range chunks {
			if _, err := w.Write(c); err != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
		}
		_, _ = w.Write(tail)
	})}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("listening %s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = srv.Close()
	return 0
}

// mirrorBinary is the `mirror` binary the external benchmark runs:
// $MIRROR_BENCH_BIN, else this package built once into dir.
func mirrorBinary(b *testing.B, dir string) string {
	b.Helper()
	if p := os.Getenv("MIRROR_BENCH_BIN"); p != "" {
		return p
	}
	out := filepath.Join(dir, "mirror")
	cmd := exec.Command("go", "build", "-o", out, ".")
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, msg)
	}
	return out
}

// procStat is /proc/PID/stat's fields from the third (the state) on.
func procStat(pid int) ([]string, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(raw)
	// The command name (field 2) may hold spaces: count from its ')'.
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return nil, fmt.Errorf("short /proc/%d/stat", pid)
	}
	return f, nil
}

// procFaults is how many minor page faults process pid has taken (field
// 10 of /proc/PID/stat): pages touched for the first time, the binary's
// own among them.
func procFaults(pid int) (int64, error) {
	f, err := procStat(pid)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(f[7], 10, 64)
}

// procCPU is the user + system CPU time of process pid, from
// /proc/PID/stat (fields 14 and 15, in clock ticks of 10 ms).
func procCPU(pid int) (time.Duration, error) {
	f, err := procStat(pid)
	if err != nil {
		return 0, err
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// startFakeOpenAI runs the fake model server as a child process and returns
// its base URL and pid.
func startFakeOpenAI(b *testing.B) (string, int) {
	b.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "MIRROR_BENCH_CHILD=openai")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	b.Cleanup(func() {
		stdin.Close()
		select {
		case <-waited:
		case <-time.After(benchWait):
			_ = cmd.Process.Kill()
		}
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(s)
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case s := <-line:
		addr, ok := strings.CutPrefix(s, "listening ")
		if !ok {
			b.Fatalf("fake model said %q", s)
		}
		return "http://" + addr, cmd.Process.Pid
	case <-time.After(benchWait):
		b.Fatal("fake model did not start")
	}
	return "", 0
}

// BenchmarkExternalOpenAI drives the real `mirror` binary through the
// OpenAI adapter with the fake model and the load client in other
// processes, at 100 and 1000 chats (50 sockets, MIRROR_BENCH_SOCKETS
// changes it) in a closed loop. One iteration is one run of
// MIRROR_BENCH_DURATION (default 10s) after the warm-up; use -benchtime=1x.
// Metrics: turns/s, the gateway's CPU per turn (gw_cpu_ms/turn) and its
// cores, the fake model's cores, p50 and p99.
func BenchmarkExternalOpenAI(b *testing.B) {
	dur := 10 * time.Second
	if d, err := time.ParseDuration(os.Getenv("MIRROR_BENCH_DURATION")); err == nil && d > 0 {
		dur = d
	}
	bin := mirrorBinary(b, b.TempDir())
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("chats=%d", n), func(b *testing.B) {
			for b.Loop() {
				externalRun(b, bin, n, dur)
			}
		})
	}
}

// writeOpenAIConfig writes a runtime.yaml into dir whose one model is
// served by the fake OpenAI server at base, and returns its path.
func writeOpenAIConfig(b *testing.B, dir, base string) string {
	cfg := filepath.Join(dir, "runtime.yaml")
	yaml := fmt.Sprintf("providers: [{name: fake, kind: openai, base_url: %s/v1}]\n"+
		"models: [{name: default, provider: fake, model: fake-model, window: 128000}]\n"+
		"chains: {default: [default]}\n"+
		"limits: {messages_per_minute: 100000000}\n", base)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	return cfg
}

func externalRun(b *testing.B, bin string, nChats int, dur time.Duration) {
	dir := b.TempDir()
	base, modelPID := startFakeOpenAI(b)
	cfg := writeOpenAIConfig(b, dir, base)
	// MIRROR_BENCH_GW_PROFILE=FILE runs the test binary as the gateway
	// instead, which writes a CPU profile of the timed window to FILE.cpu.
	prof := os.Getenv("MIRROR_BENCH_GW_PROFILE")
	env := []string{"MIRROR_AS_MAIN=1"}
	if prof != "" {
		env = append(env, statsEnv+"="+prof)
	} else {
		old, had := os.LookupEnv("MIRROR_BENCH_BIN")
		os.Setenv("MIRROR_BENCH_BIN", bin) // startChild runs serveBinary()
		defer func() {
			if had {
				os.Setenv("MIRROR_BENCH_BIN", old)
			} else {
				os.Unsetenv("MIRROR_BENCH_BIN")
			}
		}()
	}
	c := startChild(b, cfg, filepath.Join(dir, "data"), env...)
	defer c.kill()
	pid := c.cmd.Process.Pid

	f := newFleet(b, c.addr, nChats)
	if _, _, err := f.runTurns(2 * len(f.chats)); err != nil {
		b.Fatalf("warm-up: %v; stderr %s", err, c.stderr)
	}
	stop := make(chan struct{})
	done := make(chan struct{}, 1<<16)
	failed := make(chan error, 1)
	type result struct {
		recs []turnRec
		err  error
	}
	res := make(chan result, 1)
	go func() {
		recs, err := f.drive(stop, done, failed, 0)
		res <- result{recs, err}
	}()
	// The first wave of turns, outside the window.
	for range nChats {
		select {
		case <-done:
		case err := <-failed:
			close(stop)
			b.Fatalf("%v; stderr %s", err, c.stderr)
		}
	}
	b.StopTimer()
	var turns atomic.Int64
	gw0, err := procCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	m0, _ := procCPU(modelPID)
	self0, host0 := cpuTime(), hostBusy()
	var stats0 []string // the gateway's figures at the start of the window
	if prof != "" {
		_ = c.cmd.Process.Signal(syscall.SIGUSR1) // starts the profile
		stats0 = childStats(prof, "1 ")
	}
	var trace *straceRun
	if file := os.Getenv("MIRROR_BENCH_STRACE"); file != "" {
		trace = startStrace(b, pid, file)
	}
	start := time.Now()
	// The window is at least dur and a whole number of rounds (nChats
	// turns): when the machine is slow, a round of 1000 chats takes
	// seconds, and a window cut inside one would count its CPU but only
	// part of its turns.
	deadline := time.NewTimer(dur)
	hard := time.NewTimer(4*dur + benchWait)
	defer hard.Stop()
	timeUp := false
loop:
	for {
		select {
		case <-done:
			if n := turns.Add(1); timeUp && n%int64(nChats) == 0 {
				break loop
			}
		case err := <-failed:
			close(stop)
			b.Fatalf("%v; stderr %s", err, c.stderr)
		case <-deadline.C:
			timeUp = true
		case <-hard.C:
			break loop
		}
	}
	end := time.Now()
	if prof != "" {
		_ = c.cmd.Process.Signal(syscall.SIGUSR1) // stops it
	}
	if trace != nil {
		calls := trace.stop(b)
		n := float64(turns.Load())
		for _, name := range []string{"write", "read", "futex", "pwrite64", "fdatasync", "nanosleep", "epoll_pwait"} {
			b.ReportMetric(float64(calls[name])/n, name+"/turn")
		}
		b.ReportMetric(float64(calls["total"])/n, "syscalls/turn")
	}
	gw1, _ := procCPU(pid)
	m1, _ := procCPU(modelPID)
	self, host := cpuTime()-self0, hostBusy()-host0
	close(stop)
	r := <-res
	if r.err != nil {
		b.Fatalf("%v; stderr %s", r.err, c.stderr)
	}
	if prof != "" {
		// The child writes its figures (seq 2) after it stopped the profile.
		stats1 := childStats(prof, "2 ")
		if a0, a1 := statField(stats0, 5), statField(stats1, 5); a1 > a0 && a0 > 0 {
			defer func(n int64) { b.ReportMetric((a1-a0)/float64(n), "gw_B/turn") }(turns.Load())
		}
		// The collector's share of the gateway's CPU in the window (its
		// idle-time marking left out: that is CPU nobody else wanted).
		gc := statField(stats1, 1) - statField(stats0, 1) - (statField(stats1, 3) - statField(stats0, 3))
		if used := statField(stats1, 2) - statField(stats0, 2); used > 0 {
			defer b.ReportMetric(gc/used, "gw_gc_share")
		}
		// And a heap profile (FILE.heap: allocations since the start too).
		_ = os.Remove(prof + ".heap")
		_ = c.cmd.Process.Signal(syscall.SIGUSR2)
		for t0 := time.Now(); time.Since(t0) < benchWait; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(prof + ".heap"); err == nil {
				break
			}
		}
	}
	b.StartTimer()
	var lats []time.Duration
	for _, t := range r.recs {
		if t.end.After(start) && !t.end.After(end) {
			lats = append(lats, t.lat)
		}
	}
	slices.Sort(lats)
	wall := end.Sub(start).Seconds()
	n := float64(turns.Load())
	gw, model := (gw1 - gw0).Seconds(), (m1 - m0).Seconds()
	b.ReportMetric(n/wall, "turns/s")
	b.ReportMetric(gw*1000/n, "gw_cpu_ms/turn")
	b.ReportMetric(gw/wall, "gw_cores")
	b.ReportMetric(model/wall, "model_cores")
	b.ReportMetric(self.Seconds()/wall, "client_cores")
	b.ReportMetric(max(0, (host.Seconds()-gw-model-self.Seconds())/wall), "other_cores")
	b.ReportMetric(ms(pct(lats, 50)), "p50_ms")
	b.ReportMetric(ms(pct(lats, 99)), "p99_ms")
}

// childStats waits (bounded) for the stats file a profiled gateway writes
// on SIGUSR1 to carry the figures of the signal numbered by prefix, and
// returns its fields: seq, GC CPU seconds, CPU seconds used, idle GC
// marking seconds, GC cycles, bytes allocated, live heap bytes (nil when
// none came).
func childStats(path, prefix string) []string {
	for t0 := time.Now(); time.Since(t0) < benchWait; time.Sleep(10 * time.Millisecond) {
		raw, err := os.ReadFile(path)
		if err != nil || !strings.HasPrefix(string(raw), prefix) {
			continue
		}
		if f := strings.Fields(string(raw)); len(f) >= 7 {
			return f
		}
		return nil
	}
	return nil
}

// statField is field i of childStats as a number; 0 when absent.
func statField(f []string, i int) float64 {
	if i >= len(f) {
		return 0
	}
	v, _ := strconv.ParseFloat(f[i], 64)
	return v
}

// straceRun is `strace -c -f` attached to the gateway for the window
// (MIRROR_BENCH_STRACE=FILE): how many system calls of each kind a turn
// costs. The gateway runs far slower traced, so only the counts per turn
// mean anything, not the times.
type straceRun struct {
	cmd  *exec.Cmd
	file string
}

func startStrace(b *testing.B, pid int, file string) *straceRun {
	cmd := exec.Command("strace", "-c", "-f", "-p", strconv.Itoa(pid), "-o", file)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("strace: %v", err)
	}
	// strace reports each thread it attached to; the window starts once
	// it has.
	attached := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			if !once && strings.Contains(sc.Text(), "attached") {
				once = true
				close(attached)
			}
		}
	}()
	select {
	case <-attached:
	case <-time.After(benchWait):
		_ = cmd.Process.Kill()
		b.Fatal("strace did not attach")
	}
	return &straceRun{cmd: cmd, file: file}
}

// stop detaches strace and returns the calls counted per system call
// ("total" for all of them).
func (s *straceRun) stop(b *testing.B) map[string]int {
	_ = s.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(benchWait):
		_ = s.cmd.Process.Kill()
		b.Fatal("strace did not stop")
	}
	raw, err := os.ReadFile(s.file)
	if err != nil {
		b.Fatal(err)
	}
	calls := map[string]int{}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		// % time, seconds, usecs/call, calls, [errors,] syscall
		if len(f) < 5 {
			continue
		}
		if n, err := strconv.Atoi(f[3]); err == nil {
			calls[f[len(f)-1]] = n
		}
	}
	return calls
}
