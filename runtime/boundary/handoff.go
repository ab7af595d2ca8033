package boundary

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"text/template"
	"unicode/utf8"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/provider"
)

// Step states, as the handoff writes them ("- in progress: ...").
const (
	StepDone       = "done"
	StepInProgress = "in progress"
	StepPending    = "pending"
)

// Step is one step of the work and where it stands.
type Step struct {
	State string `json:"state"` // StepDone, StepInProgress or StepPending
	Text  string `json:"text"`
}

// Handoff is the record of where the work stands, kept current after every
// turn and written down at a boundary. It has two halves: the assistant's,
// in its own words through handoff_update (ApplyUpdate), and the runtime's,
// what the record saw happen (Seen). It marshals to JSON for the store.
type Handoff struct {
	Objective   string   `json:"objective,omitempty"`
	Constraints []string `json:"constraints,omitempty"`
	Done        []string `json:"done,omitempty"`
	Steps       []Step   `json:"steps,omitempty"`
	Remaining   []string `json:"remaining,omitempty"`
	Blocked     []string `json:"blocked,omitempty"`
	NextAction  string   `json:"next_action,omitempty"`
	// JudgedSeq is the seq of the row where the assistant last wrote its
	// half (the handoff_update call); 0 when it never has. The caller sets
	// it when ApplyUpdate succeeds.
	JudgedSeq uint64 `json:"judged_seq,omitempty"`
	Seen      Seen   `json:"seen"`
}

// Seen is the runtime's half of the handoff: what the record saw the turn
// do, kept whatever the assistant wrote. ObserveCall fills the call lists
// and the task list; the caller sets Running from its own state before
// rendering.
type Seen struct {
	Read     []FileEvent `json:"read,omitempty"`     // read_file and list_dir paths, latest read last
	Changed  []FileEvent `json:"changed,omitempty"`  // write_file and edit_file paths, latest change last
	Commands []CallEvent `json:"commands,omitempty"` // shell commands, oldest first
	Failed   []CallEvent `json:"failed,omitempty"`   // calls that returned an error, oldest first
	Tasks    []Step      `json:"tasks,omitempty"`    // the task list of the last task_list call
	Running  []string    `json:"running,omitempty"`  // approvals, recoveries, pending messages
}

// FileEvent is a file a call read or changed, at the seq of its row.
type FileEvent struct {
	Tool string `json:"tool"`
	Path string `json:"path"`
	Seq  uint64 `json:"seq"`
}

// CallEvent is a call worth naming (a command, a failure): its tool, what
// it was about (a path, a command; secrets redacted), and its row's seq.
type CallEvent struct {
	Tool   string `json:"tool"`
	Detail string `json:"detail"`
	Seq    uint64 `json:"seq"`
}

// Bounds of the runtime's half: the oldest entries go first, so a long
// conversation's record stays a page.
const (
	maxFiles    = 100
	maxCalls    = 50
	maxDetail   = 200 // runes of a command or failure detail
	maxPathRune = 300
)

// ObserveCall adds one finished tool call to the runtime's half: name and
// args (the raw JSON arguments) of the call, whether its result was an
// error, and the seq of the result's row. A read_file or list_dir call adds
// its path to Read, write_file and edit_file to Changed, shell its command
// to Commands; a failed call of any tool goes to Failed instead (a write
// that failed changed nothing). Other tools add nothing unless they fail.
// Arguments that do not parse leave only the tool's name. A task_list call
// that succeeded sets Tasks to its list (CurrentTasks).
func (s *Seen) ObserveCall(name, args string, isError bool, seq uint64) {
	if name == ToolTaskList && !isError {
		s.observeTasks(args)
		return
	}
	var a struct {
		Path    string `json:"path"`
		Command string `json:"command"`
	}
	_ = json.Unmarshal([]byte(args), &a) // best effort: the call itself was already judged
	path := oneLine(a.Path, maxPathRune)
	if name == "shell" {
		path = oneLine(provider.Redact(a.Command, ""), maxDetail)
	}
	if isError {
		s.Failed = appendBounded(s.Failed, CallEvent{Tool: name, Detail: path, Seq: seq}, maxCalls)
		return
	}
	switch name {
	case "read_file", "list_dir":
		if path != "" {
			s.Read = touch(s.Read, FileEvent{Tool: name, Path: path, Seq: seq})
		}
	case "write_file", "edit_file":
		if path != "" {
			s.Changed = touch(s.Changed, FileEvent{Tool: name, Path: path, Seq: seq})
		}
	case "shell":
		if path != "" {
			s.Commands = appendBounded(s.Commands, CallEvent{Tool: name, Detail: path, Seq: seq}, maxCalls)
		}
	}
}

// touch moves path to the end of list with its latest event, so the list
// names each file once and the least recent goes first when bounded.
func touch(list []FileEvent, ev FileEvent) []FileEvent {
	for i, old := range list {
		if old.Path == ev.Path {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	return appendBounded(list, ev, maxFiles)
}

func appendBounded[T any](list []T, v T, n int) []T {
	list = append(list, v)
	if len(list) > n {
		list = append(list[:0:0], list[len(list)-n:]...)
	}
	return list
}

// oneLine makes s one trimmed line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(strings.ToValidUTF8(s, "�")), " ")
	if utf8.RuneCountInString(s) > n {
		s = string([]rune(s)[:n-1]) + "…"
	}
	return s
}

// Owed reports whether a continue is owed: the record names something left
// to do (Remaining, or a step or task of the task list still pending or in
// progress) or a next step (NextAction). When it is not, the runtime refuses a continue, stops
// instead, and writes NotOwed as the reason.
func Owed(h *Handoff) bool {
	if strings.TrimSpace(h.NextAction) != "" {
		return true
	}
	for _, r := range h.Remaining {
		if strings.TrimSpace(r) != "" {
			return true
		}
	}
	for _, s := range h.Steps {
		// A step not marked done is work still ahead, whatever Remaining
		// says: the assistant often lists it only once, as a step.
		if s.Open() {
			return true
		}
	}
	for _, t := range h.Seen.Tasks {
		// So is a task of its task list: the plan it keeps as it works.
		if t.Open() {
			return true
		}
	}
	return false
}

// NotOwed is why a continue was refused, written where the conversation
// ended.
const NotOwed = "The assistant asked to carry on, but the handoff written for this boundary lists nothing remaining, no step still pending or in progress, and names no next action, so there is nothing for the next conversation to pick up. The work stopped here instead; nothing starts until you speak."

// NotAnswered is why a conversation ended at hard without the assistant's
// word: it did not answer the forced ask, and the handoff kept along the way
// names nothing left to do. (When it does, the work carries on from it:
// NotAnsweredCarriesOn.)
const NotAnswered = "The conversation reached its hard limit and the assistant did not say where the work stood when asked. The handoff below is what it wrote along the way and what the record saw; it names nothing left to do, so the work waits for you."

// NotAnsweredCarriesOn is why a conversation went on at hard without the
// assistant's word: it did not answer the forced ask, and the handoff kept
// along the way names something still to do (seed 001).
const NotAnsweredCarriesOn = "The conversation reached its hard limit and the assistant did not say where the work stood when asked. The conversation starts fresh from the handoff the runtime kept along the way: what the assistant wrote there with handoff_update, and what the record saw it do. It names something still to do, so the work carries on from it."

// Unanswered is what a boundary says when the forced ask went unanswered:
// the work carries on from the handoff kept along the way when it is owed
// something (Owed), and waits for the person when it is not.
func Unanswered(h *Handoff) string {
	if Owed(h) {
		return NotAnsweredCarriesOn
	}
	return NotAnswered
}

// Template renders a Handoff with a handoff.md template (config.HandoffTemplate).
type Template struct {
	t *template.Template
}

var funcs = template.FuncMap{
	// item writes text as one markdown list item: trimmed, continuation
	// lines indented so they stay inside the item.
	// A value that is not a string is written as it prints (a Step as
	// "in progress: text"), so a template that wrote the task list as text
	// still works.
	"item": func(v any) string {
		s, ok := v.(string)
		if !ok {
			s = fmt.Sprint(v)
		}
		s = strings.TrimSpace(strings.ReplaceAll(s, "\r\n", "\n"))
		return strings.ReplaceAll(s, "\n", "\n  ")
	},
}

// ParseTemplate parses a handoff template and tries it on a full sample
// record, so a template naming a field that does not exist is refused when
// it is loaded, not at the boundary that needs it.
func ParseTemplate(text string) (*Template, error) {
	t, err := template.New(config.HandoffFile).Funcs(funcs).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("handoff template: %w", err)
	}
	tt := &Template{t: t}
	if _, err := tt.Render(sample); err != nil {
		return nil, err
	}
	return tt, nil
}

var sample = &Handoff{
	Objective: "o", Constraints: []string{"c"}, Done: []string{"d"},
	Steps:     []Step{{StepDone, "s"}, {StepInProgress, "s"}, {StepPending, "s"}},
	Remaining: []string{"r"}, Blocked: []string{"b"}, NextAction: "n", JudgedSeq: 1,
	Seen: Seen{
		Read: []FileEvent{{"read_file", "p", 1}}, Changed: []FileEvent{{"write_file", "p", 1}},
		Commands: []CallEvent{{"shell", "c", 1}}, Failed: []CallEvent{{"shell", "c", 1}},
		Tasks: []Step{{StepInProgress, "t"}}, Running: []string{"r"},
	},
}

var defaultTemplate = sync.OnceValue(func() *Template {
	t, err := ParseTemplate(config.DefaultHandoffTemplate())
	if err != nil {
		panic("boundary: the embedded handoff template is broken: " + err.Error())
	}
	return t
})

// DefaultTemplate is the built-in config/handoff.md, parsed.
func DefaultTemplate() *Template { return defaultTemplate() }

// LoadTemplate parses the template in effect for the config read from dir
// (config.HandoffTemplate): the copy beside runtime.yaml, else the built-in.
// It reads the file on every call, so an edit changes the next record.
func LoadTemplate(dir string) (*Template, error) {
	text, err := config.HandoffTemplate(dir)
	if err != nil {
		return nil, err
	}
	return ParseTemplate(text)
}

// Render writes h as markdown. The assistant's half comes first, laid out
// as the seed shows ("# Handoff", "## Objective", ... "## Next action"), and
// the runtime's half in its own sections after it.
func (t *Template) Render(h *Handoff) (string, error) {
	var b bytes.Buffer
	if err := t.t.Execute(&b, h); err != nil {
		return "", fmt.Errorf("handoff template: %w", err)
	}
	return b.String(), nil
}
