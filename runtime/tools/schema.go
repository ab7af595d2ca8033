package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrInvalidArguments classifies every argument problem Check reports:
// errors.Is(err, ErrInvalidArguments) tells a bad call from a refused one.
var ErrInvalidArguments = errors.New("invalid tool arguments")

// ArgError is a call whose arguments do not fit the tool's schema. It lists
// every problem at once, so the model can fix the call in one try.
type ArgError struct {
	Tool     string
	Problems []string // each like `argument "path" is required`
}

func (e *ArgError) Error() string {
	return e.Tool + ": " + strings.Join(e.Problems, "; ")
}

// Is makes errors.Is(err, ErrInvalidArguments) true.
func (e *ArgError) Is(target error) bool { return target == ErrInvalidArguments }

// maxArguments bounds the raw arguments text before it is parsed, so a
// runaway model cannot make the gateway decode megabytes of JSON.
const maxArguments = 4 << 20

// schema is the subset of JSON Schema the built-in tools use: an object with
// typed properties (string, integer, boolean), required names,
// additionalProperties false, and length and range bounds. It marshals to
// the JSON Schema the model is given, so what is offered is what is checked.
type schema struct {
	Type                 string             `json:"type"`
	Description          string             `json:"description,omitempty"`
	Properties           map[string]*schema `json:"properties,omitempty"`
	Required             []string           `json:"required,omitempty"`
	AdditionalProperties *bool              `json:"additionalProperties,omitempty"`
	MinLength            *int               `json:"minLength,omitempty"`
	MaxLength            *int               `json:"maxLength,omitempty"`
	Minimum              *int64             `json:"minimum,omitempty"`
	Maximum              *int64             `json:"maximum,omitempty"`
}

func ptr[T any](v T) *T { return &v }

// object is an object schema that refuses unknown properties.
func object(required []string, props map[string]*schema) *schema {
	return &schema{Type: "object", Properties: props, Required: required, AdditionalProperties: ptr(false)}
}

func str(desc string, minLen, maxLen int) *schema {
	s := &schema{Type: "string", Description: desc, MaxLength: ptr(maxLen)}
	if minLen > 0 {
		s.MinLength = ptr(minLen)
	}
	return s
}

func integer(desc string, lo, hi int64) *schema {
	return &schema{Type: "integer", Description: desc, Minimum: ptr(lo), Maximum: ptr(hi)}
}

// validate checks raw (a JSON object, "" meaning {}) against s, which must be
// an object schema. It returns nil or an *ArgError naming every problem.
func (s *schema) validate(tool, raw string) error {
	_, err := s.check(tool, raw)
	return err
}

// check is validate returning the arguments normalised for decoding into
// the tool's typed struct: integers written as such (3.0 becomes 3), nulls
// of optional arguments dropped.
func (s *schema) check(tool, raw string) ([]byte, error) {
	obj, problems := s.problems(raw)
	if len(problems) > 0 {
		return nil, &ArgError{Tool: tool, Problems: problems}
	}
	for name, v := range obj {
		switch {
		case v == nil:
			delete(obj, name)
		case s.Properties[name] != nil && s.Properties[name].Type == "integer":
			i, _ := wholeNumber(v.(json.Number))
			obj[name] = i
		}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, &ArgError{Tool: tool, Problems: []string{"the arguments cannot be read: " + err.Error()}}
	}
	return b, nil
}

func (s *schema) problems(raw string) (map[string]any, []string) {
	if len(raw) > maxArguments {
		return nil, []string{fmt.Sprintf("the arguments are %d bytes, more than the %d allowed", len(raw), maxArguments)}
	}
	if strings.TrimSpace(raw) == "" {
		raw = "{}"
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, []string{"the arguments are not valid JSON: " + jsonProblem(err)}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, []string{"the arguments have more after the JSON object; send one object"}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, []string{"the arguments must be a JSON object such as {\"path\": \"notes.md\"}, not " + kind(v)}
	}
	var out []string
	for _, name := range s.Required {
		if val, ok := obj[name]; !ok || val == nil {
			out = append(out, fmt.Sprintf("argument %s is required", quote(name)))
		}
	}
	names := make([]string, 0, len(obj))
	for name := range obj {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := s.Properties[name]
		if p == nil {
			if s.AdditionalProperties != nil && !*s.AdditionalProperties {
				out = append(out, fmt.Sprintf("unknown argument %s (arguments: %s)", quote(name), s.propertyList()))
			}
			continue
		}
		if obj[name] == nil {
			// null for an optional argument means "not given", as models
			// in strict mode send it; a required one was reported above.
			continue
		}
		if msg := p.value(obj[name]); msg != "" {
			out = append(out, fmt.Sprintf("argument %s %s", quote(name), msg))
		}
	}
	return obj, out
}

// value checks one property value; "" means it fits.
func (s *schema) value(v any) string {
	switch s.Type {
	case "string":
		str, ok := v.(string)
		if !ok {
			return "must be a string, not " + kind(v)
		}
		n := utf8.RuneCountInString(str)
		if s.MinLength != nil && n < *s.MinLength {
			if *s.MinLength == 1 {
				return "must not be empty"
			}
			return fmt.Sprintf("must be at least %d characters long", *s.MinLength)
		}
		if s.MaxLength != nil && n > *s.MaxLength {
			return fmt.Sprintf("is %d characters long, more than the %d allowed", n, *s.MaxLength)
		}
	case "integer":
		num, ok := v.(json.Number)
		if !ok {
			return "must be a whole number, not " + kind(v)
		}
		i, ok := wholeNumber(num)
		if !ok {
			return "must be a whole number, not " + trim(num.String(), 24)
		}
		if s.Minimum != nil && i < *s.Minimum {
			return fmt.Sprintf("must be at least %d, not %d", *s.Minimum, i)
		}
		if s.Maximum != nil && i > *s.Maximum {
			return fmt.Sprintf("must be at most %d, not %d", *s.Maximum, i)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return "must be true or false, not " + kind(v)
		}
	default:
		return "has a schema type this validator does not know (" + s.Type + ")"
	}
	return ""
}

// wholeNumber reads an integer as JSON Schema defines it: 3 and 3.0 are
// integers, 3.5 and 1e400 are not.
func wholeNumber(n json.Number) (int64, bool) {
	if i, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
		return i, true
	}
	f, err := strconv.ParseFloat(n.String(), 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}

func (s *schema) propertyList() string {
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// kind names the JSON type of a decoded value, never the value itself.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// jsonProblem is the decoder's message without Go type names.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s (at byte %d)", se.Error(), se.Offset)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "it ends too early"
	}
	return err.Error()
}

// quote shows a name the model sent, bounded, as a Go-quoted string.
func quote(s string) string { return strconv.Quote(trim(s, 64)) }

// trim shortens s to at most n runes, marking the cut.
func trim(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
