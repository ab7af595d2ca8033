package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Provider kinds.
const (
	KindBuiltin   = "builtin"
	KindOpenAI    = "openai"
	KindGemini    = "gemini"
	KindAnthropic = "anthropic"
)

// Telegram modes.
const (
	ModePolling = "polling"
	ModeWebhook = "webhook"
)

// Tool policies (tools.policies in runtime.yaml).
const (
	PolicyAllow = "allow" // the call runs
	PolicyAsk   = "ask"   // the call waits for a person's approval
	PolicyDeny  = "deny"  // the call is refused; the model is told why
)

// Named context limits; any other context_limit is a token count.
const (
	ContextAuto = "auto" // min(272000, window - response reserve)
	ContextFull = "full" // the whole window less the response reserve
)

// Hook events (the keys of hooks in runtime.yaml), Claude Code's names.
const (
	HookPreCompact   = "PreCompact"   // before a checkpoint is committed; may block it
	HookPostCompact  = "PostCompact"  // after a checkpoint
	HookSessionStart = "SessionStart" // at the run after a checkpoint, source compact
)

// Compaction triggers and session sources, the values hook matchers name.
const (
	TriggerAuto   = "auto"    // the runtime checkpointed on its own
	TriggerManual = "manual"  // a person asked with /compact
	SourceCompact = "compact" // the run after a checkpoint
)

// Hook timeouts: the default when a hook gives none, and the most one may
// ask for, so a stuck hook cannot hold a turn for long.
const (
	DefaultHookTimeout = 60 * time.Second
	MaxHookTimeout     = 10 * time.Minute
)

// defaultHook is what a hooks item starts from before its keys are read.
func defaultHook() Hook { return Hook{Timeout: DefaultHookTimeout} }

// BuiltinDelay is the builtin provider's default pause between streamed
// pieces: slow enough that streaming, stop and queueing can be seen and tested.
const BuiltinDelay = 30 * time.Millisecond

// Default returns the built-in configuration: what runtime.yaml at the top of
// the repository spells out, and what runs when there is no runtime.yaml. It
// needs no key and no network. Each call returns a fresh copy.
func Default() *Config {
	return &Config{
		Listen:  "127.0.0.1:8765",
		DataDir: "./data",
		Auth:    Auth{TokenEnv: "MIRROR_TOKEN"},
		Telegram: Telegram{
			Enabled:     false,
			TokenEnv:    "TELEGRAM_BOT_TOKEN",
			APIEndpoint: "https://api.telegram.org/bot%s/%s",
			Mode:        ModePolling,
		},
		Providers: []Provider{defaultProvider(KindBuiltin, "builtin")},
		Models: []Model{func() Model {
			m := defaultModel()
			m.Name, m.Provider, m.Model, m.Window = "default", "builtin", "echo", 128000
			return m
		}()},
		Chains: map[string][]string{"default": {"default"}},
		Roles:  Roles{Chat: "default", Reflect: "default"},
		Limits: Limits{
			ProviderConcurrency: 64,
			ChatIdle:            2 * time.Minute,
			SocketBuffer:        1024,
			TurnTimeout:         10 * time.Minute,

			MessagesPerMinute:      60,
			PendingPerChat:         100,
			AuthTimeout:            10 * time.Second,
			UnauthenticatedSockets: 128,
			BodyTimeout:            15 * time.Second,
			FailedLoginsPerMinute:  6,
		},
		Cluster: defaultCluster(),
		Attachments: Attachments{
			MaxImageBytes:    DefaultAttachmentBytes,
			MaxDocumentBytes: DefaultAttachmentBytes,
			MaxAudioBytes:    DefaultAttachmentBytes,
			UnreferencedTTL:  24 * time.Hour,
		},
		BreakerHistoryDays:   30,
		BreakerHistoryMax:    500,
		BreakerPruneSchedule: "@every 1h",
		Tools: Tools{
			Policies: ToolPolicies{
				ReadFile:  PolicyAllow,
				ListDir:   PolicyAllow,
				WriteFile: PolicyAsk,
				EditFile:  PolicyAsk,
				Shell:     PolicyAsk,
				SendFile:  PolicyAsk,
			},
			ShellTimeout: 2 * time.Minute,
			OutputLimit:  16000,
		},
	}
}

// DefaultAttachmentBytes is the default size limit of one attached file of
// each kind: 20 MB, the most the Telegram Bot API lets a bot download.
const DefaultAttachmentBytes = 20 << 20

// The conversation limits by default, as shares of the window (seed 001: a
// fifth and a quarter are reasonable starting points).
const (
	DefaultSoftRatio = 0.20
	DefaultHardRatio = 0.25
)

// defaultModel is what a models[] item starts from before its keys are read:
// everything but the names and the window, which differ for every model.
func defaultModel() Model {
	return Model{
		ContextLimit: ContextAuto,
		Compaction:   Compaction{SoftRatio: DefaultSoftRatio, HardRatio: DefaultHardRatio},
		Boundary:     Boundary{ContinuityBudgetTokens: 8000},
	}
}

// defaultProvider is a provider of kind with its per-kind defaults filled.
func defaultProvider(kind, name string) Provider {
	p := Provider{Name: name, Kind: kind}
	fillProvider(&p)
	return p
}

// fillProvider sets the defaults that depend on the kind, once it is known.
func fillProvider(p *Provider) {
	if p.BaseURL == "" {
		p.BaseURL = DefaultBaseURL(p.Kind)
	}
	if p.Kind == KindBuiltin && p.Delay == nil {
		d := BuiltinDelay
		p.Delay = &d
	}
}

// DefaultBaseURL is the public API root of a provider kind, used when
// base_url is omitted; "" for builtin and unknown kinds.
func DefaultBaseURL(kind string) string {
	switch kind {
	case KindOpenAI:
		return "https://api.openai.com/v1"
	case KindGemini:
		return "https://generativelanguage.googleapis.com/v1beta"
	case KindAnthropic:
		return "https://api.anthropic.com/v1"
	}
	return ""
}

// DataPath is data_dir resolved against the folder runtime.yaml was read
// from, so `mirror serve --config /etc/mirror/runtime.yaml` finds its data
// next to its config whatever the working directory. Paths stay as written
// when the config came from the working directory or from the defaults.
func (c *Config) DataPath() string {
	if filepath.IsAbs(c.DataDir) || c.Dir == "" || c.Dir == "." {
		return c.DataDir
	}
	return filepath.Join(c.Dir, c.DataDir)
}

// DefaultWorkspace is the workspace when tools.workspace is left out:
// "workspace" next to runtime.yaml (the working directory with built-in
// defaults). Earlier versions used data_dir/workspace, which put the access
// token and mirror.db right at the shell's "..".
const DefaultWorkspace = "workspace"

// WorkspacePath is the folder the tools are confined to: tools.workspace,
// or DefaultWorkspace when it is empty, resolved like data_dir.
func (c *Config) WorkspacePath() string {
	w := c.Tools.Workspace
	if w == "" {
		w = DefaultWorkspace
	}
	if filepath.IsAbs(w) || c.Dir == "" || c.Dir == "." {
		return w
	}
	return filepath.Join(c.Dir, w)
}

// WorkspaceWarnings says what is unsafe or surprising about where the tools
// work, for the log at start: a workspace that holds data_dir or lies inside
// it (the file tools or the shell then reach the token and the database by
// a relative path), and files left in data_dir/workspace, the default
// workspace of earlier versions, when tools.workspace is not set.
func (c *Config) WorkspaceWarnings() []string {
	ws, err1 := filepath.Abs(c.WorkspacePath())
	data, err2 := filepath.Abs(c.DataPath())
	if err1 != nil || err2 != nil {
		return nil
	}
	var out []string
	switch {
	case within(data, ws):
		out = append(out, fmt.Sprintf("tools.workspace %s lies inside data_dir %s: an approved shell finds the access token and mirror.db at ..; move the workspace out of data_dir", ws, data))
	case within(ws, data):
		out = append(out, fmt.Sprintf("data_dir %s lies inside tools.workspace %s: the file tools can read the access token and mirror.db; move data_dir out of the workspace", data, ws))
	}
	old := filepath.Join(data, "workspace")
	if c.Tools.Workspace == "" && old != ws {
		if entries, err := os.ReadDir(old); err == nil && len(entries) > 0 {
			out = append(out, fmt.Sprintf("the default workspace moved from %s to %s, outside data_dir; the files in the old one are not used: move them (mv %s/* %s/), or set tools.workspace", old, ws, old, ws))
		}
	}
	return out
}

// within reports whether path is dir or lies inside it.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// Secret returns the value of the environment variable envName, trimmed of
// surrounding space (a trailing newline from `$(cat file)` is common), or ""
// when envName is empty or unset. Secrets live only in the environment; the
// value must never be logged or put in an error.
func (c *Config) Secret(envName string) string {
	if envName == "" {
		return ""
	}
	return strings.TrimSpace(os.Getenv(envName))
}

// Provider returns the provider called name.
func (c *Config) Provider(name string) (Provider, bool) {
	for _, p := range c.Providers {
		if p.Name == name {
			return p, true
		}
	}
	return Provider{}, false
}

// Model returns the model called name.
func (c *Config) Model(name string) (Model, bool) {
	for _, m := range c.Models {
		if m.Name == name {
			return m, true
		}
	}
	return Model{}, false
}
