package pgroup

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// On Linux the leader's parent-death signal is tied to the forking thread,
// and the leader can be waited for without being reaped.
const (
	lockThread = true
	reapsLate  = true
)

func leaderAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

func shellAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

func procSelfExe() string { return "/proc/self/exe" }

// awaitExit blocks until pid has exited, leaving it a zombie: its id stays
// taken until Wait reaps it.
func awaitExit(pid int) bool {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err == nil
		}
	}
}

// dieBy ends the leader by sig, as its shell ended: the default action is
// restored first (Go's runtime would otherwise catch most signals), and
// the process is made non-dumpable so a core-dumping signal writes no core.
func dieBy(sig syscall.Signal) {
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	var act [64]byte // an all-zero sigaction is SIG_DFL with no flags on every Linux arch
	_, _, _ = syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act[0])), 0, 8, 0, 0)
	_ = syscall.Kill(os.Getpid(), sig)
}

// stat is what Reap reads of /proc/PID/stat.
type stat struct {
	state     byte
	pgrp, sid int
	start     uint64
}

func readStat(pid int) (stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, false
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields that follow start after its last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); pgrp is field 5, session 6, starttime 22.
	if len(f) < 20 {
		return stat{}, false
	}
	pgrp, e1 := strconv.Atoi(f[2])
	sid, e2 := strconv.Atoi(f[3])
	start, e3 := strconv.ParseUint(f[19], 10, 64)
	if e1 != nil || e2 != nil || e3 != nil {
		return stat{}, false
	}
	return stat{state: f[0][0], pgrp: pgrp, sid: sid, start: start}, true
}

var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
})

func identify(pid int) Group {
	g := Group{PGID: pid, Boot: bootID()}
	if st, ok := readStat(pid); ok {
		g.Start, g.SID = st.start, st.sid
	}
	return g
}

// Reap kills the journaled group g if any of it still runs, and says which.
// The processes must really be g's: the leader alive with the journaled
// start time, or (the leader gone) members of the group in its session that
// started after the leader and before this process, so a process that
// reused the id is never touched.
func Reap(g Group) Outcome {
	me, ok := readStat(os.Getpid())
	if !ok {
		return Unknown
	}
	return reap(g, me.start)
}

// reap is Reap with the start time of the process asking: stragglers that
// started after it cannot be the journaled group's.
func reap(g Group, before uint64) Outcome {
	if g.PGID <= 1 || g.Start == 0 {
		return Unknown
	}
	if b := bootID(); b != "" && g.Boot != "" && b != g.Boot {
		return Ended // rebooted since: nothing of it can run
	}
	if st, ok := readStat(g.PGID); ok && st.state != 'Z' {
		if st.start != g.Start || st.pgrp != g.PGID {
			// The id belongs to another process now, which it could not
			// while any of g still ran.
			return Ended
		}
		return stop(g.PGID)
	}
	ours := func(st stat) bool { return st.sid == g.SID && st.start >= g.Start && st.start <= before }
	if members(g.PGID, ours) > 0 {
		return stop(g.PGID)
	}
	return Ended
}

// members counts the live (not zombie) processes of group pgid that match.
func members(pgid int, match func(stat) bool) int {
	dir, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range dir {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok && st.pgrp == pgid && st.state != 'Z' && (match == nil || match(st)) {
			n++
		}
	}
	return n
}

// stop kills group pgid and waits, bounded, until none of it runs: a
// repeat of the call must not start beside it.
func stop(pgid int) Outcome {
	killGroup(pgid)
	deadline := time.Now().Add(2 * time.Second)
	for members(pgid, nil) > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	return Stopped
}

// String is the group as logs show it.
func (g Group) String() string { return fmt.Sprintf("pgid %d", g.PGID) }
