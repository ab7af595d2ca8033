package tools

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// testSchema exercises every keyword the validator knows.
var testSchema = object([]string{"path"}, map[string]*schema{
	"path":  str("", 1, 10),
	"text":  str("", 0, 5),
	"n":     integer("", 1, 100),
	"force": {Type: "boolean"},
})

func TestValidate(t *testing.T) {
	tests := []struct {
		name, args string
		want       string // "" for valid
	}{
		{"minimal", `{"path":"a"}`, ""},
		{"all", `{"path":"a","text":"héllo","n":100,"force":true}`, ""},
		{"spaces around", " \n{\"path\":\"a\"}\n ", ""},
		{"integral float", `{"path":"a","n":3.0}`, ""},
		{"exponent integer", `{"path":"a","n":1e1}`, ""},
		{"null optional", `{"path":"a","n":null}`, ""},
		{"missing required", `{}`, `t: argument "path" is required`},
		{"empty means {}", ``, `t: argument "path" is required`},
		{"null required", `{"path":null}`, `t: argument "path" is required`},
		{"wrong type", `{"path":1}`, `t: argument "path" must be a string, not a number`},
		{"too long", `{"path":"abcdefghijk"}`, `t: argument "path" is 11 characters long, more than the 10 allowed`},
		{"runes not bytes", `{"path":"a","text":"ééééé"}`, ""},
		{"empty string", `{"path":""}`, `t: argument "path" must not be empty`},
		{"fraction", `{"path":"a","n":1.5}`, `t: argument "n" must be a whole number, not 1.5`},
		{"huge", `{"path":"a","n":1e400}`, `t: argument "n" must be a whole number, not 1e400`},
		{"string number", `{"path":"a","n":"5"}`, `t: argument "n" must be a whole number, not a string`},
		{"below minimum", `{"path":"a","n":0}`, `t: argument "n" must be at least 1, not 0`},
		{"above maximum", `{"path":"a","n":101}`, `t: argument "n" must be at most 100, not 101`},
		{"bool", `{"path":"a","force":"yes"}`, `t: argument "force" must be true or false, not a string`},
		{"unknown", `{"path":"a","mode":1}`, `t: unknown argument "mode" (arguments: force, n, path, text)`},
		{"several at once", `{"n":0,"x":[]}`, `t: argument "path" is required; argument "n" must be at least 1, not 0; unknown argument "x" (arguments: force, n, path, text)`},
		{"array", `[1]`, `t: the arguments must be a JSON object such as {"path": "notes.md"}, not an array`},
		{"string", `"a"`, `t: the arguments must be a JSON object such as {"path": "notes.md"}, not a string`},
		{"null", `null`, `t: the arguments must be a JSON object such as {"path": "notes.md"}, not null`},
		{"bad json", `{"path":`, `t: the arguments are not valid JSON: it ends too early`},
		{"syntax", `{path: 1}`, `t: the arguments are not valid JSON: invalid character 'p' looking for beginning of object key string (at byte 2)`},
		{"trailing", `{"path":"a"} {}`, `t: the arguments have more after the JSON object; send one object`},
		{"trailing garbage", `{"path":"a"}x`, `t: the arguments have more after the JSON object; send one object`},
		{"long key", `{"path":"a","` + strings.Repeat("k", 100) + `":1}`, `t: unknown argument "` + strings.Repeat("k", 63) + `…" (arguments: force, n, path, text)`},
		{"too big", `{"path":"` + strings.Repeat("a", maxArguments) + `"}`, `t: the arguments are 4194315 bytes, more than the 4194304 allowed`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := testSchema.validate("t", tc.args)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted %s", tc.args)
			}
			if err.Error() != tc.want {
				t.Errorf("error:\n got %s\nwant %s", err, tc.want)
			}
			if !errors.Is(err, ErrInvalidArguments) {
				t.Error("not ErrInvalidArguments")
			}
		})
	}
}

// The schema offered to the model is plain JSON Schema.
func TestSchemaJSON(t *testing.T) {
	b, err := json.Marshal(object([]string{"path"}, map[string]*schema{"path": str("Where.", 1, 10)}))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"object","properties":{"path":{"type":"string","description":"Where.","minLength":1,"maxLength":10}},"required":["path"],"additionalProperties":false}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}

// FuzzValidate: the validator never panics, and what it accepts decodes into
// the typed arguments the tools read, with every bound holding.
func FuzzValidate(f *testing.F) {
	for _, s := range []string{`{"path":"a"}`, `{"path":"a","n":5,"force":false,"text":"x"}`, `{}`, ``, `[]`, `{"n":1e308}`,
		`{"path":"a","n":-0.0}`, `{"path":"\u0000"}`, `{"path":"a","path":"b"}`, "{\"path\":\"\xff\"}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		norm, err := testSchema.check("t", args)
		if err != nil {
			if !errors.Is(err, ErrInvalidArguments) || !strings.HasPrefix(err.Error(), "t: ") {
				t.Fatalf("bad error %v", err)
			}
			return
		}
		var a struct {
			Path  string `json:"path"`
			Text  string `json:"text"`
			N     *int64 `json:"n"`
			Force *bool  `json:"force"`
		}
		dec := json.NewDecoder(strings.NewReader(string(norm)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			t.Fatalf("accepted %q, normalised to %s, but it does not decode: %v", args, norm, err)
		}
		if a.Path == "" || len([]rune(a.Path)) > 10 || len([]rune(a.Text)) > 5 {
			t.Fatalf("accepted %q: bounds broken: %+v", args, a)
		}
		if a.N != nil && (*a.N < 1 || *a.N > 100) {
			t.Fatalf("accepted %q: n out of range", args)
		}
	})
}
