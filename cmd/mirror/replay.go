package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/chats/dbcheck"
	"github.com/mirror-gateway/mirror/config"
	mruntime "github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/tools"
	"github.com/mirror-gateway/mirror/runtime/view"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// replay runs `mirror replay CHAT`: read-only, it prints every number a
// context decision of the chat turns on. With no gateway running it reads
// the database itself; a running gateway holds the database, so it is
// asked over HTTP instead (GET /api/chats/CHAT/replay, with the token).
func replay(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) error {
	var c common
	f := flag.NewFlagSet("replay", flag.ContinueOnError)
	c.register(f)
	chat, err := parseWithArg(f, args, "CHAT", "a chat id, such as c_0123abcd; GET /api/chats lists them")
	if err != nil {
		return err
	}
	cfg, err := c.loadClient()
	if err != nil {
		return err
	}
	path := filepath.Join(cfg.DataPath(), DBFile)
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("no database at %s: %w", path, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 500 * time.Millisecond,
		OpenFile: dbcheck.OpenFile(500 * time.Millisecond)})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return replayOverHTTP(ctx, cfg, chat, stdout, getenv)
	}
	if errors.Is(err, dbcheck.ErrDamaged) {
		return err // it names the file and what to do
	}
	if err != nil {
		return fmt.Errorf("open %s read-only: %w", path, err)
	}
	defer db.Close()
	engine, err := mruntime.New(cfg, getenv)
	if err != nil {
		return usageError{err}
	}
	// The same tools as serve offers (recall_memory with the data dir's
	// memory included), so the fixed overhead is the same. Replay runs no
	// turn, so nothing is written there.
	opt := mruntime.Options{Settings: db, DataDir: cfg.DataPath()}
	if reg, err := toolsFor(cfg); err == nil {
		opt.Tools = reg
	}
	if err := engine.Provision(opt); err != nil {
		return err
	}
	return writeReplay(stdout, db, engine, chat)
}

// writeReplay writes the replay of chat: the chat's line, its last
// reading, then the engine's numbers. serve answers GET /api/chats/{id}/replay
// with it too.
func writeReplay(w io.Writer, db *bolt.DB, engine *mruntime.Engine, chat string) error {
	ins, err := chats.Inspect(db, chat)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "chat %s %q, chain %s, %d events\n", ins.Chat.ID, ins.Chat.Title, ins.Chat.Chain, ins.Chat.Seq)
	if c := ins.Context; c != nil {
		fmt.Fprintf(w, "last reading: %s\n", strings.ReplaceAll(c.Line, "\n", " / "))
	}
	return engine.Replay(w, ins.Input, mruntime.ReplayState{From: ins.From, Boundaries: ins.Boundaries, Handoff: ins.Handoff, Asked: ins.Asked})
}

func replayOverHTTP(ctx context.Context, cfg *config.Config, chat string, stdout io.Writer, getenv func(string) string) error {
	_, tok, err := tokenIn(cfg, getenv)
	if err != nil {
		return err
	}
	root, err := gatewayURL(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := callGateway(ctx, http.DefaultClient, cfg.Listen, root, tok, http.MethodGet, "/api/chats/"+url.PathEscape(chat)+"/replay", nil)
	if errors.Is(err, errNoGateway) {
		return fmt.Errorf(errHeldNoGateway, cfg.Listen)
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch resp.StatusCode {
	case http.StatusOK:
		_, err = stdout.Write(body)
		return err
	}
	return fmt.Errorf("replay %s: %s", chat, strings.TrimSpace(string(body)))
}

// checkCompression runs `mirror check-compression FILE`: the token sources
// of a raw request JSON and how far masking and folding alone get.
func checkCompression(args []string, stdout io.Writer) error {
	f := flag.NewFlagSet("check-compression", flag.ContinueOnError)
	window := f.Int("context-window", 128000, "the model's context window in tokens")
	file, err := parseWithArg(f, args, "FILE", "a raw chat-completions request JSON")
	if err != nil {
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

// toolsFor is the workspace tools serve offers with cfg, so that replay
// sizes the same tool definitions (no ledger: replay changes nothing). It
// runs no tool: when the workspace does not exist it is not created (it
// lies outside the data dir, wherever replay runs), and the system's temp
// folder stands in.
func toolsFor(cfg *config.Config) (*tools.Registry, error) {
	opt := tools.OptionsFrom(cfg, nil)
	if fi, err := os.Stat(opt.Workspace); err != nil || !fi.IsDir() {
		opt.Workspace = os.TempDir()
	}
	return tools.New(opt)
}
