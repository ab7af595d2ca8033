package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	mruntime "github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/tools"
	"github.com/mirror-gateway/mirror/runtime/view"
	bolt "go.etcd.io/bbolt"
)

// replay runs `mirror replay CHAT`: read-only, it prints every number a
// context decision of the chat turns on.
func replay(args []string, stdout io.Writer, getenv func(string) string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usageError{errors.New("replay: missing CHAT (a chat id, such as c_0123abcd; GET /api/chats lists them)")}
	}
	chat, rest := args[0], args[1:]
	var c common
	f := flag.NewFlagSet("replay", flag.ContinueOnError)
	c.register(f)
	if err := parseFlags(f, rest); err != nil {
		return err
	}
	cfg, err := c.load()
	if err != nil {
		return err
	}
	path := filepath.Join(cfg.DataPath(), DBFile)
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("no database at %s: %w", path, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("open %s read-only: %w (a running gateway holds it: stop it first, or ask it with /status)", path, err)
	}
	defer db.Close()
	ins, err := chats.Inspect(db, chat)
	if err != nil {
		return err
	}
	engine, err := mruntime.New(cfg, getenv)
	if err != nil {
		return usageError{err}
	}
	if err := engine.UseLimits(db); err != nil {
		return err
	}
	// The same tools as serve offers, so the fixed overhead is the same.
	if reg, err := tools.New(tools.OptionsFrom(cfg, nil)); err == nil {
		engine.SetTools(reg)
	}
	fmt.Fprintf(stdout, "chat %s %q, chain %s, %d events\n", ins.Chat.ID, ins.Chat.Title, ins.Chat.Chain, ins.Chat.Seq)
	if c := ins.Context; c != nil {
		fmt.Fprintf(stdout, "last reading: %s\n", strings.ReplaceAll(c.Line, "\n", " / "))
	}
	return engine.Replay(stdout, ins.Input, mruntime.ReplayState{From: ins.From, Boundaries: ins.Boundaries, Handoff: ins.Handoff, Asked: ins.Asked})
}

// checkCompression runs `mirror check-compression FILE`: the token sources
// of a raw request JSON and how far masking and folding alone get.
func checkCompression(args []string, stdout io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usageError{errors.New("check-compression: missing FILE (a raw chat-completions request JSON)")}
	}
	file, rest := args[0], args[1:]
	f := flag.NewFlagSet("check-compression", flag.ContinueOnError)
	window := f.Int("context-window", 128000, "the model's context window in tokens")
	if err := parseFlags(f, rest); err != nil {
		return err
	}
	if *window <= 0 {
		return usageError{fmt.Errorf("check-compression: --context-window must be positive, not %d", *window)}
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	rep, err := view.CheckCompression(raw, *window)
	if err != nil {
		return usageError{fmt.Errorf("%s: %w", file, err)}
	}
	return rep.Write(stdout)
}
