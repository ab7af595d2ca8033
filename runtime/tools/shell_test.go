package tools

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/runtime/tools/pgroup"
)

func TestShell(t *testing.T) {
	ws := t.TempDir()
	r := newTestRegistry(t, ws, nil)
	real := r.Workspace()
	tests := []struct {
		name, command string
		want          string
		isErr         bool
	}{
		{"output and exit", "echo hello", "hello\n[exit code 0]", false},
		{"stderr combined in order", "echo out; echo err >&2; echo out2", "out\nerr\nout2\n[exit code 0]", false},
		{"exit code", "echo nope; exit 3", "nope\n[exit code 3]", false},
		{"no output", "true", "(no output)\n[exit code 0]", false},
		{"no trailing newline", "printf abc", "abc\n[exit code 0]", false},
		{"runs in the workspace", "pwd", real + "\n[exit code 0]", false},
		{"home is the workspace", `echo "$HOME"`, real + "\n[exit code 0]", false},
		{"no stdin", "cat", "(no output)\n[exit code 0]", false},
		{"killed by a signal", "kill -9 $$", "(no output)\n[killed by signal: killed]", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, r, "shell", jsonArgs("command", tc.command))
			if res.Content != tc.want || res.IsError != tc.isErr {
				t.Errorf("got %q (error %v), want %q (error %v)", res.Content, res.IsError, tc.want, tc.isErr)
			}
		})
	}
}

// The command sees PATH, HOME and LANG and nothing else of the gateway's
// environment: no key, no token.
func TestShellEnvironment(t *testing.T) {
	t.Setenv("MIRROR_TEST_API_KEY", "sk-test-SECRET")
	t.Setenv("TELEGRAM_BOT_TOKEN", "123:SECRET")
	t.Setenv("LANG", "C.UTF-8")
	r := newTestRegistry(t, t.TempDir(), nil)
	res := run(t, r, "shell", jsonArgs("command", "env"))
	if res.IsError || strings.Contains(res.Full, "SECRET") {
		t.Fatalf("env leaked: %q", res.Full)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSuffix(res.Full, "\n[exit code 0]"), "\n") {
		name, _, _ := strings.Cut(line, "=")
		switch name {
		case "PWD", "SHLVL", "_", "OLDPWD": // set by the shell itself
		default:
			names = append(names, name)
		}
	}
	sort.Strings(names)
	if got := strings.Join(names, ","); got != "HOME,LANG,PATH" {
		t.Errorf("environment names %s", got)
	}
}

// A timeout kills the command and everything it started, and the call
// returns even though a background child holds the output pipe.
func TestShellTimeoutKillsGroup(t *testing.T) {
	ws := t.TempDir()
	r, err := New(Options{Workspace: ws, ShellTimeout: 300 * time.Millisecond, Policies: map[string]Policy{"shell": Allow}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res := run(t, r, "shell", jsonArgs("command", "sleep 1000 & echo $! > bg.pid; echo started; wait"))
	if !res.IsError || res.Content != "started\n[timed out after 300ms; the command and every process it started were killed]" {
		t.Fatalf("got %+v", res)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %v", d)
	}
	assertDead(t, filepath.Join(ws, "bg.pid"))
}

// Background processes left behind by a command that exits are killed too.
func TestShellKillsLeftovers(t *testing.T) {
	ws := t.TempDir()
	r := newTestRegistry(t, ws, nil)
	res := run(t, r, "shell", jsonArgs("command", "sleep 1000 & echo $! > bg.pid; echo done"))
	if res.IsError || res.Content != "done\n[exit code 0]" {
		t.Fatalf("got %+v", res)
	}
	assertDead(t, filepath.Join(ws, "bg.pid"))
}

// Cancelling the context (the turn stopped) kills the command at once.
func TestShellCancel(t *testing.T) {
	ws := t.TempDir()
	r := newTestRegistry(t, ws, nil)
	fifo := filepath.Join(ws, "ready")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan Result, 1)
	go func() {
		done <- r.Run(ctx, callOf("shell", jsonArgs("command", "echo ready > ready; sleep 1000")), CallMeta{})
	}()
	// Opening the fifo for reading blocks until the command opens it: the
	// command is running when this returns.
	b, err := os.ReadFile(fifo)
	if err != nil || string(b) != "ready\n" {
		t.Fatalf("fifo: %q %v", b, err)
	}
	cancel()
	res := <-done
	if !res.IsError || res.Content != "(no output)\n[cancelled; the command and every process it started were killed]" {
		t.Fatalf("got %+v", res)
	}
}

func TestShellTimeoutArgument(t *testing.T) {
	r := newTestRegistry(t, t.TempDir(), nil)
	res := run(t, r, "shell", `{"command":"sleep 1000","timeout_seconds":1}`)
	if !res.IsError || !strings.Contains(res.Content, "[timed out after 1s;") {
		t.Fatalf("got %+v", res)
	}
	// Longer than the configured timeout is refused by the schema.
	res = run(t, r, "shell", `{"command":"true","timeout_seconds":21}`)
	if !res.IsError || res.Content != `shell: argument "timeout_seconds" must be at most 20, not 21` {
		t.Fatalf("got %+v", res)
	}
}

// Long output is previewed for the model and kept whole.
func TestShellLongOutput(t *testing.T) {
	r, err := New(Options{Workspace: t.TempDir(), OutputLimit: 1000, Policies: map[string]Policy{"shell": Allow}})
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, r, "shell", jsonArgs("command", "seq 1 20000"))
	if res.IsError || res.Handle == "" || len(res.Content) > 1100 {
		t.Fatalf("content %d bytes, handle %q", len(res.Content), res.Handle)
	}
	if !strings.HasPrefix(res.Full, "1\n2\n3\n") || !strings.HasSuffix(res.Full, "19999\n20000\n[exit code 0]") {
		t.Errorf("Full is not whole: %d bytes", len(res.Full))
	}
	if !strings.HasSuffix(res.Content, "20000\n[exit code 0]") {
		t.Error("the preview lost the exit code at the end")
	}
	// More than the memory cap is cut with a note, and the command still ends.
	res = run(t, r, "shell", jsonArgs("command", "head -c 9000000 /dev/zero | tr '\\0' a"))
	if res.IsError || len(res.Full) > maxShellOutput+200 || !strings.Contains(res.Full, "[output cut: 611392 more bytes were not kept]") {
		t.Errorf("cap: %d bytes, tail %q", len(res.Full), res.Full[max(0, len(res.Full)-120):])
	}
}

// assertDead reads the pid a command wrote and checks the process is gone,
// a zombie waiting for a reaper that is not ours, or killed and exiting
// (PF_EXITING: its files, the output pipe included, are already closed).
func assertDead(t *testing.T, pidFile string) {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return // gone between the two looks
	}
	_, after, _ := strings.Cut(string(stat), ") ")
	fields := strings.Fields(after) // state is field 3 of stat, flags field 9
	if len(fields) > 6 {
		flags, _ := strconv.ParseUint(fields[6], 10, 64)
		if fields[0] == "Z" || fields[0] == "X" || flags&0x4 != 0 {
			return
		}
	}
	t.Errorf("background process %d is still running: %s", pid, stat)
}

// The process group is journaled before the command runs (the journal sees
// no trace of it yet), and a journal that fails keeps it from running.
func TestShellJournalsItsGroupBeforeItRuns(t *testing.T) {
	ws := t.TempDir()
	r := newTestRegistry(t, ws, nil)
	marker := filepath.Join(ws, "ran")
	var got []int
	meta := CallMeta{Process: func(g pgroup.Group) error {
		if _, err := os.Stat(marker); err == nil {
			t.Error("the command ran before its group was journaled")
		}
		if syscall.Kill(-g.PGID, 0) != nil {
			t.Errorf("journaled group %d does not exist", g.PGID)
		}
		got = append(got, g.PGID)
		return nil
	}}
	res := r.Run(context.Background(), callOf("shell", jsonArgs("command", "touch ran; echo $PPID")), meta)
	if res.IsError || len(got) != 1 || res.Content != strconv.Itoa(got[0])+"\n[exit code 0]" {
		t.Fatalf("got %+v, journaled %v", res, got)
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	meta.Process = func(pgroup.Group) error { return errors.New("disk full") }
	res = r.Run(context.Background(), callOf("shell", jsonArgs("command", "touch ran")), meta)
	if !res.IsError || !strings.Contains(res.Content, "not run: could not journal the command's process: disk full") {
		t.Fatalf("got %+v", res)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran although its group was not journaled")
	}
}

// The command's parent is its leader, whose environment is the command's
// own: reading it shows no secret of the gateway's.
func TestShellParentHoldsNoSecret(t *testing.T) {
	t.Setenv("MIRROR_TEST_API_KEY", "sk-test-SECRET")
	r := newTestRegistry(t, t.TempDir(), nil)
	res := run(t, r, "shell", jsonArgs("command", `tr '\0' '\n' < /proc/$PPID/environ`))
	if res.IsError || strings.Contains(res.Full, "SECRET") || !strings.Contains(res.Full, "PATH=") {
		t.Fatalf("parent environment: %q", res.Full)
	}
}
