//go:build unix && !linux

package pgroup

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Without Pdeathsig or a wait that leaves the leader unreaped, the control
// socket alone tells the leader that the gateway went away.
const (
	lockThread = false
	reapsLate  = false
)

func leaderAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func shellAttr() *syscall.SysProcAttr { return nil }

func procSelfExe() string { return "" }

func awaitExit(int) bool { return false }

// dieBy ends the leader by sig where Go's runtime lets a signal kill it
// (SIGKILL, SIGHUP, SIGINT, SIGTERM); otherwise the caller exits 128+sig.
func dieBy(sig syscall.Signal) {
	signal.Reset(sig)
	switch sig {
	case syscall.SIGKILL, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM:
		_ = syscall.Kill(os.Getpid(), sig)
		time.Sleep(time.Second) // the signal ends the process meanwhile, unless it is ignored
	}
}

func identify(pid int) Group { return Group{PGID: pid} }

// Reap cannot tell a journaled group from one that reused its id without
// /proc, so it kills nothing.
func Reap(Group) Outcome { return Unknown }

// String is the group as logs show it.
func (g Group) String() string { return fmt.Sprintf("pgid %d", g.PGID) }

// stat is empty without /proc.
type stat struct{}

// members is 1 while any process of group pgid exists (zombies included), 0
// after: without /proc nothing more can be told.
func members(pgid int, _ func(stat) bool) int {
	if syscall.Kill(-pgid, 0) == nil {
		return 1
	}
	return 0
}
