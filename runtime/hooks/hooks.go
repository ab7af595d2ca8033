// Package hooks runs the compaction hooks of runtime.yaml with Claude Code's
// hook protocol, so hooks written for Claude Code work against Mirror: a
// checkpoint is Mirror's compaction. It owns nothing but the processes it
// starts: each hook has ended, or been killed with its process group at its
// timeout, before the call that started it returns. A child a hook leaves in
// the background after exiting is the hook's own, as in Claude Code; it
// cannot hold the call past a short grace for the output pipes.
//
// The protocol, per hook: the event's JSON on stdin; exit 0 is success, and
// stdout may be JSON ({"decision":"block","reason":...} or
// {"continue":false,"stopReason":...} blocks a PreCompact;
// hookSpecificOutput.additionalContext, or plain stdout, is SessionStart's
// context to add); exit 2 blocks a PreCompact with stderr as the reason; any
// other failure, a timeout included, is reported and blocks nothing, so a
// broken hook cannot stop checkpoints from keeping a chat inside its budget.
package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mirror-gateway/mirror/config"
)

// Triggers of PreCompact and PostCompact, and the source of SessionStart.
const (
	Auto          = config.TriggerAuto   // the runtime checkpointed on its own
	Manual        = config.TriggerManual // a person asked with /compact
	SourceCompact = config.SourceCompact // the first run after a checkpoint
)

// Runner runs the configured hooks. It holds no state between calls and is
// safe for concurrent use; a nil *Runner has no hooks.
type Runner struct {
	cfg config.Hooks
	dir string // absolute folder commands run in
}

// New returns a Runner for cfg, already validated by config, whose commands
// run in dir (config.Config.Dir; "" is the working directory). dir is made
// absolute now, so a later chdir of the process cannot move the hooks.
func New(cfg config.Hooks, dir string) *Runner {
	if dir == "" {
		dir = "."
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return &Runner{cfg: cfg, dir: dir}
}

// Configured reports whether any hook of event (config.HookPreCompact, ...)
// is configured, so a caller can skip preparing an input nobody reads.
func (r *Runner) Configured(event string) bool {
	if r == nil {
		return false
	}
	for _, ev := range r.cfg.Events() {
		if ev.Name == event {
			return len(ev.Hooks) > 0
		}
	}
	return false
}

// Session says which conversation a hook is about; every event carries it.
type Session struct {
	// SessionID identifies the conversation (Mirror's chat id).
	SessionID string
	// TranscriptPath is a file holding the conversation when the caller
	// has one; "" otherwise (Mirror's record lives in bbolt).
	TranscriptPath string
	// Cwd is the folder the assistant works in (the tools' workspace); ""
	// means the folder the hooks run in.
	Cwd string
}

// PreCompactInput is what a PreCompact hook is told.
type PreCompactInput struct {
	Session
	// Trigger is Auto or Manual.
	Trigger string
	// CustomInstructions is the text after /compact; "" for Auto. The
	// checkpoint is written without a model, so it does not steer it: it
	// is for the hooks.
	CustomInstructions string
}

// PostCompactInput is what a PostCompact hook is told.
type PostCompactInput struct {
	Session
	// Trigger is the one PreCompact had.
	Trigger string
	// CompactSummary is what the checkpoint left in place of what it
	// evicted (its epoch cards), when the caller has it; Claude Code sends
	// its summary here.
	CompactSummary string
}

// SessionStartInput is what a SessionStart hook is told.
type SessionStartInput struct {
	Session
	// Source is SourceCompact ("" means SourceCompact): Mirror fires
	// SessionStart only at the first run after a checkpoint.
	Source string
}

// Decision is what the PreCompact hooks decided together.
type Decision struct {
	// Block skips the checkpoint: some hook exited 2 or answered
	// "decision": "block" or "continue": false.
	Block bool
	// Reason says why, from the blocking hooks in order, one a line; it
	// is shown to the person, so it is clipped to MaxReason bytes.
	Reason string
}

// The wire inputs, in Claude Code's field names and order. Every field is
// always sent, even empty, so a hook can rely on the keys being there.
type (
	preCompactWire struct {
		SessionID          string `json:"session_id"`
		TranscriptPath     string `json:"transcript_path"`
		Cwd                string `json:"cwd"`
		HookEventName      string `json:"hook_event_name"`
		Trigger            string `json:"trigger"`
		CustomInstructions string `json:"custom_instructions"`
	}
	postCompactWire struct {
		SessionID      string `json:"session_id"`
		TranscriptPath string `json:"transcript_path"`
		Cwd            string `json:"cwd"`
		HookEventName  string `json:"hook_event_name"`
		Trigger        string `json:"trigger"`
		CompactSummary string `json:"compact_summary"`
	}
	sessionStartWire struct {
		SessionID      string `json:"session_id"`
		TranscriptPath string `json:"transcript_path"`
		Cwd            string `json:"cwd"`
		HookEventName  string `json:"hook_event_name"`
		Source         string `json:"source"`
	}
)

// ErrBadInput is returned, wrapped, for an input no hook should see (an
// unknown trigger); it is the caller's bug, so no hook runs.
var ErrBadInput = errors.New("hooks: bad input")

func checkTrigger(t string) error {
	if t != Auto && t != Manual {
		return fmt.Errorf("%w: trigger %q, want %q or %q", ErrBadInput, t, Auto, Manual)
	}
	return nil
}

// PreCompact runs the PreCompact hooks whose matcher takes in.Trigger, in
// order, before a checkpoint is committed. All of them run, as in Claude
// Code, so a hook that only records the moment sees every checkpoint, and
// any block blocks. The error reports hooks that failed without blocking
// (each an *Error, joined) or a canceled ctx; the Decision stands either way,
// and the checkpoint proceeds unless it says Block.
func (r *Runner) PreCompact(ctx context.Context, in PreCompactInput) (Decision, error) {
	if err := checkTrigger(in.Trigger); err != nil {
		return Decision{}, err
	}
	if r == nil {
		return Decision{}, nil
	}
	stdin, err := json.Marshal(preCompactWire{
		SessionID: in.SessionID, TranscriptPath: in.TranscriptPath, Cwd: r.cwd(in.Cwd),
		HookEventName: config.HookPreCompact, Trigger: in.Trigger, CustomInstructions: in.CustomInstructions,
	})
	if err != nil {
		return Decision{}, fmt.Errorf("hooks: encode PreCompact input: %w", err)
	}
	var d Decision
	var reasons []string
	errs := r.each(ctx, config.HookPreCompact, r.cfg.PreCompact, in.Trigger, stdin, func(res result) error {
		block, reason, err := preCompactOutcome(res)
		if block {
			d.Block = true
			reasons = append(reasons, reason)
		}
		return err
	})
	d.Reason = clip(strings.Join(reasons, "\n"), MaxReason)
	return d, errs
}

// PostCompact runs the PostCompact hooks whose matcher takes in.Trigger, in
// order, after a checkpoint. Nothing they say changes anything; the error
// reports those that failed (exit 2 included) or a canceled ctx.
func (r *Runner) PostCompact(ctx context.Context, in PostCompactInput) error {
	if err := checkTrigger(in.Trigger); err != nil {
		return err
	}
	if r == nil {
		return nil
	}
	stdin, err := json.Marshal(postCompactWire{
		SessionID: in.SessionID, TranscriptPath: in.TranscriptPath, Cwd: r.cwd(in.Cwd),
		HookEventName: config.HookPostCompact, Trigger: in.Trigger, CompactSummary: in.CompactSummary,
	})
	if err != nil {
		return fmt.Errorf("hooks: encode PostCompact input: %w", err)
	}
	return r.each(ctx, config.HookPostCompact, r.cfg.PostCompact, in.Trigger, stdin, func(res result) error {
		return failure(res, true)
	})
}

// SessionStart runs the SessionStart hooks whose matcher takes in.Source, in
// order, at the first run after a checkpoint, and returns the context they
// add, joined one hook's text after another ("" when none adds any); the
// caller puts it in the view as runtime context. A SessionStart hook cannot
// block; the error reports those that failed or a canceled ctx, and the
// context of the others is returned anyway.
func (r *Runner) SessionStart(ctx context.Context, in SessionStartInput) (string, error) {
	if in.Source == "" {
		in.Source = SourceCompact
	}
	if r == nil {
		return "", nil
	}
	stdin, err := json.Marshal(sessionStartWire{
		SessionID: in.SessionID, TranscriptPath: in.TranscriptPath, Cwd: r.cwd(in.Cwd),
		HookEventName: config.HookSessionStart, Source: in.Source,
	})
	if err != nil {
		return "", fmt.Errorf("hooks: encode SessionStart input: %w", err)
	}
	var parts []string
	errs := r.each(ctx, config.HookSessionStart, r.cfg.SessionStart, in.Source, stdin, func(res result) error {
		text, err := sessionStartOutcome(res)
		if text != "" {
			parts = append(parts, text)
		}
		return err
	})
	return strings.Join(parts, "\n\n"), errs
}

func (r *Runner) cwd(c string) string {
	if c == "" {
		return r.dir
	}
	return c
}

// each runs the hooks of event that match value, one after another, handing
// each result to judge and collecting its errors. A canceled ctx stops the
// rest: the caller is going away, and the hook that was running was killed.
func (r *Runner) each(ctx context.Context, event string, hs []config.Hook, value string, stdin []byte, judge func(result) error) error {
	var errs []error
	for i, h := range hs {
		if !h.Matches(value) {
			continue
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, fmt.Errorf("hooks: %s not run: %w", event, err))
			break
		}
		res := r.run(ctx, fmt.Sprintf("hooks.%s[%d]", event, i), h, stdin)
		if err := judge(res); err != nil {
			errs = append(errs, err)
		}
		if errors.Is(res.err, context.Canceled) || errors.Is(res.err, context.DeadlineExceeded) {
			break
		}
	}
	return errors.Join(errs...)
}
