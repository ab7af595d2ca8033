package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Issue 20, items 1 and 2: what the first turn of a fresh process costs
// (the tokenizer was loaded then), how much of the CPU the collector takes
// under load, and whether memory goes back to the system once the load
// ends. Each runs `mirror serve` as a child process (the test binary, or
// MIRROR_BENCH_BIN) and reads its /proc status; the collector's share
// needs the test binary, which answers SIGUSR1 with its CPU figures.

// statsEnv names the file a child started with it writes its CPU figures
// to on SIGUSR1 ("seq gc_cpu_s used_cpu_s ..."), and its heap profile to on
// SIGUSR2 (the file name plus .heap). SIGUSR1 also starts a CPU profile
// (the file name plus .cpu), and the next one stops it.
const statsEnv = "MIRROR_BENCH_STATS"

func init() {
	path := os.Getenv(statsEnv)
	if path == "" || os.Getenv("MIRROR_AS_MAIN") != "1" {
		return
	}
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		seq := 0
		profiling := false
		for s := range sig {
			seq++
			if s == syscall.SIGUSR1 { // the load starts or ends: a CPU profile of it
				if profiling {
					pprof.StopCPUProfile()
					profiling = false
				} else if f, err := os.Create(path + ".cpu"); err == nil {
					profiling = pprof.StartCPUProfile(f) == nil
				}
			}
			if s == syscall.SIGUSR2 {
				// The memory classes too, for the log of the run.
				var lines []string
				for _, d := range metrics.All() {
					if strings.HasPrefix(d.Name, "/memory/classes/") || d.Name == "/sched/goroutines:goroutines" {
						m := []metrics.Sample{{Name: d.Name}}
						metrics.Read(m)
						if m[0].Value.Kind() == metrics.KindUint64 {
							lines = append(lines, fmt.Sprintf("%s %d KiB", d.Name, m[0].Value.Uint64()>>10))
						}
					}
				}
				_ = os.WriteFile(path+".classes", []byte(strings.Join(lines, "\n")), 0o600)
				// A heap profile shows the heap as of the collection two
				// cycles back: two collections make it the heap now.
				runtime.GC()
				runtime.GC()
				if f, err := os.Create(path + ".heap.tmp"); err == nil {
					_ = pprof.Lookup("heap").WriteTo(f, 0)
					f.Close()
					_ = os.Rename(path+".heap.tmp", path+".heap")
				}
				continue
			}
			m := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"},
				{Name: "/cpu/classes/gc/mark/idle:cpu-seconds"}, {Name: "/gc/cycles/total:gc-cycles"},
				{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/live:bytes"}}
			metrics.Read(m)
			var ru syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
			used := time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
			_ = os.WriteFile(path+".tmp", fmt.Appendf(nil, "%d %g %g %g %d %d %d\n", seq, m[0].Value.Float64(), used,
				m[1].Value.Float64(), m[2].Value.Uint64(), m[3].Value.Uint64(), m[4].Value.Uint64()), 0o600)
			_ = os.Rename(path+".tmp", path)
		}
	}()
}

// childCPU asks the child for its collector's and its total CPU seconds so
// far; ok is false when the child is not the test binary.
func childCPU(b *testing.B, c *child, path string) (gc, used float64, ok bool) {
	b.Helper()
	if os.Getenv("MIRROR_BENCH_BIN") != "" {
		return 0, 0, false
	}
	old, _ := os.ReadFile(path)
	if err := c.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(benchWait)
	for time.Now().Before(deadline) {
		if cur, err := os.ReadFile(path); err == nil && len(cur) > 0 && string(cur) != string(old) {
			f := strings.Fields(string(cur))
			if len(f) >= 3 {
				b.Logf("child stats: seq gc_s used_s idle_mark_s cycles allocs live = %s", cur)
				gc, _ = strconv.ParseFloat(f[1], 64)
				used, _ = strconv.ParseFloat(f[2], 64)
				return gc, used, true
			}
		}
		time.Sleep(5 * time.Millisecond) // polling a file the child writes, bounded above
	}
	b.Fatalf("child did not write its CPU figures; stderr %s", c.stderr)
	return 0, 0, false
}

// gcShareOf is the share, in percent, of the CPU profile's samples spent
// in the collector: its mark workers, assists, sweeping and scavenging
// (read with go tool pprof). The runtime's own estimate (gc_%cpu_runtime_est)
// counts a mark worker's wall time, which on a machine shared with other
// work is far above the CPU it got.
func gcShareOf(profile string) (float64, error) {
	out, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=1000000", "-nodefraction=0", "-edgefraction=0",
		`-focus=^runtime\.(gcBgMarkWorker|gcAssistAlloc|gcAssistAlloc1|bgsweep|bgscavenge|gcStart|gcMarkTermination|sweepone|markrootSpans|gcDrain|scanobject)$`,
		os.Args[0], profile).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%v: %s", err, out)
	}
	// "Showing nodes accounting for 1.23s, 45.67% of 2.70s total"
	m := regexp.MustCompile(`accounting for [^,]+, ([0-9.]+)% of`).FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no share in %q", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

func rssMiB(b *testing.B, c *child) float64 {
	b.Helper()
	st, err := procStatus(c.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	return float64(st["VmRSS"]) / 1024
}

// BenchmarkFirstTurn: a fresh `mirror serve` (empty data dir), one chat,
// the latency of its first turn and of its second, then of a second chat's
// first turn, and the RSS just started and after the first turn. Each iteration is one process; the
// metrics are medians.
func BenchmarkFirstTurn(b *testing.B) {
	dir := b.TempDir()
	cfg := writeBenchConfig(b, dir)
	var first, second, other, rss0, rss1, faults1, faults2 []float64
	i := 0
	for b.Loop() {
		i++
		c := startChild(b, cfg, filepath.Join(dir, fmt.Sprintf("data%d", i)), "MIRROR_AS_MAIN=1")
		f := newFleet(b, c.addr, 1)
		time.Sleep(300 * time.Millisecond) // a benchmark's settling time, not synchronisation
		rss0 = append(rss0, rssMiB(b, c))
		for k := range 2 {
			pf0, err0 := procFaults(c.cmd.Process.Pid)
			lats, _, err := f.runTurns(1)
			if err != nil || len(lats) != 1 {
				b.Fatalf("turn %d: %v; stderr %s", k+1, err, c.stderr)
			}
			pf1, err1 := procFaults(c.cmd.Process.Pid)
			if err := errors.Join(err0, err1); err != nil {
				b.Fatalf("page faults of the gateway: %v", err)
			}
			if k == 0 {
				faults1 = append(faults1, float64(pf1-pf0))
				first = append(first, ms(lats[0]))
				time.Sleep(300 * time.Millisecond)
				rss1 = append(rss1, rssMiB(b, c))
			} else {
				faults2 = append(faults2, float64(pf1-pf0))
				second = append(second, ms(lats[0]))
			}
		}
		// A second chat's first turn in the same process: what is left of
		// the first turn's cost that is per chat, not per process.
		g := newFleet(b, c.addr, 1)
		lats, _, err := g.runTurns(1)
		if err != nil || len(lats) != 1 {
			b.Fatalf("other chat: %v; stderr %s", err, c.stderr)
		}
		other = append(other, ms(lats[0]))
		g.close()
		f.close()
		c.stop(b)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(median(other), "other_chat_first_ms")
	b.ReportMetric(median(first), "first_ms")
	b.ReportMetric(median(second), "second_ms")
	// The gateway's minor page faults during each turn: code and data the
	// first turn touches for the first time.
	b.ReportMetric(median(faults1), "first_faults")
	b.ReportMetric(median(faults2), "second_faults")
	b.ReportMetric(median(rss0), "rss_start_MiB")
	b.ReportMetric(median(rss1), "rss_first_turn_MiB")
}

// BenchmarkMemoryAfterLoad: a fresh `mirror serve`, one chat's first turn,
// then 1000 chats doing 5 turns each (MIRROR_BENCH_LOAD_TURNS changes the
// total), then every socket closed and a minute of idle. It reports the
// collector's share of the child's CPU during the load, and the RSS after
// the first turn, at the end of the load and after the idle minute. The
// model is the built-in one; MIRROR_BENCH_OPENAI=1 puts a fake OpenAI server
// (another process) behind the gateway instead.
func BenchmarkMemoryAfterLoad(b *testing.B) {
	turns := 5000
	if n, err := strconv.Atoi(os.Getenv("MIRROR_BENCH_LOAD_TURNS")); err == nil && n > 0 {
		turns = n
	}
	idle := time.Minute
	if d, err := time.ParseDuration(os.Getenv("MIRROR_BENCH_IDLE")); err == nil && d > 0 {
		idle = d
	}
	dir := b.TempDir()
	cfg := writeBenchConfig(b, dir)
	if os.Getenv("MIRROR_BENCH_OPENAI") != "" { // the OpenAI adapter, with its caches
		base, _ := startFakeOpenAI(b)
		cfg = writeOpenAIConfig(b, dir, base)
	}
	var anonIdle, fileIdle, anonFirst, fileFirst []float64
	var gcShare, gcEst, rssFirst, rssLoad, rssIdle, tps []float64
	i := 0
	for b.Loop() {
		i++
		stats := filepath.Join(dir, fmt.Sprintf("stats%d", i))
		c := startChild(b, cfg, filepath.Join(dir, fmt.Sprintf("data%d", i)), "MIRROR_AS_MAIN=1", statsEnv+"="+stats)
		one := newFleet(b, c.addr, 1)
		if _, _, err := one.runTurns(1); err != nil {
			b.Fatalf("first turn: %v; stderr %s", err, c.stderr)
		}
		time.Sleep(300 * time.Millisecond) // a benchmark's settling time, not synchronisation
		rssFirst = append(rssFirst, rssMiB(b, c))
		if st, err := procStatus(c.cmd.Process.Pid); err == nil {
			anonFirst = append(anonFirst, float64(st["RssAnon"])/1024)
			fileFirst = append(fileFirst, float64(st["RssFile"])/1024)
		}
		one.close()

		f := newFleet(b, c.addr, 1000)
		gc0, used0, ok := childCPU(b, c, stats)
		_, wall, err := f.runTurns(turns)
		if err != nil {
			b.Fatalf("load: %v; stderr %s", err, c.stderr)
		}
		tps = append(tps, float64(turns)/wall.Seconds())
		if gc1, used1, _ := childCPU(b, c, stats); ok && used1 > used0 {
			gcEst = append(gcEst, 100*(gc1-gc0)/(used1-used0))
			if p := os.Getenv("MIRROR_BENCH_CPU_PROFILE"); p != "" {
				if data, err := os.ReadFile(stats + ".cpu"); err == nil {
					_ = os.WriteFile(p, data, 0o600)
				}
			}
			if share, err := gcShareOf(stats + ".cpu"); err == nil {
				gcShare = append(gcShare, share)
			} else {
				b.Logf("no GC share from the CPU profile: %v", err)
			}
		}
		rssLoad = append(rssLoad, rssMiB(b, c))
		f.close()
		time.Sleep(idle) // the idle minute is what is measured
		rssIdle = append(rssIdle, rssMiB(b, c))
		if st, err := procStatus(c.cmd.Process.Pid); err == nil {
			anonIdle = append(anonIdle, float64(st["RssAnon"])/1024)
			fileIdle = append(fileIdle, float64(st["RssFile"])/1024)
		}
		if p := os.Getenv("MIRROR_BENCH_HEAP_PROFILE"); p != "" && ok {
			_ = c.cmd.Process.Signal(syscall.SIGUSR2)
			deadline := time.Now().Add(benchWait)
			for time.Now().Before(deadline) {
				if data, err := os.ReadFile(stats + ".heap"); err == nil {
					_ = os.WriteFile(p, data, 0o600)
					if classes, err := os.ReadFile(stats + ".classes"); err == nil {
						b.Logf("child memory at idle:\n%s", classes)
					}
					break
				}
				time.Sleep(5 * time.Millisecond) // polling a file the child writes, bounded above
			}
		}
		c.stop(b)
	}
	b.ReportMetric(0, "ns/op")
	if len(gcShare) > 0 {
		b.ReportMetric(median(gcShare), "gc_%cpu")
	}
	if len(gcEst) > 0 {
		b.ReportMetric(median(gcEst), "gc_%cpu_runtime_est")
	}
	b.ReportMetric(median(tps), "turns/s")
	b.ReportMetric(median(rssFirst), "rss_first_turn_MiB")
	b.ReportMetric(median(rssLoad), "rss_load_end_MiB")
	b.ReportMetric(median(rssIdle), "rss_idle_MiB")
	b.ReportMetric(median(rssIdle)/median(rssFirst), "idle/first")
	b.ReportMetric(median(anonIdle), "anon_idle_MiB")
	b.ReportMetric(median(fileIdle), "file_idle_MiB") // mapped pages: the binary, the database
	// The process's own memory (RssAnon) apart from mapped files' pages
	// (RssFile: the binary, the database, the search index), which the
	// kernel may drop at any time.
	b.ReportMetric(median(anonFirst), "anon_first_turn_MiB")
	b.ReportMetric(median(fileFirst), "file_first_turn_MiB")
	b.ReportMetric(median(anonIdle)/median(anonFirst), "anon_idle/first")
}
