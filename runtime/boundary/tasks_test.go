package boundary

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/tools"
)

func TestParseTasks(t *testing.T) {
	tests := []struct {
		name string
		args string
		want []Step
		err  string // the whole message when the call is refused
	}{
		{"a list", `{"tasks": [{"text": "write the test", "status": "in_progress"}, {"text": "the changelog", "status": "pending"}, {"text": "the endpoint", "status": "completed"}]}`,
			[]Step{{StepInProgress, "write the test"}, {StepPending, "the changelog"}, {StepDone, "the endpoint"}}, ""},
		{"lenient status and trimmed text", `{"tasks": [{"text": "  a  ", "status": "In Progress"}, {"text": "b", "status": "DONE"}, {"text": "c", "status": "in-progress-"}]}`,
			nil, `task_list: argument "tasks" has 2 tasks in_progress (items 1, 3); at most one may be: mark the others pending or completed`},
		{"lenient status", `{"tasks": [{"text": "  a  ", "status": "In Progress"}, {"text": "b", "status": "DONE"}]}`,
			[]Step{{StepInProgress, "a"}, {StepDone, "b"}}, ""},
		{"empty clears", `{"tasks": []}`, []Step{}, ""},
		{"no tasks", `{}`, nil, `task_list: argument "tasks" is required: the whole list, [] to clear it`},
		{"null tasks", `{"tasks": null}`, nil, `task_list: argument "tasks" is required: the whole list, [] to clear it`},
		{"not a list", `{"tasks": "a, b"}`, nil, `task_list: argument "tasks" must be a list, not a string`},
		{"two in progress", `{"tasks": [{"text": "a", "status": "in_progress"}, {"text": "b", "status": "in_progress"}]}`,
			nil, `task_list: argument "tasks" has 2 tasks in_progress (items 1, 2); at most one may be: mark the others pending or completed`},
		{"every problem at once", `{"tasks": [{"text": "", "status": "doing"}, "b", {"text": "c", "status": "pending", "owner": "me"}], "extra": 1}`,
			nil, `task_list: unknown argument "extra" (arguments: tasks); argument "tasks" item 1: argument "status" must be "pending", "in_progress" or "completed", not "doing"; argument "tasks" item 1: argument "text" must not be empty; argument "tasks" item 2 must be an object such as {"text": "...", "status": "pending"}, not a string; argument "tasks" item 3: has unknown field "owner" (fields: text, status)`},
		{"missing fields", `{"tasks": [{}]}`,
			nil, `task_list: argument "tasks" item 1: argument "status" is required; argument "tasks" item 1: argument "text" is required`},
		{"not json", `{"tasks": [`, nil, `task_list: the arguments are not valid JSON: it ends too early`},
		{"too long", `{"tasks": [{"text": "` + strings.Repeat("x", 1001) + `", "status": "pending"}]}`,
			nil, `task_list: argument "tasks" item 1: argument "text" is 1001 characters long, more than the 1000 allowed`},
		{"too many", `{"tasks": [` + strings.TrimSuffix(strings.Repeat(`{"text": "a", "status": "pending"},`, 101), ",") + `]}`,
			nil, `task_list: argument "tasks" has 101 items, more than the 100 allowed`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseTasks(json.RawMessage(tc.args))
			if tc.err != "" {
				if err == nil || !errors.Is(err, tools.ErrInvalidArguments) {
					t.Fatalf("err %v, want an argument error", err)
				}
				if msg := err.Error(); !strings.Contains(msg, strings.TrimPrefix(tc.err, "task_list: ")) {
					t.Fatalf("err\n%s\nwant\n%s", msg, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestCurrentTasksIsTheLastGoodCall(t *testing.T) {
	a := `{"tasks": [{"text": "a", "status": "in_progress"}]}`
	b := `{"tasks": [{"text": "a", "status": "completed"}, {"text": "b", "status": "pending"}]}`
	bad := `{"tasks": [{"text": "x", "status": "in_progress"}, {"text": "y", "status": "in_progress"}]}`
	tests := []struct {
		name  string
		calls []TaskCall
		want  []Step
	}{
		{"none", nil, nil},
		{"one", []TaskCall{{ToolTaskList, a, false}}, []Step{{StepInProgress, "a"}}},
		{"the last", []TaskCall{{ToolTaskList, a, false}, {ToolTaskList, b, false}}, []Step{{StepDone, "a"}, {StepPending, "b"}}},
		{"a failed call keeps it", []TaskCall{{ToolTaskList, a, false}, {ToolTaskList, b, true}}, []Step{{StepInProgress, "a"}}},
		{"a refused list keeps it", []TaskCall{{ToolTaskList, a, false}, {ToolTaskList, bad, false}}, []Step{{StepInProgress, "a"}}},
		{"other tools", []TaskCall{{ToolTaskList, a, false}, {"shell", b, false}}, []Step{{StepInProgress, "a"}}},
		{"cleared", []TaskCall{{ToolTaskList, a, false}, {ToolTaskList, `{"tasks": []}`, false}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := CurrentTasks(tc.calls); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			// The record's half reads the same list from the same calls.
			var s Seen
			for i, c := range tc.calls {
				s.ObserveCall(c.Name, c.Arguments, c.IsError, uint64(i+1))
			}
			if !reflect.DeepEqual(s.Tasks, tc.want) {
				t.Fatalf("Seen.Tasks %q, want %q", s.Tasks, tc.want)
			}
		})
	}
}

func TestOwedReadsTheTaskList(t *testing.T) {
	tests := []struct {
		name  string
		tasks []Step
		want  bool
	}{
		{"no list", nil, false},
		{"all completed", []Step{{StepDone, "a"}}, false},
		{"one pending", []Step{{StepDone, "a"}, {StepPending, "b"}}, true},
		{"one in progress", []Step{{StepInProgress, "a"}}, true},
		{"blank text", []Step{{StepPending, " "}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &Handoff{Objective: "o", Done: []string{"d"}, Seen: Seen{Tasks: tc.tasks}}
			if got := Owed(h); got != tc.want {
				t.Fatalf("Owed = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRenderTasks(t *testing.T) {
	got := RenderTasks([]Step{{StepDone, "the endpoint"}, {StepInProgress, "the test\nfor partial exports"}, {StepPending, "the changelog"}})
	want := "# Task list\nKept with `task_list`; send the whole list to change it.\n" +
		"- completed: the endpoint\n- in_progress: the test for partial exports\n- pending: the changelog"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if RenderTasks(nil) != "" {
		t.Fatal("an empty list renders text")
	}
}

// A handoff.md copied before the task list had states, writing each task
// as text, still loads and writes it.
func TestATemplateWritingTasksAsTextStillWorks(t *testing.T) {
	tmpl, err := ParseTemplate("{{range .Seen.Tasks}}- {{item .}}\n{{end}}")
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render(&Handoff{Seen: Seen{Tasks: []Step{{StepInProgress, "a"}, {StepPending, "b"}}}})
	if err != nil || got != "- in progress: a\n- pending: b\n" {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestTaskListIsOffered(t *testing.T) {
	var names []string
	for _, d := range Tools() {
		names = append(names, d.Name)
		var schema map[string]any
		if err := json.Unmarshal(d.Parameters, &schema); err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
	}
	if !strings.Contains(strings.Join(names, " "), ToolTaskList) {
		t.Fatalf("Tools() = %v", names)
	}
}

func FuzzParseTasks(f *testing.F) {
	f.Add(`{"tasks": [{"text": "a", "status": "in_progress"}, {"text": "b", "status": "pending"}]}`)
	f.Add(`{"tasks": []}`)
	f.Add(`{"tasks": [{"text": "a", "status": "In-Progress"}, {"text": "b", "status": "inprogress"}]}`)
	f.Add(`{"tasks": [1, null, {"text": 2}]}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, s string) {
		list, err := ParseTasks(json.RawMessage(s))
		if err != nil {
			if list != nil || !errors.Is(err, tools.ErrInvalidArguments) {
				t.Fatalf("refused with a list, or a plain error: %q %v", list, err)
			}
			return
		}
		busy := 0
		for _, st := range list {
			switch st.State {
			case StepInProgress:
				busy++
			case StepPending, StepDone:
			default:
				t.Fatalf("state %q", st.State)
			}
			if strings.TrimSpace(st.Text) == "" || st.Text != strings.TrimSpace(st.Text) {
				t.Fatalf("text %q", st.Text)
			}
		}
		if busy > 1 {
			t.Fatalf("%d in progress accepted", busy)
		}
	})
}
