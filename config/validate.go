package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Validate checks every rule of runtime.yaml and reports all problems at
// once, each with the line it was read from when the Config came from Parse.
// It changes nothing: defaults are filled by Parse and Default.
func (c *Config) Validate() error {
	v := &validator{c: c}
	v.top()
	v.auth()
	v.telegram()
	v.providers()
	v.models()
	v.chains()
	v.roles()
	v.limits()
	v.edges()
	v.breakers()
	v.tools()
	v.mcp()
	v.hooks()
	v.attachments()
	v.people()
	v.cluster()
	sort.SliceStable(v.errs, func(i, j int) bool {
		a, b := v.errs[i].Line, v.errs[j].Line
		return a != 0 && (b == 0 || a < b) // known lines in file order, unknown last
	})
	return result(v.errs)
}

type validator struct {
	c    *Config
	errs []*Error
}

func (v *validator) fail(field, format string, args ...any) {
	file := v.c.file
	if file == "" {
		file = DefaultFile
	}
	v.errs = append(v.errs, &Error{File: file, Line: v.c.line(field), Field: field, Msg: fmt.Sprintf(format, args...)})
}

// line finds the line of field, or of its nearest parent that was in the
// file (a defaulted key has no line of its own).
func (c *Config) line(field string) int {
	for field != "" {
		if l, ok := c.lines[field]; ok {
			return l
		}
		i := strings.LastIndexAny(field, ".[")
		if i < 0 {
			break
		}
		field = field[:i]
	}
	return 0
}

func (v *validator) top() {
	c := v.c
	if host, port, err := net.SplitHostPort(c.Listen); err != nil {
		v.fail("listen", "want host:port such as 127.0.0.1:8765, not %s", show(c.Listen))
	} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 || strings.HasPrefix(port, "+") {
		v.fail("listen", "the port must be a number from 0 to 65535, not %s", show(port))
	} else if strings.ContainsAny(host, " /") {
		v.fail("listen", "want host:port such as 127.0.0.1:8765, not %s", show(c.Listen))
	}
	switch {
	case c.DataDir == "":
		v.fail("data_dir", "required: the folder for the database and the token, such as ./data")
	case strings.ContainsRune(c.DataDir, 0):
		v.fail("data_dir", "contains a NUL byte")
	}
}

func (v *validator) auth() {
	a := v.c.Auth
	v.envName("auth.token_env", a.TokenEnv, false)
	for i, o := range a.AllowedOrigins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			v.fail(fmt.Sprintf("auth.allowed_origins[%d]", i), "want an origin scheme://host[:port] such as https://chat.example.com, without path, not %s", show(o))
		}
	}
}

func (v *validator) telegram() {
	t := v.c.Telegram
	if t.Mode != ModePolling && t.Mode != ModeWebhook {
		v.fail("telegram.mode", "want polling or webhook, not %s", show(t.Mode))
	}
	v.envName("telegram.token_env", t.TokenEnv, t.Enabled)
	if strings.Count(t.APIEndpoint, "%s") != 2 || strings.Count(t.APIEndpoint, "%") != 2 {
		v.fail("telegram.api_endpoint", "want a URL with exactly two %%s, the token then the method, such as https://api.telegram.org/bot%%s/%%s, and no other %%")
	} else if !httpURL(fmt.Sprintf(t.APIEndpoint, "TOKEN", "getMe")) {
		v.fail("telegram.api_endpoint", "want an http or https URL such as https://api.telegram.org/bot%%s/%%s")
	}
	for i, id := range t.AllowedUsers {
		if id <= 0 {
			v.fail(fmt.Sprintf("telegram.allowed_users[%d]", i), "want a Telegram user id (a positive number), not %d", id)
		}
	}
	if t.Enabled && t.Mode == ModeWebhook {
		if u, err := url.Parse(t.WebhookURL); err != nil || u.Scheme != "https" || u.Host == "" {
			v.fail("telegram.webhook_url", "webhook mode needs the public https URL Telegram posts to, such as https://bot.example.com/telegram/webhook")
		}
	}
	if p := t.WebhookPath; p != "" && (!strings.HasPrefix(p, "/") || strings.HasPrefix(p, "/api/") || p == "/" || p == "/ws") {
		v.fail("telegram.webhook_path", "want a path of its own such as /telegram/webhook, not %s", show(p))
	}
	v.envName("telegram.webhook_secret_env", t.WebhookSecretEnv, false)
}

func (v *validator) providers() {
	seen := map[string]int{}
	for i, p := range v.c.Providers {
		at := fmt.Sprintf("providers[%d]", i)
		if v.name(at+".name", p.Name) {
			if j, dup := seen[p.Name]; dup {
				v.fail(at+".name", "%s is already the name of providers[%d]", show(p.Name), j)
			} else {
				seen[p.Name] = i
			}
		}
		switch p.Kind {
		case KindBuiltin:
			if p.BaseURL != "" {
				v.fail(at+".base_url", "the builtin provider takes no base_url")
			}
			if p.APIKeyEnv != "" {
				v.fail(at+".api_key_env", "the builtin provider takes no key")
			}
		case KindOpenAI, KindGemini, KindAnthropic:
			v.baseURL(at+".base_url", p.BaseURL)
			v.envName(at+".api_key_env", p.APIKeyEnv, false)
			if p.Delay != nil {
				v.fail(at+".delay", "only the builtin provider has a delay")
			}
		case "":
			v.fail(at+".kind", "required: builtin, openai, gemini or anthropic")
		default:
			v.fail(at+".kind", "want builtin, openai, gemini or anthropic, not %s", show(p.Kind))
		}
		if p.Timeout < 0 {
			v.fail(at+".timeout", "must not be negative")
		}
		if p.Delay != nil && *p.Delay < 0 {
			v.fail(at+".delay", "must not be negative")
		}
	}
}

// baseURL checks an API root. The value is never echoed: a URL may carry a
// key in its query or user info, which is exactly what is refused here.
func (v *validator) baseURL(field, s string) {
	if s == "" {
		v.fail(field, "required: the API root such as https://api.openai.com/v1")
		return
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || !httpURL(s):
		v.fail(field, "want an http or https URL such as https://api.openai.com/v1 or http://127.0.0.1:11434/v1")
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		v.fail(field, "must be a plain URL without user info, query or fragment; put a key in api_key_env (name the environment variable, not the secret)")
	}
}

func (v *validator) models() {
	providers := map[string]bool{}
	var provNames []string
	for _, p := range v.c.Providers {
		providers[p.Name] = true
		provNames = append(provNames, p.Name)
	}
	seen := map[string]int{}
	for i, m := range v.c.Models {
		at := fmt.Sprintf("models[%d]", i)
		if v.name(at+".name", m.Name) {
			if j, dup := seen[m.Name]; dup {
				v.fail(at+".name", "%s is already the name of models[%d]", show(m.Name), j)
			} else {
				seen[m.Name] = i
			}
		}
		switch {
		case m.Provider == "":
			v.fail(at+".provider", "required: the name of one of providers (%s)", list(provNames))
		case !providers[m.Provider]:
			v.fail(at+".provider", "no provider named %s (providers: %s)", show(m.Provider), list(provNames))
		}
		if strings.TrimSpace(m.Model) == "" {
			v.fail(at+".model", "required: the provider's own name of the model, such as gpt-4o-mini")
		}
		windowOK := m.Window > 0 && m.Window <= maxTokens
		if !windowOK {
			v.fail(at+".window", "want the model's context window in tokens, a number from 1 to %d", maxTokens)
		}
		if n, err := ParseContextLimit(m.ContextLimit); err != nil {
			v.fail(at+".context_limit", "%v, not %s", err, show(m.ContextLimit))
		} else if windowOK && n > m.Window {
			v.fail(at+".context_limit", "%d tokens is above the window of %d", n, m.Window)
		}
		if m.MaxOutput < 0 || (windowOK && m.MaxOutput >= m.Window) {
			v.fail(at+".max_output", "want 0 (the response reserve) or a number of tokens below the window")
		}
		soft, hard := m.Compaction.SoftRatio, m.Compaction.HardRatio
		softOK, hardOK := ratio(soft), ratio(hard)
		if !softOK {
			v.fail(at+".compaction.soft_ratio", "want a share of the window above 0 and at most 1, such as 0.20, not %g", soft)
		}
		if !hardOK {
			v.fail(at+".compaction.hard_ratio", "want a share of the window above 0 and at most 1, such as 0.25, not %g", hard)
		}
		if softOK && hardOK && soft >= hard {
			v.fail(at+".compaction.soft_ratio", "%g must be below hard_ratio %g: the warning comes before the boundary", soft, hard)
		}
		if b := m.Boundary.ContinuityBudgetTokens; b <= 0 || (windowOK && b >= m.Window) {
			v.fail(at+".boundary.continuity_budget_tokens", "want a number of tokens above 0 and below the window, such as 8000")
		}
		for _, p := range []struct {
			key string
			val float64
		}{{"input", m.Prices.Input}, {"cached_input", m.Prices.CachedInput}, {"output", m.Prices.Output}} {
			if !(p.val >= 0 && p.val < maxPrice) {
				v.fail(at+".prices."+p.key, "want a price per million tokens from 0 to %g, such as 2.5, not %g", float64(maxPrice), p.val)
			}
		}
	}
}

// ratio reports whether r is in (0, 1]; NaN is not.
func ratio(r float64) bool { return r > 0 && r <= 1 }

func (v *validator) chains() {
	models := map[string]bool{}
	var modelNames []string
	for _, m := range v.c.Models {
		models[m.Name] = true
		modelNames = append(modelNames, m.Name)
	}
	if len(v.c.Chains) == 0 {
		v.fail("chains", "want at least one chain, such as default: [default]")
		return
	}
	names := make([]string, 0, len(v.c.Chains))
	for name := range v.c.Chains {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		at := join("chains", name)
		v.name(at, name)
		chain := v.c.Chains[name]
		if len(chain) == 0 {
			v.fail(at, "empty chain; list the models to try in order, such as [default]")
		}
		seen := map[string]int{}
		for i, m := range chain {
			item := fmt.Sprintf("%s[%d]", at, i)
			if j, dup := seen[m]; dup {
				v.fail(item, "%s is already %s[%d]", show(m), at, j)
				continue
			}
			seen[m] = i
			if !models[m] {
				v.fail(item, "no model named %s (models: %s)", show(m), list(modelNames))
			}
		}
	}
}

func (v *validator) roles() {
	var names []string
	for name := range v.c.Chains {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, r := range []struct{ field, chain string }{
		{"roles.chat", v.c.Roles.Chat},
		{"roles.reflect", v.c.Roles.Reflect},
	} {
		if r.chain == "" {
			v.fail(r.field, "required: the name of one of chains (%s)", list(names))
		} else if _, ok := v.c.Chains[r.chain]; !ok {
			v.fail(r.field, "no chain named %s (chains: %s)", show(r.chain), list(names))
		}
	}
	v.transcribe(names)
}

// transcribe checks roles.transcribe: optional, but when set a chain whose
// every model is served by an OpenAI-compatible provider, the only kind
// with an /audio/transcriptions endpoint.
func (v *validator) transcribe(chains []string) {
	name := v.c.Roles.Transcribe
	if name == "" {
		return
	}
	chain, ok := v.c.Chains[name]
	if !ok {
		v.fail("roles.transcribe", "no chain named %s (chains: %s)", show(name), list(chains))
		return
	}
	kinds := map[string]string{}
	for _, p := range v.c.Providers {
		kinds[p.Name] = p.Kind
	}
	for _, mn := range chain {
		for _, m := range v.c.Models {
			if m.Name == mn && kinds[m.Provider] != "openai" && kinds[m.Provider] != "" {
				v.fail("roles.transcribe", "model %s of chain %s is served by %s of kind %s; transcription needs an OpenAI-compatible provider (kind openai) with /audio/transcriptions",
					show(mn), show(name), show(m.Provider), kinds[m.Provider])
			}
		}
	}
}

func (v *validator) limits() {
	l := v.c.Limits
	if l.ProviderConcurrency <= 0 {
		v.fail("limits.provider_concurrency", "must be above 0")
	}
	if l.ChatIdle <= 0 {
		v.fail("limits.chat_idle", "must be above 0, such as 2m")
	}
	if l.SocketBuffer <= 0 {
		v.fail("limits.socket_buffer", "must be above 0")
	}
	if l.TurnTimeout <= 0 {
		v.fail("limits.turn_timeout", "must be above 0, such as 10m")
	}
	for _, b := range []struct {
		key string
		val float64
	}{{"daily_budget", l.DailyBudget}, {"chat_daily_budget", l.ChatDailyBudget}} {
		if !(b.val >= 0 && b.val < maxPrice) {
			v.fail("limits."+b.key, "want 0 (no limit) or an amount to spend per UTC day, such as 5, not %g", b.val)
		}
	}
}

// maxPrice bounds prices and budgets: a larger number is a typo, and NaN or
// infinity would make every sum meaningless.
const maxPrice = 1e9

// maxAttachmentBytes caps each attachment limit: past 2 GiB a file is not
// an attachment, and one upload must not fill the data dir's disk.
const maxAttachmentBytes = 2 << 30

func (v *validator) attachments() {
	a := v.c.Attachments
	for _, f := range []struct {
		field string
		n     int64
	}{
		{"attachments.max_image_bytes", a.MaxImageBytes},
		{"attachments.max_document_bytes", a.MaxDocumentBytes},
		{"attachments.max_audio_bytes", a.MaxAudioBytes},
	} {
		if f.n <= 0 || f.n > maxAttachmentBytes {
			v.fail(f.field, "must be a byte count from 1 to %d (2 GiB), such as 20971520 for 20 MB", int64(maxAttachmentBytes))
		}
	}
	if a.UnreferencedTTL < time.Minute {
		v.fail("attachments.unreferenced_ttl", "must be at least 1m, such as 24h: an upload must outlive the send that names it")
	}
}

func (v *validator) breakers() {
	c := v.c
	if c.BreakerHistoryDays <= 0 {
		v.fail("breaker_history_days", "must be above 0")
	}
	if c.BreakerHistoryMax <= 0 {
		v.fail("breaker_history_max", "must be above 0")
	}
	if _, err := cron.ParseStandard(c.BreakerPruneSchedule); err != nil {
		v.fail("breaker_prune_schedule", "want a robfig/cron schedule such as \"@every 1h\" or \"0 3 * * *\": %v", err)
	}
}

// minOutputLimit keeps a preview of a long tool result (its head, its tail
// and the line naming the handle) readable.
const minOutputLimit = 500

func (v *validator) tools() {
	t := v.c.Tools
	if strings.ContainsRune(t.Workspace, 0) {
		v.fail("tools.workspace", "contains a NUL byte")
	}
	p := t.Policies
	for _, f := range []struct{ field, policy string }{
		{"read_file", p.ReadFile}, {"write_file", p.WriteFile}, {"edit_file", p.EditFile},
		{"list_dir", p.ListDir}, {"shell", p.Shell}, {"send_file", p.SendFile},
	} {
		switch f.policy {
		case PolicyAllow, PolicyAsk, PolicyDeny:
		default:
			v.fail("tools.policies."+f.field, "want allow, ask or deny, not %s", show(f.policy))
		}
	}
	if t.ShellTimeout <= 0 {
		v.fail("tools.shell_timeout", "must be above 0, such as 2m")
	}
	if t.OutputLimit < minOutputLimit || t.OutputLimit > maxTokens {
		v.fail("tools.output_limit", "want a number of characters from %d to %d, such as 16000", minOutputLimit, maxTokens)
	}
}

// hookMatchValues are what a matcher may name per event. SessionStart takes
// Claude Code's sources so its settings carry over, but Mirror fires only
// compact, so a matcher without it is refused as never matching.
var hookMatchValues = map[string][]string{
	HookPreCompact:   {TriggerAuto, TriggerManual},
	HookPostCompact:  {TriggerAuto, TriggerManual},
	HookSessionStart: {SourceCompact, "startup", "resume", "clear"},
}

func (v *validator) hooks() {
	for _, ev := range v.c.Hooks.Events() {
		for i, h := range ev.Hooks {
			at := fmt.Sprintf("hooks.%s[%d]", ev.Name, i)
			// The command is never echoed: it may carry what logs must not.
			switch {
			case strings.TrimSpace(h.Command) == "":
				v.fail(at+".command", "required: a shell command run with /bin/sh -c in this file's folder, such as ./hooks/keep-plan.sh")
			case strings.ContainsRune(h.Command, 0):
				v.fail(at+".command", "contains a NUL byte")
			}
			if h.Timeout <= 0 || h.Timeout > MaxHookTimeout {
				v.fail(at+".timeout", "want a duration above 0 and at most 10m, such as 10s; leave it out for 60s")
			}
			v.matcher(at+".matcher", ev.Name, h)
		}
	}
}

// matcher checks a hook's matcher: "", * or known values joined with |.
func (v *validator) matcher(field, event string, h Hook) {
	if h.Matcher == "" || h.Matcher == "*" {
		return
	}
	known := hookMatchValues[event]
	want := fmt.Sprintf("want %s, alternatives joined with | or \"\" for all", strings.Join(known, ", "))
	for _, alt := range strings.Split(h.Matcher, "|") {
		if !slices.Contains(known, strings.TrimSpace(alt)) {
			v.fail(field, "%s, not %s", want, show(h.Matcher))
			return
		}
	}
	if event == HookSessionStart && !h.Matches(SourceCompact) {
		v.fail(field, "%s never matches: Mirror fires SessionStart only after a checkpoint, with source compact", show(h.Matcher))
	}
}

// name checks a name chains and roles refer to; it reports whether it is good.
func (v *validator) name(field, s string) bool {
	switch {
	case s == "":
		v.fail(field, "required")
	case !nameRE.MatchString(s):
		v.fail(field, "want a name of letters, digits, '.', '_' and '-' (at most 64), not %s", show(s))
	default:
		return true
	}
	return false
}

var nameRE = form{regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`), 64}

// envName checks a *_env key. Its value is never echoed: a value that is not
// a variable name is most likely the secret itself, pasted in the wrong place.
func (v *validator) envName(field, s string, required bool) {
	if s == "" {
		if required {
			v.fail(field, "required: the name of the environment variable holding the secret")
		}
		return
	}
	if !envRE.MatchString(s) || looksSecret(s) {
		v.fail(field, "want the name of an environment variable, such as OPENAI_API_KEY (letters, digits and _); name the environment variable, not the secret")
	}
}

var envRE = form{regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`), 128}

// plainWord is a key or value that is safe and unambiguous to print bare.
func plainWord(s string) bool { return wordRE.MatchString(s) }

var wordRE = form{regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`), 40}

// form is a name's form: the regexp of its characters and its most bytes.
// The length is checked apart: a counted repetition such as {0,127}
// compiles into a program of that many steps, and the four of this
// package took 2.5 ms of every start of every mirror command.
type form struct {
	re  *regexp.Regexp
	max int
}

// MatchString reports whether s has the form.
func (f form) MatchString(s string) bool { return len(s) <= f.max && f.re.MatchString(s) }

// secretPrefixes start well-known API keys and tokens (case matters: HF_TOKEN
// is a variable name, hf_... a token).
var secretPrefixes = []string{"sk-", "sk_", "AIza", "ghp_", "gho_", "ghs_", "github_pat_", "glpat-", "xoxb-", "xoxp-", "hf_", "Bearer "}

// looksSecret guesses whether s is a secret rather than a name: a known key
// prefix, a Telegram bot token's digits:..., or a long run of mixed-case
// letters and digits with no underscore, which names almost never are.
func looksSecret(s string) bool {
	for _, p := range secretPrefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	if i := strings.IndexByte(s, ':'); i > 0 && strings.Trim(s[:i], "0123456789") == "" {
		return true
	}
	var lower, upper, digit bool
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z':
			lower = true
		case r >= 'A' && r <= 'Z':
			upper = true
		case r >= '0' && r <= '9':
			digit = true
		}
	}
	return len(s) >= 24 && lower && upper && digit && !strings.Contains(s, "_")
}

// secretKey reports whether an unknown key's name says it holds a secret.
func secretKey(key string) bool {
	k := strings.ToLower(strings.ReplaceAll(key, "-", "_"))
	switch k {
	case "key", "apikey", "token", "secret", "password", "passwd", "credentials", "auth_token", "bearer":
		return true
	}
	for _, suf := range []string{"_key", "_token", "_secret", "_password", "apikey"} {
		if strings.HasSuffix(k, suf) {
			return true
		}
	}
	return false
}

// show quotes a value for an error message, unless it may be a secret or is
// too long to be useful.
func show(s string) string {
	if len(s) > 64 || looksSecret(s) || strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return "(value not shown)"
	}
	return strconv.Quote(s)
}

func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = n
		if !nameRE.MatchString(n) {
			out[i] = show(n)
		}
	}
	return strings.Join(out, ", ")
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
