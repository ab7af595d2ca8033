// Package provider defines the small streaming interface every model API
// adapter implements, the messages it carries, and the typed error classes an
// adapter maps its provider's failures into.
package provider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"
)

// Message roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one entry of the model-facing conversation.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// Tokens is the local count of Content, and of Parts as sized for the
	// provider the request was built for (0 when unknown).
	Tokens int `json:"tokens,omitempty"`
	// Seq is the seq of the record row the message is, so what reads a
	// conversation (reflect) can cite "event N"; 0 when it is no one row
	// (the system prompt, the cards, the runtime context). Never sent.
	Seq uint64 `json:"-"`
	// Parts are the message's attachments (user messages only), sent
	// before Content in each provider's own form; see PartTokens for
	// their share of the request's size.
	Parts []Part `json:"parts,omitempty"`
}

// ToolCall is one call the model asked for. Arguments is the raw JSON text.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	// Signature is opaque data the provider attached to the call and wants
	// back, byte for byte, with it on later requests (Gemini's
	// thoughtSignature: Gemini 3 refuses a multi-step tool turn without
	// it). It is stored with the call, so it survives a restart; adapters
	// that have no such thing ignore it.
	Signature string `json:"signature,omitempty"`
}

// Tool is a tool definition offered to the model.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Parameters is the JSON Schema of the arguments.
	Parameters []byte `json:"parameters"`
}

// SameTools reports whether a and b list the same tools, field by field:
// what a cache keyed by a list (its encoding, its token count) compares,
// since a chat offers the same list turn after turn.
func SameTools(a, b []Tool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Description != b[i].Description || !bytes.Equal(a[i].Parameters, b[i].Parameters) {
			return false
		}
	}
	return true
}

// CloneTools copies tools, their schemas included, for a cache to keep: a
// caller may change its list in place afterwards.
func CloneTools(tools []Tool) []Tool {
	kept := make([]Tool, len(tools))
	for i, t := range tools {
		kept[i] = Tool{Name: t.Name, Description: t.Description, Parameters: bytes.Clone(t.Parameters)}
	}
	return kept
}

// Request is one model request.
type Request struct {
	// Model is the provider's own model name (config models[].model).
	Model    string
	Messages []Message
	Tools    []Tool
	// MaxTokens caps the answer; 0 leaves it to the provider.
	MaxTokens int
	// ToolChoice, when set, names the one tool the model must call: the
	// answer can only be that call (a boundary's forced ask).
	ToolChoice string
	// Conversation names the conversation the request continues (its
	// chat), so that an adapter can reuse what it built for the last
	// request of the same one; "" when none. Never sent, and only a hint:
	// an adapter checks whatever it reuses against the messages.
	Conversation string
}

// Usage is what the provider reports it billed for one request.
type Usage struct {
	InputTokens  int `json:"input"`
	OutputTokens int `json:"output"`
	CachedTokens int `json:"cached"`
}

// Delta is one streamed piece of an answer.
type Delta struct {
	Text string
}

// Result is a complete answer.
type Result struct {
	Text      string
	ToolCalls []ToolCall
	Usage     Usage
	// FinishReason is the provider's reason (stop, length, tool_calls, ...).
	FinishReason string
	// Limits is what the response headers said about the key's rate
	// limits; nil when the provider sent none.
	Limits *RateLimits
	// Model is the model the provider says answered (OpenAI's and
	// Anthropic's "model", Gemini's modelVersion); "" when it said none.
	// It is what the provider reports, not proof of where it routed.
	Model string
	// RequestID is the provider's id of the request (see RequestID), for
	// a diagnostic; "" when it sent none.
	RequestID string
	// Images are pictures the answer carried (Gemini's inlineData,
	// OpenAI-compatible servers' message images), decoded, in order.
	Images []Image
}

// Image is a picture in a model's answer.
type Image struct {
	MediaType string
	Data      []byte
}

// Provider streams one answer. Stream calls emit for each piece of text in
// order, from the calling goroutine, and returns the assembled result. If emit
// returns an error, Stream stops and returns it. When ctx is cancelled, Stream
// returns ctx.Err() (possibly wrapped) together with what was assembled so far.
type Provider interface {
	Stream(ctx context.Context, req Request, emit func(Delta) error) (Result, error)
}

// Class is a typed failure class, the same for every provider.
type Class string

// The classes a provider error maps into.
const (
	ClassAuth          Class = "auth"           // bad or missing key
	ClassPermission    Class = "permission"     // key valid, access denied
	ClassNotFound      Class = "not_found"      // unknown model or route
	ClassRateLimited   Class = "rate_limited"   // 429; RetryAfter may be set
	ClassQuota         Class = "quota"          // billing / exhausted quota: retrying will not help
	ClassContextLength Class = "context_length" // request larger than the model accepts
	ClassOverloaded    Class = "overloaded"     // provider busy (503/529)
	ClassServer        Class = "server"         // provider 5xx
	ClassBadRequest    Class = "bad_request"    // the provider refused the request as malformed
	ClassNetwork       Class = "network"        // could not reach the provider, or the stream broke
)

// Error is a provider failure with its class. Message never contains a key.
type Error struct {
	Provider   string
	Class      Class
	Status     int           // HTTP status, 0 when none
	Code       string        // provider's own error code, if any
	Message    string        // provider's message, secrets redacted
	RetryAfter time.Duration // from headers or body, 0 when none
	// Quota is the structured quota refusal (Google's QuotaFailure and
	// RetryInfo), nil when the provider gave none.
	Quota *QuotaInfo
	// Limits is what the response headers said about the key's rate
	// limits, nil when none.
	Limits *RateLimits
	// RequestID is the provider's id of the refused request (see
	// RequestID), "" when it sent none.
	RequestID string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %s", e.Provider, e.Class)
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	return s
}

// ClassOf returns the class of err, or "" when err is not a provider error.
func ClassOf(err error) Class {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Class
	}
	return ""
}

// Retryable reports whether the same request may succeed when tried again
// later or on another model of the chain.
func (c Class) Retryable() bool {
	switch c {
	case ClassRateLimited, ClassOverloaded, ClassServer, ClassNetwork:
		return true
	}
	return false
}
