package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/mirror-gateway/mirror/runtime/provider/sse"
)

// MaxErrorBody bounds how much of an error response is read.
const MaxErrorBody = 64 << 10

// Poster sends one streaming request the way every HTTP adapter does: a
// JSON POST asking for an event stream, transport failures classified as
// network errors with the key redacted, an idle watchdog on the body, and
// a refusal (non-2xx) read in part and mapped by the adapter.
type Poster struct {
	Name   string // the provider's name in config, for errors
	Key    string // redacted from every error
	Client *http.Client
	Idle   time.Duration // silence that ends a stream; <= 0: none
	// Refusal maps a non-2xx answer (status, headers, the start of the
	// body, when the headers arrived) to the provider's error.
	Refusal func(status int, h http.Header, raw []byte, at time.Time) error
}

// Response is an answer that started (its status was 2xx).
type Response struct {
	*http.Response
	// Body is the response body behind the idle watchdog.
	Body io.Reader
	// At is when the headers arrived, for rate-limit reset times.
	At time.Time
	// Ctx is the request's context; the watchdog cancels it with ErrIdle,
	// which StreamEnd.Finish tells from the caller's cancellation.
	Ctx context.Context
	// RequestID is the provider's id of the request (see RequestID).
	RequestID string
	stop      func()
}

// Tag names the request on what Stream returns: res's RequestID, or the
// RequestID of a provider error the stream ended with, when the adapter
// set none.
func (r *Response) Tag(res Result, err error) (Result, error) {
	if res.RequestID == "" {
		res.RequestID = r.RequestID
	}
	var pe *Error
	if errors.As(err, &pe) && pe.RequestID == "" {
		pe.RequestID = r.RequestID
	}
	return res, err
}

// Close releases the response: the watchdog, the body, the request.
func (r *Response) Close() { r.stop() }

// Post sends body to url with header (besides Content-Type and Accept).
// The error is ctx's error (wrapped), a network *Error, or the adapter's
// refusal; a *Response must be closed.
func (p Poster) Post(ctx context.Context, url string, header http.Header, body []byte) (*Response, error) {
	return p.post(ctx, url, header, body, nil)
}

// PostBody is Post with a pooled body, whose hold it takes over: the
// buffer returns to the pool once the client and every body reader it
// was given are done with it.
func (p Poster) PostBody(ctx context.Context, url string, header http.Header, body *Body) (*Response, error) {
	// Retries and redirects ask for the body (GetBody) only inside the
	// client's Do, which has returned when this hold is let go.
	defer body.Release()
	return p.post(ctx, url, header, body.Bytes(), body)
}

// post sends body, the bytes of owner when it is not nil.
func (p Poster) post(ctx context.Context, url string, header http.Header, body []byte, owner *Body) (*Response, error) {
	// The idle watchdog cancels this context; the caller's ctx is checked
	// first wherever an error is classified, so its cancellation wins.
	rctx, cancel := context.WithCancelCause(ctx)
	hreq, err := http.NewRequestWithContext(rctx, http.MethodPost, url, nil)
	if err != nil {
		cancel(nil)
		return nil, LocalError(p.Name, p.Key, err.Error())
	}
	// A body the client's connections write without copying (reqbody.go).
	newBody := func() io.ReadCloser { return newRequestBody(body) }
	if owner != nil {
		newBody = func() io.ReadCloser { return newPooledBody(owner) }
	}
	hreq.Body, hreq.ContentLength = newBody(), int64(len(body))
	hreq.GetBody = func() (io.ReadCloser, error) { return newBody(), nil }
	if len(body) == 0 {
		hreq.Body.Close()
		hreq.Body, hreq.GetBody = http.NoBody, func() (io.ReadCloser, error) { return http.NoBody, nil }
	}
	for k, v := range header {
		hreq.Header[k] = v
	}
	hreq.Header["Content-Type"], hreq.Header["Accept"] = jsonType, eventStream
	resp, err := p.Client.Do(hreq)
	if err != nil {
		cancel(nil)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", p.Name, ctx.Err())
		}
		return nil, NetworkError(p.Name, p.Key, err, "")
	}
	r := &Response{Response: resp, Body: resp.Body, At: time.Now(), Ctx: rctx, RequestID: RequestID(resp.Header, p.Key)}
	stopIdle := func() {}
	if p.Idle > 0 {
		ir := sse.WatchIdle(resp.Body, p.Idle, func() { cancel(ErrIdle) })
		r.Body, stopIdle = ir, ir.Stop
	}
	r.stop = func() { stopIdle(); resp.Body.Close(); cancel(nil) }
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// A server that stalls here is cut by the idle watchdog; what
		// arrived by then is enough to classify the failure.
		raw, rerr := ReadCapped(r.Body, MaxErrorBody, p.Key)
		r.Close()
		if rerr != nil && ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", p.Name, ctx.Err())
		}
		refusal := p.Refusal(resp.StatusCode, resp.Header, raw, r.At)
		var pe *Error
		if errors.As(refusal, &pe) && pe.RequestID == "" {
			pe.RequestID = r.RequestID
		}
		return nil, refusal
	}
	return r, nil
}

// The values of the headers every request sends, shared by all: neither
// the client nor its transport writes a request's headers.
var (
	jsonType    = []string{"application/json"}
	eventStream = []string{"text/event-stream"}
)

// LocalError is a request Mirror refuses before sending it.
func LocalError(name, key, msg string) *Error {
	return &Error{Provider: name, Class: ClassBadRequest, Message: Redact(msg, key)}
}

// requestIDHeaders are the headers providers name a request by: OpenAI
// (and most servers speaking its API) send x-request-id, Anthropic
// request-id. Gemini sends none; its adapter uses the body's responseId.
var requestIDHeaders = []string{"X-Request-Id", "Request-Id"}

// maxRequestID bounds a request id kept in a diagnostic: real ones are
// under 64 characters, and a header is the server's to fill.
const maxRequestID = 128

// RequestID is the provider's id of a request, from its response headers:
// one printable token of at most 128 characters, key-shaped text redacted,
// "" when none.
func RequestID(h http.Header, key string) string {
	for _, name := range requestIDHeaders {
		if v := CleanID(h.Get(name), key); v != "" {
			return v
		}
	}
	return ""
}

// CleanID makes an id a provider sent safe to store and show: printable
// ASCII without spaces, key-shaped text redacted, at most 128 characters;
// "" when nothing of it is left. It filters before it redacts, so a key
// broken up by spaces or control bytes is whole when redaction looks for
// it, and a cut that leaves the start of the key drops that start too.
func CleanID(v, key string) string {
	// The usual id (a model name, a request id) is already clean: it is
	// returned as it is, without a copy.
	if len(v) <= maxRequestID && printableID(v) && !mayHoldSecret(v, key) {
		return v
	}
	b := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		if c := v[i]; c > ' ' && c < 0x7f {
			b = append(b, c)
		}
	}
	s := Redact(string(b), key)
	if len(s) > maxRequestID {
		s = s[:maxRequestID]
		s = s[:len(s)-keyHeadAtEnd([]byte(s), key)]
	}
	return s
}

// printableID reports whether CleanID's filter keeps every byte of v.
func printableID(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}
