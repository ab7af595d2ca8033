package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"sync"
)

// MarshalWire encodes a request body without HTML escaping: the body is read
// by a model, not a browser, and "<" as \u003c only costs tokens. The same
// value always gives the same bytes, which keeps a provider's prefix cache
// warm.
func MarshalWire(v any) ([]byte, error) {
	w := wireEncoders.Get().(*wireEncoder)
	defer w.put()
	if err := w.enc.Encode(v); err != nil {
		return nil, err
	}
	// A copy of the exact size: an encoder's buffer grew by doubling, and a
	// request encodes a few values a turn (its new messages, its head).
	return bytes.Clone(bytes.TrimSuffix(w.buf.Bytes(), []byte("\n"))), nil
}

// wireEncoder is an encoder set up as MarshalWire's, with the buffer it
// writes to, kept for reuse.
type wireEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

// maxPooledWire bounds a buffer kept for reuse (a message with a large
// attachment gives its buffer to the collector).
const maxPooledWire = 1 << 20

var wireEncoders = sync.Pool{New: func() any {
	w := new(wireEncoder)
	w.enc = json.NewEncoder(&w.buf)
	w.enc.SetEscapeHTML(false)
	return w
}}

// put returns w to the pool, emptied.
func (w *wireEncoder) put() {
	if w.buf.Cap() > maxPooledWire {
		return
	}
	w.buf.Reset()
	wireEncoders.Put(w)
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
