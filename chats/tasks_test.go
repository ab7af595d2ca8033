package chats

import (
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/boundary"
	"github.com/mirror-gateway/mirror/runtime/provider"
)

const (
	planTasks = `{"tasks": [{"text": "the endpoint and its schema", "status": "completed"}, ` +
		`{"text": "the test for a partial export", "status": "in_progress"}, {"text": "the changelog line", "status": "pending"}]}`
	twoBusy   = `{"tasks": [{"text": "a", "status": "in_progress"}, {"text": "b", "status": "in_progress"}]}`
	nextTasks = `{"tasks": [{"text": "the endpoint and its schema", "status": "completed"}, ` +
		`{"text": "the test for a partial export", "status": "completed"}, {"text": "the changelog line", "status": "in_progress"}]}`
)

// taskReply answers "plan", "two at once" and "finish" with one task_list
// call each, and anything else (or a tool result) with a short answer.
func taskReply(r wireReq) (string, []provider.ToolCall) {
	if r.Messages[len(r.Messages)-1].Role == "tool" {
		return "Listed.", nil
	}
	switch u := r.last("user"); {
	case strings.Contains(u, "plan the export"):
		return "", []provider.ToolCall{{ID: "t1", Name: boundary.ToolTaskList, Arguments: planTasks}}
	case strings.Contains(u, "two at once"):
		return "", []provider.ToolCall{{ID: "t2", Name: boundary.ToolTaskList, Arguments: twoBusy}}
	case strings.Contains(u, "finish the test"):
		return "", []provider.ToolCall{{ID: "t3", Name: boundary.ToolTaskList, Arguments: nextTasks}}
	}
	return "Noted.", nil
}

func (le *longEnv) result(t *testing.T, chat, callID string) *ToolOutcome {
	t.Helper()
	for _, ev := range le.durable(chat) {
		if r := pay[*ToolResult](ev); r != nil && r.Result.CallID == callID {
			return r.Result
		}
	}
	t.Fatalf("no result for %s", callID)
	return nil
}

func TestTheTaskListReachesTheNextRequestTheHandoffAndARestart(t *testing.T) {
	le := newLongEnvWith(t, taskReply, 0.9, nil) // no boundary in the way
	c := le.chat()
	s := newSub()
	if err := le.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	le.turn(t, s, c.ID, "Please plan the export.")
	if res := le.result(t, c.ID, "t1"); res.IsError || res.Content != "The task list is up to date: 1 in progress, 1 pending, 1 completed." {
		t.Fatalf("task_list answered %+v", res)
	}
	le.turn(t, s, c.ID, "Go on.")
	want := "# Task list\nKept with `task_list`; send the whole list to change it.\n" +
		"- completed: the endpoint and its schema\n- in_progress: the test for a partial export\n- pending: the changelog line"
	if ctx := contextLine(le.lastChatRequest(t)); !strings.Contains(ctx, want) {
		t.Fatalf("the next request's runtime context lacks the list:\n%s", ctx)
	}
	record, err := boundary.ReadHandoff(le.dataDir, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "handoff_tasks.golden", record)

	// A list the tool refuses changes nothing, and says why.
	le.turn(t, s, c.ID, "Mark two at once.")
	if res := le.result(t, c.ID, "t2"); !res.IsError || !strings.Contains(res.Content, "at most one may be") {
		t.Fatalf("two tasks in progress: %+v", res)
	}
	listed := "## Task list\n- done: the endpoint and its schema\n- in progress: the test for a partial export\n- pending: the changelog line\n"
	if again, _ := boundary.ReadHandoff(le.dataDir, c.ID); !strings.Contains(again, listed) || !strings.Contains(again, "## Failed calls\n- task_list") {
		t.Fatalf("a refused list changed the task list, or was not named as failed:\n%s", again)
	}

	// After a restart the list is read back from the record's rows.
	le.restart2(t)
	ins, err := Inspect(le.db, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantSteps := []boundary.Step{{State: boundary.StepDone, Text: "the endpoint and its schema"},
		{State: boundary.StepInProgress, Text: "the test for a partial export"}, {State: boundary.StepPending, Text: "the changelog line"}}
	if !reflect.DeepEqual(ins.Handoff.Seen.Tasks, wantSteps) {
		t.Fatalf("after a restart the list is %q", ins.Handoff.Seen.Tasks)
	}
	s2 := newSub()
	if err := le.svc.Open(bg, c.ID, nil, s2, ""); err != nil {
		t.Fatal(err)
	}
	le.turn(t, s2, c.ID, "Now finish the test.")
	le.turn(t, s2, c.ID, "Go on.")
	if ctx := contextLine(le.lastChatRequest(t)); !strings.Contains(ctx, "- completed: the test for a partial export\n- in_progress: the changelog line") {
		t.Fatalf("after a restart the runtime context says:\n%s", ctx)
	}
	if record, _ = boundary.ReadHandoff(le.dataDir, c.ID); !strings.Contains(record, "## Task list\n- done: the endpoint and its schema\n"+
		"- done: the test for a partial export\n- in progress: the changelog line\n") {
		t.Fatalf("after a restart the record says:\n%s", record)
	}
}

// A continue is owed while the task list has work ahead, and only then.
func TestATaskStillAheadMakesAContinueOwed(t *testing.T) {
	tests := []struct {
		name  string
		tasks string
		owed  bool
	}{
		{"a task pending", `{"tasks": [{"text": "the endpoint", "status": "completed"}, {"text": "the changelog line", "status": "pending"}]}`, true},
		{"a task in progress", `{"tasks": [{"text": "the changelog line", "status": "in_progress"}]}`, true},
		{"every task completed", `{"tasks": [{"text": "the endpoint", "status": "completed"}]}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reply := func(r wireReq) (string, []provider.ToolCall) {
				if r.Messages[len(r.Messages)-1].Role == "tool" || !strings.Contains(r.last("user"), "wrap up") {
					return "Noted.", nil
				}
				// The handoff names nothing left: only the task list can.
				return "Phase done.", []provider.ToolCall{
					{ID: "h1", Name: boundary.ToolHandoffUpdate, Arguments: `{"objective":"ship the export feature","done":["the endpoint"]}`},
					{ID: "t1", Name: boundary.ToolTaskList, Arguments: tc.tasks},
					{ID: "c1", Name: boundary.ToolConsolidate, Arguments: `{"continue":true,"reason":"a clean point"}`}}
			}
			le := newLongEnv(t, reply)
			c := le.chat()
			s := newSub()
			if err := le.svc.Open(bg, c.ID, nil, s, ""); err != nil {
				t.Fatal(err)
			}
			le.turn(t, s, c.ID, "The export is half done.")
			le.turn(t, s, c.ID, "Please wrap up.")
			var b *BoundaryCrossed
			for _, ev := range le.durable(c.ID) {
				if ev.Type == EvBoundary {
					b = pay[*BoundaryCrossed](ev)
				}
			}
			if b == nil || b.Reason != runtime.ReasonAssistant {
				t.Fatalf("boundary %+v", b)
			}
			if b.Continued != tc.owed || strings.Contains(b.Why, boundary.NotOwed) == tc.owed {
				t.Fatalf("continued %v, why %q; want continued %v", b.Continued, b.Why, tc.owed)
			}
			if !strings.Contains(b.Record, "## Task list\n") {
				t.Fatalf("the record lacks the task list:\n%s", b.Record)
			}
			checkReflectLabels(t, le, c.ID)
		})
	}
}

func TestTheBuiltinModelKeepsATaskList(t *testing.T) {
	e := newToolEnv(t)
	c := e.chat()
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	send := func(n int, text string) *ToolOutcome {
		t.Helper()
		if _, err := e.svc.Send(bg, c.ID, text, strconv.Itoa(n), "", Origin{}); err != nil {
			t.Fatal(err)
		}
		evs := s.waitFor(t, "the turn's end", has(EvTurnFinished, n))
		var res *ToolOutcome
		for _, ev := range evs {
			if ev.Type == EvToolResult {
				res = pay[*ToolResult](ev).Result
			}
		}
		if res == nil || res.Name != boundary.ToolTaskList {
			t.Fatalf("no task_list result: %+v", res)
		}
		return res
	}
	if res := send(1, `/tool task_list `+planTasks); res.IsError {
		t.Fatalf("task_list: %s", res.Content)
	}
	res := send(2, `/tool task_list {"tasks": [{"text": "a", "status": "doing"}]}`)
	if !res.IsError || !strings.Contains(res.Content, `argument "status" must be "pending", "in_progress" or "completed", not "doing"`) {
		t.Fatalf("a bad status: %+v", res)
	}
	ins, err := Inspect(e.db, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ins.Handoff.Seen.Tasks) != 3 || ins.Handoff.Seen.Tasks[1].State != boundary.StepInProgress {
		t.Fatalf("the list kept: %q", ins.Handoff.Seen.Tasks)
	}
}

var reflectLabel = regexp.MustCompile(`(?m)^\[(?:event (\d+), )?(user|assistant)\]\n(.*)$`)

// checkReflectLabels checks the transcript of the last reflect request:
// every row is labelled with the seq of the record row it is, and the row
// there says what the transcript says.
func checkReflectLabels(t *testing.T, le *longEnv, chat string) {
	t.Helper()
	var transcript string
	for _, r := range le.fake.requests() {
		if r.reflecting() {
			transcript = r.Messages[1].Content
		}
	}
	labels := reflectLabel.FindAllStringSubmatch(transcript, -1)
	if len(labels) < 2 {
		t.Fatalf("reflect read no rows:\n%s", transcript)
	}
	texts := map[uint64]string{}
	for _, ev := range le.durable(chat) {
		if m := ev.Message(); m != nil {
			texts[ev.Seq] = m.Text
			if m.Seq != 0 {
				texts[m.Seq] = m.Text
			}
		}
	}
	for _, l := range labels {
		seq, _ := strconv.ParseUint(l[1], 10, 64)
		if seq == 0 {
			t.Fatalf("a row without its event number: %q\n%s", l[0], transcript)
		}
		if got, ok := texts[seq]; !ok || !strings.HasPrefix(strings.TrimSpace(got), l[3]) {
			t.Fatalf("[event %d] reads %q, but event %d is %q", seq, l[3], seq, got)
		}
	}
}

func TestAMidTurnBoundaryReflectsWithEventNumbersAndStatusReadsTheFreshConversation(t *testing.T) {
	reply := func(r wireReq) (string, []provider.ToolCall) {
		last := r.Messages[len(r.Messages)-1]
		if last.Role == "tool" || !strings.Contains(r.last("user"), "do the work") {
			return "Done with this part.", nil
		}
		return words("Working through the export.", 1500), []provider.ToolCall{{ID: "h1", Name: boundary.ToolHandoffUpdate,
			Arguments: `{"objective":"ship the export feature","next_action":"write the partial-export test"}`}}
	}
	le := newLongEnv(t, reply)
	c := le.chat()
	s := newSub()
	if err := le.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	le.turn(t, s, c.ID, words("Some context.", 900))
	le.turn(t, s, c.ID, "Now do the work.")
	checkReflectLabels(t, le, c.ID)

	var started, last, b *Event
	for _, ev := range le.durable(c.ID) {
		switch {
		case ev.Type == EvBoundary:
			b = ev
		case ev.Type == EvContext:
			if b == nil {
				started = ev // the last reading before the boundary: the turn's start
			}
			last = ev
		}
	}
	if b == nil || started == nil || last.Seq < b.Seq {
		t.Fatalf("no reading after the boundary (boundary %v, last reading %v)", b != nil, last)
	}
	lastC, startedC := pay[*ContextReading](last), pay[*ContextReading](started)
	if lastC.Used >= startedC.Used || lastC.HardReached {
		t.Fatalf("the reading after the boundary (%d used) is not of the fresh conversation (%d before)",
			lastC.Used, startedC.Used)
	}
	status, err := le.svc.Command(bg, c.ID, "/status", Origin{})
	if err != nil {
		t.Fatal(err)
	}
	status, _, _ = strings.Cut(status, "\n") // the Context line; the Tools line follows
	if status != lastC.Line || status == startedC.Line {
		t.Fatalf("/status says %q; the fresh conversation reads %q", status, lastC.Line)
	}
}
