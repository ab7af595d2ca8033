package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config"
)

// script writes an executable hook named name into dir. Every hook first
// saves the JSON it got on stdin to name.stdin, so tests can check it.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	src := "#!/bin/sh\ncat > \"$0.stdin\"\n" + body + "\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o700); err != nil {
		t.Fatal(err)
	}
	return "./" + name
}

// stdinOf is the JSON hook name received, or nil when it did not run.
func stdinOf(t *testing.T, dir, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name+".stdin"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s got stdin that is not JSON: %q", name, b)
	}
	return m
}

func hook(cmd string) config.Hook { return config.Hook{Command: cmd, Timeout: 10 * time.Second} }

// hookErrors are the *Error values joined in err.
func hookErrors(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(err error) {
		var e *Error
		if errors.As(err, &e) && err == error(e) {
			out = append(out, e)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, err := range j.Unwrap() {
				walk(err)
			}
		}
	}
	walk(err)
	return out
}

var session = Session{SessionID: "chat-7", TranscriptPath: "/tmp/chat-7.jsonl", Cwd: "/srv/ws"}

func TestPreCompact(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		block     bool
		reason    string // want the whole reason, or its start when it ends in "..."
		errSubstr string // "" means no error
	}{
		{"exit 0 silent", "exit 0", false, "", ""},
		{"exit 0 plain stdout is ignored", "echo keep going; exit 0", false, "", ""},
		{"exit 2 blocks with stderr", "echo 'the plan is not saved yet' >&2; exit 2", true, "the plan is not saved yet", ""},
		{"exit 2 without stderr", "exit 2", true, "hooks.PreCompact[0] blocked the checkpoint (exit status 2)", ""},
		{"JSON decision block", `echo '{"decision": "block", "reason": "mid-refactor"}'`, true, "mid-refactor", ""},
		{"JSON continue false", `echo '{"continue": false, "stopReason": "wait for tests"}'`, true, "wait for tests", ""},
		{"JSON block without reason", `echo '{"decision":"block"}'`, true, "hooks.PreCompact[0] blocked the checkpoint", ""},
		{"JSON approve", `echo '{"decision": "approve", "suppressOutput": true}'`, false, "", ""},
		{"JSON with only other fields", `echo '{"systemMessage": "saved", "continue": true}'`, false, "", ""},
		{"exit 1 is a non-blocking error", "echo 'no plan file' >&2; exit 1", false, "", "hooks.PreCompact[0]: exit status 1: no plan file"},
		{"exit 2 block wins over stdout", `echo '{"decision":"approve"}'; echo stop >&2; exit 2`, true, "stop", ""},
		{"malformed JSON is reported", `echo '{"decision": "block"'`, false, "", "hooks.PreCompact[0]: stdout: not valid hook JSON"},
		{"wrong type is reported", `echo '{"decision": true}'`, false, "", "hooks.PreCompact[0]: stdout: not valid hook JSON"},
		{"unknown decision is reported", `echo '{"decision": "maybe"}'`, false, "", `hooks.PreCompact[0]: stdout: decision "maybe", want "block" or none`},
		{"command not found", "exec ./no-such-program", false, "", "hooks.PreCompact[0]: exit status 127"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			r := New(config.Hooks{PreCompact: []config.Hook{hook(script(t, dir, "pre.sh", tc.body))}}, dir)
			d, err := r.PreCompact(context.Background(), PreCompactInput{Session: session, Trigger: Manual, CustomInstructions: "keep the plan"})
			if d.Block != tc.block {
				t.Errorf("Block = %v, want %v (reason %q, err %v)", d.Block, tc.block, d.Reason, err)
			}
			if want, prefix := strings.CutSuffix(tc.reason, "..."); (prefix && !strings.HasPrefix(d.Reason, want)) || (!prefix && d.Reason != want) {
				t.Errorf("Reason = %q, want %q", d.Reason, tc.reason)
			}
			switch {
			case tc.errSubstr == "" && err != nil:
				t.Errorf("err = %v", err)
			case tc.errSubstr != "" && (err == nil || !strings.Contains(err.Error(), tc.errSubstr)):
				t.Errorf("err = %v, want it to contain %q", err, tc.errSubstr)
			case tc.errSubstr != "" && len(hookErrors(err)) != 1:
				t.Errorf("err = %v is not one *Error", err)
			}
			want := map[string]any{
				"session_id": "chat-7", "transcript_path": "/tmp/chat-7.jsonl", "cwd": "/srv/ws",
				"hook_event_name": "PreCompact", "trigger": "manual", "custom_instructions": "keep the plan",
			}
			if got := stdinOf(t, dir, "pre.sh"); !reflect.DeepEqual(got, want) {
				t.Errorf("stdin = %v\nwant %v", got, want)
			}
		})
	}
}

// Several hooks run in order, all of them, and any block blocks; matchers
// pick by trigger.
func TestPreCompactSeveral(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Hooks{PreCompact: []config.Hook{
		hook(script(t, dir, "a.sh", "echo first >> order; echo 'not now' >&2; exit 2")),
		hook(script(t, dir, "b.sh", "echo second >> order; exit 1")),
		{Command: script(t, dir, "manual.sh", "echo manual >> order"), Timeout: time.Second, Matcher: "manual"},
		{Command: script(t, dir, "auto.sh", `echo auto >> order; echo '{"decision":"block","reason":"auto is off"}'`), Timeout: time.Second, Matcher: "auto"},
		{Command: script(t, dir, "both.sh", "echo both >> order"), Timeout: time.Second, Matcher: "auto|manual"},
	}}
	r := New(cfg, dir)

	d, err := r.PreCompact(context.Background(), PreCompactInput{Trigger: Auto})
	if !d.Block || d.Reason != "not now\nauto is off" {
		t.Errorf("Decision = %+v, want a block with both reasons", d)
	}
	if es := hookErrors(err); len(es) != 1 || es[0].Hook != "hooks.PreCompact[1]" || es[0].ExitCode != 1 {
		t.Errorf("err = %v, want hooks.PreCompact[1]'s exit status 1", err)
	}
	order, _ := os.ReadFile(filepath.Join(dir, "order"))
	if got := strings.Fields(string(order)); !reflect.DeepEqual(got, []string{"first", "second", "auto", "both"}) {
		t.Errorf("ran %v", got)
	}
	if in := stdinOf(t, dir, "auto.sh"); in["trigger"] != "auto" || in["custom_instructions"] != "" || in["cwd"] != dir {
		t.Errorf("auto stdin = %v (cwd defaults to the hooks' folder)", in)
	}
	if stdinOf(t, dir, "manual.sh") != nil {
		t.Error("a manual hook ran on an auto checkpoint")
	}
}

// Hooks run with /bin/sh -c in the config folder, with the gateway's
// environment and CLAUDE_PROJECT_DIR.
func TestEnvironment(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MIRROR_HOOK_TEST", "from-the-gateway")
	r := New(config.Hooks{SessionStart: []config.Hook{hook(`printf '%s|%s|%s' "$PWD" "$MIRROR_HOOK_TEST" "$CLAUDE_PROJECT_DIR"; cat >/dev/null`)}}, dir)
	got, err := r.SessionStart(context.Background(), SessionStartInput{})
	if err != nil {
		t.Fatal(err)
	}
	if want := dir + "|from-the-gateway|" + dir; got != want {
		t.Errorf("hook saw %q, want %q", got, want)
	}
}

func TestPostCompact(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Hooks{PostCompact: []config.Hook{
		hook(script(t, dir, "block.sh", `echo '{"decision":"block","reason":"too late"}'`)),
		hook(script(t, dir, "two.sh", "echo 'cannot block now' >&2; exit 2")),
		{Command: script(t, dir, "manual.sh", ""), Timeout: time.Second, Matcher: "manual"},
	}}
	err := New(cfg, dir).PostCompact(context.Background(), PostCompactInput{Session: session, Trigger: Auto, CompactSummary: "epoch 3: built the parser"})
	if es := hookErrors(err); len(es) != 1 || es[0].Hook != "hooks.PostCompact[1]" || es[0].ExitCode != 2 || es[0].Stderr != "cannot block now" {
		t.Errorf("err = %v, want hooks.PostCompact[1]'s exit 2 reported", err)
	}
	want := map[string]any{
		"session_id": "chat-7", "transcript_path": "/tmp/chat-7.jsonl", "cwd": "/srv/ws",
		"hook_event_name": "PostCompact", "trigger": "auto", "compact_summary": "epoch 3: built the parser",
	}
	if got := stdinOf(t, dir, "block.sh"); !reflect.DeepEqual(got, want) {
		t.Errorf("stdin = %v\nwant %v", got, want)
	}
	if stdinOf(t, dir, "manual.sh") != nil {
		t.Error("a manual hook ran after an auto checkpoint")
	}
}

func TestSessionStart(t *testing.T) {
	tests := []struct {
		name      string
		bodies    []string
		want      string
		errSubstr string
	}{
		{"plain stdout", []string{"echo '  Plan: step 3 of 5  '"}, "Plan: step 3 of 5", ""},
		{"additionalContext", []string{`echo '{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "Plan: step 3"}}'`}, "Plan: step 3", ""},
		{"additionalContext without event name", []string{`echo '{"hookSpecificOutput": {"additionalContext": "x"}}'`}, "x", ""},
		{"JSON without context", []string{`echo '{"suppressOutput": true}'`}, "", ""},
		{"silent", []string{"true"}, "", ""},
		{"several in order", []string{"echo one", `echo '{"hookSpecificOutput":{"additionalContext":"two"}}'`, "echo three"}, "one\n\ntwo\n\nthree", ""},
		{"a failure keeps the others", []string{"echo one", "echo broken >&2; exit 1", "echo three"}, "one\n\nthree", "hooks.SessionStart[1]: exit status 1: broken"},
		{"exit 2 does not block", []string{"echo ignored; echo no >&2; exit 2"}, "", "hooks.SessionStart[0]: exit status 2: no"},
		{"other event's output", []string{`echo '{"hookSpecificOutput":{"hookEventName":"PreCompact","additionalContext":"x"}}'`}, "", `stdout: hookSpecificOutput.hookEventName is "PreCompact", want SessionStart`},
		{"continue false is reported", []string{`echo '{"continue": false, "hookSpecificOutput":{"additionalContext":"kept"}}'`}, "kept", `"continue": false is ignored`},
		{"malformed JSON", []string{`echo '{"hookSpecificOutput": '`}, "", "stdout: not valid hook JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var cfg config.Hooks
			for i, body := range tc.bodies {
				cfg.SessionStart = append(cfg.SessionStart, hook(script(t, dir, "s"+string(rune('0'+i))+".sh", body)))
			}
			got, err := New(cfg, dir).SessionStart(context.Background(), SessionStartInput{Session: session, Source: SourceCompact})
			if got != tc.want {
				t.Errorf("context = %q, want %q", got, tc.want)
			}
			if (tc.errSubstr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.errSubstr)) {
				t.Errorf("err = %v, want %q", err, tc.errSubstr)
			}
			want := map[string]any{
				"session_id": "chat-7", "transcript_path": "/tmp/chat-7.jsonl", "cwd": "/srv/ws",
				"hook_event_name": "SessionStart", "source": "compact",
			}
			if got := stdinOf(t, dir, "s0.sh"); !reflect.DeepEqual(got, want) {
				t.Errorf("stdin = %v\nwant %v", got, want)
			}
		})
	}
}

// A hook past its timeout is killed with everything it started, and the
// call returns at once rather than when the hook's sleep would end; the
// timeout is reported and blocks nothing, and the next hook still runs.
func TestTimeoutKillsTheGroup(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Hooks{PreCompact: []config.Hook{
		// The background sleep keeps stdout open: were only the shell
		// killed, the call would wait for it (or for waitDelay).
		{Command: script(t, dir, "slow.sh", "sleep 30 & sleep 30; exit 2"), Timeout: 300 * time.Millisecond},
		hook(script(t, dir, "next.sh", "exit 0")),
	}}
	start := time.Now()
	d, err := New(cfg, dir).PreCompact(context.Background(), PreCompactInput{Trigger: Auto})
	elapsed := time.Since(start)
	if elapsed >= waitDelay {
		t.Errorf("took %v: the hook's children were not killed (waitDelay %v)", elapsed, waitDelay)
	}
	if d.Block {
		t.Errorf("a timed-out hook blocked: %+v", d)
	}
	es := hookErrors(err)
	if len(es) != 1 || !errors.Is(es[0], ErrTimeout) || es[0].Hook != "hooks.PreCompact[0]" || es[0].ExitCode != -1 {
		t.Errorf("err = %v, want hooks.PreCompact[0] timed out", err)
	}
	if stdinOf(t, dir, "next.sh") == nil {
		t.Error("the hook after a timed-out one did not run")
	}
}

// When the caller's ctx ends, the running hook is killed, the rest are not
// run, and the error says so.
func TestCallerCanceled(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Hooks{SessionStart: []config.Hook{
		hook(script(t, dir, "slow.sh", "echo partial; sleep 30")),
		hook(script(t, dir, "next.sh", "echo never")),
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	got, err := New(cfg, dir).SessionStart(ctx, SessionStartInput{})
	if elapsed := time.Since(start); elapsed >= waitDelay {
		t.Errorf("took %v", elapsed)
	}
	if got != "" || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("SessionStart = %q, %v; want nothing and the ctx error", got, err)
	}
	if stdinOf(t, dir, "next.sh") != nil {
		t.Error("a hook ran after the caller gave up")
	}
}

// Output past MaxOutput is read and dropped: the hook finishes, memory stays
// bounded, and the cut is reported.
func TestOutputBounded(t *testing.T) {
	dir := t.TempDir()
	flood := "head -c 300000 /dev/zero | tr '\\0' a"
	cfg := config.Hooks{
		SessionStart: []config.Hook{hook(script(t, dir, "out.sh", flood))},
		PreCompact:   []config.Hook{hook(script(t, dir, "err.sh", flood+" >&2; exit 2"))},
		PostCompact:  []config.Hook{hook(script(t, dir, "fail.sh", flood+" >&2; exit 3"))},
	}
	r := New(cfg, dir)
	got, err := r.SessionStart(context.Background(), SessionStartInput{})
	if len(got) != MaxOutput || err == nil || !strings.Contains(err.Error(), "only its start is added") {
		t.Errorf("SessionStart: %d bytes, %v", len(got), err)
	}
	d, err := r.PreCompact(context.Background(), PreCompactInput{Trigger: Manual})
	if !d.Block || len(d.Reason) > MaxReason || !strings.HasSuffix(d.Reason, " …") || err != nil {
		t.Errorf("PreCompact: block %v, reason of %d bytes, %v", d.Block, len(d.Reason), err)
	}
	err = r.PostCompact(context.Background(), PostCompactInput{Trigger: Manual})
	if es := hookErrors(err); len(es) != 1 || es[0].ExitCode != 3 || len(es[0].Stderr) > maxStderr {
		t.Errorf("PostCompact: %v", err)
	}
}

func TestNoHooks(t *testing.T) {
	for _, r := range []*Runner{nil, New(config.Hooks{}, "")} {
		if d, err := r.PreCompact(context.Background(), PreCompactInput{Trigger: Auto}); d.Block || err != nil {
			t.Errorf("PreCompact = %+v, %v", d, err)
		}
		if err := r.PostCompact(context.Background(), PostCompactInput{Trigger: Manual}); err != nil {
			t.Errorf("PostCompact = %v", err)
		}
		if s, err := r.SessionStart(context.Background(), SessionStartInput{}); s != "" || err != nil {
			t.Errorf("SessionStart = %q, %v", s, err)
		}
		if r.Configured(config.HookPreCompact) {
			t.Error("Configured with no hooks")
		}
	}
	r := New(config.Hooks{PostCompact: []config.Hook{hook("true")}}, "")
	if !r.Configured(config.HookPostCompact) || r.Configured(config.HookSessionStart) || r.Configured("Stop") {
		t.Error("Configured is wrong")
	}
}

func TestBadTrigger(t *testing.T) {
	dir := t.TempDir()
	r := New(config.Hooks{PreCompact: []config.Hook{hook(script(t, dir, "pre.sh", ""))}}, dir)
	if _, err := r.PreCompact(context.Background(), PreCompactInput{Trigger: "compact"}); !errors.Is(err, ErrBadInput) {
		t.Errorf("PreCompact(trigger compact) = %v, want ErrBadInput", err)
	}
	if err := r.PostCompact(context.Background(), PostCompactInput{}); !errors.Is(err, ErrBadInput) {
		t.Errorf("PostCompact(no trigger) = %v, want ErrBadInput", err)
	}
	if stdinOf(t, dir, "pre.sh") != nil {
		t.Error("a hook ran on a bad input")
	}
}

func TestClip(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdefghij", 8, "abcd" + " …"},
		{"ééééé", 8, "éé" + " …"}, // 4 bytes for the mark leaves 4: two runes
		{"aéééé", 8, "aé" + " …"}, // 4 bytes would split the second é
	}
	for _, tc := range tests {
		if got := clip(tc.s, tc.n); got != tc.want || len(got) > tc.n {
			t.Errorf("clip(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
