//go:build unix

// Package pgroup runs the shell commands of tools and hooks so that nothing
// they start outlives the gateway.
//
// Each command runs as `/bin/sh -c COMMAND` under a leader: the gateway's own
// binary executed again (argv[0] "mirror-process-leader", recognised by this
// package's init before anything else runs), which heads a new process group
// and supervises it:
//
//   - The leader is started with Pdeathsig SIGTERM (Linux), and treats
//     SIGHUP (sent to a group orphaned while one of it was stopped) alike. The signal is sent
//     when the thread that forked the leader exits, so that goroutine keeps
//     its OS thread locked until the leader has exited: the thread, and with
//     it the parent-death signal, lives exactly as long as the command.
//   - The leader also holds one end of a socket pair whose other end only
//     the gateway holds. When the gateway dies, however it dies, the kernel
//     closes that end and the leader reads EOF. Either way the leader kills
//     its whole process group with SIGKILL: the shell, and everything the
//     shell started that did not leave the group.
//   - The shell itself gets Pdeathsig SIGKILL from the leader, so a leader
//     killed on its own takes the shell with it; the gateway then kills the
//     rest of the group before it reaps the leader.
//
// A command can be held (Cmd.Hold): the leader waits for Release before it
// starts the shell, so the caller can write the group's identity (Group) to
// its journal first. At the next start, Reap kills a journaled group that is
// still alive, after checking that the processes are really the ones
// journaled (the leader's start time, the boot, the session), never a
// process that reused the id.
//
// The leader mirrors the shell's end: the same exit code, or death by the
// same signal, so callers read the leader's status as the shell's.
package pgroup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	goruntime "runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// leaderName is the leader's argv[0]. Nobody runs the gateway under this
// name by accident; seeing it, init turns the process into a leader.
const leaderName = "mirror-process-leader"

// Leader modes (argv[1]).
const (
	modeRun  = "run"  // start the shell at once
	modeHold = "hold" // wait for the go byte first
)

// exitNotRun is the leader's exit code when the gateway let go of a held
// command without releasing it: the shell never started.
const exitNotRun = 125

// ctlFD is where the leader finds its end of the control socket
// (exec.Cmd.ExtraFiles[0]).
const ctlFD = 3

func init() {
	if len(os.Args) == 3 && os.Args[0] == leaderName {
		// syscall.Exit, not os.Exit: nothing is buffered, and a binary built
		// with -race would otherwise sleep a second at exit.
		syscall.Exit(lead(os.Args[1], os.Args[2]))
	}
}

// Group identifies a command's process group well enough to find it again
// after a crash, and to tell it from a process that reused its id.
type Group struct {
	// PGID is the group's id: the leader's pid.
	PGID int `json:"pgid"`
	// Start is the leader's start time, in clock ticks after boot (Linux
	// /proc/PID/stat field 22); 0 where unknown.
	Start uint64 `json:"start,omitempty"`
	// Boot is the kernel's boot id: after a reboot no journaled process can
	// be alive.
	Boot string `json:"boot,omitempty"`
	// SID is the session the group belongs to.
	SID int `json:"sid,omitempty"`
}

// Outcome is what Reap found.
type Outcome string

// Outcomes of Reap.
const (
	// Stopped: the group was still running; it has been killed.
	Stopped Outcome = "stopped"
	// Ended: nothing of the group was running any more.
	Ended Outcome = "ended"
	// Unknown: this system cannot tell (no /proc); nothing was killed.
	Unknown Outcome = ""
)

// Cmd is one shell command run under a leader. Set the fields of the
// embedded exec.Cmd (Dir, Env, Stdin, Stdout, Stderr, WaitDelay) before
// Start; leave Path, Args, ExtraFiles, SysProcAttr and Cancel to Cmd.
type Cmd struct {
	*exec.Cmd
	// Hold keeps the shell from starting until Release, so the caller can
	// journal Group first. A held Cmd must be released or killed before
	// Wait.
	Hold bool
	// KillStragglers kills what the command left running in its group
	// when the shell exits. Without it they run on until they end, or
	// until the gateway dies while the leader still runs.
	KillStragglers bool

	ctl    *os.File
	group  Group
	exited chan struct{} // closed once the leader has exited, before it is reaped

	mu      sync.Mutex
	reaping bool // the leader has exited: its pid may be reaped and reused
}

// Command returns a Cmd that runs `/bin/sh -c command`.
func Command(command string) *Cmd {
	return wrap(exec.Command(self(), modeRun, command))
}

// CommandContext is Command whose whole group is killed when ctx is done
// before the command ends.
func CommandContext(ctx context.Context, command string) *Cmd {
	return wrap(exec.CommandContext(ctx, self(), modeRun, command))
}

func wrap(ec *exec.Cmd) *Cmd {
	// exec.Command made Args[0] the path; the leader is known by its name.
	ec.Args[0] = leaderName
	c := &Cmd{Cmd: ec}
	if ec.Cancel != nil {
		ec.Cancel = func() error { c.Kill(); return nil }
	}
	return c
}

// Start starts the leader in a new process group. With Hold, the shell
// waits for Release.
func (c *Cmd) Start() error {
	if len(c.ExtraFiles) > 0 {
		return errors.New("pgroup: ExtraFiles are not supported")
	}
	if c.Hold {
		c.Args[1] = modeHold
	}
	fds, err := socketpair()
	if err != nil {
		return fmt.Errorf("pgroup: control socket: %w", err)
	}
	parent, child := os.NewFile(uintptr(fds[0]), "pgroup-ctl"), os.NewFile(uintptr(fds[1]), "pgroup-ctl")
	c.ExtraFiles = []*os.File{child}
	c.SysProcAttr = leaderAttr()
	c.exited = make(chan struct{})
	started := make(chan error, 1)
	go c.supervise(started)
	err = <-started
	child.Close()
	if err != nil {
		parent.Close()
		return err
	}
	c.ctl = parent
	c.group = identify(c.Process.Pid)
	return nil
}

// supervise starts the leader and, where the system can, waits for it to
// exit without reaping it, so its id stays taken while stragglers are
// killed. On Linux its thread stays locked all that time: the leader's
// parent-death signal is tied to this very thread.
func (c *Cmd) supervise(started chan<- error) {
	if lockThread {
		goruntime.LockOSThread()
		defer goruntime.UnlockOSThread()
	}
	err := c.Cmd.Start()
	started <- err
	if err != nil {
		close(c.exited)
		return
	}
	if awaitExit(c.Process.Pid) {
		c.mu.Lock()
		c.reaping = true
		if c.KillStragglers {
			killGroup(c.Process.Pid)
		}
		c.mu.Unlock()
	}
	close(c.exited)
}

// Group is the identity of the command's process group, known once Start
// returned.
func (c *Cmd) Group() Group { return c.group }

// Release lets a held command start its shell.
func (c *Cmd) Release() error {
	if c.ctl == nil {
		return errors.New("pgroup: not started")
	}
	if _, err := c.ctl.Write([]byte{'g'}); err != nil {
		return fmt.Errorf("pgroup: release: %w", err)
	}
	return nil
}

// Kill kills the command's whole process group now. It is safe at any time
// before Wait returns, and does nothing once the leader has exited and may
// have been reaped.
func (c *Cmd) Kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Process == nil || c.reaping {
		return
	}
	killGroup(c.Process.Pid)
}

// Wait waits, after a successful Start, for the command to exit and for its
// output to be copied, as exec.Cmd.Wait does; the status is the shell's, as
// the leader mirrors it.
func (c *Cmd) Wait() error {
	<-c.exited
	c.mu.Lock()
	c.reaping = true
	c.mu.Unlock()
	err := c.Cmd.Wait()
	if !reapsLate && c.KillStragglers {
		// This system could not wait without reaping: the group id may in
		// theory be reused already, as with any kill after a wait.
		killGroup(c.Process.Pid)
	}
	if c.ctl != nil {
		c.ctl.Close()
	}
	return err
}

// Run starts the command and waits for it.
func (c *Cmd) Run() error {
	if err := c.Start(); err != nil {
		return err
	}
	return c.Wait()
}

// killGroup kills the process group pgid; a group already gone is fine.
func killGroup(pgid int) {
	if pgid > 1 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

var selfPath = sync.OnceValue(func() string {
	if p := procSelfExe(); p != "" {
		return p
	}
	p, err := os.Executable()
	if err != nil {
		return os.Args[0]
	}
	return p
})

// self is the executable the leader runs: the gateway's own binary, even if
// it was replaced on disk since it started (where /proc/self/exe exists).
func self() string { return selfPath() }

// socketpair returns a connected pair of close-on-exec unix sockets.
func socketpair() ([2]int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return fds, err
	}
	unix.CloseOnExec(fds[0])
	unix.CloseOnExec(fds[1])
	return fds, nil
}

// lead is the leader process: it heads its group, waits for the go byte when
// held, runs the shell, kills the group when the gateway goes away, and
// ends as the shell ended.
func lead(mode, command string) int {
	ctl := os.NewFile(ctlFD, "pgroup-ctl")
	if ctl == nil {
		fmt.Fprintln(os.Stderr, "mirror: process leader started without its control socket")
		return exitNotRun
	}
	unix.CloseOnExec(ctlFD)
	if syscall.Getpgrp() != os.Getpid() {
		// Killing "its group" would kill whoever started it by hand.
		fmt.Fprintln(os.Stderr, "mirror: a process leader must head its own process group")
		return exitNotRun
	}
	// The gateway's death arrives as SIGTERM (Pdeathsig) or as EOF on the
	// control socket; either kills the whole group, the leader included.
	// So does SIGHUP: the kernel sends it (with SIGCONT) to a group orphaned
	// by the gateway's death while one of its processes was stopped, and a
	// leader dying of it would leave the rest running.
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		if _, ok := <-term; ok {
			_ = syscall.Kill(0, syscall.SIGKILL)
		}
	}()
	if mode == modeHold {
		var b [1]byte
		if n, _ := ctl.Read(b[:]); n != 1 || b[0] != 'g' {
			return exitNotRun
		}
	}
	go func() {
		_, _ = io.Copy(io.Discard, ctl)
		_ = syscall.Kill(0, syscall.SIGKILL)
	}()
	sh := exec.Command("/bin/sh", "-c", command)
	sh.Stdin, sh.Stdout, sh.Stderr = os.Stdin, os.Stdout, os.Stderr
	sh.SysProcAttr = shellAttr()
	if lockThread {
		goruntime.LockOSThread() // the shell's Pdeathsig follows this thread
	}
	if err := sh.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "mirror: could not start /bin/sh: %v\n", err)
		return 127
	}
	_ = sh.Wait()
	ws, _ := sh.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		signal.Stop(term)
		signal.Reset(syscall.SIGTERM, syscall.SIGHUP)
		dieBy(ws.Signal())
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
