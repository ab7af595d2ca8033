// Package mcp runs the MCP (Model Context Protocol) tool servers of
// runtime.yaml mcp.servers and offers their tools to the one tool registry
// (runtime/tools) as a Source, so each call goes through the same policy,
// approval, journal, recovery and preview as a built-in. It is the only
// package that imports the MCP SDK (github.com/modelcontextprotocol/go-sdk).
//
// Every server is a supervised part. A stdio server is a child process
// started through pgroup, so it and everything it starts die with the
// gateway however the gateway dies; it gets PATH, HOME, LANG and its
// configured env, nothing else. Its stderr goes to the log, line by line,
// with the values of its env and headers redacted (from results and errors
// too). A server that will not start, keeps crashing or cannot be reached
// is restarted with a doubling backoff and opens its own breaker on the
// Monitor ("mcp:NAME"); while that is open its tools stay offered but
// answer that they are unavailable, so the model can go on without them.
//
// Start returns at once: servers connect in the background and their tools
// appear when they answer, so a slow server never holds up the gateway.
// A server's tool list is read again when it says it changed
// (notifications/tools/list_changed); Generation tells the turn.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/monitor"
	"github.com/mirror-gateway/mirror/runtime/tools"
)

// Backoff and stability defaults (Options leave them zero).
const (
	DefaultMinBackoff = 500 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
	// DefaultStable is how long a started server must stay up for its
	// start to count as a success on its breaker; one that dies sooner
	// counts as a failure, so a server that crashes at every start opens
	// its breaker even though each start answered.
	DefaultStable = 30 * time.Second
)

// Server states, as Status reports them.
const (
	StateStarting    = "starting"    // connecting, or listing its tools
	StateReady       = "ready"       // its tools can be called
	StateRestarting  = "restarting"  // it failed; waiting out the backoff
	StateUnavailable = "unavailable" // its breaker is open
	StateStopped     = "stopped"     // the gateway is shutting down
)

// Options configure a Manager.
type Options struct {
	Servers []config.MCPServer
	// Dir resolves relative cwd values (the folder of runtime.yaml).
	Dir string
	// Getenv reads the variables env and headers name; nil: os.Getenv.
	Getenv func(string) string
	// Monitor holds each server's breaker; nil runs without breakers.
	Monitor *monitor.Monitor
	// Log takes the servers' stderr and their starts and failures.
	Log *slog.Logger
	// MinBackoff, MaxBackoff and Stable tune restarts (0: the defaults).
	MinBackoff, MaxBackoff, Stable time.Duration
}

// Manager runs the configured servers. It implements tools.Source.
type Manager struct {
	servers []*server
	byName  map[string]*server
	log     *slog.Logger
	gen     atomic.Uint64

	wg     sync.WaitGroup
	cancel context.CancelFunc
}

// New prepares the servers of opt; nothing runs before Start.
func New(opt Options) (*Manager, error) {
	if opt.Getenv == nil {
		opt.Getenv = os.Getenv
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	if opt.MinBackoff <= 0 {
		opt.MinBackoff = DefaultMinBackoff
	}
	if opt.MaxBackoff < opt.MinBackoff {
		opt.MaxBackoff = max(DefaultMaxBackoff, opt.MinBackoff)
	}
	if opt.Stable <= 0 {
		opt.Stable = DefaultStable
	}
	m := &Manager{byName: map[string]*server{}, log: opt.Log}
	for _, c := range opt.Servers {
		if m.byName[c.Name] != nil {
			return nil, fmt.Errorf("mcp: server %s configured twice", c.Name)
		}
		s := &server{cfg: c, m: m, opt: opt, state: StateStarting, changed: make(chan struct{}, 1), progress: map[string]func(string){}}
		if c.Cwd != "" && !filepath.IsAbs(c.Cwd) && opt.Dir != "" {
			s.cfg.Cwd = filepath.Join(opt.Dir, c.Cwd)
		}
		for _, k := range sortedKeys(c.Env) {
			v := opt.Getenv(c.Env[k])
			s.env = append(s.env, k+"="+v)
			s.addSecret(v)
		}
		s.headers = map[string]string{}
		for _, k := range sortedKeys(c.Headers) {
			v := opt.Getenv(c.Headers[k])
			s.headers[k] = v
			s.addSecret(v)
			// The credential inside "Bearer TOKEN" is redacted on its own too.
			if _, tok, ok := strings.Cut(v, " "); ok {
				s.addSecret(tok)
			}
		}
		if opt.Monitor != nil {
			s.breaker = opt.Monitor.MCP(c.Name)
		}
		m.servers = append(m.servers, s)
		m.byName[c.Name] = s
	}
	return m, nil
}

// Start starts every server in the background and returns at once. The
// servers stop when ctx is done or Close is called.
func (m *Manager) Start(ctx context.Context) {
	ctx, m.cancel = context.WithCancel(ctx)
	for _, s := range m.servers {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			s.run(ctx)
		}()
	}
}

// Close stops every server (a stdio child is told to end, then killed with
// its process group) and waits for them.
func (m *Manager) Close() error {
	if m.cancel != nil {
		m.cancel()
	}
	m.wg.Wait()
	return nil
}

// Generation changes whenever the tools offered change.
func (m *Manager) Generation() uint64 { return m.gen.Load() }

// Tools lists every server's tools as last listed, named SERVER__TOOL,
// sorted. A server that is down keeps its last list: its tools answer that
// they are unavailable, which tells the model more than a tool that
// vanished.
func (m *Manager) Tools() []tools.External {
	var out []tools.External
	for _, s := range m.servers {
		s.mu.Lock()
		out = append(out, s.tools...)
		s.mu.Unlock()
	}
	return out
}

// Call runs name (SERVER__TOOL) on its server with args (a JSON object
// that passed the tool's schema). ctx ending cancels the call on the
// server (notifications/cancelled); the server's timeout bounds it.
func (m *Manager) Call(ctx context.Context, name string, args []byte, meta tools.CallMeta) (string, bool, error) {
	srv, tool, _ := strings.Cut(name, config.MCPSeparator)
	s := m.byName[srv]
	if s == nil {
		return "", true, fmt.Errorf("no MCP server %s", srv)
	}
	out, failed, err := s.call(ctx, tool, args, meta)
	if err != nil {
		return "", true, errors.New(s.redact(err.Error()))
	}
	return s.redact(out), failed, nil
}

// Status is one server as the Monitor lists it.
type Status struct {
	Name      string `json:"name"`
	Transport string `json:"transport"` // stdio or http
	State     string `json:"state"`
	Tools     int    `json:"tools"`
	Restarts  int    `json:"restarts"`
	// Error is the last failure, secrets redacted; "" when it never failed.
	Error   string `json:"error,omitempty"`
	Breaker string `json:"breaker,omitempty"` // its breaker's id
}

// Status lists the servers in configuration order.
func (m *Manager) Status() []Status {
	out := make([]Status, 0, len(m.servers))
	for _, s := range m.servers {
		s.mu.Lock()
		st := Status{Name: s.cfg.Name, Transport: "http", State: s.state, Tools: len(s.tools), Restarts: s.restarts, Error: s.lastErr}
		s.mu.Unlock()
		if s.cfg.Stdio() {
			st.Transport = "stdio"
		}
		if s.breaker != nil {
			st.Breaker = s.breaker.ID()
			if s.breaker.View().State == monitor.StateOpen {
				st.State = StateUnavailable
			}
		}
		out = append(out, st)
	}
	return out
}

// Servers are the configured server names, in order.
func (m *Manager) Servers() []string {
	out := make([]string, len(m.servers))
	for i, s := range m.servers {
		out[i] = s.cfg.Name
	}
	return out
}

// validToolName reports whether name is what providers accept as a function
// name (OpenAI's rule, the strictest: 1 to 64 of A-Z a-z 0-9 _ -): a server
// tool whose full name breaks it is not offered. A loop, not the regexp
// `^[A-Za-z0-9_-]{1,64}$`, whose counted repetition compiled at every start.
func validToolName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// externals turns a server's listed tools into the registry's, with their
// schemas resolved once for checking arguments.
func (s *server) externals(list []*sdk.Tool) []tools.External {
	out := make([]tools.External, 0, len(list))
	for _, t := range list {
		name := s.cfg.Name + config.MCPSeparator + t.Name
		if !validToolName(name) || strings.Contains(t.Name, config.MCPSeparator) {
			s.m.log.Warn("mcp: tool not offered: its name is not a valid function name", "server", s.cfg.Name, "tool", trim(t.Name, 80))
			continue
		}
		params, err := json.Marshal(t.InputSchema)
		if err != nil || len(params) == 0 || string(params) == "null" {
			params = []byte(`{"type":"object"}`)
		}
		out = append(out, tools.External{Name: name, Description: t.Description, Parameters: params, Server: s.cfg.Name, Check: checker(params)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// checker validates arguments against a tool's JSON Schema. A schema the
// validator cannot resolve checks only that the arguments are an object;
// the server still checks them itself.
func checker(params []byte) func([]byte) []string {
	var sch jsonschema.Schema
	if err := json.Unmarshal(params, &sch); err != nil {
		return nil
	}
	rs, err := sch.Resolve(nil)
	if err != nil {
		return nil
	}
	return func(args []byte) []string {
		var v any
		if err := json.Unmarshal(args, &v); err != nil {
			return []string{"the arguments are not valid JSON"}
		}
		if err := rs.Validate(v); err != nil {
			return []string{err.Error()}
		}
		return nil
	}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func trim(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
