package hooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mirror-gateway/mirror/config"
)

// Bounds of one run.
const (
	// MaxOutput is how much of a hook's stdout, and of its stderr, is kept;
	// the rest is read and dropped, so a chatty hook neither blocks on a
	// full pipe nor grows the gateway's memory.
	MaxOutput = 64 << 10
	// MaxReason bounds a block reason, which is shown to the person.
	MaxReason = 4000
	// maxStderr bounds the stderr an *Error carries into logs.
	maxStderr = 1000
	// waitDelay bounds the wait for a hook's pipes once it has exited or
	// been killed: a child it left in the background must not hold the
	// turn by keeping stdout open.
	waitDelay = 2 * time.Second
)

// ErrTimeout is wrapped by the *Error of a hook that ran past its timeout and
// was killed with its process group.
var ErrTimeout = errors.New("timed out")

// Error is one hook that failed without blocking: a non-zero exit status
// other than PreCompact's 2, a timeout, output it could not be understood, or
// a command that could not start. It never carries the command line.
type Error struct {
	// Hook is the config field the hook was read from, such as
	// hooks.PreCompact[0], so the operator finds it in runtime.yaml.
	Hook string
	// ExitCode is the hook's exit status; -1 when it did not exit on its
	// own (killed, or never started).
	ExitCode int
	// Stderr is the start of what the hook wrote to stderr, trimmed.
	Stderr string
	// Err is ErrTimeout, the start or output problem, or nil for a plain
	// non-zero exit.
	Err error
}

// Error reads like "hooks.PreCompact[0]: exit status 1: no plan file".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Hook)
	b.WriteString(": ")
	switch {
	case e.Err != nil:
		b.WriteString(e.Err.Error())
	default:
		fmt.Fprintf(&b, "exit status %d", e.ExitCode)
	}
	if e.Stderr != "" {
		b.WriteString(": ")
		b.WriteString(e.Stderr)
	}
	return b.String()
}

// Unwrap lets errors.Is find ErrTimeout.
func (e *Error) Unwrap() error { return e.Err }

// result is one finished run.
type result struct {
	hook     string
	exitCode int    // -1 when err is set
	stdout   []byte // at most MaxOutput
	stderr   []byte // at most MaxOutput
	cut      bool   // stdout was longer than MaxOutput
	// err: ErrTimeout, the caller's ctx error (wrapped), or a start error.
	err error
}

// run runs one hook to its end. The process gets its own process group, so
// a timeout or a canceled ctx kills the shell and everything it started.
func (r *Runner) run(ctx context.Context, name string, h config.Hook, stdin []byte) result {
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = config.DefaultHookTimeout // a Config built in code without one
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var stdout, stderr capped
	cmd := command(runCtx, h.Command)
	cmd.Dir = r.dir
	// The gateway's own environment, as Claude Code passes its own, with
	// CLAUDE_PROJECT_DIR so scripts written for Claude Code find their
	// files; nothing secret is added.
	cmd.Env = append(os.Environ(), "CLAUDE_PROJECT_DIR="+r.dir)
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = waitDelay

	err := cmd.Run()
	res := result{hook: name, exitCode: -1, stdout: stdout.buf, stderr: stderr.buf, cut: stdout.cut}
	switch {
	case ctx.Err() != nil:
		// The caller gave up (the turn stopped); whatever the hook said
		// no longer matters.
		res.err = fmt.Errorf("canceled: %w", ctx.Err())
	case runCtx.Err() != nil:
		res.err = fmt.Errorf("%w after %s (killed)", ErrTimeout, timeout)
	case cmd.ProcessState != nil && cmd.ProcessState.Exited():
		// errors.Is(err, exec.ErrWaitDelay) lands here too: the hook
		// exited, only a straggler it left kept a pipe open.
		res.exitCode = cmd.ProcessState.ExitCode()
	case err != nil:
		res.err = err
	default:
		res.err = errors.New("ended without an exit status")
	}
	return res
}

// failure is the *Error of a run that did not succeed, or nil. exit2 says
// whether exit status 2 is a failure here (everywhere but PreCompact, where
// it blocks).
func failure(res result, exit2 bool) error {
	switch {
	case res.err != nil:
		return &Error{Hook: res.hook, ExitCode: -1, Stderr: stderrText(res.stderr), Err: res.err}
	case res.exitCode == 0, res.exitCode == 2 && !exit2:
		return nil
	}
	return &Error{Hook: res.hook, ExitCode: res.exitCode, Stderr: stderrText(res.stderr)}
}

// preCompactOutcome judges one PreCompact run: whether it blocks, why, and
// the error it reports when it failed without blocking.
func preCompactOutcome(res result) (block bool, reason string, err error) {
	if e := failure(res, false); e != nil {
		return false, "", e
	}
	if res.exitCode == 2 {
		reason = strings.TrimSpace(string(res.stderr))
		if reason == "" {
			reason = res.hook + " blocked the checkpoint (exit status 2)"
		}
		return true, clip(reason, MaxReason), nil
	}
	out, isJSON, perr := parseOutput(res.stdout)
	if perr != nil {
		return false, "", outputError(res, perr)
	}
	if !isJSON {
		return false, "", nil // plain stdout of PreCompact goes nowhere, as in Claude Code
	}
	switch {
	case out.Continue != nil && !*out.Continue:
		reason = out.StopReason
	case out.Decision == "block":
		reason = out.Reason
	case out.Decision == "" || out.Decision == "approve":
		return false, "", nil
	default:
		return false, "", outputError(res, fmt.Errorf("decision %s, want \"block\" or none", quote(out.Decision)))
	}
	reason = strings.TrimSpace(reason)
	if reason == "" {
		reason = res.hook + " blocked the checkpoint"
	}
	return true, clip(reason, MaxReason), nil
}

// sessionStartOutcome judges one SessionStart run: the context it adds and
// the error it reports. Plain stdout is context, as in Claude Code; JSON
// stdout adds hookSpecificOutput.additionalContext.
func sessionStartOutcome(res result) (string, error) {
	if e := failure(res, true); e != nil {
		return "", e
	}
	out, isJSON, perr := parseOutput(res.stdout)
	if perr != nil {
		return "", outputError(res, perr)
	}
	var text string
	var err error
	if !isJSON {
		text = strings.TrimSpace(string(res.stdout))
	} else {
		if hs := out.HookSpecificOutput; hs != nil {
			if hs.HookEventName != "" && hs.HookEventName != config.HookSessionStart {
				return "", outputError(res, fmt.Errorf("hookSpecificOutput.hookEventName is %s, want SessionStart", quote(hs.HookEventName)))
			}
			text = strings.TrimSpace(hs.AdditionalContext)
		}
		if out.Continue != nil && !*out.Continue {
			// Claude Code would end the session; Mirror's SessionStart
			// cannot stop a run, so say the request did nothing.
			err = outputError(res, errors.New(`"continue": false is ignored: SessionStart cannot stop a run`))
		}
	}
	if res.cut && text != "" {
		err = errors.Join(err, outputError(res, fmt.Errorf("stdout longer than %d bytes; only its start is added", MaxOutput)))
	}
	return text, err
}

func outputError(res result, err error) error {
	return &Error{Hook: res.hook, ExitCode: res.exitCode, Err: fmt.Errorf("stdout: %w", err)}
}

// capped keeps the first MaxOutput bytes written to it and drops the rest,
// while still accepting them so the hook never blocks on its pipe.
type capped struct {
	buf []byte
	cut bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := MaxOutput - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(room, len(p))]...)
		if len(p) > room {
			c.cut = true
		}
	} else if len(p) > 0 {
		c.cut = true
	}
	return len(p), nil
}

func stderrText(b []byte) string {
	return clip(strings.TrimSpace(string(b)), maxStderr)
}

// clip shortens s to at most n bytes, not splitting a rune, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = " …"
	cut := n - len(mark)
	// s[cut] is the first byte dropped: step back off a rune's middle.
	for i := 0; i < utf8.UTFMax && cut > 0 && !utf8.RuneStart(s[cut]); i++ {
		cut--
	}
	return s[:cut] + mark
}

// quote shows a value a hook wrote, bounded.
func quote(s string) string {
	return fmt.Sprintf("%q", clip(s, 64))
}
