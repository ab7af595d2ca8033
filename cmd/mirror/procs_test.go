package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/mirror-gateway/mirror/runtime/tools/pgroup"
)

// Secrets the gateway's environment holds in these tests.
var testSecrets = []string{"OPENAI_API_KEY=sk-proc-test-SECRET-openai", "TELEGRAM_BOT_TOKEN=123:SECRET-telegram"}

// shellChat opens a new chat on a fresh socket, sends `/tool shell` with
// command and allows it. It returns the socket and the chat.
func shellChat(t *testing.T, addr, command string) (*wsClient, string) {
	t.Helper()
	a := dialWS(t, addr)
	a.send(map[string]any{"type": "hello", "client": "procs"})
	a.next("welcome", nil)
	a.send(map[string]any{"type": "chat.create", "title": "procs"})
	chat := a.next("chat.created", nil)["chat"].(map[string]any)["id"].(string)
	a.send(map[string]any{"type": "chat.open", "chat": chat})
	a.next("chat.snapshot", nil)
	args := fmt.Sprintf(`{"command":%q}`, command)
	a.send(map[string]any{"type": "message.send", "chat": chat, "text": "/tool shell " + args, "client_id": "k1"})
	ap := a.next("approval.requested", nil)["approval"].(map[string]any)
	a.send(map[string]any{"type": "approval.answer", "approval": ap["id"], "allow": true})
	a.next("approval.resolved", nil)
	return a, chat
}

// readPGID waits, bounded, for the process group id a command wrote.
func readPGID(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			pgid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || pgid <= 1 {
				t.Fatalf("pgid file %q", b)
			}
			return pgid
		}
		if time.Now().After(deadline) {
			t.Fatal("the shell call never started")
		}
		time.Sleep(10 * time.Millisecond) // polling a file the command writes, bounded
	}
}

// groupMembers counts the live processes of group pgid, and the stopped ones.
func groupMembers(pgid int) (live, stopped int) {
	dir, _ := os.ReadDir("/proc")
	for _, e := range dir {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) < 3 || f[2] != strconv.Itoa(pgid) || f[0] == "Z" || f[0] == "X" {
			continue
		}
		live++
		if f[0] == "T" {
			stopped++
		}
	}
	return live, stopped
}

// waitGroup waits, bounded, until pred holds for group pgid's members.
func waitGroup(t *testing.T, pgid int, what string, pred func(live int) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		live, _ := groupMembers(pgid)
		if pred(live) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process group %d: %s (%d live)", pgid, what, live)
		}
		time.Sleep(10 * time.Millisecond) // polling /proc, bounded
	}
}

// TestToolProcessesDieWithTheGateway runs the gateway as a real process: an
// approved shell call starts a command with processes in the background,
// the gateway is killed with SIGKILL, and the command's whole process group
// is gone without waiting for a restart. When the gateway comes back, the
// recovery says the process was no longer running. In the second case part
// of the group outlives the gateway: the gateway is frozen (SIGSTOP), the
// group's leader killed, then the gateway; the sleeps the shell started run
// on. The restart finds them by the journaled group, stops them before the
// call can be repeated, and the recovery says so.
func TestToolProcessesDieWithTheGateway(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	for _, survive := range []bool{false, true} {
		name := map[bool]string{false: "dies with the gateway", true: "stopped at the restart"}[survive]
		t.Run(name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			p := startServe(t, data)
			_, chat := shellChat(t, p.addr, `awk '{print $5}' /proc/$$/stat > pgid.tmp && mv pgid.tmp pgid; sleep 300 & sleep 301 & wait`)
			pgid := readPGID(t, filepath.Join(filepath.Dir(data), "workspace", "pgid"))
			t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
			// The leader, the shell and both sleeps.
			waitGroup(t, pgid, "never had its four processes", func(live int) bool { return live >= 4 })
			if survive {
				// Frozen, the gateway cannot kill the group when its leader
				// dies; the shell dies with the leader (its Pdeathsig).
				if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				if err := syscall.Kill(pgid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				waitGroup(t, pgid, "lost more than its leader and shell", func(live int) bool { return live == 2 })
			}
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
			want := "ended"
			if survive {
				if live, _ := groupMembers(pgid); live != 2 {
					t.Fatalf("the sleeps did not outlive the gateway: %d live", live)
				}
				want = "stopped"
			} else {
				waitGroup(t, pgid, "outlived the gateway", func(live int) bool { return live == 0 })
			}

			p = startServe(t, data)
			b := dialWS(t, p.addr)
			b.send(map[string]any{"type": "chat.open", "chat": chat, "since": 0})
			rec := b.next("recovery.requested", nil)["recovery"].(map[string]any)
			if rec["process"] != want {
				t.Fatalf("recovery %v, want process %q", rec, want)
			}
			if live, _ := groupMembers(pgid); live != 0 {
				t.Fatalf("%d processes of the old call run beside the recovery", live)
			}
			// The browser's recovery card says it too.
			cardSays(t, p.addr, map[string]string{
				"stopped": "was still running when the gateway came back; it was stopped",
				"ended":   "was no longer running when the gateway came back",
			}[want])
			b.send(map[string]any{"type": "recovery.answer", "recovery": rec["id"], "action": "skip"})
			b.next("turn.finished", nil)
			p.stop(t)
		})
	}
}

// TestAnApprovedShellReachesNoSecret: from an approved shell call, the
// parent process's environment holds no key or token, the gateway's own
// environment cannot be read (it is non-dumpable), and the default
// workspace's .. holds neither the token file nor mirror.db.
func TestAnApprovedShellReachesNoSecret(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	p := serveUnprivileged(t, testSecrets...)
	gw := p.cmd.Process.Pid
	command := fmt.Sprintf(`echo parent; tr '\0' '\n' < /proc/$PPID/environ; echo gateway; tr '\0' '\n' < /proc/%d/environ 2>&1; echo up; ls -a ..; echo memory; head -c 16 /proc/%d/mem 2>&1 | head -c 200`, gw, gw)
	a, _ := shellChat(t, p.addr, command)
	res := a.next("tool.result", nil)["result"].(map[string]any)
	out, _ := res["content"].(string)
	for _, secret := range append(testSecrets, "MIRROR_TOKEN=test-token-0123456789abcdef") {
		if _, value, _ := strings.Cut(secret, "="); strings.Contains(out, value) {
			t.Fatalf("the shell read %s:\n%s", secret, out)
		}
	}
	parent, rest, _ := strings.Cut(out, "gateway\n")
	gateway, rest, _ := strings.Cut(rest, "up\n")
	up, _, _ := strings.Cut(rest, "memory\n")
	if !strings.Contains(parent, "PATH=") {
		t.Fatalf("the parent's environment was not read:\n%s", out)
	}
	if !strings.Contains(gateway, "Permission denied") {
		t.Fatalf("reading the gateway's environment did not fail:\n%s", out)
	}
	for _, name := range []string{"token", DBFile} {
		for _, entry := range strings.Fields(up) {
			if entry == name {
				t.Fatalf("the workspace's .. holds %s:\n%s", name, out)
			}
		}
	}
	// The same for this test process, when it is of the same user (root
	// may read anything).
	if os.Geteuid() != 0 {
		if _, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", gw)); !errors.Is(err, os.ErrPermission) {
			t.Fatalf("reading the gateway's environment from the same user: %v", err)
		}
	}
	a.next("turn.finished", nil)
	p.stop(t)
}

// nobody is the user the gateway runs as when the tests run as root: root
// may read any process's memory, dumpable or not, so the protection can
// only be seen from an unprivileged user.
const nobody = 65534

// serveUnprivileged starts `mirror serve` with built-in defaults and env
// added, as startServe does, but never as root: under root it runs as
// nobody, from a copy of the test binary that user may execute, in a
// folder it owns. The data dir is "data" in that folder.
func serveUnprivileged(t *testing.T, env ...string) *proc {
	t.Helper()
	if os.Geteuid() != 0 {
		return startServe(t, filepath.Join(t.TempDir(), "data"), env...)
	}
	base, err := os.MkdirTemp("", "mirror-procs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	bin := filepath.Join(base, "mirror")
	src, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(base, "work")
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(os.Chmod(base, 0o755), os.Mkdir(work, 0o700), os.Chown(work, nobody, nobody)); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--data", filepath.Join(work, "data"), "--addr", "127.0.0.1:0")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), append([]string{"MIRROR_AS_MAIN=1", "MIRROR_TOKEN=test-token-0123456789abcdef", "HOME=" + work}, env...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	return startCmd(t, cmd)
}

// BenchmarkShellLeader is what running each shell command under its
// supervising leader costs with this binary (every package of mirror
// initialised in the leader too), against /bin/sh started directly.
func BenchmarkShellLeader(b *testing.B) {
	b.Run("leader", func(b *testing.B) {
		for b.Loop() {
			if err := pgroup.Command("true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sh", func(b *testing.B) {
		for b.Loop() {
			c := exec.Command("/bin/sh", "-c", "true") // as shell ran commands before
			c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := c.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// cardSays opens the gateway's page in headless Chromium, logs in, opens the
// one chat and waits until its recovery card shows text.
func cardSays(t *testing.T, addr, text string) {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed; .ci/run installs it (apt-get install -y chromium)")
		}
		t.Log("chromium not installed: the recovery card is not checked in a browser")
		return
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1200, 800))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelCtx := chromedp.NewContext(actx)
	defer cancelCtx()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	poll := func(what, expr string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			t.Fatalf("browser: waiting for %s: %v", what, err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+addr+"/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), "test-token-0123456789abcdef"),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS("#chat-list"))); err != nil {
		t.Fatal(err)
	}
	poll("the chat", `(() => { const e = document.querySelector('.chat-item'); if (!e) return false; e.click(); return true })()`)
	poll("the recovery card", fmt.Sprintf(`[...document.querySelectorAll('.card.recovery')].some(e => e.textContent.includes(%q))`, text))
}

// TestAPendingApprovalIsAskedAgainAfterKillMinusNine: the gateway is killed
// while a shell call waits for Allow/Deny. After the restart the call is not
// a recovery of a call "running when the gateway died": the same approval is
// asked again, answerable, and the call runs once, when allowed.
func TestAPendingApprovalIsAskedAgainAfterKillMinusNine(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	p := startServe(t, data)
	a := dialWS(t, p.addr)
	a.send(map[string]any{"type": "hello", "client": "a"})
	a.next("welcome", nil)
	a.send(map[string]any{"type": "chat.create", "title": "pending"})
	chat := a.next("chat.created", nil)["chat"].(map[string]any)["id"].(string)
	a.send(map[string]any{"type": "chat.open", "chat": chat})
	a.next("chat.snapshot", nil)
	a.send(map[string]any{"type": "message.send", "chat": chat, "text": `/tool shell {"command":"echo ran >> ran"}`, "client_id": "k1"})
	ap := a.next("approval.requested", nil)["approval"].(map[string]any)
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()

	p = startServe(t, data)
	b := dialWS(t, p.addr)
	b.send(map[string]any{"type": "chat.open", "chat": chat, "since": 0})
	var recoveries, asked int
	var resolvedWithoutAnswer bool
	seen := func(m map[string]any) {
		switch m["type"] {
		case "recovery.requested":
			recoveries++
		case "approval.requested":
			if m["approval"].(map[string]any)["id"] == ap["id"] {
				asked++
			}
		case "approval.resolved":
			if m["approval"].(map[string]any)["allow"] != true {
				resolvedWithoutAnswer = true
			}
		}
	}
	// The first approval.requested is the stored one (replayed from 0);
	// the second is the question asked again.
	b.next("chat.resumed", seen)
	for asked < 2 {
		b.next("approval.requested", seen)
	}
	b.send(map[string]any{"type": "approval.answer", "approval": ap["id"], "allow": true})
	res := b.next("tool.result", seen)["result"].(map[string]any)
	if res["call_id"] != ap["call"].(map[string]any)["id"] || res["is_error"] == true {
		t.Fatalf("result %v", res)
	}
	b.next("turn.finished", seen)
	if recoveries != 0 || resolvedWithoutAnswer {
		t.Fatalf("%d recoveries, resolved without an answer: %v", recoveries, resolvedWithoutAnswer)
	}
	out, err := os.ReadFile(filepath.Join(filepath.Dir(data), "workspace", "ran"))
	if err != nil || string(out) != "ran\n" {
		t.Fatalf("the call ran %q (%v)", out, err)
	}
	p.stop(t)
}
