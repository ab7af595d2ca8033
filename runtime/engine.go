// Package runtime runs one turn of the assistant: it builds the model-facing
// view of a conversation, asks the chain of models for an answer under the
// global provider concurrency cap, and streams the answer back. It never
// imports chats or gateway: chats hands it the conversation it may read.
//
// Its files are cut by what they own, and calls between them run one way,
// from the turn down:
//
//	turn.go, phase.go, ending.go  the turn, its phases and how it ended
//	calls.go, tasks.go            running tools (settle, policy, approval, the task list)
//	boundaries.go, fresh.go       boundaries: consolidate, record ask, reflect
//	viewing.go                    building the view a request carries
//	ask.go                        asking the models: quota, breaker, provider, retry
//	models.go                     the model details the browser shows and sets
//	sizing.go, reserve.go         sizing a conversation, the answer's cap, the tool list
//	settings.go                   the model settings chosen in the browser
//	engine.go                     construction
package runtime

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/monitor"
	"github.com/mirror-gateway/mirror/runtime/hooks"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/anthropic"
	"github.com/mirror-gateway/mirror/runtime/provider/builtin"
	"github.com/mirror-gateway/mirror/runtime/provider/gemini"
	"github.com/mirror-gateway/mirror/runtime/provider/openai"
	"github.com/mirror-gateway/mirror/runtime/quota"
	"github.com/mirror-gateway/mirror/runtime/tokens"
	"github.com/mirror-gateway/mirror/runtime/tools"
	bolt "go.etcd.io/bbolt"
)

// SystemPrompt is the fixed prompt every chat request starts with.
const SystemPrompt = "You are Mirror, a helpful assistant reached through a chat gateway. Answer clearly and concisely."

// Model is one configured model bound to its provider.
type Model struct {
	Name     string // config models[].name
	ProvName string // config providers[].name, for its breaker
	// ProvKind is config providers[].kind: the rule attachments are sized
	// by (provider.PartTokens); "" sizes them at seed 000's flat allowance.
	ProvKind  string
	Provider  provider.Provider
	Remote    string // the provider's own model name
	Window    int
	MaxOutput int
	// Fingerprint is provider.Fingerprint of the provider's API key: models
	// on the same key and remote model share one quota.
	Fingerprint string
	// SoftRatio and HardRatio are the conversation's limits as shares of
	// Window (compaction.soft_ratio, hard_ratio); 0 leaves a limit off.
	SoftRatio, HardRatio float64
	// ContextLimit is the request budget's context limit: auto, full or
	// a token step.
	ContextLimit string
	// ContinuityBudget caps the message a continued conversation opens
	// with (boundary.continuity_budget_tokens).
	ContinuityBudget int
}

// Engine runs turns. It is safe for concurrent use by every chat.
type Engine struct {
	tools  *tools.Registry  // nil: no tools offered
	mon    *monitor.Monitor // nil: no breakers
	models map[string]*Model
	chains map[string][]*Model
	roles  config.Roles
	sem    chan struct{}
	quota  quota.Keeper // nil: no quota accounting

	defsMu    sync.Mutex
	defsCache map[*provider.Tool]counted // the offered tool lists' JSON, counted once per list

	order    []*Model // as runtime.yaml lists them
	limitsMu sync.RWMutex
	settings map[string]modelSettings // chosen in the browser, by model
	limitsDB *bolt.DB                 // where they are kept; nil keeps them in memory

	offerMu     sync.Mutex
	offerSet    bool
	offerGen    uint64              // the registry's Generation offeredDefs was made at
	offeredDefs []provider.Tool     // what a turn with a chat offers
	roster      []string            // their names
	offerSome   map[string]offering // for chats that offer only some MCP servers

	cal       *tokens.Calibration // what providers billed against local counts, per model
	dataDir   string              // memory notes and handoff records live here; "" writes none
	configDir string              // where a handoff.md beside runtime.yaml overrides the built-in one
	hooks     *hooks.Runner       // compaction hooks; nil runs none
	log       *slog.Logger

	provisioned bool // Provision ran: the fields above it set are fixed
}

// New binds the configured models to providers built from cfg. getenv reads
// secrets (api_key_env); nil means os.Getenv.
func New(cfg *config.Config, getenv func(string) string) (*Engine, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	secret := func(p config.Provider) string {
		if p.APIKeyEnv == "" {
			return "" // a local server that needs no key
		}
		return strings.TrimSpace(getenv(p.APIKeyEnv))
	}
	provs := make(map[string]provider.Provider, len(cfg.Providers))
	prints := make(map[string]string, len(cfg.Providers))
	kinds := make(map[string]string, len(cfg.Providers))
	for _, p := range cfg.Providers {
		prints[p.Name] = provider.Fingerprint(secret(p))
		kinds[p.Name] = p.Kind
		switch p.Kind {
		case "builtin":
			delay := 30 * time.Millisecond
			if p.Delay != nil {
				delay = *p.Delay
			}
			provs[p.Name] = builtin.New(delay)
		case "openai":
			// timeout bounds the wait for the answer to start, never a
			// stream that is still flowing.
			provs[p.Name] = openai.New(openai.Config{Name: p.Name, BaseURL: p.BaseURL, APIKey: secret(p), HeaderTimeout: p.Timeout})
		case "gemini":
			provs[p.Name] = gemini.New(gemini.Config{Name: p.Name, BaseURL: p.BaseURL, APIKey: secret(p), HeaderTimeout: p.Timeout})
		case "anthropic":
			provs[p.Name] = anthropic.New(anthropic.Config{Name: p.Name, BaseURL: p.BaseURL, APIKey: secret(p), HeaderTimeout: p.Timeout})
		default:
			return nil, fmt.Errorf("provider %s: unknown kind %s", p.Name, p.Kind)
		}
	}
	models := make([]*Model, 0, len(cfg.Models))
	for _, m := range cfg.Models {
		models = append(models, &Model{Name: m.Name, ProvName: m.Provider, ProvKind: kinds[m.Provider], Provider: provs[m.Provider], Remote: m.Model, Window: m.Window, MaxOutput: m.MaxOutput,
			Fingerprint: prints[m.Provider], SoftRatio: m.Compaction.SoftRatio, HardRatio: m.Compaction.HardRatio,
			ContextLimit: m.ContextLimit, ContinuityBudget: m.Boundary.ContinuityBudgetTokens})
	}
	return NewEngine(models, cfg.Chains, cfg.Roles, cfg.Limits.ProviderConcurrency)
}

// NewEngine binds already built models into chains. concurrency caps the
// model requests in flight across every chat.
func NewEngine(models []*Model, chains map[string][]string, roles config.Roles, concurrency int) (*Engine, error) {
	e := &Engine{models: map[string]*Model{}, chains: map[string][]*Model{}, roles: roles,
		sem: make(chan struct{}, max(1, concurrency)), cal: &tokens.Calibration{}, settings: map[string]modelSettings{}}
	for _, m := range models {
		if m.SoftRatio <= 0 && m.HardRatio <= 0 {
			// A model built in code without limits gets the defaults.
			m.SoftRatio, m.HardRatio = config.DefaultSoftRatio, config.DefaultHardRatio
		}
		e.models[m.Name] = m
		e.order = append(e.order, m)
	}
	for name, list := range chains {
		for _, mn := range list {
			m, ok := e.models[mn]
			if !ok {
				return nil, fmt.Errorf("chain %s: no model %s", name, mn)
			}
			e.chains[name] = append(e.chains[name], m)
		}
	}
	if _, ok := e.chains[roles.Chat]; !ok {
		return nil, fmt.Errorf("role chat: no chain %q", roles.Chat)
	}
	return e, nil
}

// Options are what an Engine serves with beyond its models, given once
// with Provision before the first turn. A zero field leaves its part off.
type Options struct {
	// Tools are offered to the model in every turn that has a Host.
	Tools *tools.Registry
	// Monitor guards every model with its provider breaker: a chain skips
	// a model whose breaker is open.
	Monitor *monitor.Monitor
	// Quota makes every model request reserve its input tokens under the
	// quota its provider, model and key have taught the Book, waiting its
	// turn when the window is full: a *quota.Book on one gateway, the
	// cluster's book (chats/cluster.QuotaBook) on a cluster node.
	Quota quota.Keeper
	// Hooks run around checkpoints (the compaction hooks).
	Hooks *hooks.Runner
	// Log takes what a turn cannot report to its chat (a failed hook).
	Log *slog.Logger
	// DataDir is where boundaries write memory notes and handoff records;
	// "" writes none. ConfigDir is the folder of runtime.yaml, whose
	// handoff.md overrides the built-in template.
	DataDir, ConfigDir string
	// Settings keeps the model choices made in the browser (context limit,
	// soft and hard), and the ones made before apply; it is only read
	// until a choice is made, so a read-only db serves `mirror replay`.
	// nil keeps them in memory.
	Settings *bolt.DB
}

// ErrProvisioned is a second Provision: an Engine's options are given once,
// before any turn reads them.
var ErrProvisioned = errors.New("the engine was provisioned already")

// Provision gives the Engine its options. Call it once, before the first
// turn; without it the Engine offers no tools and guards nothing.
func (e *Engine) Provision(o Options) error {
	if e.provisioned {
		return ErrProvisioned
	}
	if o.Settings != nil {
		if err := e.useSettings(o.Settings); err != nil {
			return err
		}
	}
	e.provisioned = true
	e.tools, e.mon, e.quota, e.hooks, e.log = o.Tools, o.Monitor, o.Quota, o.Hooks, o.Log
	if b, ok := e.quota.(*quota.Book); ok && b == nil {
		e.quota = nil // a nil *Book means no accounting, as it always did
	}
	e.dataDir, e.configDir = o.DataDir, o.ConfigDir
	return nil
}

// DataDir is where boundaries write memory notes and handoff records.
func (e *Engine) DataDir() string { return e.dataDir }

// ConfigDir is the folder whose handoff.md overrides the built-in template.
func (e *Engine) ConfigDir() string { return e.configDir }

// Counter is the token counter of a chain's first model's family (o200k_base
// or cl100k_base): rows are counted once, with it, when they are stored.
func (e *Engine) Counter(chain string) *tokens.Counter {
	if m := e.chains[chain]; len(m) > 0 {
		return tokens.For(m[0].Remote)
	}
	return tokens.For("")
}

// Chain returns the models of a chain, in order.
func (e *Engine) Chain(name string) []*Model { return e.chains[name] }

// Quotas returns every key's quota state, for /api/quotas; nil without a
// Book.
func (e *Engine) Quotas() []quota.Status {
	if e.quota == nil {
		return nil
	}
	return e.quota.Snapshot()
}

// HasChain reports whether name is a configured chain.
func (e *Engine) HasChain(name string) bool { _, ok := e.chains[name]; return ok }

// ChatChain is the chain the chat role uses, for chats that name none.
func (e *Engine) ChatChain() string { return e.roles.Chat }
