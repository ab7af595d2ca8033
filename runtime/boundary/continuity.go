package boundary

import (
	"fmt"
	"sort"

	"github.com/mirror-gateway/mirror/runtime/tokens"
)

// continueIntro opens a cleared conversation whose work goes on, word for
// word as the seed has it.
const continueIntro = "This conversation was consolidated and cleared, and the work carries on here.\n" +
	"What was said is archived and searchable with `recall_history`; what a past\n" +
	"boundary wrote down, including this one, is listed and read back with\n" +
	"`handoff_history`; what it taught is in memory. This is where the work stood."

// endedIntro opens a cleared conversation whose work is finished: the
// record is left at the top, and nothing starts until the person speaks.
const endedIntro = "This conversation was consolidated and cleared, and it ended here: the work is finished.\n" +
	"What was said is archived and searchable with `recall_history`; what a past\n" +
	"boundary wrote down, including this one, is listed and read back with\n" +
	"`handoff_history`; what it taught is in memory. Nothing starts until you speak.\n" +
	"This is where the work stood."

// waitingIntro opens a cleared conversation that stopped at hard to wait
// for the person: the assistant did not answer the forced ask and the
// handoff kept along the way names nothing left to do. The work is not
// said to be finished, because nobody said so.
const waitingIntro = "This conversation was consolidated and cleared, and it stopped here to wait for you.\n" +
	"What was said is archived and searchable with `recall_history`; what a past\n" +
	"boundary wrote down, including this one, is listed and read back with\n" +
	"`handoff_history`; what it taught is in memory. Nothing starts until you speak.\n" +
	"This is where the work stood."

// Continuity is the message that opens the cleared conversation when the
// work goes on: the seed's words, the seqs the record is current through,
// and the handoff rendered with t. throughSeq is the last seq the archived
// conversation held; the assistant's last judgement is h.JudgedSeq.
//
// The message is bounded by budget tokens (boundary.continuity_budget_tokens;
// ≤ 0: unbounded) as count measures them (nil: tokens.Count). Over it, list
// items are dropped, fewest first, in this order: the runtime's half (files
// read, commands, failed calls, files changed, the task list, what is still
// running), then the assistant's (done, finished steps, the other steps,
// blocked, constraints, remaining), each list oldest item first; Objective
// and Next action are never dropped. A last line says how many items went.
// dropped is that number. If even dropping every item cannot meet the
// budget, the message is returned over it: what is left cannot be cut.
func Continuity(t *Template, h *Handoff, throughSeq uint64, budget int, count func(string) int) (text string, dropped int, err error) {
	return compose(t, h, continueIntro, throughSeq, budget, count)
}

// Ended is the message left at the top of the cleared conversation when the
// work is finished, with the record below it. why, when not "", says why it
// ended although the assistant asked to carry on (NotOwed). It is bounded
// like Continuity.
func Ended(t *Template, h *Handoff, throughSeq uint64, why string, budget int, count func(string) int) (text string, dropped int, err error) {
	intro := endedIntro
	if why != "" {
		intro += "\n\n" + why
	}
	return compose(t, h, intro, throughSeq, budget, count)
}

// Waiting is the message left at the top of the cleared conversation when
// the assistant did not answer the forced ask at hard and the handoff kept
// along the way names nothing left to do (NotAnswered): the work waits for
// the person, with the record below. It is bounded like Continuity.
func Waiting(t *Template, h *Handoff, throughSeq uint64, budget int, count func(string) int) (text string, dropped int, err error) {
	return compose(t, h, waitingIntro+"\n\n"+NotAnswered, throughSeq, budget, count)
}

func compose(t *Template, h *Handoff, intro string, through uint64, budget int, count func(string) int) (string, int, error) {
	if count == nil {
		count = tokens.Count
	}
	head := intro + "\n\n" + seqLine(through, h.JudgedSeq) + "\n\n"
	order := dropOrder(h)
	build := func(k int) (string, error) {
		body, err := t.Render(without(h, order[:k]))
		if err != nil {
			return "", err
		}
		s := head + body
		if k > 0 {
			s += fmt.Sprintf("\n(%s dropped to stay within %d tokens; read the whole record with `handoff_history`.)\n", items(k), budget)
		}
		return s, nil
	}
	text, err := build(0)
	if err != nil || budget <= 0 || count(text) <= budget {
		return text, 0, err
	}
	// Fewer items make a shorter message, so the least k that fits can be
	// found by halving; the counting is the dear part.
	var ferr error
	k := sort.Search(len(order), func(k int) bool {
		s, err := build(k + 1)
		if err != nil {
			ferr = err
			return true
		}
		return count(s) <= budget
	}) + 1
	if ferr != nil {
		return "", 0, ferr
	}
	k = min(k, len(order))
	if k == 0 {
		return text, 0, nil // nothing to drop
	}
	text, err = build(k)
	return text, k, err
}

func seqLine(through, judged uint64) string {
	s := fmt.Sprintf("Current through event %d of this chat's record.", through)
	if judged == 0 {
		return s + " The agent did not write its judgement; the handoff holds what the record saw."
	}
	return s + fmt.Sprintf(" The agent last wrote its judgement at event %d.", judged)
}

func items(n int) string {
	if n == 1 {
		return "1 item"
	}
	return fmt.Sprintf("%d items", n)
}

// ref names one list item of a Handoff.
type ref struct {
	list int
	i    int
}

// The lists in the order they give up items.
const (
	lRead = iota
	lCommands
	lFailed
	lChanged
	lTasks
	lRunning
	lDone
	lSteps
	lBlocked
	lConstraints
	lRemaining
)

func dropOrder(h *Handoff) []ref {
	var out []ref
	add := func(list, n int) {
		for i := range n {
			out = append(out, ref{list, i})
		}
	}
	add(lRead, len(h.Seen.Read))
	add(lCommands, len(h.Seen.Commands))
	add(lFailed, len(h.Seen.Failed))
	add(lChanged, len(h.Seen.Changed))
	add(lTasks, len(h.Seen.Tasks))
	add(lRunning, len(h.Seen.Running))
	add(lDone, len(h.Done))
	// Finished steps go before the ones still ahead.
	for i, s := range h.Steps {
		if s.State == StepDone {
			out = append(out, ref{lSteps, i})
		}
	}
	for i, s := range h.Steps {
		if s.State != StepDone {
			out = append(out, ref{lSteps, i})
		}
	}
	add(lBlocked, len(h.Blocked))
	add(lConstraints, len(h.Constraints))
	add(lRemaining, len(h.Remaining))
	return out
}

// without is a copy of h lacking the items refs name.
func without(h *Handoff, refs []ref) *Handoff {
	if len(refs) == 0 {
		return h
	}
	gone := map[ref]bool{}
	for _, r := range refs {
		gone[r] = true
	}
	c := *h
	c.Seen.Read = keep(h.Seen.Read, lRead, gone)
	c.Seen.Commands = keep(h.Seen.Commands, lCommands, gone)
	c.Seen.Failed = keep(h.Seen.Failed, lFailed, gone)
	c.Seen.Changed = keep(h.Seen.Changed, lChanged, gone)
	c.Seen.Tasks = keep(h.Seen.Tasks, lTasks, gone)
	c.Seen.Running = keep(h.Seen.Running, lRunning, gone)
	c.Done = keep(h.Done, lDone, gone)
	c.Steps = keep(h.Steps, lSteps, gone)
	c.Blocked = keep(h.Blocked, lBlocked, gone)
	c.Constraints = keep(h.Constraints, lConstraints, gone)
	c.Remaining = keep(h.Remaining, lRemaining, gone)
	return &c
}

func keep[T any](list []T, id int, gone map[ref]bool) []T {
	var out []T
	for i, v := range list {
		if !gone[ref{id, i}] {
			out = append(out, v)
		}
	}
	return out
}
