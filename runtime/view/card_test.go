package view

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// cardConv is a conversation big enough that masking and folding alone
// cannot reach the target: user turns are large and cannot be masked.
func cardConv() *conv {
	c := &conv{}
	for i := 1; i <= 30; i++ {
		u := c.user(fmt.Sprintf("Turn %d: implement step %d of the plan.\nDetails follow on the next line.", i, i), 2500)
		switch {
		case i == 3:
			u.Pinned = true
			u.Text = "Always keep the public API backwards compatible."
		case i == 9:
			u.Origin = OriginAmendment
			u.Text = "Change of plan: target Go 1.26 only."
		case i == 10:
			u.Origin = OriginWake
			u.Text = "(wake: the build job finished)"
		}
		c.step("read_file", fmt.Sprintf(`{"path": "pkg/step%d.go"}`, i%6), "package pkg", 1200, false)
		c.step("shell", fmt.Sprintf(`{"command": "go test ./pkg/... -run Step%d"}`, i%4), fmt.Sprintf("exit status %d\nmore", i%5), 400, i%5 == 0)
		if i%3 == 0 {
			c.answer(strings.Repeat(fmt.Sprintf("Answer %d explains the change. ", i), 150), 1100)
		} else {
			c.answer(fmt.Sprintf("Step %d done.", i), 40)
		}
	}
	return c
}

func TestCardsGolden(t *testing.T) {
	c := cardConv()
	in := Input{Rows: c.rows, Budget: mustBudget(t, 0, "auto"), Overhead: 3000, Roster: fullRoster,
		Signals: Signals{Compact: true, Instructions: "keep the plan"}, Context: []Section{{Key: "cwd", Text: "/src"}}}
	v, err := Materialize(in)
	if err != nil {
		t.Fatal(err)
	}
	cp := v.Checkpoint
	if cp == nil || cp.Evicted == 0 || len(cp.Cards) != 1 {
		t.Fatalf("want one eviction card, got %+v", cp)
	}
	if cp.After > cp.Target {
		t.Errorf("after %d > target %d", cp.After, cp.Target)
	}
	if cp.Trigger != TriggerManual || cp.Instructions != "keep the plan" {
		t.Errorf("trigger %q instructions %q", cp.Trigger, cp.Instructions)
	}
	if !strings.Contains(v.Messages[0].Content, "Always keep the public API backwards compatible.") {
		t.Error("the evicted pinned message is not verbatim after the cards")
	}
	if !strings.Contains(v.Messages[0].Content, "(assignment update): Change of plan") {
		t.Error("the amendment is not labeled")
	}
	if strings.Contains(v.Messages[0].Content, "wake: the build job") {
		t.Error("a runtime wake is quoted as a request")
	}
	if v.Messages[1].Role != "user" || !strings.HasPrefix(v.Messages[1].Content, "Turn ") {
		t.Errorf("the view does not resume at a user turn: %+v", v.Messages[1])
	}
	var buf bytes.Buffer
	buf.WriteString("== head message ==\n" + v.Messages[0].Content + "\n\n== checkpoint ==\n")
	buf.Write(marshal(t, cp))
	buf.WriteString("\n== view ==\n")
	buf.Write(marshal(t, v.Messages))
	golden(t, "cards.golden", buf.Bytes())

	// A second checkpoint later starts from the first: the first card stays,
	// the evicted range only grows, the cards degrade oldest first.
	for i := 0; i < 40; i++ {
		c.user(fmt.Sprintf("Later turn %d.", i), 2500)
		c.answer("ok", 10)
	}
	in.Rows, in.Checkpoint = c.rows, cp
	v2, err := Materialize(in)
	if err != nil {
		t.Fatal(err)
	}
	cp2 := v2.Checkpoint
	if cp2 == nil || cp2.Epoch != 2 || cp2.Evicted <= cp.Evicted || len(cp2.Cards) != 2 || cp2.Cards[0].From != cp.Cards[0].From {
		t.Fatalf("second checkpoint %+v", cp2)
	}
	if cp2.Cards[0].Level < cp2.Cards[1].Level {
		t.Errorf("newer card degraded before older: levels %d, %d", cp2.Cards[0].Level, cp2.Cards[1].Level)
	}
	if !strings.Contains(v2.Messages[0].Content, "Always keep the public API backwards compatible.") {
		t.Error("the pin did not survive the second checkpoint")
	}
	golden(t, "cards2.golden", []byte(v2.Messages[0].Content+"\n"))
}

func TestCardDegrade(t *testing.T) {
	b := &build{count: func(s string) int { return len(s) }}
	cards := []Card{
		{Epoch: 1, From: 1, To: 10, Turns: 2, Files: []string{"internal/a.go", "internal/b.go", "internal/c.go"}, Requests: []Request{{ID: "m1", Text: "the first request, in words"}}},
		{Epoch: 2, From: 11, To: 20, Turns: 2, Files: []string{"internal/d.go", "internal/e.go", "internal/f.go"}, Requests: []Request{{ID: "m11", Text: "the second request, in words"}}},
	}
	whole := len(cards[0].render()) + len(cards[1].render())
	b.degrade(cards, whole-1)
	if cards[0].Level != 1 || cards[1].Level != 0 {
		t.Errorf("levels %d %d, want the oldest degraded first", cards[0].Level, cards[1].Level)
	}
	b.degrade(cards, 0)
	if cards[0].Level != 2 || cards[1].Level != 2 {
		t.Errorf("levels %d %d, want stubs", cards[0].Level, cards[1].Level)
	}
}

func TestDiff(t *testing.T) {
	a := []Section{{"cwd", "/a"}, {"clock", "1"}, {"jobs", "none"}}
	b := []Section{{"clock", "2"}, {"cwd", "/a"}, {"todo", "x"}}
	got := Diff(a, b)
	want := []Section{{"clock", "2"}, {"todo", "x"}, {"jobs", ""}}
	if !jsonEqual(got, want) {
		t.Errorf("Diff = %v, want %v", got, want)
	}
	if d := Diff(a, a); len(d) != 0 {
		t.Errorf("Diff of equal = %v", d)
	}
	if d := Diff(nil, b); len(d) != 3 {
		t.Errorf("Diff from nothing = %v", d)
	}
	if r := renderContext(a, b, false); !strings.HasPrefix(r, "<runtime-context update>\n## clock\n2") || !strings.Contains(r, "## jobs\n(removed)") {
		t.Errorf("render = %q", r)
	}
}

func TestRuntimeContextPlacement(t *testing.T) {
	c := &conv{}
	c.user("first", 0)
	secs := []Section{{"cwd", "/a"}, {"clock", "1"}}
	in := Input{Budget: mustBudget(t, 0, "auto"), Context: secs}
	in.Rows = c.rows
	v, err := Materialize(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := v.Messages[len(v.Messages)-1].Content; !strings.HasPrefix(got, "<runtime-context>\n") || v.Context == nil {
		t.Fatalf("first turn context %q", got)
	}
	c.context(v.Context, v.ContextTokens)
	c.answer("reply one", 0)
	c.user("second", 0)
	in.Rows, in.Context = c.rows, []Section{{"cwd", "/a"}, {"clock", "2"}}
	v, err = Materialize(in)
	if err != nil {
		t.Fatal(err)
	}
	roles := ""
	for _, m := range v.Messages {
		roles += m.Role[:1]
	}
	// user, its context, the reply, user, this turn's update last.
	if roles != "usaus" || v.Messages[1].Content[:18] != "<runtime-context>\n" {
		t.Errorf("roles %q: %+v", roles, v.Messages)
	}
	if got := v.Messages[4].Content; got != "<runtime-context update>\n## clock\n2\n</runtime-context>" {
		t.Errorf("update %q", got)
	}
	// Nothing changed: nothing sent, nothing to store.
	c.context(v.Context, v.ContextTokens)
	c.answer("reply two", 0)
	c.user("third", 0)
	in.Rows = c.rows
	v, _ = Materialize(in)
	if v.Context != nil || v.Messages[len(v.Messages)-1].Content != "third" {
		t.Errorf("unchanged context sent: %+v", v.Messages[len(v.Messages)-1])
	}
}

func TestClearCut(t *testing.T) {
	c := &conv{}
	c.user("before", 0)
	c.answer("old answer", 0)
	c.add(Row{Kind: KindClear})
	c.user("after", 0)
	old := &Checkpoint{Epoch: 3, AtSeq: 2, Evicted: 1}
	v, err := Materialize(Input{Rows: c.rows, Checkpoint: old, Budget: mustBudget(t, 0, "auto")})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Messages) != 1 || v.Messages[0].Content != "after" || v.Epoch != 0 {
		t.Errorf("view after clear: %+v epoch %d", v.Messages, v.Epoch)
	}
}

func TestAgentHistory(t *testing.T) {
	c := &conv{}
	c.user("hi", 0)
	c.add(Row{Kind: KindAssistant}) // empty, silent
	c.add(Row{Kind: KindTool, ToolCallID: "nobody", Text: "orphan"})
	c.add(Row{Kind: "event", Text: "typing"})
	c.answer("hello", 0)
	v, err := Materialize(Input{Rows: c.rows, Budget: mustBudget(t, 0, "auto")})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Messages) != 2 {
		t.Errorf("messages %+v", v.Messages)
	}
	if v.Reasoning[1] == "" {
		t.Error("reasoning of a row no checkpoint planned over was dropped")
	}
}

// The signals of the seed's table.
func TestSignals(t *testing.T) {
	bud := mustBudget(t, 0, "auto") // ceiling 111616, mark 94873, warn 80363
	c := &conv{}
	for i := 0; i < 40; i++ {
		c.user(fmt.Sprintf("q%d", i), 100)
		c.step("read_file", `{"path":"a"}`, "x", 2000, false)
		c.answer("a", 20)
	}
	base := Input{Rows: c.rows, Budget: bud, Overhead: 1000, Context: []Section{{"cwd", "/"}}, Roster: fullRoster}
	last := c.seq
	for _, tc := range []struct {
		name    string
		meas    Measurement
		sig     Signals
		trigger string
		warned  bool
	}{
		{"quiet", Measurement{Tokens: 50000, Seq: last}, Signals{}, "", false},
		{"warning", Measurement{Tokens: 81000, Seq: last}, Signals{}, "", true},
		{"mark", Measurement{Tokens: 95000, Seq: last}, Signals{}, TriggerAuto, false},
		{"stale measurement", Measurement{Tokens: 95000, Epoch: 4, Seq: last}, Signals{}, "", false},
		{"compact", Measurement{}, Signals{Compact: true}, TriggerManual, false},
		{"pruned", Measurement{}, Signals{Pruned: true}, TriggerSafetyNet, false},
		{"overflow", Measurement{}, Signals{Overflow: true}, TriggerOverflow, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := base
			in.Measured, in.Signals = tc.meas, tc.sig
			v, err := Materialize(in)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if v.Checkpoint != nil {
				got = v.Checkpoint.Trigger
			}
			if got != tc.trigger || v.Warned != tc.warned {
				t.Errorf("trigger %q warned %v, want %q %v", got, v.Warned, tc.trigger, tc.warned)
			}
			if tc.warned && !strings.Contains(v.Messages[len(v.Messages)-1].Content, "# Context checkpoint ahead") {
				t.Error("no warning section")
			}
		})
	}
	// Warned once: with the warning stored, the next turn does not repeat it.
	in := base
	in.Measured = Measurement{Tokens: 81000, Seq: last}
	v, _ := Materialize(in)
	c.context(v.Context, v.ContextTokens)
	c.answer("a", 20)
	c.user("next", 10)
	in.Rows = c.rows
	in.Measured = Measurement{Tokens: 82000, Seq: c.seq}
	if v, _ := Materialize(in); v.Warned || v.Context != nil {
		t.Errorf("warned twice (%v) or sent the warning's removal (%v)", v.Warned, v.Context)
	}

	// An estimate near the mark waits for a measurement; an estimate over the
	// ceiling checkpoints now (admission).
	big := &conv{}
	for i := 0; i < 60; i++ {
		big.user(fmt.Sprintf("q%d", i), 100)
		big.step("read_file", `{"path":"a"}`, "x", 2000, false)
	}
	in = Input{Rows: big.rows, Budget: bud, Overhead: 1000}
	v, err := Materialize(in)
	if err != nil {
		t.Fatal(err)
	}
	if v.Checkpoint == nil || v.Checkpoint.Trigger != TriggerAdmission || v.Size > bud.Ceiling || v.Measured {
		t.Errorf("over the ceiling: checkpoint %+v size %d", v.Checkpoint, v.Size)
	}
	in.Rows = big.rows[:3*42]
	if v, _ := Materialize(in); v.Checkpoint != nil {
		t.Errorf("an estimate under the ceiling (%d) scheduled a checkpoint", v.Size)
	}
}

func TestBudgetErrors(t *testing.T) {
	bud := mustBudget(t, 0, "auto")
	c := &conv{}
	c.user("tiny", 10)
	c.user("a pasted log", 120000)
	_, err := Materialize(Input{Rows: c.rows, Budget: bud, Overhead: 1000})
	var be *BudgetError
	if !errors.As(err, &be) || be.Stage != "preflight" || be.Limit != bud.Ceiling || be.Size < 120000 {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(be.Error(), "larger context limit") || !strings.Contains(be.Error(), fmt.Sprint(be.Size)) {
		t.Errorf("message %q", be.Error())
	}

	// A view whose history cannot shrink (one long pinned turn) fails in
	// admission after its checkpoint.
	c = &conv{}
	p := c.user("pinned and huge", 70000)
	p.Pinned = true
	c.answer("ok", 10)
	c.user("now", 10)
	_, err = Materialize(Input{Rows: c.rows, Budget: bud, Overhead: 45000})
	if !errors.As(err, &be) || be.Stage != "admission" || !strings.Contains(be.Error(), "/compact") {
		t.Fatalf("err = %v", err)
	}
}

func TestLatePin(t *testing.T) {
	c := cardConv()
	in := Input{Rows: c.rows, Budget: mustBudget(t, 0, "auto"), Overhead: 3000, Roster: fullRoster,
		Signals: Signals{Compact: true}, Context: []Section{{Key: "cwd", Text: "/src"}}}
	v, err := Materialize(in)
	if err != nil {
		t.Fatal(err)
	}
	cp := v.Checkpoint
	c.context(v.Context, v.ContextTokens)
	// Pin an evicted answer and a masked tool result after the fact.
	long := strings.Repeat("é", 9000)
	for i := range c.rows {
		r := &c.rows[i]
		if r.Seq == cp.Cards[0].From+3 { // the first turn's first tool result
			r.Pinned, r.Text = true, long
		}
		if len(cp.Masked) > 0 && r.Seq == cp.Masked[0].Seq {
			r.Pinned = true
		}
	}
	c.answer("done", 5)
	c.user("what did I pin?", 10)
	in.Rows, in.Checkpoint, in.Signals = c.rows, cp, Signals{}
	v, err = Materialize(in)
	if err != nil {
		t.Fatal(err)
	}
	last := v.Messages[len(v.Messages)-1].Content
	if !strings.Contains(last, "# Pinned messages") || strings.Count(last, "\n## m") != 2 {
		t.Fatalf("late pins section: %q", last[:min(len(last), 400)])
	}
	for _, part := range strings.Split(last, "\n## m")[1:] {
		body := part[strings.IndexByte(part, '\n')+1:]
		body = strings.TrimRight(strings.TrimSuffix(body, "\n</runtime-context>"), "\n")
		if n := utf8.RuneCountInString(body); n > PinMaxChars {
			t.Errorf("a late pin is %d characters", n)
		}
	}
	if !strings.Contains(last, "characters cut") {
		t.Error("no middle truncation")
	}
	// The next checkpoint keeps them whole; the late section goes.
	c.context(v.Context, v.ContextTokens)
	c.answer("ok", 5)
	for i := 0; i < 12; i++ {
		c.user("more work", 2500)
		c.answer("ok", 5)
	}
	in.Rows, in.Signals = c.rows, Signals{Compact: true}
	v, err = Materialize(in)
	if err != nil {
		t.Fatal(err)
	}
	if v.Checkpoint == nil || !strings.Contains(v.Messages[0].Content, long) {
		t.Fatal("the next checkpoint did not keep the late pin whole")
	}
	for _, m := range v.Messages[1:] {
		if strings.Contains(m.Content, "# Pinned messages\n") {
			t.Error("the late section outlived the checkpoint that preserved its pins")
		}
	}
	for _, cut := range v.Checkpoint.Masked {
		if len(cp.Masked) > 0 && cut.Seq == cp.Masked[0].Seq {
			t.Error("a pinned tool result stayed masked")
		}
	}
}

func TestPlannedCheckpointJSON(t *testing.T) {
	c := cardConv()
	v, err := Materialize(Input{Rows: c.rows, Budget: mustBudget(t, 0, "auto"), Signals: Signals{Compact: true}})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(v.Checkpoint)
	var back Checkpoint
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	// The stored checkpoint gives the same view as the one just planned.
	c.user("next", 10)
	v1, _ := Materialize(Input{Rows: c.rows, Budget: mustBudget(t, 0, "auto"), Checkpoint: v.Checkpoint})
	v2, _ := Materialize(Input{Rows: c.rows, Budget: mustBudget(t, 0, "auto"), Checkpoint: &back})
	if !jsonEqual(v1.Messages, v2.Messages) {
		t.Error("a checkpoint read back from JSON gives another view")
	}
	if !jsonEqual(v.Messages, v1.Messages[:len(v.Messages)]) {
		t.Error("the turn after a checkpoint does not extend its view")
	}
}
