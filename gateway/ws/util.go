package ws

import (
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
