// Package openai is the provider for OpenAI's Chat Completions API and the
// servers that speak it (Ollama, llama.cpp, vLLM, OpenRouter, ...). It
// streams over SSE, assembles text and tool calls, reads the usage the
// server reports, and maps failures into provider.Error classes. The API key
// is sent only in the Authorization header and is redacted from every error.
package openai

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// DefaultBaseURL is used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.openai.com/v1"

// Defaults of the timeouts a Client applies when Config leaves them zero.
const (
	// DefaultHeaderTimeout bounds the wait for response headers. It is long
	// because local servers answer only after loading the model and reading
	// the whole prompt.
	DefaultHeaderTimeout = 3 * time.Minute
	// DefaultIdleTimeout bounds the silence between two reads of a stream,
	// so a half-open connection does not hang a chat forever. Reasoning
	// models can think for minutes before their first token.
	DefaultIdleTimeout = 10 * time.Minute
)

// Config configures a Client.
type Config struct {
	// Name is the provider's name in config, used in errors.
	Name string
	// BaseURL is the API root, e.g. https://api.openai.com/v1 or
	// http://127.0.0.1:11434/v1; requests go to BaseURL + "/chat/completions".
	BaseURL string
	// APIKey is sent as a bearer token. Empty sends no Authorization header
	// (Ollama, llama.cpp and vLLM need none).
	APIKey string
	// HTTPClient sends the requests. nil uses a client with dial, TLS and
	// response-header timeouts but no overall timeout, since a stream may
	// last minutes. A client with Timeout set cuts long answers short.
	HTTPClient *http.Client
	// HeaderTimeout is the response-header timeout of the default client
	// (ignored when HTTPClient is set); 0 means DefaultHeaderTimeout.
	HeaderTimeout time.Duration
	// IdleTimeout ends a stream that sends nothing for this long as a
	// network error; 0 means DefaultIdleTimeout, negative disables it.
	IdleTimeout time.Duration
}

// Client streams chat completions. It is safe for concurrent use.
type Client struct {
	name string
	url  string
	key  string
	hc   *http.Client
	idle time.Duration
	// official says the endpoint is OpenAI's own API, where every model
	// takes max_completion_tokens (see capField).
	official bool
	// enc keeps the encoded messages of recent requests (encCache).
	enc *encCache
	// header is what every request sends besides its body's type (the
	// key), built once; it is only read.
	header http.Header
}

// New returns a client for cfg.
func New(cfg Config) *Client {
	base := strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/")
	if base == "" {
		base = DefaultBaseURL
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = DefaultHTTPClient(cfg.HeaderTimeout)
	}
	idle := cfg.IdleTimeout
	if idle == 0 {
		idle = DefaultIdleTimeout
	}
	name := cfg.Name
	if name == "" {
		name = "openai"
	}
	h := http.Header{}
	if cfg.APIKey != "" {
		h.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	return &Client{name: name, url: base + "/chat/completions", key: cfg.APIKey, hc: hc, idle: idle, official: isOfficial(base), enc: newEncCache(), header: h}
}

// DefaultHTTPClient returns the client New uses when Config.HTTPClient is nil:
// bounded dial, TLS handshake and response-header waits (headerTimeout, or
// DefaultHeaderTimeout when 0), the environment's proxy, and no overall
// timeout.
func DefaultHTTPClient(headerTimeout time.Duration) *http.Client {
	if headerTimeout <= 0 {
		headerTimeout = DefaultHeaderTimeout
	}
	return provider.NewHTTPClient(headerTimeout)
}

// Forget lets go of what the client keeps of past requests (the encoded
// messages and each conversation's last request: up to tens of MiB after a
// load). The gateway calls it once it has gone quiet, with the chats it
// sheds; the next request of a conversation encodes its history afresh.
func (c *Client) Forget() { c.enc.forget() }

// Stream sends req and streams the answer. Text goes to emit as it arrives;
// tool calls are returned whole in the Result. On failure the Result holds
// the text received so far (never half-assembled tool calls) and the error is
// a *provider.Error, ctx's error (wrapped) or emit's error.
func (c *Client) Stream(ctx context.Context, req provider.Request, emit func(provider.Delta) error) (provider.Result, error) {
	// The request is built in a pooled buffer, which PostBody gives back
	// once the transport is done with it.
	body := provider.NewBody()
	if _, err := encodeRequestInto(body.Buffer(), req, c.official, c.enc); err != nil {
		body.Release()
		return provider.Result{}, provider.LocalError(c.name, c.key, err.Error())
	}
	p := provider.Poster{Name: c.name, Key: c.key, Client: c.hc, Idle: c.idle,
		Refusal: func(status int, h http.Header, raw []byte, _ time.Time) error { return c.bodyError(status, h, raw) }}
	resp, err := p.PostBody(ctx, c.url, c.header, body)
	if err != nil {
		return provider.Result{}, err
	}
	defer resp.Close()

	// A server that ignores stream:true sends one JSON completion. Decide by
	// the first byte rather than Content-Type, which some servers get wrong:
	// an SSE stream never starts with '{'.
	br := peekReaders.Get().(*bufio.Reader)
	br.Reset(resp.Body)
	defer func() { br.Reset(nil); peekReaders.Put(br) }()
	limits := provider.ParseRateLimits(resp.Header, resp.At)
	if startsWithBrace(br) {
		res, err := c.readWhole(ctx, resp.Ctx, br, emit)
		if err == nil {
			res.Limits = limits
		}
		return resp.Tag(res, err)
	}

	var st stream
	err = st.read(br, emit)
	res := st.result()
	res.Limits = limits
	end := provider.StreamEnd{Name: c.name, Key: c.key, Idle: c.idle, Missing: "[DONE] or a finish reason",
		BodyError: func(b []byte) error { return c.bodyError(0, nil, b) }}
	res.Model = provider.CleanID(res.Model, c.key)
	return resp.Tag(end.Finish(ctx, resp.Ctx, res, st.complete(), err))
}

// peekReaders are the readers Stream peeks at a reply's start through, 4
// KiB each: enough to peek at the start, and the SSE reader has its own
// buffer (a bigger one here was 64 KiB more garbage per turn, and a new
// one each turn still 4 KiB).
var peekReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}

// readWhole handles a non-streamed JSON completion (or error) body.
func (c *Client) readWhole(ctx, rctx context.Context, r io.Reader, emit func(provider.Delta) error) (provider.Result, error) {
	raw, err := provider.ReadCapped(r, maxLine, c.key)
	if err != nil {
		if ctx.Err() != nil {
			return provider.Result{}, fmt.Errorf("%s: %w", c.name, ctx.Err())
		}
		if errors.Is(context.Cause(rctx), provider.ErrIdle) {
			return provider.Result{}, &provider.Error{Provider: c.name, Class: provider.ClassNetwork,
				Message: fmt.Sprintf("stream broke mid-reply: nothing received for %s", c.idle)}
		}
		return provider.Result{}, provider.NetworkError(c.name, c.key, err, "reading reply: ")
	}
	var whole struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Content   *string        `json:"content"`
				ToolCalls []wireToolCall `json:"tool_calls"`
			} `json:"message"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *wireUsage      `json:"usage"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(raw, &whole); err != nil {
		return provider.Result{}, &provider.Error{Provider: c.name, Class: provider.ClassServer,
			Message: "reply is not a chat completion: " + snippet(raw, c.key)}
	}
	if len(whole.Error) > 0 && string(whole.Error) != "null" {
		return provider.Result{}, c.bodyError(0, nil, raw)
	}
	if len(whole.Choices) == 0 {
		return provider.Result{}, &provider.Error{Provider: c.name, Class: provider.ClassServer, Message: "reply has no choices"}
	}
	ch := whole.Choices[0]
	var res provider.Result
	if ch.Message.Content != nil {
		res.Text = *ch.Message.Content
	}
	for _, tc := range ch.Message.ToolCalls {
		res.ToolCalls = append(res.ToolCalls, provider.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	if ch.FinishReason != nil {
		res.FinishReason = *ch.FinishReason
	}
	res.Usage = whole.Usage.usage()
	res.Model = provider.CleanID(whole.Model, c.key)
	if res.Text != "" {
		if err := emit(provider.Delta{Text: res.Text}); err != nil {
			return provider.Result{}, err
		}
	}
	return res, nil
}

// startsWithBrace reports whether the first non-blank byte of br is '{',
// without consuming anything.
func startsWithBrace(br *bufio.Reader) bool {
	for n := 1; n <= 512; n++ {
		b, err := br.Peek(n)
		if len(b) < n || err != nil {
			return false
		}
		switch b[n-1] {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return true
		}
		return false
	}
	return false
}
