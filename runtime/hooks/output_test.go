package hooks

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseOutput(t *testing.T) {
	tests := []struct {
		in     string
		isJSON bool
		ok     bool
	}{
		{"", false, true},
		{"plain text\n", false, true},
		{"[1, 2]", false, true}, // not an object: text, as Claude Code reads it
		{"  {\"decision\": \"block\"}\n", true, true},
		{"{}", true, true},
		{"{\"unknown\": [1, {\"x\": 2}]}", true, true},
		{"{\"decision\": \"block\"", false, false},
		{"{\"decision\": \"block\"}}", false, false},
		{"{\"a\": 1} {\"b\": 2}", false, false},
		{"{\"continue\": \"no\"}", false, false},
		{"{\"hookSpecificOutput\": \"text\"}", false, false},
		{"{not json}", false, false},
	}
	for _, tc := range tests {
		_, isJSON, err := parseOutput([]byte(tc.in))
		if isJSON != tc.isJSON || (err == nil) != tc.ok {
			t.Errorf("parseOutput(%q) = JSON %v, %v; want JSON %v, ok %v", tc.in, isJSON, err, tc.isJSON, tc.ok)
		}
	}
}

// FuzzParseOutput feeds arbitrary stdout to the parser and to how PreCompact
// and SessionStart judge it: nothing panics, text is never mistaken for
// JSON, JSON survives a round trip, and a block always says why within
// MaxReason.
func FuzzParseOutput(f *testing.F) {
	for _, s := range []string{
		"",
		"plain\n",
		`{"decision":"block","reason":"keep the plan"}`,
		`{"continue":false,"stopReason":"wait"}`,
		`{"continue":true,"suppressOutput":true,"systemMessage":"x"}`,
		`{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"ctx"}}`,
		`{"hookSpecificOutput":{"hookEventName":"PreCompact"}}`,
		`{"decision":"block","reason":"` + strings.Repeat("é", 3000) + `"}`,
		`{"decision":`,
		`{"a":1}}`,
		"{\"reason\":\"\xff\"}",
		"\xef\xbb\xbf{}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, stdout []byte) {
		out, isJSON, err := parseOutput(stdout)
		trimmed := bytes.TrimSpace(stdout)
		switch {
		case err != nil && isJSON:
			t.Fatal("an error and JSON at once")
		case err == nil && !isJSON && len(trimmed) > 0 && trimmed[0] == '{':
			t.Fatalf("%q taken as text", stdout)
		case isJSON:
			b, merr := json.Marshal(out)
			if merr != nil {
				t.Fatal(merr)
			}
			again, isJSON2, err2 := parseOutput(b)
			if err2 != nil || !isJSON2 || !reflect.DeepEqual(again, out) {
				t.Fatalf("round trip of %q: %+v, %v", b, again, err2)
			}
		}

		for _, exit := range []int{0, 2} {
			res := result{hook: "hooks.PreCompact[0]", exitCode: exit, stdout: stdout, stderr: stdout}
			block, reason, err := preCompactOutcome(res)
			if block && (strings.TrimSpace(reason) == "" || len(reason) > MaxReason || err != nil) {
				t.Fatalf("exit %d: block with reason %q, err %v", exit, reason, err)
			}
			if !block && reason != "" {
				t.Fatalf("exit %d: a reason without a block: %q", exit, reason)
			}
			if utf8.Valid(stdout) && !utf8.ValidString(reason) {
				t.Fatalf("exit %d: clipping broke UTF-8: %q", exit, reason)
			}
		}
		res := result{hook: "hooks.SessionStart[0]", exitCode: 0, stdout: stdout}
		text, err := sessionStartOutcome(res)
		if text != strings.TrimSpace(text) {
			t.Fatalf("context not trimmed: %q", text)
		}
		if !isJSON && err == nil && text != string(trimmed) {
			t.Fatalf("plain stdout %q became context %q", stdout, text)
		}
	})
}
