// Package gemini is the provider for Google's Gemini API
// (generativelanguage.googleapis.com, v1beta). It streams
// models/{model}:streamGenerateContent over SSE, maps Mirror's messages to
// systemInstruction, contents and function declarations, assembles text and
// function calls, reads usageMetadata, and maps failures into
// provider.Error classes. Structured 429s (google.rpc.QuotaFailure and
// RetryInfo) become a provider.QuotaInfo so a quota learner can respect
// the key's input-token minute quota; daily and zero quotas fail at once.
// The API key is sent only in the x-goog-api-key header, never in the URL,
// and is redacted from every error.
package gemini

import (
	"context"
	"crypto/sha256"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// DefaultBaseURL is used when Config.BaseURL is empty.
const DefaultBaseURL = "https://generativelanguage.googleapis.com/v1beta"

// DefaultIdleTimeout bounds the silence between two reads of a stream, so a
// half-open connection does not hang a chat forever. Thinking models can
// think for minutes before their first chunk.
const DefaultIdleTimeout = 10 * time.Minute

// Config configures a Client.
type Config struct {
	// Name is the provider's name in config, used in errors.
	Name string
	// BaseURL is the API root; requests go to
	// BaseURL + "/models/{model}:streamGenerateContent?alt=sse".
	BaseURL string
	// APIKey is sent in the x-goog-api-key header.
	APIKey string
	// HTTPClient sends the requests. nil uses provider.NewHTTPClient
	// (no overall timeout, since a stream may last minutes).
	HTTPClient *http.Client
	// HeaderTimeout is the response-header timeout of the default client
	// (ignored when HTTPClient is set); 0 means provider.DefaultHeaderTimeout.
	HeaderTimeout time.Duration
	// IdleTimeout ends a stream that sends nothing for this long as a
	// network error; 0 means DefaultIdleTimeout, negative disables it.
	IdleTimeout time.Duration
}

// Client streams Gemini answers. It is safe for concurrent use.
type Client struct {
	name string
	base string
	key  string
	hc   *http.Client
	idle time.Duration
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
		name = "gemini"
	}
	return &Client{name: name, base: base, key: cfg.APIKey, hc: hc, idle: idle}
}

// Fingerprint identifies the client's key for quota accounting (see
// provider.Fingerprint).
func (c *Client) Fingerprint() string { return provider.Fingerprint(c.key) }

// Stream sends req and streams the answer. Text goes to emit as it arrives;
// function calls are returned whole in the Result. On failure the Result
// holds the text received so far (never tool calls) and the error is a
// *provider.Error, ctx's error (wrapped) or emit's error.
func (c *Client) Stream(ctx context.Context, req provider.Request, emit func(provider.Delta) error) (provider.Result, error) {
	model := strings.TrimPrefix(strings.TrimSpace(req.Model), "models/")
	if model == "" {
		return provider.Result{}, provider.LocalError(c.name, c.key, "request names no model")
	}
	body, err := encodeRequest(req)
	if err != nil {
		return provider.Result{}, provider.LocalError(c.name, c.key, err.Error())
	}
	h := http.Header{}
	if c.key != "" {
		h.Set("x-goog-api-key", c.key)
	}
	resp, err := c.poster().Post(ctx, c.base+"/models/"+url.PathEscape(model)+":streamGenerateContent?alt=sse", h, body)
	if err != nil {
		return provider.Result{}, err
	}
	defer resp.Close()
	// The request's hash seeds the ids of calls Gemini sends without one:
	// the same request and answer give the same ids, different turns give
	// different ones.
	st := stream{seed: sha256.Sum256(body)}
	err = st.read(resp.Body, emit)
	res := st.result()
	res.Limits = provider.ParseRateLimits(resp.Header, resp.At)
	end := provider.StreamEnd{Name: c.name, Key: c.key, Idle: c.idle, Missing: "a finish reason",
		BodyError: func(b []byte) error { return c.bodyError(0, nil, b, resp.At) }}
	// Gemini names a request by its responseId, in the body.
	res.Model, res.RequestID = provider.CleanID(res.Model, c.key), provider.CleanID(res.RequestID, c.key)
	return resp.Tag(end.Finish(ctx, resp.Ctx, res, st.complete(), err))
}

func (c *Client) poster() provider.Poster {
	return provider.Poster{Name: c.name, Key: c.key, Client: c.hc, Idle: c.idle,
		Refusal: func(status int, h http.Header, raw []byte, at time.Time) error {
			return c.bodyError(status, h, raw, at)
		}}
}
