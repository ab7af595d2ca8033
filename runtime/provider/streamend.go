package provider

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors a stream parser returns, shared by the adapters so that how a
// stream ended is judged in one place (StreamEnd.Finish).
type (
	// EmitError carries the error the caller's emit returned; it comes back
	// to the caller unchanged.
	EmitError struct{ Err error }
	// StreamError is an error the provider sent inside the stream; Body is
	// its JSON, for the adapter's own error mapping.
	StreamError struct{ Body []byte }
	// DecodeError is a stream whose bytes are not the provider's chunks
	// (typically one cut short). Data is the offending event, quoted as a
	// snippet; it is kept whole so that Finish redacts the key from all
	// of it before cutting.
	DecodeError struct {
		Msg  string
		Data []byte
	}
)

func (e *EmitError) Error() string   { return e.Err.Error() }
func (e *EmitError) Unwrap() error   { return e.Err }
func (e *StreamError) Error() string { return "error event in stream" }
func (e *DecodeError) Error() string { return e.text("") }

// text is the error's message with key redacted.
func (e *DecodeError) text(key string) string {
	msg := Redact(e.Msg, key)
	if e.Data != nil {
		msg += ": " + Snippet(e.Data, key)
	}
	return msg
}

// ErrIdle is the cancellation cause an adapter's idle watchdog sets.
var ErrIdle = errors.New("stream idle")

// Partial keeps only what is safe to use from an interrupted answer: the
// text. Tool calls are dropped, since a call cut short must not run.
func Partial(r Result) Result {
	return Result{Text: r.Text, Usage: r.Usage, Limits: r.Limits, Model: r.Model, RequestID: r.RequestID}
}

// StreamEnd judges how one adapter's stream ended.
type StreamEnd struct {
	Name string        // provider name, for errors
	Key  string        // redacted from every message
	Idle time.Duration // the idle watchdog's limit, for its message
	// Missing says what a complete stream has ("[DONE] or a finish
	// reason"), for a stream that ended without it.
	Missing string
	// BodyError maps an error the provider sent inside the stream.
	BodyError func(body []byte) error
}

// Finish returns the answer for a stream that ended with err (nil: the body
// ended) after the parser assembled res. complete says the parser saw the
// end a finished answer has; without it the reply is never taken as whole.
// rctx is the request's context, whose cause tells an idle cut.
func (s StreamEnd) Finish(ctx, rctx context.Context, res Result, complete bool, err error) (Result, error) {
	broke := func(msg string) error {
		return &Error{Provider: s.Name, Class: ClassNetwork, Message: "stream broke mid-reply: " + msg}
	}
	var (
		ee *EmitError
		se *StreamError
		de *DecodeError
	)
	switch {
	case err == nil && complete:
		return res, nil
	case err == nil:
		return Partial(res), broke("it ended without " + s.Missing)
	case ctx.Err() != nil:
		return Partial(res), fmt.Errorf("%s: %w", s.Name, ctx.Err())
	case errors.As(err, &ee):
		return Partial(res), ee.Err
	case errors.As(err, &se):
		return Partial(res), s.BodyError(se.Body)
	case errors.Is(context.Cause(rctx), ErrIdle):
		return Partial(res), broke(fmt.Sprintf("nothing received for %s", s.Idle))
	case errors.As(err, &de):
		return Partial(res), broke(de.text(s.Key))
	default:
		return Partial(res), NetworkError(s.Name, s.Key, err, "stream broke mid-reply: ")
	}
}
