package pgroup

import (
	"bytes"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestReapKillsOnlyTheJournaledGroup: a journaled group still running is
// stopped; one already gone is reported ended; a live group whose leader's
// start time differs from the journal (a reused id) is left alone; and
// stragglers whose leader is gone are found by their group and session.
func TestReapKillsOnlyTheJournaledGroup(t *testing.T) {
	start := func(command string) *Cmd {
		t.Helper()
		c := Command(command)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Kill(); _ = c.Wait() })
		return c
	}

	c := start("sleep 300")
	g := c.Group()
	// Boot and SID may be empty where the host hides them (a sandbox
	// without boot_id; a session led from outside this PID namespace reads
	// as 0): Reap then leans on the start time alone.
	if g.Start == 0 {
		t.Fatalf("identity %#v", g)
	}
	other := g
	other.Start++ // as if the id had been reused by another process
	if got := Reap(other); got != Ended {
		t.Fatalf("Reap of a reused id = %q", got)
	}
	if !alive(g.PGID) {
		t.Fatal("Reap killed a process that was not the journaled one")
	}
	if g.Boot != "" {
		rebooted := g
		rebooted.Boot = "another-boot"
		if got := Reap(rebooted); got != Ended || !alive(g.PGID) {
			t.Fatalf("Reap across a reboot = %q", got)
		}
	}
	if got := Reap(g); got != Stopped {
		t.Fatalf("Reap of a running group = %q", got)
	}
	_ = c.Wait() // the leader is this test's child: reaped here, not by init
	gone(t, g.PGID)
	if got := Reap(g); got != Ended {
		t.Fatalf("Reap of a finished group = %q", got)
	}

	// The leader has exited; a straggler of its group still runs.
	var out bytes.Buffer
	s := Command("sleep 300 >/dev/null 2>&1 & echo $!")
	s.Stdout = &out
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killGroup(s.Group().PGID) })
	pid, _ := strconv.Atoi(strings.TrimSpace(out.String()))
	if !alive(pid) {
		t.Fatal("no straggler")
	}
	if got := reap(s.Group(), ^uint64(0)); got != Stopped {
		t.Fatalf("Reap of a group whose leader is gone = %q", got)
	}
	gone(t, s.Group().PGID)
	// Stragglers that started after the restarted gateway cannot be the
	// journaled group's.
	s2 := Command("sleep 300 >/dev/null 2>&1 &")
	if err := s2.Run(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killGroup(s2.Group().PGID) })
	if got := reap(s2.Group(), s2.Group().Start-1); got != Ended || syscall0(s2.Group().PGID) != nil {
		t.Fatalf("Reap with a later straggler = %q", got)
	}
}

func syscall0(pgid int) error { return syscallKill(-pgid, 0) }

var syscallKill = syscall.Kill
