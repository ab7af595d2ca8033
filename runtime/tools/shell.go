package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/mirror-gateway/mirror/runtime/tools/pgroup"
)

// maxShellOutput bounds what one command's output keeps in memory (and in
// the store); the rest is read and dropped so the command never blocks.
const maxShellOutput = 8 << 20

// maxCommand bounds the command text, in characters.
const maxCommand = 64 << 10

// pipeGrace is how long the output pipe may stay open after the command's
// whole process group was killed: only a process that left the group (setsid)
// can hold it longer, and its output is not waited for.
const pipeGrace = 2 * time.Second

// defaultPath is the PATH commands get when the gateway has none.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

func (r *Registry) shellTool() *tool {
	maxSec := max(int64(1), int64((r.shellTimeout+time.Second-1)/time.Second))
	return &tool{
		name: "shell",
		description: fmt.Sprintf("Run a command with /bin/sh -c in the workspace folder. stdout and stderr are combined; the exit code is reported. "+
			"The command is killed, with every process it started, after %s or timeout_seconds if shorter. The environment holds only PATH, HOME (the workspace) and LANG.", r.shellTimeout),
		schema: object([]string{"command"}, map[string]*schema{
			"command":         str("The shell command line.", 1, maxCommand),
			"timeout_seconds": integer("Stop the command after this many seconds.", 1, maxSec),
		}),
		run: r.shell,
	}
}

type shellArgs struct {
	Command        string `json:"command"`
	TimeoutSeconds *int64 `json:"timeout_seconds"`
}

func (r *Registry) shell(ctx context.Context, raw []byte, meta CallMeta) (string, bool, error) {
	var a shellArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return "", true, err
	}
	timeout := r.shellTimeout
	if a.TimeoutSeconds != nil {
		timeout = min(timeout, time.Duration(*a.TimeoutSeconds)*time.Second)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	pr, pw, err := os.Pipe()
	if err != nil {
		return "", true, fmt.Errorf("could not start the command: %w", err)
	}
	defer pr.Close()
	// The command runs under a leader heading its own process group: a
	// timeout kills everything it started, and so does the gateway's death.
	cmd := pgroup.Command(a.Command)
	cmd.Dir = r.ws.real
	cmd.Env = r.shellEnv()
	// One *os.File for both streams keeps their order and lets Wait return
	// when the shell exits, whoever else still holds the pipe.
	cmd.Stdout, cmd.Stderr = pw, pw
	// Background processes the command leaves behind die with it: nothing
	// the tool started outlives the call.
	cmd.KillStragglers = true
	cmd.Hold = meta.Process != nil
	if err := cmd.Start(); err != nil {
		pw.Close()
		return "", true, fmt.Errorf("could not start the command: %w", err)
	}
	pw.Close()
	if meta.Process != nil {
		// The group is journaled before the command runs, so the next start
		// can stop it if it outlives this process.
		err := meta.Process(cmd.Group())
		if err == nil {
			err = cmd.Release()
		}
		if err != nil {
			cmd.Kill()
			_ = cmd.Wait()
			return "", true, fmt.Errorf("not run: could not journal the command's process: %w", err)
		}
	}

	out := &capped{limit: maxShellOutput}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(out, pr)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var stopped error
	select {
	case err = <-exited:
	case <-ctx.Done():
		stopped = ctx.Err()
		cmd.Kill()
		err = <-exited
	}
	grace := time.NewTimer(pipeGrace)
	select {
	case <-copied:
	case <-grace.C:
		pr.Close() // unblocks the copy
		<-copied
	}
	grace.Stop()

	text := out.String()
	if text == "" {
		text = "(no output)\n"
	} else if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	if out.dropped > 0 {
		text += fmt.Sprintf("[output cut: %d more bytes were not kept]\n", out.dropped)
	}
	switch {
	case errors.Is(stopped, context.DeadlineExceeded):
		return text + fmt.Sprintf("[timed out after %s; the command and every process it started were killed]", timeout), true, nil
	case stopped != nil:
		return text + "[cancelled; the command and every process it started were killed]", true, nil
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		return text + "[exit code 0]", false, nil
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		// A failing command is a result the model reads, not a failed call.
		return text + fmt.Sprintf("[exit code %d]", exit.ExitCode()), false, nil
	case errors.As(err, &exit):
		return text + fmt.Sprintf("[killed by %s]", exit.String()), true, nil
	}
	return text, true, fmt.Errorf("waiting for the command: %w", err)
}

// shellEnv is the whole environment of a command: nothing of the gateway's
// own environment but PATH and LANG, so no key or token can leak into it.
func (r *Registry) shellEnv() []string {
	p := os.Getenv("PATH")
	if p == "" {
		p = defaultPath
	}
	lang := os.Getenv("LANG")
	if lang == "" || strings.ContainsAny(lang, "\n=") {
		lang = "C.UTF-8"
	}
	return []string{"PATH=" + p, "HOME=" + r.ws.real, "LANG=" + lang}
}

// capped keeps the first limit bytes written and counts the rest.
type capped struct {
	mu      sync.Mutex
	buf     []byte
	limit   int
	dropped int64
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.limit - len(c.buf)
	if room >= len(p) {
		c.buf = append(c.buf, p...)
	} else {
		c.buf = append(c.buf, p[:max(room, 0)]...)
		c.dropped += int64(len(p) - max(room, 0))
	}
	return len(p), nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.ToValidUTF8(string(c.buf), "\uFFFD")
}
