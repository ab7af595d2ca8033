package view

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// sim plays turns of a chat the way the lead's turn loop will: materialize,
// store the checkpoint and the runtime context, then the turn's rows, then
// the provider's measurement of its last request.
type sim struct {
	t       testing.TB
	c       conv
	cp      *Checkpoint
	meas    Measurement
	sig     Signals
	in      Input
	turnNum int
}

func newSim(t testing.TB, window int) *sim {
	return &sim{t: t, in: Input{Budget: mustBudget(t, window, "auto"), Overhead: 2000, Roster: fullRoster}}
}

// turn materializes turn n's view after its user message, then plays the
// rest of the turn.
func (s *sim) turn() View {
	s.turnNum++
	n := s.turnNum
	s.c.user(fmt.Sprintf("request %d: look at src/file%d.go and run the tests of pkg%d", n, n, n%3), 30)
	in := s.in
	in.Rows, in.Checkpoint, in.Measured, in.Signals = s.c.rows, s.cp, s.meas, s.sig
	in.Context = []Section{{Key: "clock", Text: fmt.Sprintf("hour %d", n/5)}, {Key: "cwd", Text: "/work/project"}}
	v, err := Materialize(in)
	if err != nil {
		s.t.Fatalf("turn %d: %v", n, err)
	}
	if again, err := Materialize(in); err != nil || !jsonEqual(again.Messages, v.Messages) {
		s.t.Fatalf("turn %d: a second materialization of the same input differs (%v)", n, err)
	}
	s.sig = Signals{}
	if v.Checkpoint != nil {
		s.cp = v.Checkpoint
	}
	if v.Context != nil {
		s.c.context(v.Context, v.ContextTokens)
	}
	s.c.step("read_file", fmt.Sprintf(`{"path": "src/file%d.go"}`, n), fmt.Sprintf("package pkg\n// file %d, 300 lines", n), 1500, false)
	s.c.step("shell", fmt.Sprintf(`{"command": "go test ./pkg%d"}`, n%3), fmt.Sprintf("exit status %d\n--- FAIL: TestX", n%7), 800, n%7 == 0)
	s.meas = Measurement{Tokens: v.Size + 2*(20+3) + 1500 + 800 + 2*3, Epoch: v.Epoch, Seq: s.c.seq}
	if n%4 == 0 {
		s.c.answer(strings.Repeat(fmt.Sprintf("Paragraph of answer %d. ", n), 160), 900)
	} else {
		s.c.answer(fmt.Sprintf("Done with request %d.", n), 60)
	}
	return v
}

// Same rows, same checkpoint, same bytes: every turn's messages extend the
// previous turn's byte for byte, until a checkpoint re-plans the view.
func TestAppendOnly(t *testing.T) {
	s := newSim(t, 0)
	var prev []byte
	var log bytes.Buffer
	fired := 0
	var last View
	for i := 0; i < 50; i++ {
		v := s.turn()
		cur, err := json.Marshal(v.Messages)
		if err != nil {
			t.Fatal(err)
		}
		if v.Checkpoint != nil {
			fired++
		} else if prev != nil && !bytes.HasPrefix(cur, prev[:len(prev)-1]) {
			t.Fatalf("turn %d: messages do not extend turn %d's:\n%s", s.turnNum, s.turnNum-1, firstDiff(prev, cur))
		}
		prev = cur
		cp := "-"
		if v.Checkpoint != nil {
			cp = fmt.Sprintf("epoch %d (%s) evicted m%d masked %d folded %d, %d→%d", v.Checkpoint.Epoch, v.Checkpoint.Trigger,
				v.Checkpoint.Evicted, len(v.Checkpoint.Masked), len(v.Checkpoint.Folded), v.Checkpoint.Before, v.Checkpoint.After)
		}
		fmt.Fprintf(&log, "turn %2d: %3d messages, %6d bytes, size %6d measured %-5v warned %-5v sha %x checkpoint %s\n",
			s.turnNum, len(v.Messages), len(cur), v.Size, v.Measured, v.Warned, sha256.Sum256(cur), cp)
		last = v
	}
	if fired == 0 {
		t.Fatal("no checkpoint in 50 turns; the test no longer covers one")
	}
	log.WriteString("\nlast view:\n")
	log.Write(marshal(t, last.Messages))
	golden(t, "append_only.golden", log.Bytes())
}

func jsonEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// A build knows which of the tools its pointers name the roster offers,
// whatever else the roster holds, from a set it does not allocate.
func TestOfferedTools(t *testing.T) {
	for _, tc := range []struct {
		roster         []string
		output, search bool
	}{
		{nil, false, false},
		{[]string{"shell", "read_file"}, false, false},
		{[]string{"shell", ToolOutput}, true, false},
		{[]string{GlobalSearch}, false, true},
		{[]string{GlobalSearch, "shell", ToolOutput, ToolOutput}, true, true},
	} {
		got := offered(tc.roster)
		if got[ToolOutput] != tc.output || got[GlobalSearch] != tc.search || len(got) != btoi(tc.output)+btoi(tc.search) {
			t.Errorf("offered(%q) = %v", tc.roster, got)
		}
	}
	if n := testing.AllocsPerRun(10, func() { offered([]string{ToolOutput, GlobalSearch}) }); n != 0 {
		t.Errorf("offered allocates %v times", n)
	}
}
