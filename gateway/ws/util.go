package ws

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
)

// omit makes an empty string vanish from a frame sent with conn.send.
func omit(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return "not valid JSON"
	case errors.As(err, &te):
		return "field " + te.Field + " must be " + te.Type.String()
	}
	return err.Error()
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// encode is json.Marshal without HTML escaping, as chats encodes events: a
// frame is read by a JSON parser, and escaping made <, > and & of every
// message six bytes each.
func encode(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
