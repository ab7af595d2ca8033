package config

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// stripped drops what only Parse and Load know, for comparing with Default.
func stripped(c *Config) *Config {
	cc := *c
	cc.Dir, cc.file, cc.lines = "", "", nil
	return &cc
}

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
}

func TestDefaultContract(t *testing.T) {
	c := Default()
	m := c.Models[0]
	checks := []struct {
		name      string
		got, want any
	}{
		{"listen", c.Listen, "127.0.0.1:8765"},
		{"data_dir", c.DataDir, "./data"},
		{"auth.token_env", c.Auth.TokenEnv, "MIRROR_TOKEN"},
		{"telegram.enabled", c.Telegram.Enabled, false},
		{"telegram.token_env", c.Telegram.TokenEnv, "TELEGRAM_BOT_TOKEN"},
		{"telegram.api_endpoint", c.Telegram.APIEndpoint, "https://api.telegram.org/bot%s/%s"},
		{"telegram.mode", c.Telegram.Mode, "polling"},
		{"providers", len(c.Providers), 1},
		{"providers[0]", [2]string{c.Providers[0].Name, c.Providers[0].Kind}, [2]string{"builtin", "builtin"}},
		{"providers[0].delay", *c.Providers[0].Delay, 30 * time.Millisecond},
		{"models", len(c.Models), 1},
		{"models[0]", [3]string{m.Name, m.Provider, m.Model}, [3]string{"default", "builtin", "echo"}},
		{"models[0].window", m.Window, 128000},
		{"models[0].context_limit", m.ContextLimit, "auto"},
		{"models[0].compaction", m.Compaction, Compaction{0.20, 0.25}},
		{"models[0].boundary", m.Boundary.ContinuityBudgetTokens, 8000},
		{"chains", c.Chains, map[string][]string{"default": {"default"}}},
		{"roles", c.Roles, Roles{Chat: "default", Reflect: "default"}},
		{"breaker_history_days", c.BreakerHistoryDays, 30},
		{"breaker_history_max", c.BreakerHistoryMax, 500},
		{"breaker_prune_schedule", c.BreakerPruneSchedule, "@every 1h"},
		{"limits", [4]any{c.Limits.ProviderConcurrency, c.Limits.ChatIdle, c.Limits.SocketBuffer, c.Limits.TurnTimeout},
			[4]any{64, 2 * time.Minute, 1024, 10 * time.Minute}},
		{"limits (edges)", [6]any{c.Limits.MessagesPerMinute, c.Limits.PendingPerChat, c.Limits.AuthTimeout,
			c.Limits.UnauthenticatedSockets, c.Limits.BodyTimeout, c.Limits.FailedLoginsPerMinute},
			[6]any{60, 100, 10 * time.Second, 128, 15 * time.Second, 6}},
		{"auth.trusted_proxies", len(c.Auth.TrustedProxies), 0},
		{"tools.workspace", c.Tools.Workspace, ""},
		{"tools.policies", c.Tools.Policies.Map(), map[string]string{
			"read_file": "allow", "list_dir": "allow", "write_file": "ask", "edit_file": "ask", "shell": "ask", "send_file": "ask"}},
		{"tools.shell_timeout", c.Tools.ShellTimeout, 2 * time.Minute},
		{"tools.output_limit", c.Tools.OutputLimit, 16000},
		{"hooks", c.Hooks, Hooks{}},
	}
	for _, tc := range checks {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	// Each call is a fresh copy: a caller changing its Config must not
	// change the next one's defaults.
	*c.Providers[0].Delay = 0
	c.Chains["x"] = nil
	if d := Default(); *d.Providers[0].Delay != 30*time.Millisecond || len(d.Chains) != 1 {
		t.Error("Default shares state between calls")
	}
}

// The sample runtime.yaml at the top of the repository is the defaults
// spelled out: it must parse to exactly Default.
func TestSampleFileIsDefault(t *testing.T) {
	c, err := Load(filepath.Join("..", "runtime.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Dir != ".." {
		t.Errorf("Dir = %q, want ..", c.Dir)
	}
	if got, want := stripped(c), Default(); !reflect.DeepEqual(got, want) {
		t.Errorf("runtime.yaml differs from Default():\n got %+v\nwant %+v", got, want)
	}
}

func TestEmptyFileIsDefault(t *testing.T) {
	for _, src := range []string{"", "# only a comment\n", "---\n", "~\n"} {
		c, err := Parse([]byte(src), "")
		if err != nil {
			t.Fatalf("Parse(%q) = %v", src, err)
		}
		if !reflect.DeepEqual(stripped(c), Default()) {
			t.Errorf("Parse(%q) is not Default()", src)
		}
	}
}

// The examples runtime.yaml and the README show must be accepted.
func TestExamples(t *testing.T) {
	src := `
providers:
  - {name: builtin, kind: builtin}
  - {name: openai, kind: openai, base_url: https://api.openai.com/v1, api_key_env: OPENAI_API_KEY, timeout: 5m}
  - {name: ollama, kind: openai, base_url: http://127.0.0.1:11434/v1}
  - {name: claude, kind: anthropic, api_key_env: ANTHROPIC_API_KEY}
  - {name: gemini, kind: gemini, api_key_env: GEMINI_API_KEY}
models:
  - {name: default, provider: builtin, model: echo, window: 128000}
  - {name: gpt, provider: openai, model: gpt-4o-mini, window: 128000, context_limit: 100k}
  - {name: llama, provider: ollama, model: llama3.2, window: 128000}
  - {name: sonnet, provider: claude, model: claude-sonnet-4, window: 200000, context_limit: full}
chains:
  default: [gpt, default]
  local: [llama, default]
  stt: [llama]
roles: {chat: default, reflect: local, transcribe: stt}
`
	c, err := Parse([]byte(src), "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Roles.Transcribe != "stt" {
		t.Errorf("roles.transcribe = %q", c.Roles.Transcribe)
	}
	p, _ := c.Provider("ollama")
	if p.APIKeyEnv != "" || p.BaseURL != "http://127.0.0.1:11434/v1" || p.Delay != nil {
		t.Errorf("ollama = %+v", p)
	}
	if p, _ := c.Provider("claude"); p.BaseURL != "https://api.anthropic.com/v1" {
		t.Errorf("anthropic default base_url = %q", p.BaseURL)
	}
	if p, _ := c.Provider("gemini"); p.BaseURL != "https://generativelanguage.googleapis.com/v1beta" {
		t.Errorf("gemini default base_url = %q", p.BaseURL)
	}
	if p, _ := c.Provider("builtin"); p.Delay == nil || *p.Delay != BuiltinDelay {
		t.Errorf("builtin delay = %v, want the default", p.Delay)
	}
	m, _ := c.Model("llama")
	if m.ContextLimit != "auto" || m.Compaction != (Compaction{0.20, 0.25}) || m.Boundary.ContinuityBudgetTokens != 8000 {
		t.Errorf("a model item does not start from the model defaults: %+v", m)
	}
	if n, _ := c.Models[1].ContextLimitTokens(); n != 100000 {
		t.Errorf("gpt context limit = %d, want 100000", n)
	}
	if p, _ := c.Provider("openai"); p.Timeout != 5*time.Minute {
		t.Errorf("timeout = %v", p.Timeout)
	}
	// Chains replace the default mapping whole.
	if len(c.Chains) != 3 || !reflect.DeepEqual(c.Chains["default"], []string{"gpt", "default"}) {
		t.Errorf("chains = %v", c.Chains)
	}
}

func TestPartialFileKeepsDefaults(t *testing.T) {
	c, err := Parse([]byte("telegram:\n  enabled: true\nlimits:\n  chat_idle: 5m\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Telegram.Enabled = true
	want.Limits.ChatIdle = 5 * time.Minute
	if !reflect.DeepEqual(stripped(c), want) {
		t.Errorf("got %+v\nwant %+v", stripped(c), want)
	}
}

func TestParseErrors(t *testing.T) {
	// model is a valid models list to build cases on.
	const model = "models:\n  - name: default\n    provider: builtin\n    model: echo\n    window: 100000\n"
	tests := []struct {
		name string
		src  string
		want string // the whole first line of the error, or its start when it ends in "..."
	}{
		// File level.
		{"syntax", "listen: [\n", "runtime.yaml:1: bad YAML: did not find expected node content"},
		{"not a mapping", "- a\n- b\n", "runtime.yaml:1: want a mapping of keys such as listen: and models:, not a list"},
		{"two documents", "listen: 127.0.0.1:1\n---\nlisten: 127.0.0.1:2\n", "runtime.yaml:2: only one YAML document is allowed; remove this ---"},
		{"alias", "listen: &a 127.0.0.1:1\ndata_dir: *a\n", "runtime.yaml:2: data_dir: aliases (*name) are not supported; write the value out"},
		{"repeated key", "listen: 127.0.0.1:1\nlisten: 127.0.0.1:2\n", "runtime.yaml:2: listen: given twice (first on line 1)"},
		{"repeated chain", "chains:\n  default: [default]\n  default: [default]\n", "runtime.yaml:3: chains.default: given twice (first on line 2)"},

		// Keys and types.
		{"unknown key", "\nlisten: 127.0.0.1:1\nlisen: x\n", "runtime.yaml:3: lisen: unknown key; known keys here: attachments, auth, ..."},
		{"unknown nested key", "telegram:\n  mode: polling\n  bot: x\n", "runtime.yaml:3: telegram.bot: unknown key; known keys here: allowed_users, api_endpoint, enabled, mode, token_env, webhook_path, webhook_secret_env, webhook_url"},
		{"secret key in provider", "providers:\n  - name: x\n    kind: openai\n    api_key: sk-abc\n", "runtime.yaml:4: providers[0].api_key: unknown key: secrets are never written in runtime.yaml; put the secret in an environment variable and set api_key_env to its name (name the environment variable, not the secret)"},
		{"secret key in telegram", "telegram:\n  bot_token: 123:abc\n", "runtime.yaml:2: telegram.bot_token: unknown key: secrets are never written in runtime.yaml; put the secret in an environment variable and set token_env to its name (name the environment variable, not the secret)"},
		{"secret as a key", "providers:\n  - {name: x, kind: openai, sk-proj-abcdef}\n", "runtime.yaml:2: providers[0].?: unknown key (not shown: it may be a secret); known keys here: ..."},
		{"mapping for scalar", "listen: {a: b}\n", "runtime.yaml:1: listen: want a string, not a mapping"},
		{"scalar for mapping", "telegram: true\n", "runtime.yaml:1: telegram: want a mapping of keys, not a boolean"},
		{"mapping for list", "models: {a: b}\n", "runtime.yaml:1: models: want a list, not a mapping"},
		{"yes is not a bool", "telegram:\n  enabled: yes\n", "runtime.yaml:2: telegram.enabled: want true or false, not a string"},
		{"quoted number", model + "    boundary: {continuity_budget_tokens: \"8000\"}\n", "runtime.yaml:6: models[0].boundary.continuity_budget_tokens: want a whole number, not a string"},
		{"float for int", "breaker_history_days: 1.5\n", "runtime.yaml:1: breaker_history_days: want a whole number, not a number"},
		{"string for float", model + "    compaction: {soft_ratio: low}\n", "runtime.yaml:6: models[0].compaction.soft_ratio: want a number, not a string"},
		{"bare duration", "limits:\n  chat_idle: 30\n", "runtime.yaml:2: limits.chat_idle: want a duration with a unit, such as 30ms, 2m or 1h30m (a bare number is ambiguous)"},
		{"bad duration", "limits:\n  turn_timeout: soon\n", "runtime.yaml:2: limits.turn_timeout: want a duration with a unit, such as 30ms, 2m or 1h30m"},
		{"empty list item", "providers:\n  -\n", "runtime.yaml:2: providers[0]: empty item; remove the - or give it a value"},
		{"user id type", "telegram:\n  allowed_users: [1, x]\n", "runtime.yaml:2: telegram.allowed_users[1]: want a whole number, not a string"},

		// listen and data_dir.
		{"listen no port", "listen: localhost\n", "runtime.yaml:1: listen: want host:port such as 127.0.0.1:8765, not \"localhost\""},
		{"listen named port", "listen: 127.0.0.1:http\n", "runtime.yaml:1: listen: the port must be a number from 0 to 65535, not \"http\""},
		{"listen big port", "listen: 127.0.0.1:70000\n", "runtime.yaml:1: listen: the port must be a number from 0 to 65535, not \"70000\""},
		{"empty data_dir", "data_dir: \"\"\n", "runtime.yaml:1: data_dir: required: the folder for the database and the token, such as ./data"},

		// Secrets only from the environment.
		{"token_env holds a token", "auth:\n  token_env: abc-def-ghi\n", "runtime.yaml:2: auth.token_env: want the name of an environment variable, such as OPENAI_API_KEY (letters, digits and _); name the environment variable, not the secret"},
		{"api_key_env holds a key", "providers:\n  - {name: o, kind: openai, api_key_env: sk-proj-Zx9SECRET}\n", "runtime.yaml:2: providers[0].api_key_env: want the name of an environment variable, such as OPENAI_API_KEY (letters, digits and _); name the environment variable, not the secret"},
		{"api_key_env holds a key that is a word", "providers:\n  - {name: o, kind: gemini, api_key_env: AIzaSyB0abcdefSECRETxyz}\n", "runtime.yaml:2: providers[0].api_key_env: want the name of an environment variable, ..."},
		{"telegram token_env holds a token", "telegram:\n  token_env: 123456:AAHsecretSECRET\n", "runtime.yaml:2: telegram.token_env: want the name of an environment variable, ..."},
		{"telegram enabled without token_env", "telegram:\n  enabled: true\n  token_env: \"\"\n", "runtime.yaml:3: telegram.token_env: required: the name of the environment variable holding the secret"},
		{"key in base_url", "providers:\n  - {name: g, kind: gemini, base_url: \"https://g.example.com/v1?key=SECRET\"}\n", "runtime.yaml:2: providers[0].base_url: must be a plain URL without user info, query or fragment; put a key in api_key_env (name the environment variable, not the secret)"},
		{"user info in base_url", "providers:\n  - {name: g, kind: openai, base_url: \"https://me:SECRET@o.example.com/v1\"}\n", "runtime.yaml:2: providers[0].base_url: must be a plain URL without user info, ..."},

		// auth and telegram.
		{"origin with path", "auth:\n  allowed_origins:\n    - https://chat.example.com/app\n", "runtime.yaml:3: auth.allowed_origins[0]: want an origin scheme://host[:port] such as https://chat.example.com, without path, not \"https://chat.example.com/app\""},
		{"telegram mode", "telegram:\n  mode: push\n", "runtime.yaml:2: telegram.mode: want polling or webhook, not \"push\""},
		{"api_endpoint one %s", "telegram:\n  api_endpoint: https://api.telegram.org/bot%s\n", "runtime.yaml:2: telegram.api_endpoint: want a URL with exactly two %s, the token then the method, such as https://api.telegram.org/bot%s/%s, and no other %"},
		{"api_endpoint other verb", "telegram:\n  api_endpoint: https://x.example.com/bot%s/%s/%d\n", "runtime.yaml:2: telegram.api_endpoint: want a URL with exactly two %s, ..."},
		{"api_endpoint not http", "telegram:\n  api_endpoint: ftp://x/bot%s/%s\n", "runtime.yaml:2: telegram.api_endpoint: want an http or https URL such as https://api.telegram.org/bot%s/%s"},
		{"user id zero", "telegram:\n  allowed_users: [0]\n", "runtime.yaml:2: telegram.allowed_users[0]: want a Telegram user id (a positive number), not 0"},

		// providers.
		{"provider kind", "providers:\n  - {name: x, kind: llama}\n", "runtime.yaml:2: providers[0].kind: want builtin, openai, gemini or anthropic, not \"llama\""},
		{"provider no kind", "providers:\n  - {name: x}\n", "runtime.yaml:2: providers[0].kind: required: builtin, openai, gemini or anthropic"},
		{"provider no name", "providers:\n  - {kind: builtin}\n", "runtime.yaml:2: providers[0].name: required"},
		{"provider bad name", "providers:\n  - {name: my provider, kind: builtin}\n", "runtime.yaml:2: providers[0].name: want a name of letters, digits, '.', '_' and '-' (at most 64), not \"my provider\""},
		{"provider twice", "providers:\n  - {name: builtin, kind: builtin}\n  - name: builtin\n    kind: builtin\n", "runtime.yaml:3: providers[1].name: \"builtin\" is already the name of providers[0]"},
		{"base_url not http", "providers:\n  - {name: builtin, kind: builtin}\n  - {name: o, kind: openai, base_url: 127.0.0.1:11434}\n", "runtime.yaml:3: providers[1].base_url: want an http or https URL such as https://api.openai.com/v1 or http://127.0.0.1:11434/v1"},
		{"builtin base_url", "providers:\n  - {name: builtin, kind: builtin, base_url: http://x}\n", "runtime.yaml:2: providers[0].base_url: the builtin provider takes no base_url"},
		{"builtin key", "providers:\n  - {name: builtin, kind: builtin, api_key_env: KEY}\n", "runtime.yaml:2: providers[0].api_key_env: the builtin provider takes no key"},
		{"delay on openai", "providers:\n  - {name: builtin, kind: builtin}\n  - {name: o, kind: openai, delay: 1s}\n", "runtime.yaml:3: providers[1].delay: only the builtin provider has a delay"},
		{"negative timeout", "providers:\n  - {name: builtin, kind: builtin, timeout: -1s}\n", "runtime.yaml:2: providers[0].timeout: must not be negative"},

		// models.
		{"missing provider", "models:\n  - name: default\n    provider: openai\n    model: gpt\n    window: 100000\n", "runtime.yaml:3: models[0].provider: no provider named \"openai\" (providers: builtin)"},
		{"no provider", "models:\n  - {name: default, model: echo, window: 1000}\n", "runtime.yaml:2: models[0].provider: required: the name of one of providers (builtin)"},
		{"no model", "models:\n  - {name: default, provider: builtin, window: 1000}\n", "runtime.yaml:2: models[0].model: required: the provider's own name of the model, such as gpt-4o-mini"},
		{"model twice", model + "  - {name: default, provider: builtin, model: echo, window: 100000}\n", "runtime.yaml:6: models[1].name: \"default\" is already the name of models[0]"},
		{"no window", "models:\n  - {name: default, provider: builtin, model: echo}\n", "runtime.yaml:2: models[0].window: want the model's context window in tokens, a number from 1 to 1073741824"},
		{"negative window", model + "    context_limit: full\n  - {name: b, provider: builtin, model: echo, window: -5}\n", "runtime.yaml:7: models[1].window: want the model's context window in tokens, a number from 1 to 1073741824"},
		{"context_limit word", model + "    context_limit: lots\n", "runtime.yaml:6: models[0].context_limit: want auto, full or a token count such as 200k, 1m or 272000, not \"lots\""},
		{"context_limit decimal", model + "    context_limit: 1.5m\n", "runtime.yaml:6: models[0].context_limit: want auto, full or a token count such as 200k, 1m or 272000, not \"1.5m\""},
		{"context_limit above window", model + "    context_limit: 200k\n", "runtime.yaml:6: models[0].context_limit: 200000 tokens is above the window of 100000"},
		{"max_output", model + "    max_output: 100000\n", "runtime.yaml:6: models[0].max_output: want 0 (the response reserve) or a number of tokens below the window"},
		{"negative price", model + "    prices: {input: 1, cached_input: -0.5, output: 4}\n", "runtime.yaml:6: models[0].prices.cached_input: want a price per million tokens from 0 to 1e+09, such as 2.5, not -0.5"},
		{"infinite price", model + "    prices:\n      output: .inf\n", "runtime.yaml:7: models[0].prices.output: want a price per million tokens from 0 to 1e+09, such as 2.5, not +Inf"},
		{"negative daily budget", "limits:\n  daily_budget: -1\n", "runtime.yaml:2: limits.daily_budget: want 0 (no limit) or an amount to spend per UTC day, such as 5, not -1"},
		{"NaN chat budget", "limits:\n  chat_daily_budget: .nan\n", "runtime.yaml:2: limits.chat_daily_budget: want 0 (no limit) or an amount to spend per UTC day, such as 5, not NaN"},
		{"soft equals hard", model + "    compaction:\n      soft_ratio: 0.25\n      hard_ratio: 0.25\n", "runtime.yaml:7: models[0].compaction.soft_ratio: 0.25 must be below hard_ratio 0.25: the warning comes before the boundary"},
		{"soft above default hard", model + "    compaction:\n      soft_ratio: 0.5\n", "runtime.yaml:7: models[0].compaction.soft_ratio: 0.5 must be below hard_ratio 0.25: the warning comes before the boundary"},
		{"hard below default soft: line of the parent", model + "    compaction:\n      hard_ratio: 0.1\n", "runtime.yaml:6: models[0].compaction.soft_ratio: 0.2 must be below hard_ratio 0.1: the warning comes before the boundary"},
		{"soft zero", model + "    compaction: {soft_ratio: 0}\n", "runtime.yaml:6: models[0].compaction.soft_ratio: want a share of the window above 0 and at most 1, such as 0.20, not 0"},
		{"hard above one", model + "    compaction: {hard_ratio: 1.5}\n", "runtime.yaml:6: models[0].compaction.hard_ratio: want a share of the window above 0 and at most 1, such as 0.25, not 1.5"},
		{"ratio nan", model + "    compaction: {hard_ratio: .nan}\n", "runtime.yaml:6: models[0].compaction.hard_ratio: want a share of the window above 0 and at most 1, such as 0.25, not NaN"},
		{"continuity zero", model + "    boundary: {continuity_budget_tokens: 0}\n", "runtime.yaml:6: models[0].boundary.continuity_budget_tokens: want a number of tokens above 0 and below the window, such as 8000"},

		// chains and roles.
		{"chain names missing model", "chains:\n  default:\n    - default\n    - nope\n", "runtime.yaml:4: chains.default[1]: no model named \"nope\" (models: default)"},
		{"chain twice the same", "chains:\n  default: [default, default]\n", "runtime.yaml:2: chains.default[1]: \"default\" is already chains.default[0]"},
		{"empty chain", "chains:\n  default: []\n", "runtime.yaml:2: chains.default: empty chain; list the models to try in order, such as [default]"},
		{"no chains", "chains: {}\nroles: {chat: x, reflect: x}\n", "runtime.yaml:1: chains: want at least one chain, such as default: [default]"},
		{"role names missing chain", "roles:\n  chat: fast\n", "runtime.yaml:2: roles.chat: no chain named \"fast\" (chains: default)"},
		{"role removed chain", "chains:\n  main: [default]\n", "runtime.yaml: roles.chat: no chain named \"default\" (chains: main)"},
		{"role empty", "roles:\n  reflect: \"\"\n", "runtime.yaml:2: roles.reflect: required: the name of one of chains (default)"},
		{"transcribe names missing chain", "roles:\n  transcribe: stt\n", "runtime.yaml:2: roles.transcribe: no chain named \"stt\" (chains: default)"},
		{"transcribe on builtin", "roles:\n  transcribe: default\n", "runtime.yaml:2: roles.transcribe: model \"default\" of chain \"default\" is served by \"builtin\" of kind builtin; transcription needs an OpenAI-compatible provider (kind openai) with /audio/transcriptions"},

		// limits and breakers.
		{"concurrency", "limits:\n  provider_concurrency: 0\n", "runtime.yaml:2: limits.provider_concurrency: must be above 0"},
		{"chat_idle", "limits:\n  chat_idle: 0\n", "runtime.yaml:2: limits.chat_idle: must be above 0, such as 2m"},
		{"socket_buffer", "limits:\n  socket_buffer: -1\n", "runtime.yaml:2: limits.socket_buffer: must be above 0"},
		{"turn_timeout", "limits:\n  turn_timeout: -1m\n", "runtime.yaml:2: limits.turn_timeout: must be above 0, such as 10m"},
		{"history days", "breaker_history_days: 0\n", "runtime.yaml:1: breaker_history_days: must be above 0"},
		{"history max", "breaker_history_max: -1\n", "runtime.yaml:1: breaker_history_max: must be above 0"},
		// tools.
		{"unknown tool", "tools:\n  policies:\n    shell: allow\n    rm_rf: allow\n", "runtime.yaml:4: tools.policies.rm_rf: unknown key; known keys here: edit_file, list_dir, read_file, send_file, shell, write_file"},
		{"bad policy", "tools:\n  policies: {shell: maybe}\n", "runtime.yaml:2: tools.policies.shell: want allow, ask or deny, not \"maybe\""},
		{"empty policy", "tools:\n  policies:\n    write_file: \"\"\n", "runtime.yaml:3: tools.policies.write_file: want allow, ask or deny, not \"\""},
		{"policies as list", "tools:\n  policies: [shell]\n", "runtime.yaml:2: tools.policies: want a mapping of keys, not a list"},
		{"shell_timeout", "tools:\n  shell_timeout: 0s\n", "runtime.yaml:2: tools.shell_timeout: must be above 0, such as 2m"},
		{"output_limit small", "tools:\n  output_limit: 10\n", "runtime.yaml:2: tools.output_limit: want a number of characters from 500 to 1073741824, such as 16000"},
		{"workspace NUL", "tools:\n  workspace: \"a\\0b\"\n", "runtime.yaml:2: tools.workspace: contains a NUL byte"},

		// hooks.
		{"unknown event", "hooks:\n  PreCompact: []\n  Stop:\n    - {command: x}\n", "runtime.yaml:3: hooks.Stop: unknown key; known keys here: PostCompact, PreCompact, SessionStart"},
		{"event in lower case", "hooks:\n  precompact: [{command: x}]\n", "runtime.yaml:2: hooks.precompact: unknown key; known keys here: PostCompact, PreCompact, SessionStart"},
		{"hooks as list", "hooks:\n  - PreCompact\n", "runtime.yaml:2: hooks: want a mapping of keys, not a list"},
		{"event as mapping", "hooks:\n  PreCompact: {command: x}\n", "runtime.yaml:2: hooks.PreCompact: want a list, not a mapping"},
		{"unknown hook key", "hooks:\n  PreCompact:\n    - command: x\n      type: command\n", "runtime.yaml:4: hooks.PreCompact[0].type: unknown key; known keys here: command, matcher, timeout"},
		{"no command", "hooks:\n  PreCompact:\n    - {timeout: 10s}\n", "runtime.yaml:3: hooks.PreCompact[0].command: required: a shell command run with /bin/sh -c in this file's folder, such as ./hooks/keep-plan.sh"},
		{"blank command", "hooks:\n  PostCompact:\n    - command: x\n    - command: \"  \"\n", "runtime.yaml:4: hooks.PostCompact[1].command: required: ..."},
		{"NUL in command", "hooks:\n  SessionStart:\n    - command: \"cat a\\0SECRET\"\n", "runtime.yaml:3: hooks.SessionStart[0].command: contains a NUL byte"},
		{"command as list", "hooks:\n  PreCompact:\n    - command: [a, b]\n", "runtime.yaml:3: hooks.PreCompact[0].command: want a string, not a list"},
		{"timeout zero", "hooks:\n  PreCompact:\n    - command: x\n      timeout: 0s\n", "runtime.yaml:4: hooks.PreCompact[0].timeout: want a duration above 0 and at most 10m, such as 10s; leave it out for 60s"},
		{"timeout negative", "hooks:\n  PreCompact:\n    - {command: x, timeout: -1s}\n", "runtime.yaml:3: hooks.PreCompact[0].timeout: want a duration above 0 and at most 10m, ..."},
		{"timeout too long", "hooks:\n  PostCompact:\n    - {command: x, timeout: 11m}\n", "runtime.yaml:3: hooks.PostCompact[0].timeout: want a duration above 0 and at most 10m, ..."},
		{"timeout bare number", "hooks:\n  PreCompact:\n    - {command: x, timeout: 10}\n", "runtime.yaml:3: hooks.PreCompact[0].timeout: want a duration with a unit, such as 30ms, 2m or 1h30m (a bare number is ambiguous)"},
		{"matcher unknown", "hooks:\n  PreCompact:\n    - {command: x, matcher: always}\n", "runtime.yaml:3: hooks.PreCompact[0].matcher: want auto, manual, alternatives joined with | or \"\" for all, not \"always\""},
		{"matcher a source on PreCompact", "hooks:\n  PreCompact:\n    - {command: x, matcher: \"auto|compact\"}\n", "runtime.yaml:3: hooks.PreCompact[0].matcher: want auto, manual, alternatives joined with | or \"\" for all, not \"auto|compact\""},
		{"matcher a trigger on SessionStart", "hooks:\n  SessionStart:\n    - {command: x, matcher: manual}\n", "runtime.yaml:3: hooks.SessionStart[0].matcher: want compact, startup, resume, clear, alternatives joined with | or \"\" for all, not \"manual\""},
		{"SessionStart never fires", "hooks:\n  SessionStart:\n    - {command: x, matcher: \"startup|resume\"}\n", "runtime.yaml:3: hooks.SessionStart[0].matcher: \"startup|resume\" never matches: Mirror fires SessionStart only after a checkpoint, with source compact"},

		{"attachment limit zero", "attachments:\n  max_image_bytes: 0\n", "runtime.yaml:2: attachments.max_image_bytes: must be a byte count from 1 to ..."},
		{"attachment limit huge", "attachments:\n  max_audio_bytes: 9999999999999\n", "runtime.yaml:2: attachments.max_audio_bytes: must be a byte count from 1 to ..."},
		{"attachment ttl", "attachments:\n  unreferenced_ttl: 1s\n", "runtime.yaml:2: attachments.unreferenced_ttl: must be at least 1m, ..."},
		{"schedule", "breaker_prune_schedule: every hour\n", "runtime.yaml:1: breaker_prune_schedule: want a robfig/cron schedule such as \"@every 1h\" or \"0 3 * * *\": ..."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), "runtime.yaml")
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.src)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not a *config.Error: %v", err, err)
			}
			first, _, _ := strings.Cut(err.Error(), "\n")
			if want, ok := strings.CutSuffix(tc.want, "..."); ok {
				if !strings.HasPrefix(first, want) {
					t.Errorf("error:\n got %s\nwant %s...", first, want)
				}
			} else if first != tc.want {
				t.Errorf("error:\n got %s\nwant %s", first, tc.want)
			}
			if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "sk-") {
				t.Errorf("error echoes a secret: %v", err)
			}
		})
	}
}

func TestSeveralErrors(t *testing.T) {
	src := "listen: nope\nlimits:\n  socket_buffer: 0\nbreaker_history_max: 0\n"
	_, err := Parse([]byte(src), "mirror.yaml")
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("error %T is not Errors: %v", err, err)
	}
	want := "mirror.yaml:1: listen: want host:port such as 127.0.0.1:8765, not \"nope\"\n" +
		"mirror.yaml:3: limits.socket_buffer: must be above 0\n" +
		"mirror.yaml:4: breaker_history_max: must be above 0"
	if err.Error() != want {
		t.Errorf("got\n%s\nwant\n%s", err, want)
	}
	var e *Error
	if !errors.As(err, &e) || e.Line != 1 || e.Field != "listen" {
		t.Errorf("errors.As(*Error) = %+v", e)
	}
}

func TestValidateWithoutFile(t *testing.T) {
	c := Default()
	c.Models[0].Compaction.SoftRatio = 0.3
	err := c.Validate()
	want := "runtime.yaml: models[0].compaction.soft_ratio: 0.3 must be below hard_ratio 0.25: the warning comes before the boundary"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	t.Run("missing", func(t *testing.T) {
		_, err := Load(filepath.Join(dir, "runtime.yaml"))
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Load(missing) = %v, want fs.ErrNotExist", err)
		}
	})
	t.Run("base name in errors", func(t *testing.T) {
		path := filepath.Join(dir, "custom.yaml")
		if err := os.WriteFile(path, []byte("listen: 127.0.0.1:1\nmode: x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		if err == nil || !strings.HasPrefix(err.Error(), "custom.yaml:2: mode: unknown key") {
			t.Errorf("Load = %v", err)
		}
	})
	t.Run("data_dir relative to the file", func(t *testing.T) {
		sub := filepath.Join(dir, "etc")
		if err := os.Mkdir(sub, 0o700); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(sub, "runtime.yaml")
		if err := os.WriteFile(path, []byte("data_dir: state\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if c.Dir != sub || c.DataPath() != filepath.Join(sub, "state") {
			t.Errorf("Dir = %q, DataPath = %q", c.Dir, c.DataPath())
		}
		c.DataDir = "/var/lib/mirror"
		if c.DataPath() != "/var/lib/mirror" {
			t.Errorf("absolute DataPath = %q", c.DataPath())
		}
	})
	if got := Default().DataPath(); got != "./data" {
		t.Errorf("Default().DataPath() = %q, want ./data", got)
	}
}

func TestTools(t *testing.T) {
	// Naming one policy keeps the defaults of the others.
	c, err := Parse([]byte("tools:\n  policies:\n    shell: deny\n  output_limit: 2000\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Tools.Policies.Shell = PolicyDeny
	want.Tools.OutputLimit = 2000
	if !reflect.DeepEqual(stripped(c), want) {
		t.Errorf("got %+v\nwant %+v", stripped(c).Tools, want.Tools)
	}

	dir := t.TempDir()
	tests := []struct {
		name, dataDir, cfgDir, workspace, want string
	}{
		{"default in the working directory, beside data_dir", "./data", "", "", "workspace"},
		{"default next to the file, outside data_dir", "state", dir, "", filepath.Join(dir, "workspace")},
		{"absolute", "./data", dir, "/srv/ws", "/srv/ws"},
		{"relative to the file", "./data", dir, "ws", filepath.Join(dir, "ws")},
		{"relative to the working directory", "./data", ".", "ws", "ws"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			c.DataDir, c.Dir, c.Tools.Workspace = tc.dataDir, tc.cfgDir, tc.workspace
			if got := filepath.Clean(c.WorkspacePath()); got != filepath.Clean(tc.want) {
				t.Errorf("WorkspacePath() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestHooks(t *testing.T) {
	src := `
hooks:
  PreCompact:
    - {command: ./hooks/keep-plan.sh, timeout: 10s, matcher: manual}
    - command: ./hooks/snapshot.sh
  PostCompact:
    - {command: "echo done >> log", matcher: "auto|manual"}
  SessionStart:
    - {command: cat PLAN.md, matcher: "startup|compact"}
`
	c, err := Parse([]byte(src), "")
	if err != nil {
		t.Fatal(err)
	}
	want := Hooks{
		PreCompact: []Hook{
			{Command: "./hooks/keep-plan.sh", Timeout: 10 * time.Second, Matcher: "manual"},
			{Command: "./hooks/snapshot.sh", Timeout: DefaultHookTimeout},
		},
		PostCompact:  []Hook{{Command: "echo done >> log", Timeout: time.Minute, Matcher: "auto|manual"}},
		SessionStart: []Hook{{Command: "cat PLAN.md", Timeout: time.Minute, Matcher: "startup|compact"}},
	}
	if !reflect.DeepEqual(c.Hooks, want) {
		t.Errorf("hooks = %+v\nwant %+v", c.Hooks, want)
	}
	// Naming one event leaves the others empty; an empty list is no hooks.
	c, err = Parse([]byte("hooks:\n  PostCompact: []\n  SessionStart:\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(stripped(c), Default()) {
		t.Errorf("empty hooks are not the default: %+v", c.Hooks)
	}

	matches := []struct {
		matcher, value string
		want           bool
	}{
		{"", "auto", true}, {"", "manual", true}, {"*", "compact", true},
		{"auto", "auto", true}, {"auto", "manual", false},
		{"manual", "manual", true}, {"manual", "auto", false},
		{"auto|manual", "manual", true}, {"auto | manual", "auto", true},
		{"startup|compact", "compact", true}, {"startup|resume", "compact", false},
		{"compact", "comp", false},
	}
	for _, tc := range matches {
		if got := (Hook{Matcher: tc.matcher}).Matches(tc.value); got != tc.want {
			t.Errorf("Matcher %q Matches(%q) = %v, want %v", tc.matcher, tc.value, got, tc.want)
		}
	}
}

// The example runtime.yaml gives, commented out, must load once uncommented.
func TestHooksSampleExample(t *testing.T) {
	sample, err := os.ReadFile(filepath.Join("..", "runtime.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(sample), "\n# hooks:\n")
	if !ok {
		t.Fatal("runtime.yaml has no commented hooks: example")
	}
	src := "hooks:\n"
	for _, line := range strings.Split(block, "\n") {
		rest, ok := strings.CutPrefix(line, "# ")
		if !ok {
			break
		}
		src += rest + "\n"
	}
	c, err := Parse([]byte(src), "")
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	if len(c.Hooks.PreCompact) != 1 || len(c.Hooks.PostCompact) != 1 || len(c.Hooks.SessionStart) != 1 {
		t.Errorf("example hooks = %+v", c.Hooks)
	}
}

func TestParseContextLimit(t *testing.T) {
	tests := []struct {
		in   string
		want int
		ok   bool
	}{
		{"auto", 0, true}, {"full", 0, true}, {"200k", 200000, true}, {"200K", 200000, true},
		{"1m", 1000000, true}, {"272000", 272000, true}, {"1", 1, true},
		{"", 0, false}, {"0", 0, false}, {"0k", 0, false}, {"-5k", 0, false}, {"+5", 0, false},
		{"1.5m", 0, false}, {"k", 0, false}, {"5g", 0, false}, {" 5k", 0, false}, {"Auto", 0, false},
		{"99999999999m", 0, false}, {"2000m", 0, false}, {"0x10", 0, false},
	}
	for _, tc := range tests {
		got, err := ParseContextLimit(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseContextLimit(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestSecret(t *testing.T) {
	t.Setenv("MIRROR_TEST_SECRET", " s3cret\n")
	c := Default()
	if got := c.Secret("MIRROR_TEST_SECRET"); got != "s3cret" {
		t.Errorf("Secret = %q", got)
	}
	if got := c.Secret(""); got != "" {
		t.Errorf(`Secret("") = %q`, got)
	}
}

var errLine = regexp.MustCompile(`^[^:\n]+(:[0-9]+)?: [^\n]+$`)

func FuzzParse(f *testing.F) {
	sample, err := os.ReadFile(filepath.Join("..", "runtime.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		string(sample),
		"",
		"listen: 127.0.0.1:0\n",
		"providers:\n  - {name: o, kind: openai, base_url: http://127.0.0.1:11434/v1}\nmodels:\n  - {name: default, provider: o, model: m, window: 1000, context_limit: 1k}\n",
		"models:\n  - {name: default, provider: builtin, model: echo, window: 100, compaction: {soft_ratio: 0.1, hard_ratio: 0.9}}\n",
		"chains: {a: [default], b: [default]}\nroles: {chat: a, reflect: b}\n",
		"a: &x [1]\nb: *x\n",
		"telegram: {enabled: true, allowed_users: [1, 2]}\n",
		"limits: {chat_idle: 1h, turn_timeout: 0}\n",
		"\"\\u0000\": 1\n",
		"hooks:\n  PreCompact: [{command: ./a.sh, timeout: 10s, matcher: manual}]\n  SessionStart: [{command: x, matcher: \"startup|compact\"}]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "runtime.yaml")
		if err != nil {
			if c != nil {
				t.Fatal("a Config with an error")
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not a *config.Error: %v", err, err)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !errLine.MatchString(line) || !strings.HasPrefix(line, "runtime.yaml") {
					t.Fatalf("malformed error line %q", line)
				}
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config does not re-validate: %v", err)
		}
		for _, m := range c.Models {
			if _, err := m.ContextLimitTokens(); err != nil {
				t.Fatalf("accepted model %q: %v", m.Name, err)
			}
		}
	})
}

// TestWorkspaceWarnings: a workspace and a data_dir inside one another are
// named at start, and so are files left in the old default workspace
// (data_dir/workspace) when tools.workspace is not set.
func TestWorkspaceWarnings(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "data", "workspace")
	if err := os.MkdirAll(old, 0o700); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, workspace, oldFile string
		want                     []string
	}{
		{"default, old one empty", "", "", nil},
		{"default, files left in the old one", "", "notes.txt", []string{"the default workspace moved from " + old}},
		{"set explicitly to the old one", "data/workspace", "notes.txt", []string{"lies inside data_dir"}},
		{"holding data_dir", ".", "", []string{"data_dir " + filepath.Join(dir, "data") + " lies inside tools.workspace"}},
		{"elsewhere", "/srv/ws", "notes.txt", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_ = os.Remove(filepath.Join(old, "notes.txt"))
			if tc.oldFile != "" {
				if err := os.WriteFile(filepath.Join(old, tc.oldFile), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c := Default()
			c.Dir, c.DataDir, c.Tools.Workspace = dir, "data", tc.workspace
			got := c.WorkspaceWarnings()
			if len(got) != len(tc.want) {
				t.Fatalf("warnings %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %q does not say %q", got[i], w)
				}
			}
		})
	}
}

func TestPricesCost(t *testing.T) {
	p := Prices{Input: 2.5, CachedInput: 1.25, Output: 10}
	for _, c := range []struct {
		in, out, cached int
		want            float64
	}{
		{1_000_000, 0, 0, 2.5},
		{1_000_000, 0, 400_000, 0.6*2.5 + 0.4*1.25},
		{0, 1_000_000, 0, 10},
		{1000, 500, 2000, 1000*1.25/1e6 + 500*10/1e6}, // cached above input: all cached
		{-5, -5, -5, 0},
	} {
		if got := p.Cost(c.in, c.out, c.cached); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Cost(%d, %d, %d) = %g, want %g", c.in, c.out, c.cached, got, c.want)
		}
	}
}
