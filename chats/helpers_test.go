package chats

import (
	"context"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats/search"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/builtin"
	"github.com/mirror-gateway/mirror/runtime/tools"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"
)

// wait bounds every wait in these tests: generous, since a loaded 2-core
// machine under -race counts a 150 KiB message's tokens slowly, and a wait
// that holds ends as soon as its condition does.
const wait = 30 * time.Second

// gate is a fake model: each answer streams "partial ", then waits for a
// release (or cancellation), then streams the rest.
type gate struct {
	started chan string   // the last user message of each request
	release chan struct{} // one receive lets one answer finish
	open    bool          // answer at once
}

func newGate(open bool) *gate {
	return &gate{started: make(chan string, 1000), release: make(chan struct{}, 1000), open: open}
}

func (g *gate) Stream(ctx context.Context, req provider.Request, emit func(provider.Delta) error) (provider.Result, error) {
	last := ""
	for _, m := range req.Messages {
		if m.Role == provider.RoleUser {
			last = m.Content
		}
	}
	g.started <- last
	if err := emit(provider.Delta{Text: "partial "}); err != nil {
		return provider.Result{}, err
	}
	if !g.open {
		select {
		case <-g.release:
		case <-ctx.Done():
			return provider.Result{Text: "partial "}, ctx.Err()
		}
	}
	rest := "answer to " + last
	if err := emit(provider.Delta{Text: rest}); err != nil {
		return provider.Result{}, err
	}
	return provider.Result{Text: "partial " + rest, Usage: provider.Usage{InputTokens: 10, OutputTokens: 3}}, nil
}

// env is a service over a real bbolt file in a temp dir.
type env struct {
	t     *testing.T
	path  string
	db    *bolt.DB
	store *Store
	svc   *Service
	gate  *gate
	// With tools, the model is the builtin one (it calls tools on
	// "/tool NAME {json}") and the tools run in workspace.
	tools     bool
	workspace string
	ledger    *tools.Ledger
	// dataDir, when set, is where chats keep their handoff folders and
	// blobs their attachments.
	dataDir string
	blobs   *Blobs
	// searchDir, when set, is where the search index is kept; undo is
	// Options.UndoDelete.
	searchDir string
	index     *search.Index
	undo      time.Duration
	// sources and patterns add tools to the registry (MCP servers) under
	// their policies; mcpServers are the names /mcp knows.
	sources    []tools.Source
	patterns   []config.PolicyPattern
	mcpServers []string
	prompts    Prompts
	// policies override the tool env's policies; overloaded puts a model
	// that always answers 529 first in the chain, so "m" answers as a
	// fallback.
	policies   map[string]tools.Policy
	overloaded bool
	// log, when set, runs the service in cluster mode on it
	// (Options.RecordLog).
	log RecordLog
}

// overloadedModel always fails as an overloaded provider does.
type overloadedModel struct{}

func (overloadedModel) Stream(context.Context, provider.Request, func(provider.Delta) error) (provider.Result, error) {
	return provider.Result{}, &provider.Error{Provider: "busy", Class: provider.ClassOverloaded, Status: 529, Message: "overloaded"}
}

func newEnv(t *testing.T, g *gate) *env {
	t.Helper()
	e := &env{t: t, path: filepath.Join(t.TempDir(), "mirror.db"), gate: g}
	e.start()
	t.Cleanup(e.stop)
	return e
}

func (e *env) start() {
	e.t.Helper()
	db, err := OpenDB(e.path, time.Second)
	if err != nil {
		e.t.Fatal(err)
	}
	store, err := NewStore(db)
	if err != nil {
		e.t.Fatal(err)
	}
	var model provider.Provider = e.gate
	if e.tools {
		model = builtin.New(0)
	}
	models, chain := []*runtime.Model{{Name: "m", Provider: model, Remote: "fake", Window: 128000}}, []string{"m"}
	if e.overloaded {
		models = append(models, &runtime.Model{Name: "busy", Provider: overloadedModel{}, Remote: "busy", Window: 128000})
		chain = []string{"busy", "m"}
	}
	eng, err := runtime.NewEngine(models, map[string][]string{"default": chain}, config.Roles{Chat: "default", Reflect: "default"}, 8)
	if err != nil {
		e.t.Fatal(err)
	}
	opt := Options{Store: store, Turner: eng, Idle: time.Minute, DataDir: e.dataDir, UndoDelete: e.undo, MCPServers: e.mcpServers, Prompts: e.prompts,
		RecordLog: e.log}
	if e.searchDir != "" {
		if e.index, err = search.Open(e.searchDir); err != nil {
			e.t.Fatal(err)
		}
		opt.Search = e.index
	}
	if e.dataDir != "" {
		if e.blobs, err = OpenBlobs(e.dataDir, BlobLimits{Image: 1 << 20, Document: 1 << 20, Audio: 1 << 20}, 24*time.Hour); err != nil {
			e.t.Fatal(err)
		}
		opt.Blobs = e.blobs
	}
	if e.tools {
		if e.ledger, err = tools.NewLedger(db); err != nil {
			e.t.Fatal(err)
		}
		pols := map[string]tools.Policy{"write_file": tools.Allow, "edit_file": tools.Allow, "shell": tools.Ask}
		maps.Copy(pols, e.policies)
		reg, err := tools.New(tools.Options{Workspace: e.workspace, Ledger: e.ledger, Policies: pols,
			Sources: e.sources, Patterns: e.patterns})
		if err != nil {
			e.t.Fatal(err)
		}
		if err := eng.Provision(runtime.Options{Tools: reg}); err != nil {
			e.t.Fatal(err)
		}
		opt.Ledger, opt.Workspace = e.ledger, reg.Workspace()
	}
	e.db, e.store = db, store
	e.svc = New(opt)
}

// newToolEnv is an env whose model is the builtin one and whose chats run
// real tools in a temporary workspace.
func newToolEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, path: filepath.Join(t.TempDir(), "mirror.db"), tools: true, workspace: filepath.Join(t.TempDir(), "ws")}
	e.start()
	t.Cleanup(e.stop)
	return e
}

func (e *env) stop() {
	if e.svc == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	e.svc.Close(ctx)
	if e.index != nil {
		e.index.Close()
		e.index = nil
	}
	e.store.Close()
	e.db.Close()
	e.svc = nil
}

func (e *env) restart() {
	e.stop()
	e.start()
}

func (e *env) chat() Chat {
	e.t.Helper()
	c, err := e.svc.Create(context.Background(), "test", "", Origin{})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// sub records deliveries.
type sub struct {
	mu     sync.Mutex
	got    []Delivery
	notify chan struct{}
}

func newSub() *sub { return &sub{notify: make(chan struct{}, 1)} }

func (s *sub) Deliver(d Delivery) {
	s.mu.Lock()
	s.got = append(s.got, d)
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func (s *sub) events() []*Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Event
	for _, d := range s.got {
		if d.Event != nil {
			out = append(out, d.Event)
		}
	}
	return out
}

// req is the req the subscriber's delivery of ev carried, for the event
// delivered at position i of events().
func (s *sub) req(i int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, d := range s.got {
		if d.Event != nil {
			if n == i {
				return d.Req
			}
			n++
		}
	}
	return ""
}

// waitFor waits, bounded, until pred holds over the deliveries so far.
func (s *sub) waitFor(t testing.TB, what string, pred func([]*Event) bool) []*Event {
	t.Helper()
	deadline := time.After(wait)
	for {
		evs := s.events()
		if pred(evs) {
			return evs
		}
		select {
		case <-s.notify:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; got %s", what, typesOf(evs))
		}
	}
}

func has(typ string, n int) func([]*Event) bool {
	return func(evs []*Event) bool { return count(evs, typ) >= n }
}

func count(evs []*Event, typ string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

func typesOf(evs []*Event) string {
	var b strings.Builder
	for _, ev := range evs {
		b.WriteString(ev.Type)
		b.WriteString(" ")
	}
	return b.String()
}

// durable returns the stored events of a chat.
func (e *env) durable(chat string) []*Event {
	e.t.Helper()
	var out []*Event
	err := e.db.View(func(tx *bolt.Tx) error {
		return eventsSince(tx, chat, 0, func(ev *Event) error { out = append(out, ev); return nil })
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func recvStarted(t *testing.T, g *gate) string {
	t.Helper()
	select {
	case s := <-g.started:
		return s
	case <-time.After(wait):
		t.Fatal("timed out waiting for a model request")
		return ""
	}
}

// bleve (chats/search) starts its analysis workers at init, for the
// life of the process.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"))
}

// pay is ev's payload as P; nil for an event of another type.
func pay[P Payload](ev *Event) P {
	p, _ := ev.Payload.(P)
	return p
}
