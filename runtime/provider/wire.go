package provider

import (
	"bytes"
	"encoding/json"
	"errors"
)

// MarshalWire encodes a request body without HTML escaping: the body is read
// by a model, not a browser, and "<" as \u003c only costs tokens. The same
// value always gives the same bytes, which keeps a provider's prefix cache
// warm.
func MarshalWire(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// ObjectJSON checks that a call's arguments are a JSON object, as Anthropic's
// tool_use input and Gemini's functionCall args must be; empty arguments are
// the empty object.
func ObjectJSON(s string) (json.RawMessage, error) {
	b := bytes.TrimSpace([]byte(s))
	if len(b) == 0 {
		return json.RawMessage("{}"), nil
	}
	if !json.Valid(b) || b[0] != '{' {
		return nil, errors.New("are not a JSON object")
	}
	return b, nil
}
