package boundary

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/tools"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updateGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// seedHalf is the assistant's half of the seed's example, word for word,
// with event K as 12.
const seedHalf = `# Handoff

## Objective
ship the export feature

## Constraints
- keep the receipt email out of the partial path until the operator decides

## Done
- the endpoint and its schema
- file_write src/export/handler.py (event 12)

## Steps
- done: the failure path for a missing account: returns not found with the account id
- in progress: the test for a partial export
- pending: the changelog line

## Remaining
- the partial-export test, then the changelog line

## Blocked
- should a partial export still send the receipt email? The operator decides.

## Next action
write the partial-export test
`

// seedArgs writes the seed's example through the tool, as the model would.
const seedArgs = `{
	"objective": "ship the export feature",
	"constraints": ["keep the receipt email out of the partial path until the operator decides"],
	"done": ["the endpoint and its schema", "file_write src/export/handler.py (event 12)"],
	"steps": [
		{"state": "done", "text": "the failure path for a missing account: returns not found with the account id"},
		{"state": "in_progress", "text": "the test for a partial export"},
		{"state": "pending", "text": "the changelog line"}
	],
	"remaining": ["the partial-export test, then the changelog line"],
	"blocked": ["should a partial export still send the receipt email? The operator decides."],
	"next_action": "write the partial-export test"
}`

// seedHandoff is the seed's example with a runtime half the record saw.
func seedHandoff(t *testing.T) *Handoff {
	t.Helper()
	h := &Handoff{}
	if err := ApplyUpdate(h, json.RawMessage(seedArgs)); err != nil {
		t.Fatal(err)
	}
	h.JudgedSeq = 40
	calls := []struct {
		name, args string
		isErr      bool
		seq        uint64
	}{
		{"read_file", `{"path": "src/export/handler.py"}`, false, 8},
		{"list_dir", `{"path": "src/export"}`, false, 9},
		{"write_file", `{"path": "src/export/handler.py", "content": "SECRET CONTENT"}`, false, 12},
		{"shell", `{"command": "pytest tests/export -x"}`, false, 20},
		{"shell", `{"command": "curl -H 'Authorization: Bearer sk-abcdefghijklmnopqrstuvwx' https://api"}`, false, 22},
		{"read_file", `{"path": "tests/export/test_partial.py"}`, true, 30},
		{"edit_file", `{"path": "CHANGELOG.md", "old": "a", "new": "b"}`, true, 31},
		{"read_file", `{"path": "src/export/handler.py"}`, false, 33},
		{"handoff_update", `{}`, false, 40},
		{"task_list", `{"tasks": [{"text": "the export feature", "status": "in_progress"}, {"text": "the changelog line", "status": "pending"}]}`, false, 41},
		// A list the tool would refuse (two in progress) leaves it.
		{"task_list", `{"tasks": [{"text": "a", "status": "in_progress"}, {"text": "b", "status": "in_progress"}]}`, false, 42},
	}
	for _, c := range calls {
		h.Seen.ObserveCall(c.name, c.args, c.isErr, c.seq)
	}
	h.Seen.Running = []string{"approval waiting: shell rm -rf build/"}
	return h
}

func TestRenderSeedExample(t *testing.T) {
	h := seedHandoff(t)
	got, err := DefaultTemplate().Render(h)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, seedHalf+"\n## ") {
		t.Errorf("the assistant's half is not the seed's layout:\n%s", got)
	}
	if strings.Contains(got, "SECRET") || strings.Contains(got, "sk-abc") {
		t.Errorf("a secret reached the record:\n%s", got)
	}
	golden(t, "handoff.golden", got)

	// The store keeps it as JSON; it comes back the same.
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var back Handoff
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(&back, h) {
		t.Errorf("JSON round trip: %+v, %v", back, err)
	}

	// An empty record says so rather than leaving blank sections.
	empty, err := DefaultTemplate().Render(&Handoff{})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "handoff_empty.golden", empty)
}

func TestObserveCall(t *testing.T) {
	h := seedHandoff(t)
	s := h.Seen
	// The file read twice is named once, at its latest read, last.
	want := []FileEvent{{"list_dir", "src/export", 9}, {"read_file", "src/export/handler.py", 33}}
	if !reflect.DeepEqual(s.Read, want) {
		t.Errorf("Read = %+v, want %+v", s.Read, want)
	}
	// The failed edit changed nothing.
	if want := []FileEvent{{"write_file", "src/export/handler.py", 12}}; !reflect.DeepEqual(s.Changed, want) {
		t.Errorf("Changed = %+v", s.Changed)
	}
	if len(s.Failed) != 2 || s.Failed[1] != (CallEvent{"edit_file", "CHANGELOG.md", 31}) {
		t.Errorf("Failed = %+v", s.Failed)
	}
	// Bounded: the oldest go first.
	var b Seen
	for i := range 3 * maxFiles {
		b.ObserveCall("read_file", `{"path": "f`+strings.Repeat("x", i)+`"}`, false, uint64(i))
		b.ObserveCall("shell", `not json`, false, uint64(i))
	}
	if len(b.Read) != maxFiles || b.Read[0].Seq != 2*maxFiles || len(b.Commands) != 0 {
		t.Errorf("bounded Read: %d items from seq %d; commands %d", len(b.Read), b.Read[0].Seq, len(b.Commands))
	}
}

func TestApplyUpdate(t *testing.T) {
	base := func() *Handoff {
		return &Handoff{Objective: "old", Done: []string{"a"}, Remaining: []string{"r"}, NextAction: "next"}
	}
	tests := []struct {
		name string
		args string
		want *Handoff // nil: an error, and nothing changed
		err  string
	}{
		{"replace one", `{"objective": "  new  "}`,
			&Handoff{Objective: "new", Done: []string{"a"}, Remaining: []string{"r"}, NextAction: "next"}, ""},
		{"clear", `{"remaining": [], "next_action": ""}`,
			&Handoff{Objective: "old", Done: []string{"a"}, Remaining: []string{}}, ""},
		{"null is omitted", `{"done": null, "blocked": ["x"]}`,
			&Handoff{Objective: "old", Done: []string{"a"}, Remaining: []string{"r"}, NextAction: "next", Blocked: []string{"x"}}, ""},
		{"steps", `{"steps": [{"state": "In-Progress", "text": "t"}]}`,
			&Handoff{Objective: "old", Done: []string{"a"}, Remaining: []string{"r"}, NextAction: "next",
				Steps: []Step{{StepInProgress, "t"}}}, ""},
		{"empty", `{}`, nil,
			"handoff_update: no fields given; give at least one of: objective, constraints, done, steps, remaining, blocked, next_action"},
		{"nothing", ``, nil, "handoff_update: no fields given; give at least one of: objective, constraints, done, steps, remaining, blocked, next_action"},
		{"not json", `{"objective": `, nil, "handoff_update: the arguments are not valid JSON: it ends too early"},
		{"not object", `["x"]`, nil, "handoff_update: the arguments must be a JSON object, not a list"},
		{"two objects", `{"objective": "a"} {}`, nil, "handoff_update: the arguments have more after the JSON object; send one object"},
		{"all problems at once", `{"objective": 3, "done": "x", "remaining": ["ok", ""], "steps": [{"state": "later", "text": "t", "why": 1}, "s"], "nope": true}`, nil,
			`handoff_update: unknown argument "nope" (arguments: objective, constraints, done, steps, remaining, blocked, next_action); ` +
				`argument "objective" must be a string, not a number; argument "done" must be a list, not a string; ` +
				`argument "remaining" item 2 must not be empty; ` +
				`argument "steps" item 1: has unknown field "why" (fields: state, text); ` +
				`argument "steps" item 1: argument "state" must be "done", "in progress" or "pending", not "later"; ` +
				`argument "steps" item 2 must be an object such as {"state": "pending", "text": "..."}, not a string`},
		{"too long", `{"next_action": "` + strings.Repeat("é", maxText+1) + `"}`, nil,
			`handoff_update: argument "next_action" is 2001 characters long, more than the 2000 allowed`},
		{"too many", `{"done": [` + strings.TrimSuffix(strings.Repeat(`"x",`, maxItems+1), ",") + `]}`, nil,
			`handoff_update: argument "done" has 101 items, more than the 100 allowed`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := base()
			err := ApplyUpdate(h, json.RawMessage(tc.args))
			if tc.want == nil {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error:\n got %v\nwant %s", err, tc.err)
				}
				if !errors.Is(err, tools.ErrInvalidArguments) {
					t.Errorf("not ErrInvalidArguments: %v", err)
				}
				if !reflect.DeepEqual(h, base()) {
					t.Errorf("a bad update changed the record: %+v", h)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(h, tc.want) {
				t.Errorf("got %+v\nwant %+v", h, tc.want)
			}
		})
	}
}

func TestOwed(t *testing.T) {
	tests := []struct {
		h    Handoff
		want bool
	}{
		{Handoff{}, false},
		{Handoff{Objective: "x", Done: []string{"all"}}, false},
		{Handoff{Remaining: []string{" "}, NextAction: "  "}, false},
		{Handoff{Remaining: []string{"tests"}}, true},
		{Handoff{NextAction: "ask the operator"}, true},
		{Handoff{Steps: []Step{{StepDone, "the endpoint"}, {StepPending, "the changelog line"}}}, true},
		{Handoff{Steps: []Step{{StepInProgress, "the partial-export test"}}}, true},
		{Handoff{Steps: []Step{{StepDone, "the endpoint"}, {StepDone, "the tests"}}}, false},
		{Handoff{Steps: []Step{{StepPending, "  "}}}, false},
	}
	for i, tc := range tests {
		if got := Owed(&tc.h); got != tc.want {
			t.Errorf("%d: Owed(%+v) = %v", i, tc.h, got)
		}
	}
}

// Editing handoff.md beside runtime.yaml changes the next record.
func TestTemplateOverride(t *testing.T) {
	dir := t.TempDir()
	if text, err := config.HandoffTemplate(dir); err != nil || text != config.DefaultHandoffTemplate() {
		t.Fatalf("no copy: %v", err)
	}
	h := &Handoff{Objective: "ship it", NextAction: "test"}
	for _, tc := range []struct{ tmpl, want string }{
		{"# Mine\nGoal: {{.Objective}}\n", "# Mine\nGoal: ship it\n"},
		{"# Edited\nThen: {{.NextAction}}\n", "# Edited\nThen: test\n"},
	} {
		if err := os.WriteFile(filepath.Join(dir, config.HandoffFile), []byte(tc.tmpl), 0o644); err != nil {
			t.Fatal(err)
		}
		tmpl, err := LoadTemplate(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := tmpl.Render(h); got != tc.want {
			t.Errorf("Render = %q, want %q", got, tc.want)
		}
	}
	// A template that names what does not exist is refused when loaded.
	for _, bad := range []string{"{{.Nope}}", "{{range .Objective}}", "{{"} {
		if _, err := ParseTemplate(bad); err == nil {
			t.Errorf("ParseTemplate(%q) accepted", bad)
		}
	}
	if err := os.Remove(filepath.Join(dir, config.HandoffFile)); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, config.HandoffFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTemplate(dir); err == nil {
		t.Error("a directory named handoff.md was accepted")
	}
}
