package boundary

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// ToolTaskList is the assistant's task list: the whole list each call.
const ToolTaskList = "task_list"

// Task statuses as the task_list tool takes them (the words coding
// assistants use); the record writes them as step states (TaskState).
const (
	TaskPending    = "pending"
	TaskInProgress = "in_progress"
	TaskCompleted  = "completed"
)

// TaskListTool is the task_list definition. The list is not kept in a
// store of its own: the call's row in the chat's record is the list, and
// the current one is the last call since the boundary that succeeded
// (CurrentTasks, Seen.ObserveCall).
var TaskListTool = provider.Tool{
	Name: ToolTaskList,
	Description: "Keep your task list for work of several steps: send the whole list every time, each task with " +
		"its status (pending, in_progress or completed), at most one in_progress. Mark a task in_progress " +
		"before you start it and completed as soon as it is done. The list stays in your runtime context and is " +
		"carried in the handoff; an empty list clears it.",
	Parameters: compact(`{
		"type": "object",
		"additionalProperties": false,
		"required": ["tasks"],
		"properties": {
			"tasks": {"type": "array", "maxItems": 100, "description": "the whole list, in order",
				"items": {"type": "object", "additionalProperties": false, "required": ["text", "status"],
					"properties": {
						"text": {"type": "string", "minLength": 1, "maxLength": 1000, "description": "the task, in a short sentence"},
						"status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}}}}
		}
	}`),
}

// ParseTasks reads task_list arguments into the record's form: one Step
// per task, its State a step state (completed is StepDone). Statuses are
// read leniently ("In Progress" is in_progress) but a list with more than
// one task in progress is refused: one task is the one being worked on.
// Errors are *tools.ArgError naming every problem; nothing is set then.
func ParseTasks(raw json.RawMessage) ([]Step, error) {
	p := newArgs(ToolTaskList, raw, "tasks")
	out, ok := p.stepList("tasks", taskSteps)
	if !ok {
		if p.obj != nil && len(p.problems) == 0 {
			p.problem(`argument "tasks" is required: the whole list, [] to clear it`)
		}
		return nil, p.err()
	}
	var busy []string
	for i, st := range out {
		if st.State == StepInProgress {
			busy = append(busy, fmt.Sprint(i+1))
		}
	}
	if len(busy) > 1 {
		p.problem(fmt.Sprintf(`argument "tasks" has %d tasks in_progress (items %s); at most one may be: mark the others pending or completed`,
			len(busy), strings.Join(busy, ", ")))
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return out, nil
}

// taskSteps is task_list's wording of a step.
var taskSteps = stepVocab{key: "status", fields: "text, status", state: TaskState,
	allowed: `"pending", "in_progress" or "completed"`, example: `{"text": "...", "status": "pending"}`}

// TaskState is the step state of a task_list status, "" when s is none.
// Case and the separator between words do not matter; the record's own
// words (done, in progress) are taken too.
func TaskState(s string) string {
	w := strings.ToLower(strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return r == ' ' || r == '_' || r == '-'
	}), "_"))
	switch w {
	case TaskPending:
		return StepPending
	case TaskInProgress, "inprogress":
		return StepInProgress
	case TaskCompleted, StepDone:
		return StepDone
	}
	return ""
}

// taskStatus is the task_list status of a step state.
func taskStatus(state string) string {
	switch state {
	case StepDone:
		return TaskCompleted
	case StepInProgress:
		return TaskInProgress
	}
	return TaskPending
}

// RenderTasks is the task list as the assistant reads it back in the
// runtime context: a heading of its own, then one line per task with its
// status in the tool's words, so the next call can copy them. "" when the
// list is empty.
func RenderTasks(list []Step) string {
	if len(list) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("# Task list\nKept with `task_list`; send the whole list to change it.")
	for _, t := range list {
		fmt.Fprintf(&b, "\n- %s: %s", taskStatus(t.State), oneLine(t.Text, maxItem))
	}
	return b.String()
}

// TaskCall is a call as CurrentTasks reads it: its tool, arguments, and
// whether its result was an error.
type TaskCall struct {
	Name, Arguments string
	IsError         bool
}

// CurrentTasks is the task list in force after calls (oldest first): the
// list of the last task_list call that succeeded, nil when none did or it
// was cleared. It is how the list is derived from the record, so that the
// runtime context, the handoff and a restart all read the same list.
func CurrentTasks(calls []TaskCall) []Step {
	var cur []Step
	for _, c := range calls {
		if c.Name != ToolTaskList || c.IsError {
			continue
		}
		if list, err := ParseTasks(json.RawMessage(c.Arguments)); err == nil {
			cur = list
		}
	}
	if len(cur) == 0 {
		return nil
	}
	return cur
}

// observeTasks sets s.Tasks from a finished task_list call; one that
// failed, or whose arguments do not parse, leaves the list as it was.
func (s *Seen) observeTasks(args string) {
	list, err := ParseTasks(json.RawMessage(args))
	if err != nil {
		return
	}
	if len(list) == 0 {
		list = nil
	}
	s.Tasks = list
}

// Open reports whether a step (or task) is still ahead: not done, and
// saying something.
func (s Step) Open() bool { return s.State != StepDone && strings.TrimSpace(s.Text) != "" }

// String is the step as the record writes it ("in progress: the test"),
// so a handoff.md template may write a task with {{item .}}.
func (s Step) String() string { return s.State + ": " + s.Text }

func sortedKeys(obj map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
