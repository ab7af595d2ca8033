// Package anthropic is the provider for Anthropic's Messages API. It
// streams POST /messages over SSE, maps Mirror's messages to a top-level
// system prompt, content blocks, tool_use and tool_result, assembles text and
// tool calls from content_block_* events (tool input from input_json_delta
// pieces), reads the usage with its cache counts, and maps failures into
// provider.Error classes. Rate-limit headers (anthropic-ratelimit-*) are
// read on every response. The API key is sent only in the x-api-key header
// and is redacted from every error.
package anthropic

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// Defaults applied when Config leaves a field zero.
const (
	DefaultBaseURL = "https://api.anthropic.com/v1"
	DefaultVersion = "2023-06-01"
	// DefaultMaxTokens is sent when the request sets no cap, because
	// Anthropic requires max_tokens. Every current model accepts it.
	DefaultMaxTokens = 4096
	// DefaultIdleTimeout bounds the silence between two reads of a stream.
	// Anthropic pings during long thinking, so silence this long means a
	// half-open connection.
	DefaultIdleTimeout = 10 * time.Minute
)

// Config configures a Client.
type Config struct {
	// Name is the provider's name in config, used in errors.
	Name string
	// BaseURL is the API root; requests go to BaseURL + "/messages".
	BaseURL string
	// APIKey is sent in the x-api-key header.
	APIKey string
	// HTTPClient sends the requests. nil uses provider.NewHTTPClient.
	HTTPClient *http.Client
	// HeaderTimeout is the response-header timeout of the default client
	// (ignored when HTTPClient is set); 0 means provider.DefaultHeaderTimeout.
	HeaderTimeout time.Duration
	// IdleTimeout ends a stream that sends nothing for this long as a
	// network error; 0 means DefaultIdleTimeout, negative disables it.
	IdleTimeout time.Duration
	// Version is the anthropic-version header; "" means DefaultVersion.
	Version string
}

// Client streams Claude answers. It is safe for concurrent use.
type Client struct {
	name    string
	url     string
	key     string
	version string
	hc      *http.Client
	idle    time.Duration
}

// New returns a client for cfg.
func New(cfg Config) *Client {
	base := strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/")
	if base == "" {
		base = DefaultBaseURL
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = provider.NewHTTPClient(cfg.HeaderTimeout)
	}
	idle := cfg.IdleTimeout
	if idle == 0 {
		idle = DefaultIdleTimeout
	}
	name := cfg.Name
	if name == "" {
		name = "anthropic"
	}
	version := cfg.Version
	if version == "" {
		version = DefaultVersion
	}
	return &Client{name: name, url: base + "/messages", key: cfg.APIKey, version: version, hc: hc, idle: idle}
}

// Fingerprint identifies the client's key for quota accounting (see
// provider.Fingerprint).
func (c *Client) Fingerprint() string { return provider.Fingerprint(c.key) }

// Stream sends req and streams the answer. Text goes to emit as it arrives;
// tool calls are returned whole in the Result. On failure the Result holds
// the text received so far (never half-assembled tool calls) and the error
// is a *provider.Error, ctx's error (wrapped) or emit's error.
func (c *Client) Stream(ctx context.Context, req provider.Request, emit func(provider.Delta) error) (provider.Result, error) {
	body, err := encodeRequest(req)
	if err != nil {
		return provider.Result{}, provider.LocalError(c.name, c.key, err.Error())
	}
	h := http.Header{}
	h.Set("anthropic-version", c.version)
	if c.key != "" {
		h.Set("x-api-key", c.key)
	}
	resp, err := c.poster().Post(ctx, c.url, h, body)
	if err != nil {
		return provider.Result{}, err
	}
	defer resp.Close()
	var st stream
	err = st.read(resp.Body, emit)
	res := st.result()
	res.Limits = provider.ParseRateLimits(resp.Header, resp.At)
	end := provider.StreamEnd{Name: c.name, Key: c.key, Idle: c.idle, Missing: "message_stop or a stop reason",
		BodyError: func(b []byte) error { return c.bodyError(0, nil, b, resp.At) }}
	res.Model = provider.CleanID(res.Model, c.key)
	return resp.Tag(end.Finish(ctx, resp.Ctx, res, st.complete(), err))
}

func (c *Client) poster() provider.Poster {
	return provider.Poster{Name: c.name, Key: c.key, Client: c.hc, Idle: c.idle,
		Refusal: func(status int, h http.Header, raw []byte, at time.Time) error {
			return c.bodyError(status, h, raw, at)
		}}
}
