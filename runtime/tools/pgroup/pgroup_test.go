//go:build unix

package pgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as a gateway that starts a command and is then
// killed with SIGKILL (PGROUP_TEST_GATEWAY=COMMAND): it prints the group's
// id and waits on stdin.
func TestMain(m *testing.M) {
	if command := os.Getenv("PGROUP_TEST_GATEWAY"); command != "" {
		c := Command(command)
		c.KillStragglers = true
		if err := c.Start(); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(c.Group().PGID)
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// gone waits, bounded, until no process of group pgid is left.
func gone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for running(pgid) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("process group %d still runs", pgid)
		}
		time.Sleep(5 * time.Millisecond) // polling the kernel, bounded
	}
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// TestTheShellsEndIsMirrored: the leader ends as its shell did, so callers
// read exit codes and signals as before.
func TestTheShellsEndIsMirrored(t *testing.T) {
	cases := []struct {
		name, command string
		code          int
		sig           syscall.Signal
		out           string
	}{
		{"exit 0", "echo hi", 0, 0, "hi\n"},
		{"exit 3", "echo out; echo err >&2; exit 3", 3, 0, "out\nerr\n"},
		{"killed", "kill -KILL $$", -1, syscall.SIGKILL, ""},
		{"terminated", "kill -TERM $$", -1, syscall.SIGTERM, ""},
		{"hangup", "kill -HUP $$", -1, syscall.SIGHUP, ""},
		// Go's runtime would print a goroutine dump on SIGQUIT: none may
		// reach the output.
		{"quit", "kill -QUIT $$", -1, syscall.SIGQUIT, ""},
		{"usr1", "kill -USR1 $$", -1, syscall.SIGUSR1, ""},
		{"no shell builtin", "exec /nonexistent/cmd 2>/dev/null", 127, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			c := Command(tc.command)
			c.Stdout, c.Stderr = &out, &out
			err := c.Run()
			ws := c.ProcessState.Sys().(syscall.WaitStatus)
			switch {
			case tc.sig != 0 && (!ws.Signaled() || ws.Signal() != tc.sig):
				t.Fatalf("status %v (%v), want signal %v", ws, err, tc.sig)
			case tc.sig == 0 && c.ProcessState.ExitCode() != tc.code:
				t.Fatalf("exit %d (%v), want %d", c.ProcessState.ExitCode(), err, tc.code)
			}
			if out.String() != tc.out {
				t.Fatalf("output %q, want %q", out.String(), tc.out)
			}
		})
	}
}

// TestTheCommandRunsInItsOwnGroupUnderItsLeader: the shell's parent is the
// leader, the group is the leader's, and the environment is what the caller
// gave, nothing of the caller's own.
func TestTheCommandRunsInItsOwnGroupUnderItsLeader(t *testing.T) {
	t.Setenv("PGROUP_SECRET", "s3cret")
	var out bytes.Buffer
	c := Command(`echo "$PPID $(cut -d' ' -f5 /proc/$$/stat 2>/dev/null || ps -o pgid= -p $$)"; env`)
	c.Env = []string{"PATH=/usr/bin:/bin", "ONLY=this"}
	c.Dir = t.TempDir()
	c.Stdout = &out
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	first, env, _ := strings.Cut(out.String(), "\n")
	want := fmt.Sprintf("%d %d", c.Group().PGID, c.Group().PGID)
	if strings.Join(strings.Fields(first), " ") != want {
		t.Fatalf("ppid and pgid %q, want %q", first, want)
	}
	if strings.Contains(env, "s3cret") || !strings.Contains(env, "ONLY=this") {
		t.Fatalf("environment %q", env)
	}
}

// TestAHeldCommandRunsOnlyWhenReleased: killed before Release, the shell
// never ran; released, it runs.
func TestAHeldCommandRunsOnlyWhenReleased(t *testing.T) {
	dir := t.TempDir()
	c := Command("touch ran")
	c.Dir, c.Hold = dir, true
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if g := c.Group(); g.PGID != c.Process.Pid {
		t.Fatalf("group %+v, leader %d", g, c.Process.Pid)
	}
	c.Kill()
	_ = c.Wait()
	if _, err := os.Stat(filepath.Join(dir, "ran")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a held command ran before its release: %v", err)
	}

	c = Command("touch ran")
	c.Dir, c.Hold = dir, true
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err != nil {
		t.Fatal("the released command did not run")
	}
}

// TestStragglersDieWithTheCommand: with KillStragglers, a background process
// the command left is killed when it exits; without, it runs on.
func TestStragglersDieWithTheCommand(t *testing.T) {
	for _, kill := range []bool{true, false} {
		t.Run(fmt.Sprint(kill), func(t *testing.T) {
			var out bytes.Buffer
			c := Command("sleep 300 >/dev/null 2>&1 & echo $!")
			c.Stdout, c.KillStragglers = &out, kill
			if err := c.Run(); err != nil {
				t.Fatal(err)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(out.String()))
			if err != nil {
				t.Fatal(err)
			}
			if kill {
				gone(t, c.Group().PGID)
				return
			}
			if !alive(pid) {
				t.Fatal("the straggler was killed without KillStragglers")
			}
			killGroup(c.Group().PGID)
			gone(t, c.Group().PGID)
		})
	}
}

// TestTheGroupDiesWithTheGateway: a gateway process killed with SIGKILL
// takes its command's whole group with it: the shell and the processes the
// shell started.
func TestTheGroupDiesWithTheGateway(t *testing.T) {
	gw := exec.Command(os.Args[0], "-test.run=^$")
	gw.Env = append(os.Environ(), "PGROUP_TEST_GATEWAY=sleep 300 & sleep 301 & wait")
	stdin, err := gw.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	out, err := gw.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("gateway said %q", line)
	}
	t.Cleanup(func() { killGroup(pgid) })
	// Both sleeps run (the group holds more than its leader) before the kill.
	deadline := time.Now().Add(10 * time.Second)
	for goruntime.GOOS == "linux" && running(pgid) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("group %d has %d members", pgid, running(pgid))
		}
		time.Sleep(5 * time.Millisecond) // polling /proc, bounded
	}
	_ = gw.Process.Kill()
	_ = gw.Wait()
	gone(t, pgid)
}

// running counts the live processes of group pgid (zombies are dead: they
// wait for init to reap them).
func running(pgid int) int { return members(pgid, nil) }

// BenchmarkStart is the cost of running `true` under a leader, against
// /bin/sh started directly: what the supervision adds to each command.
func BenchmarkStart(b *testing.B) {
	b.Run("leader", func(b *testing.B) {
		for b.Loop() {
			if err := Command("true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sh", func(b *testing.B) {
		for b.Loop() {
			c := exec.Command("/bin/sh", "-c", "true")
			c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := c.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
