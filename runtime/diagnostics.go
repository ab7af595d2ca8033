package runtime

import (
	"context"
	"errors"
	"time"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// Diagnostic kinds.
const (
	DiagAttempt = "attempt" // one provider attempt of an ask
	DiagHook    = "hook"    // a hook that blocked a checkpoint
	DiagCommand = "command" // a slash command that failed (written by chats)
)

// Purposes of an ask, as an attempt's diagnostic names them.
const (
	PurposeTurn    = "turn"    // a request of the turn itself
	PurposeRecord  = "record"  // a boundary's forced ask for the record
	PurposeReflect = "reflect" // a boundary's reflect request
)

// Outcomes of an attempt besides ok and a provider.Class.
const (
	OutcomeOK          = "ok"
	OutcomeCanceled    = "canceled"     // the turn was stopped while it ran
	OutcomeBreakerOpen = "breaker_open" // not sent: the model's breaker is open
	OutcomeQuota       = "quota"        // not sent: the quota refused the wait
	OutcomeBudget      = "budget"       // not sent: the request does not fit the model's ceiling
	OutcomeError       = "error"        // a failure of no provider class
	OutcomeBlocked     = "blocked"      // a hook blocked what it guards
)

// Diagnostic is what one provider attempt, hook block or failed command
// leaves in a chat's record: bounded, local-only metadata (seed 002),
// never sent to a model, never holding a secret. Kind says which fields
// are set.
type Diagnostic struct {
	Kind string `json:"kind"`
	// Purpose is what an attempt asked for: turn, record or reflect.
	Purpose string `json:"purpose,omitempty"`
	// Model is the configured model asked, Remote the provider's name for
	// it, Answered the model the provider said answered (what it reports,
	// not proof of routing; "" when it said none).
	Model    string `json:"model,omitempty"`
	Remote   string `json:"remote,omitempty"`
	Answered string `json:"answered,omitempty"`
	// RequestID is the provider's id of the request (x-request-id,
	// request-id, Gemini's responseId); "" when it sent none.
	RequestID string `json:"request_id,omitempty"`
	// Attempt counts the attempts of one ask from 1, across retries and
	// the models of the chain.
	Attempt int `json:"attempt,omitempty"`
	// Outcome is ok, a provider.Class, or one of the Outcome constants.
	Outcome string `json:"outcome"`
	// Status is the HTTP status of a refusal (0 when none).
	Status int `json:"status,omitempty"`
	// LatencyMS is how long the attempt took, sending to its end.
	LatencyMS int64 `json:"latency_ms,omitempty"`
	// Name is a hook's event or a command's name (never its arguments).
	Name string `json:"name,omitempty"`
	// Error says what went wrong, redacted and cut to 300 characters.
	Error string `json:"error,omitempty"`
}

// DiagnosticJournal is a Host that keeps diagnostics: each attempt of every
// ask, and each hook block. Diagnostic must not block the turn for long;
// a diagnostic it cannot keep is dropped, never the turn's failure.
type DiagnosticJournal interface {
	Diagnostic(d Diagnostic)
}

// DiagError is err's text as a diagnostic or a log line keeps it: key-shaped
// text redacted (adapters redact their own key already), one line, at most
// 300 characters.
func DiagError(err error) string {
	if err == nil {
		return ""
	}
	return diagText(err.Error())
}

// diagText is s as a diagnostic keeps it (see DiagError).
func diagText(s string) string { return provider.Excerpt(s, "") }

// asker is who an ask reports to: the person shown its quota waits (nil:
// nobody), the journal its attempts go to (nil: none), and the chat and
// purpose they name.
type asker struct {
	person  Person
	journal DiagnosticJournal
	chat    string
	purpose string
	payer   string // who the requests are billed to (TurnInput.Payer)
}

// askerFor is the asker of a turn's ask for purpose; show says whether its
// quota waits are shown to the person.
func (in *TurnInput) askerFor(purpose string, show bool) asker {
	a := asker{chat: in.Chat, purpose: purpose, payer: in.Payer}
	if in.Host == nil {
		return a
	}
	if show {
		a.person = in.Host
	}
	a.journal, _ = in.Host.(DiagnosticJournal)
	return a
}

// attempt reports one attempt: to the journal, and, when it failed, as
// one log line (the same redacted fields; the key never reaches either).
func (e *Engine) attempt(ctx context.Context, to asker, d Diagnostic, res provider.Result, err error, start time.Time) {
	d.Kind, d.Purpose = DiagAttempt, to.purpose
	if !start.IsZero() {
		d.LatencyMS = time.Since(start).Milliseconds()
	}
	d.Answered, d.RequestID = res.Model, res.RequestID
	switch {
	case err == nil:
		d.Outcome = OutcomeOK
	case ctx.Err() != nil:
		d.Outcome = OutcomeCanceled
	default:
		if pe := providerError(err); pe != nil {
			d.Outcome, d.Status = string(pe.Class), pe.Status
			if d.RequestID == "" {
				d.RequestID = pe.RequestID
			}
		} else if d.Outcome == "" {
			d.Outcome = OutcomeError
		}
	}
	if err != nil {
		d.Error = DiagError(err)
	}
	if to.journal != nil {
		to.journal.Diagnostic(d)
	}
	if err != nil && d.Outcome != OutcomeCanceled && e.log != nil {
		e.log.Warn("model attempt failed", "chat", to.chat, "purpose", d.Purpose, "model", d.Model, "remote", d.Remote,
			"attempt", d.Attempt, "outcome", d.Outcome, "status", d.Status, "request_id", d.RequestID,
			"latency_ms", d.LatencyMS, "err", d.Error)
	}
}

// providerError is err's provider error, nil when it has none. It is a
// function of its own so that an attempt that went well allocates
// nothing for it.
func providerError(err error) *provider.Error {
	var pe *provider.Error
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}

// hookDiagnostic reports a hook that blocked (outcome blocked, with the
// reason it gave) or failed (outcome error) to the record's journal.
func hookDiagnostic(rec Record, event, outcome, text string) {
	if j, ok := rec.(DiagnosticJournal); ok {
		j.Diagnostic(Diagnostic{Kind: DiagHook, Name: event, Outcome: outcome, Error: diagText(text)})
	}
}
