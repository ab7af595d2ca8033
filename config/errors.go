package config

import (
	"strconv"
	"strings"
)

// Error is one problem with runtime.yaml. It prints as the contract fixes it,
// `runtime.yaml:LINE: FIELD: what is wrong`, so an operator can jump to the line.
// Msg never contains the value of a key that may hold a secret.
type Error struct {
	File  string // base name of the file read; "runtime.yaml" for a config built in code
	Line  int    // 1-based line of the offending key or item; 0 when unknown
	Field string // dotted path such as models[0].compaction.soft_ratio; "" for the whole file
	Msg   string
}

// Error formats the problem as runtime.yaml:LINE: FIELD: what is wrong; the
// line and the field are left out when unknown.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is several problems found at once, in file order where lines are
// known. It prints one problem per line, so one run shows everything to fix.
type Errors []*Error

// Error prints one problem per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find each *Error.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// result turns collected problems into the error to return: nil, the one
// *Error, or Errors.
func result(es []*Error) error {
	switch len(es) {
	case 0:
		return nil
	case 1:
		return es[0]
	}
	return Errors(es)
}
