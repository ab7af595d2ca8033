package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/chats/people"
	"github.com/mirror-gateway/mirror/chats/search"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/config/datadir"
	"github.com/mirror-gateway/mirror/gateway"
	"github.com/mirror-gateway/mirror/gateway/limit"
	"github.com/mirror-gateway/mirror/gateway/telegram"
	"github.com/mirror-gateway/mirror/monitor"
	mruntime "github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/hooks"
	"github.com/mirror-gateway/mirror/runtime/quota"
	"github.com/mirror-gateway/mirror/runtime/tokens"
	"github.com/mirror-gateway/mirror/runtime/tools"
	"github.com/mirror-gateway/mirror/runtime/tools/mcp"
)

// DBFile is the database's name inside the data dir.
const DBFile = "mirror.db"

// shutdownGrace is how long running turns get to finish at SIGTERM before
// they are cut short and journaled, to resume at the next start.
const shutdownGrace = 5 * time.Second

// common flags of the commands that read the configuration.
type common struct {
	config, data string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.config, "config", "", "runtime.yaml to read (default ./runtime.yaml, built-in defaults when it is missing)")
	fs.StringVar(&c.data, "data", "", "data directory (overrides data_dir)")
}

// load reads the configuration the flags name.
func (c *common) load() (*config.Config, error) {
	path, explicit := c.config, c.config != ""
	if !explicit {
		path = "runtime.yaml"
	}
	cfg, err := config.Load(path)
	if err != nil && !explicit && errors.Is(err, fs.ErrNotExist) {
		cfg, err = config.Default(), nil
	}
	if err != nil {
		return nil, usageError{err}
	}
	if c.data != "" {
		abs, err := filepath.Abs(c.data)
		if err != nil {
			return nil, usageError{err}
		}
		cfg.DataDir = abs
	}
	return cfg, nil
}

// loadArgs reads the flags of a subcommand that takes only the common ones,
// and loads the configuration they name.
func loadArgs(name string, args []string) (*config.Config, error) {
	var c common
	f := flag.NewFlagSet(name, flag.ContinueOnError)
	c.register(f)
	if err := parseFlags(f, args); err != nil {
		return nil, err
	}
	return c.loadClient()
}

// loadClient is load for a subcommand that may ask a running gateway: its
// listen address is where the gateway holding this data dir really listens
// (--addr may have moved it off runtime.yaml's listen).
func (c *common) loadClient() (*config.Config, error) {
	cfg, err := c.load()
	if err != nil {
		return nil, err
	}
	cfg.Listen = runningListen(cfg)
	return cfg, nil
}

// tokenIn prepares cfg's data dir (the storage trust checks) and returns it
// with the access token.
func tokenIn(cfg *config.Config, getenv func(string) string) (dir, tok string, err error) {
	if dir, err = datadir.Prepare(cfg.DataPath()); err != nil {
		return "", "", err
	}
	tok, err = gateway.LoadToken(cfg, dir, getenv)
	return dir, tok, err
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		var b strings.Builder
		fmt.Fprintf(&b, "flags of mirror %s:\n", fs.Name())
		fs.SetOutput(&b)
		fs.PrintDefaults()
		return helpShown{b.String()}
	} else if err != nil {
		return usageError{fmt.Errorf("%s: %w", fs.Name(), err)}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))}
	}
	return nil
}

func token(args []string, stdout io.Writer, getenv func(string) string) error {
	cfg, err := loadArgs("token", args)
	if err != nil {
		return err
	}
	_, t, err := tokenIn(cfg, getenv)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, t)
	return nil
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	// First of all: the commands an approved shell runs share the
	// gateway's user, and must not read its environment or memory.
	if err := nonDumpable(); err != nil {
		return fmt.Errorf("protect the gateway's memory (prctl PR_SET_DUMPABLE): %w", err)
	}
	var c common
	var addr string
	var asNode bool
	f := flag.NewFlagSet("serve", flag.ContinueOnError)
	c.register(f)
	f.StringVar(&addr, "addr", "", "HOST:PORT to listen on (overrides listen)")
	f.BoolVar(&asNode, "cluster", false, "run as a node of the cluster configured in runtime.yaml (cluster:)")
	if err := parseFlags(f, args); err != nil {
		return err
	}
	cfg, err := c.load()
	if err != nil {
		return err
	}
	if addr != "" {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return usageError{fmt.Errorf("--addr %q: %w", addr, err)}
		}
		cfg.Listen = addr
	}
	if asNode || cfg.Cluster.Enabled {
		if err := cfg.EnableCluster(); err != nil {
			return usageError{err}
		}
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	for _, w := range cfg.WorkspaceWarnings() {
		log.Warn(w)
	}
	// Catch the signals first: a SIGTERM that arrives while starting must
	// still shut down cleanly, not kill the process mid-write.
	sig, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	dir, tok, err := tokenIn(cfg, getenv)
	if err != nil {
		return err
	}
	dbPath := filepath.Join(dir, DBFile)
	if err := datadir.CheckFile(dbPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	opened := time.Now()
	db, rep, err := chats.OpenDBReport(dbPath, time.Second)
	if err != nil {
		return err
	}
	if rep != nil && rep.Tree {
		log.Info("database: the previous run did not close it cleanly (or it is new to this version): checked its whole tree",
			"pages", rep.Pages, "took", time.Since(opened).Round(time.Microsecond))
	}
	// Closed last, with its freelist and the clean-shutdown marker, so
	// the next start checks only the meta pages and the freelist.
	defer func() {
		if err := chats.CloseDB(db); err != nil {
			log.Warn("database: not marked as closed cleanly; the next start checks it whole", "err", err)
		}
	}()

	engine, err := mruntime.New(cfg, getenv)
	if err != nil {
		return usageError{err}
	}
	mon, err := monitor.Open(db, cfg, monitor.Options{Log: log})
	if err != nil {
		return err
	}
	defer mon.Close()
	if err := mon.Start(); err != nil {
		return usageError{err}
	}
	// Listening before the node starts: the node shows the other nodes
	// where this gateway answers (--addr may pick a free port).
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	defer ln.Close() // closed by the server when it serves; this covers a failed start
	// cluster.go: in cluster mode, this gateway is also a node (nil otherwise).
	var lost routerSlot
	node, err := startNode(sig, cfg, dir, tok, ln.Addr().String(), log, &lost)
	if err != nil {
		return err
	}
	if node != nil {
		defer node.Close() // after the chats stopped: gives up its leases
		clusterMonitor(node, mon)
	}
	book := quota.New(quota.Options{Store: quota.NewBoltStore(db), Log: log})
	if err := book.Load(); err != nil {
		// A row that cannot be read loses only its own quota: the
		// provider teaches it again with its next 429 or headers.
		log.Warn("quota: saved observations", "err", err)
	}
	keeper, closeQuotas := clusterQuotas(node, book, log) // the leader's book in cluster mode
	defer closeQuotas()
	ledger, err := tools.NewLedger(db)
	if err != nil {
		return err
	}
	// MCP servers start in the background: the gateway listens at once,
	// and each server's tools join the registry when it answers.
	servers, err := mcp.New(mcp.Options{Servers: cfg.MCP.Servers, Dir: cfg.Dir, Getenv: getenv, Monitor: mon, Log: log})
	if err != nil {
		return usageError{err}
	}
	servers.Start(sig)
	defer servers.Close() // after the chats: running calls end with their turns
	topt := tools.OptionsFrom(cfg, ledger)
	topt.Sources = []tools.Source{servers}
	toolbox, err := tools.New(topt)
	replayChat := func(w io.Writer, chat string) error { return writeReplay(w, db, engine, chat) }
	if err != nil {
		return usageError{err}
	}
	checkWorkspace(sig, node, toolbox, log) // cluster mode: refuse file and shell tools on an unshared workspace
	err = engine.Provision(mruntime.Options{Tools: toolbox, Monitor: mon, Quota: keeper, Hooks: hooks.New(cfg.Hooks, cfg.Dir),
		Log: log, DataDir: dir, ConfigDir: cfg.Dir, Settings: db})
	if err != nil {
		return err
	}
	store, err := chats.NewStore(db)
	if err != nil {
		return err
	}
	// A model request's cost rides the commit of the turn that made it
	// (no fsync of its own on a turn's path).
	store.Carry(mon.CarryCosts)
	metrics := monitor.NewMetrics()
	// The Monitor's charts: tokens per turn and the quotas' use, stored.
	metrics.KeepAggregates(mon)
	mon.SampleQuotas(func() []monitor.QuotaSample {
		var out []monitor.QuotaSample
		for _, q := range engine.Quotas() {
			s := monitor.QuotaSample{Key: q.Provider + "/" + q.Model, Used: q.Usage + q.Outside}
			if q.Quota != nil {
				s.Limit = int(q.Quota.Limit)
			}
			out = append(out, s)
		}
		return out
	})
	// Attachments live in data_dir/blobs; opening it removes the temp
	// files of uploads a crash cut short.
	at := cfg.Attachments
	blobs, err := chats.OpenBlobs(dir, chats.BlobLimits{Image: at.MaxImageBytes, Document: at.MaxDocumentBytes, Audio: at.MaxAudioBytes},
		at.UnreferencedTTL)
	if err != nil {
		return err
	}
	clusterBlobs(node, blobs) // cluster.go: shared by the nodes in cluster mode
	// The search index sits beside the record, in data_dir/search; a
	// missing or stale one is caught up from the record in the background.
	index, err := search.Open(filepath.Join(dir, "search"))
	if err != nil {
		return err
	}
	defer index.Close() // after svc.Close, which stops the indexer
	// People: the access token is the first owner's (chats/people).
	folks, err := people.Open(db, tok)
	if err != nil {
		store.Close()
		return err
	}
	defer clusterPeople(node, folks, log)() // cluster.go: in cluster mode people are the cluster's
	// cluster.go: in cluster mode each chat runs on its owner, its record in the cluster's log.
	recordLog, owners, serveChats, stopChats := clusterChats(node, &lost)
	defer stopChats()
	svc := chats.New(chats.Options{Store: store, Turner: engine, Idle: cfg.Limits.ChatIdle,
		TurnTimeout: cfg.Limits.TurnTimeout, Ledger: ledger, Workspace: toolbox.Workspace(), Metrics: metrics, Log: log,
		DataDir: dir, ConfigDir: cfg.Dir, MaxPending: cfg.Limits.PendingPerChat, Blobs: blobs, Search: index, MCPServers: servers.Servers(), Prompts: servers, People: folks,
		RolePolicies: cfg.People.Policies, TokensPerDay: cfg.People.TokensPerDay, RecordLog: recordLog, Owners: owners})
	serveChats(svc)

	var tg *telegram.Bot
	// One allowance of messages a minute per person, in the browser and
	// on Telegram alike.
	sends := limit.Messages(cfg.Limits.MessagesPerMinute)
	routes := gateway.DatabaseRoutes(db) // backup and check while the gateway holds the file
	if cfg.Telegram.Enabled {
		secret := ""
		if cfg.Telegram.WebhookSecretEnv != "" {
			secret = getenv(cfg.Telegram.WebhookSecretEnv)
		}
		// cluster.go: in cluster mode only the leader receives updates.
		leader, offsets, replica, closeLead := clusterTelegram(node)
		defer closeLead()
		tg, err = telegram.New(sig, telegram.Options{Config: cfg, Token: getenv(cfg.Telegram.TokenEnv), WebhookSecret: secret,
			Chats: svc, Store: store, Monitor: mon, Metrics: metrics, Log: log, Sends: sends, Leader: leader, Offsets: offsets, Replica: replica})
		if err != nil {
			svc.Close(context.Background())
			store.Close()
			return fmt.Errorf("telegram: %w", err)
		}
		routes = append(routes, gateway.Route{Pattern: "/api/telegram/", Handler: tg.PairingHandler(), Private: true, Owner: true})
		if cfg.Telegram.Mode == config.ModeWebhook {
			routes = append(routes, gateway.Route{Pattern: "POST " + tg.WebhookPath(), Handler: tg.WebhookHandler()})
		}
	}
	if node != nil {
		routes = append(routes, clusterRoutes(node)...)
	}
	srv := gateway.New(gateway.Options{Config: cfg, Chats: svc, Token: tok, Addr: ln.Addr().String(), People: folks,
		DataDir: dir, Models: engine, Replay: replayChat,
		Monitor: mon, Metrics: metrics, Routes: routes, Sends: sends, Log: log, Quotas: func() any {
			if q := engine.Quotas(); q != nil {
				return q
			}
			return []quota.Status{}
		}, MCP: func() any { return servers.Status() }})
	hs := srv.HTTPServer(slog.NewLogLogger(log.Handler(), slog.LevelWarn))
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	// The subcommands that ask a running gateway (pair, replay, backup,
	// check) find it here even when --addr moved it off runtime.yaml's
	// listen; a file left by a killed process names a port nobody answers.
	// Written before the listening line, so whoever reads that line finds it.
	if err := writeListenFile(dir, ln.Addr().String()); err != nil {
		log.Warn("write the listen address into the data dir", "err", err)
	}
	defer os.Remove(filepath.Join(dir, ListenFile))
	fmt.Fprintf(stdout, "mirror: listening on http://%s\n", ln.Addr())
	// What the first turn and the first page load would do first is done
	// now, in the background.
	go func() {
		warmCounters(cfg)
		engine.Warm()
		srv.Warm()
	}()

	if n, err := svc.Resume(sig); err != nil {
		log.Error("resume chats", "err", err)
	} else if n > 0 {
		log.Info("resumed chats with work left", "chats", n)
	}
	if tg != nil {
		if err := tg.Start(sig); err != nil {
			log.Error("telegram", "err", err)
		}
	}

	// memory.go: the collector's pace; memory goes back once a load ends.
	watchCtx, stopWatch := context.WithCancel(sig)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		watchMemory(watchCtx, dbPath, func(quiet time.Duration) {
			if n := svc.Shed(quiet); n > 0 {
				log.Debug("memory: idle chats unloaded", "chats", n)
			}
			engine.Forget() // the providers' encodings of past requests
		})
	}()

	// Uploads no message named within the TTL are collected at start and
	// every hour after.
	collectCtx, stopCollect := context.WithCancel(sig)
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		t := time.NewTicker(time.Hour)
		defer t.Stop()
		for {
			if n, err := svc.CollectBlobs(collectCtx); err != nil && collectCtx.Err() == nil {
				log.Warn("collect attachment files", "err", err)
			} else if n > 0 {
				log.Info("collected attachment files no message names", "files", n)
			}
			select {
			case <-collectCtx.Done():
				return
			case <-t.C:
			}
		}
	}()

	var serveErr error
	select {
	case <-sig.Done():
		log.Info("shutting down")
	case serveErr = <-served:
	}
	stopCollect()
	<-collected
	stopWatch()
	<-watched
	if tg != nil {
		tg.Close() // unsubscribes and records what it sent, before the chats stop
	}
	shutdown(hs, srv, svc, store)
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}

// shutdown stops accepting, closes sockets, lets running turns finish (or
// journals them), and flushes every write.
func shutdown(hs *http.Server, srv *gateway.Server, svc *chats.Service, store *chats.Store) {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	_ = hs.Shutdown(ctx)
	srv.Close()
	svc.Close(ctx)
	store.Close()
}

// warmCounters warms (tokens.Counter.Warm) the counter every message is
// counted with and those of the configured models.
func warmCounters(cfg *config.Config) {
	warm := map[*tokens.Counter]bool{tokens.For(""): true}
	for _, m := range cfg.Models {
		warm[tokens.For(m.Model)] = true
	}
	for c := range warm {
		_ = c.Warm() // a table that cannot load fails its counts, which say so
	}
}
