package runtime

import (
	"encoding/json"
	"fmt"

	"github.com/mirror-gateway/mirror/runtime/boundary"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/view"
)

// TasksKey is the runtime-context section carrying the assistant's task
// list (task_list), present while the list has tasks.
const TasksKey = "tasks"

// tasksSection is the runtime-context section of the task list in force
// at the end of rows; none when there is no list. Like the record's
// handoff (boundary.Seen), it is derived from the rows themselves: the
// list of the last task_list call since the boundary that succeeded.
func tasksSection(rows []view.Row) []view.Section {
	text := boundary.RenderTasks(currentTasks(rows))
	if text == "" {
		return nil
	}
	return []view.Section{{Key: TasksKey, Text: text}}
}

// currentTasks reads the task list in force from rows: each task_list call
// of an assistant row, judged by its result row.
func currentTasks(rows []view.Row) []boundary.Step {
	args := map[string]string{} // task_list calls awaiting their result, by call id
	var calls []boundary.TaskCall
	for i := range rows {
		r := &rows[i]
		switch r.Kind {
		case view.KindAssistant:
			for _, c := range r.ToolCalls {
				if c.Name == boundary.ToolTaskList {
					args[c.ID] = c.Arguments
				}
			}
		case view.KindTool:
			if a, ok := args[r.ToolCallID]; ok {
				calls = append(calls, boundary.TaskCall{Name: boundary.ToolTaskList, Arguments: a, IsError: r.IsError})
				delete(args, r.ToolCallID)
			}
		}
	}
	return boundary.CurrentTasks(calls)
}

// taskList answers the assistant's task_list: a list that does not parse
// is refused with every problem named, and the record keeps the last
// good one. The list itself is the call's row; nothing else is stored.
func (e *Engine) taskList(call provider.ToolCall) ToolResult {
	list, err := boundary.ParseTasks(json.RawMessage(call.Arguments))
	if err != nil {
		return ToolResult{Content: err.Error(), Full: err.Error(), IsError: true}
	}
	n := map[string]int{}
	for _, t := range list {
		n[t.State]++
	}
	text := "The task list is cleared."
	if len(list) > 0 {
		text = fmt.Sprintf("The task list is up to date: %d in progress, %d pending, %d completed.",
			n[boundary.StepInProgress], n[boundary.StepPending], n[boundary.StepDone])
	}
	return ToolResult{Content: text, Full: text}
}
