// Package config owns runtime.yaml: its schema, the built-in defaults, loading
// with line-numbered errors, and validation. It imports nothing of ours, so every
// other package may depend on it.
package config

import (
	"strings"
	"time"
)

// Config is the whole of runtime.yaml after defaults are applied.
//
// Lists and mappings given in the file replace the default ones whole; nested
// keys of a struct replace only themselves, so a file names just what it changes.
type Config struct {
	// Listen is the HTTP address, host:port (loopback by default).
	Listen string `yaml:"listen"`
	// DataDir holds the database and the token; relative to Dir. See DataPath.
	DataDir   string     `yaml:"data_dir"`
	Auth      Auth       `yaml:"auth"`
	Telegram  Telegram   `yaml:"telegram"`
	Providers []Provider `yaml:"providers"`
	Models    []Model    `yaml:"models"`
	// Chains maps a chain name to the models tried in order.
	Chains map[string][]string `yaml:"chains"`
	Roles  Roles               `yaml:"roles"`
	Limits Limits              `yaml:"limits"`
	// People are roles' tool policies and per-person budgets.
	People People `yaml:"people"`
	// BreakerHistoryDays and BreakerHistoryMax bound the breaker display
	// history: entries older than the days, or past the count, are pruned.
	BreakerHistoryDays int `yaml:"breaker_history_days"`
	BreakerHistoryMax  int `yaml:"breaker_history_max"`
	// BreakerPruneSchedule is when pruning runs, in robfig/cron standard
	// syntax ("@every 1h", "0 3 * * *").
	BreakerPruneSchedule string `yaml:"breaker_prune_schedule"`
	Tools                Tools  `yaml:"tools"`
	Hooks                Hooks  `yaml:"hooks"`
	// MCP lists the MCP tool servers.
	MCP MCP `yaml:"mcp"`
	// Attachments bounds the files people attach to messages.
	Attachments Attachments `yaml:"attachments"`
	// Cluster makes the gateway a node of a cluster (off by default).
	Cluster Cluster `yaml:"cluster"`

	// Dir is the folder runtime.yaml was read from ("" for built-in defaults);
	// relative paths such as data_dir are resolved against it.
	Dir string `yaml:"-"`

	// file and lines remember where each key was read, so Validate can name
	// the line of a problem; both are empty for a Config built in code.
	file  string
	lines map[string]int
}

// Auth configures how HTTP and WebSocket clients prove who they are.
type Auth struct {
	// TokenEnv names the environment variable holding the access token. When
	// it is unset, a random token is created and kept in data_dir/token.
	TokenEnv string `yaml:"token_env"`
	// AllowedOrigins lists extra browser origins (scheme://host:port) allowed
	// to open the WebSocket, and to send requests that change state with the
	// login cookie, besides the gateway's own.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// TrustedProxies lists the reverse proxies (IP addresses or CIDR ranges)
	// whose X-Forwarded-Proto and X-Forwarded-For are believed: a request
	// from one of them that says https gets a Secure cookie, and failed
	// logins are counted per the client it names. See Proxies.
	TrustedProxies []string `yaml:"trusted_proxies"`
}

// Telegram configures the Bot API channel.
type Telegram struct {
	Enabled bool `yaml:"enabled"`
	// TokenEnv names the environment variable holding the bot token.
	TokenEnv string `yaml:"token_env"`
	// APIEndpoint is the Bot API URL pattern; the first %s is the token, the
	// second the method. Tests point it at a local fake.
	APIEndpoint string `yaml:"api_endpoint"`
	Mode        string `yaml:"mode"` // polling | webhook
	// AllowedUsers are the Telegram user ids with access; anyone else gets a
	// pairing code.
	AllowedUsers []int64 `yaml:"allowed_users"`
	// WebhookURL is the public HTTPS address Telegram posts updates to in
	// webhook mode; a reverse proxy forwards it to WebhookPath on listen.
	WebhookURL string `yaml:"webhook_url"`
	// WebhookPath is the path on the listen address that receives webhook
	// updates ("" means /telegram/webhook). It is not behind the access
	// token: the secret header guards it.
	WebhookPath string `yaml:"webhook_path"`
	// WebhookSecretEnv names the environment variable holding the webhook
	// secret token; when it is empty or unset, a random secret is made at
	// each start (setWebhook hands it to Telegram anyway).
	WebhookSecretEnv string `yaml:"webhook_secret_env"`
}

// Provider is one model API the gateway can talk to.
type Provider struct {
	Name string `yaml:"name"`
	Kind string `yaml:"kind"` // builtin | openai | gemini | anthropic
	// BaseURL is the API root; Parse fills the kind's public endpoint when
	// it is omitted (see DefaultBaseURL).
	BaseURL string `yaml:"base_url"`
	// APIKeyEnv names the environment variable holding the key; "" sends no
	// key (local servers such as Ollama need none).
	APIKeyEnv string `yaml:"api_key_env"`
	// Timeout bounds the wait for an answer to start (0: the adapter default);
	// a stream that keeps flowing is bounded only by the turn.
	Timeout time.Duration `yaml:"timeout"`
	// Delay is the builtin provider's pause between streamed pieces; 0 streams at once.
	Delay *time.Duration `yaml:"delay"`
}

// Model is one model of a provider with its context settings.
type Model struct {
	Name         string     `yaml:"name"`          // what chains call it
	Provider     string     `yaml:"provider"`      // a providers[].name
	Model        string     `yaml:"model"`         // the provider's own model name
	Window       int        `yaml:"window"`        // context window in tokens
	ContextLimit string     `yaml:"context_limit"` // auto | full | a token step such as 200k
	MaxOutput    int        `yaml:"max_output"`    // longest answer asked for; 0: the response reserve
	Compaction   Compaction `yaml:"compaction"`
	Boundary     Boundary   `yaml:"boundary"`
	// Prices are what the provider charges for the model; zero prices
	// count tokens in the cost ledger at no cost.
	Prices Prices `yaml:"prices"`
}

// Prices are a model's prices in currency units per million tokens.
// CachedInput is what an input token read from the provider's prompt cache
// costs instead of Input (OpenAI's cached_tokens, Anthropic's
// cache_read_input_tokens).
type Prices struct {
	Input       float64 `yaml:"input"`
	CachedInput float64 `yaml:"cached_input"`
	Output      float64 `yaml:"output"`
}

// Cost is what one request's billed tokens cost: in counts every input
// token, cached included (as the providers report it), so the cached ones
// are priced at CachedInput and the rest at Input.
func (p Prices) Cost(in, out, cached int) float64 {
	cached = min(max(cached, 0), max(in, 0))
	return (float64(max(in, 0)-cached)*p.Input + float64(cached)*p.CachedInput + float64(max(out, 0))*p.Output) / 1e6
}

// Compaction holds the soft and hard limits as shares of the window.
// Soft must be below hard; both are in (0, 1].
type Compaction struct {
	// SoftRatio is where the chat is warned that a boundary is near.
	SoftRatio float64 `yaml:"soft_ratio"`
	// HardRatio is where a boundary is taken between turns.
	HardRatio float64 `yaml:"hard_ratio"`
}

// Boundary configures what a boundary carries into the next conversation.
type Boundary struct {
	// ContinuityBudgetTokens caps the continuity message that opens the next
	// conversation.
	ContinuityBudgetTokens int `yaml:"continuity_budget_tokens"`
}

// Roles names the chain each role uses.
type Roles struct {
	Chat    string `yaml:"chat"`
	Reflect string `yaml:"reflect"`
	// Transcribe is the chain that turns voice and audio into text over
	// an OpenAI-compatible /audio/transcriptions endpoint; "" transcribes
	// nothing.
	Transcribe string `yaml:"transcribe"`
}

// Limits are the gateway's own resource bounds.
type Limits struct {
	// ProviderConcurrency caps model requests in flight across all chats.
	ProviderConcurrency int `yaml:"provider_concurrency"`
	// ChatIdle is how long a chat with nothing running stays in memory.
	ChatIdle time.Duration `yaml:"chat_idle"`
	// SocketBuffer is how many events may wait for one slow WebSocket client
	// before it is disconnected (it then resumes with since, losing nothing).
	SocketBuffer int `yaml:"socket_buffer"`
	// TurnTimeout bounds one whole turn.
	TurnTimeout time.Duration `yaml:"turn_timeout"`
	// MessagesPerMinute caps message.send per authenticated principal (an
	// access token); past it the send is refused with rate_limited.
	MessagesPerMinute int `yaml:"messages_per_minute"`
	// PendingPerChat caps the messages waiting in one chat's queue; past it
	// a send is refused with too_large.
	PendingPerChat int `yaml:"pending_per_chat"`
	// AuthTimeout is how long a WebSocket may stay open without having
	// authenticated (hello, cookie or bearer) before it is closed with 4401.
	AuthTimeout time.Duration `yaml:"auth_timeout"`
	// UnauthenticatedSockets caps the WebSockets open at once that have not
	// authenticated yet; an upgrade past it is refused with 503.
	UnauthenticatedSockets int `yaml:"unauthenticated_sockets"`
	// BodyTimeout bounds reading one HTTP request body.
	BodyTimeout time.Duration `yaml:"body_timeout"`
	// FailedLoginsPerMinute is how many wrong tokens one address may send
	// to POST /login in a minute (and at once) before it is refused with 429.
	FailedLoginsPerMinute int `yaml:"failed_logins_per_minute"`
	// DailyBudget caps what all chats together may spend in a UTC day, in
	// the currency of models[].prices; 0 sets no cap. Past it a turn is
	// refused before any request until 00:00 UTC.
	DailyBudget float64 `yaml:"daily_budget"`
	// ChatDailyBudget is the same cap for each chat on its own; 0 sets none.
	ChatDailyBudget float64 `yaml:"chat_daily_budget"`
}

// Attachments bounds what one attached file may weigh, by kind (the kind
// comes from its media type: image/*, audio/*, anything else a document),
// and how long an uploaded file no message names is kept.
type Attachments struct {
	MaxImageBytes    int64 `yaml:"max_image_bytes"`
	MaxDocumentBytes int64 `yaml:"max_document_bytes"`
	MaxAudioBytes    int64 `yaml:"max_audio_bytes"`
	// UnreferencedTTL is how long an uploaded file stays when no message
	// names it (an upload whose send never came); then it is collected.
	UnreferencedTTL time.Duration `yaml:"unreferenced_ttl"`
}

// Tools configures the tools the assistant may call and where they work.
type Tools struct {
	// Workspace is the folder every file tool and the shell are confined to;
	// "" means DefaultWorkspace next to runtime.yaml (outside data_dir, so
	// the token and the database are not the shell's ".."). Relative to
	// Dir. See WorkspacePath.
	Workspace string `yaml:"workspace"`
	// Policies says, per built-in tool, whether a call runs (allow), waits
	// for a person's approval (ask) or is refused (deny).
	Policies ToolPolicies `yaml:"policies"`
	// ShellTimeout bounds one shell command; a call may ask for less.
	ShellTimeout time.Duration `yaml:"shell_timeout"`
	// OutputLimit is how many characters of a tool result the model reads;
	// a longer result is stored whole and the model gets a preview with a
	// handle.
	OutputLimit int `yaml:"output_limit"`
}

// ToolPolicies holds one policy per built-in tool. It is a struct rather than
// a mapping so that an unknown tool name is refused at load with its line,
// and a file that names one tool keeps the defaults of the others.
type ToolPolicies struct {
	ReadFile  string `yaml:"read_file"`
	WriteFile string `yaml:"write_file"`
	EditFile  string `yaml:"edit_file"`
	ListDir   string `yaml:"list_dir"`
	Shell     string `yaml:"shell"`
	SendFile  string `yaml:"send_file"`
	// MCP are the keys naming MCP tools (SERVER__TOOL, with * patterns
	// such as github__*), in file order; see MCPPolicy.
	MCP []PolicyPattern `yaml:"-"`
}

// Map returns the policies keyed by tool name.
func (p ToolPolicies) Map() map[string]string {
	return map[string]string{
		"read_file":  p.ReadFile,
		"write_file": p.WriteFile,
		"edit_file":  p.EditFile,
		"list_dir":   p.ListDir,
		"shell":      p.Shell,
		"send_file":  p.SendFile,
	}
}

// Hooks are shell commands run around a checkpoint, which is Mirror's
// compaction, the way Claude Code runs its compaction hooks: PreCompact before
// a checkpoint is committed (a hook may block it), PostCompact after it, and
// SessionStart with source compact at the next run, so a hook can put back
// context the new view no longer carries. The keys are Claude Code's event
// names, so an unknown event is refused at load rather than never firing.
// Hooks of one event run in order; runtime/hooks runs them.
type Hooks struct {
	PreCompact   []Hook `yaml:"PreCompact"`
	PostCompact  []Hook `yaml:"PostCompact"`
	SessionStart []Hook `yaml:"SessionStart"`
}

// Hook is one command of a hook event.
type Hook struct {
	// Command runs through /bin/sh -c in the folder runtime.yaml was read
	// from (Dir), with the hook's JSON input on stdin. It is never shown in
	// errors: a command line may carry things not meant for logs.
	Command string `yaml:"command"`
	// Timeout bounds one run (default DefaultHookTimeout, at most
	// MaxHookTimeout); a hook past it is killed with its process group.
	Timeout time.Duration `yaml:"timeout"`
	// Matcher picks the runs the hook fires on, as in Claude Code: for
	// PreCompact and PostCompact the trigger (auto, manual), for SessionStart
	// the source (compact; startup, resume and clear are accepted for
	// settings copied from Claude Code but Mirror never fires them).
	// Alternatives are joined with |; "" and * match everything. See Matches.
	Matcher string `yaml:"matcher"`
}

// Matches reports whether the hook fires for value, a trigger or a source.
func (h Hook) Matches(value string) bool {
	if h.Matcher == "" || h.Matcher == "*" {
		return true
	}
	for _, alt := range strings.Split(h.Matcher, "|") {
		if strings.TrimSpace(alt) == value {
			return true
		}
	}
	return false
}

// Events lists the hook events with their hooks, in the order they fire, so
// callers need not name each field.
func (h Hooks) Events() []HookEvent {
	return []HookEvent{
		{HookPreCompact, h.PreCompact},
		{HookPostCompact, h.PostCompact},
		{HookSessionStart, h.SessionStart},
	}
}

// HookEvent is one event's name and hooks.
type HookEvent struct {
	Name  string
	Hooks []Hook
}
