package boundary

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/tokens"
)

// The seed's opening, word for word, with N = 57 and M = 40.
const seedOpening = "This conversation was consolidated and cleared, and the work carries on here.\n" +
	"What was said is archived and searchable with `recall_history`; what a past\n" +
	"boundary wrote down, including this one, is listed and read back with\n" +
	"`handoff_history`; what it taught is in memory. This is where the work stood.\n" +
	"\n" +
	"Current through event 57 of this chat's record. The agent last wrote its judgement at event 40.\n" +
	"\n"

func TestContinuity(t *testing.T) {
	h := seedHandoff(t)
	text, dropped, err := Continuity(DefaultTemplate(), h, 57, 8000, tokens.Count)
	if err != nil || dropped != 0 {
		t.Fatalf("dropped %d, %v", dropped, err)
	}
	if !strings.HasPrefix(text, seedOpening+seedHalf) {
		t.Errorf("not the seed's message:\n%s", text)
	}
	golden(t, "continuity.golden", text)

	ended, _, err := Ended(DefaultTemplate(), h, 57, NotOwed, 8000, nil)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "ended.golden", ended)

	// The forced ask went unanswered and the handoff kept along the way
	// names nothing left to do: the work waits, and is not called finished.
	idle := *h
	idle.Steps = []Step{{StepDone, "the failure path for a missing account"}}
	idle.Remaining, idle.NextAction, idle.JudgedSeq = nil, "", 0
	idle.Seen.Tasks = []Step{{StepDone, "the export feature"}} // a finished task list owes nothing
	if Owed(&idle) || Unanswered(&idle) != NotAnswered {
		t.Fatalf("an idle handoff: owed %v, says %q", Owed(&idle), Unanswered(&idle))
	}
	waiting, _, err := Waiting(DefaultTemplate(), &idle, 57, 8000, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(waiting, "finished") || !strings.Contains(waiting, "stopped here to wait for you") ||
		!strings.Contains(waiting, NotAnswered) {
		t.Errorf("the waiting opening:\n%s", waiting)
	}
	golden(t, "waiting.golden", waiting)
	// When it names something still to do, the words say the work carries
	// on from it, as the seed does.
	if Unanswered(h) != NotAnsweredCarriesOn || !strings.Contains(NotAnsweredCarriesOn, "starts fresh from the handoff the runtime kept along the way") {
		t.Errorf("an owed handoff says %q", Unanswered(h))
	}

	// Never judged: the message says the handoff is what the record saw.
	h.JudgedSeq = 0
	text, _, _ = Continuity(DefaultTemplate(), h, 57, 0, nil)
	if !strings.Contains(text, "Current through event 57 of this chat's record. The agent did not write its judgement; the handoff holds what the record saw.\n") {
		t.Errorf("unjudged:\n%s", text)
	}
}

func TestContinuityBudget(t *testing.T) {
	h := seedHandoff(t)
	for i := range 60 {
		h.Seen.ObserveCall("read_file", fmt.Sprintf(`{"path": "src/pkg%02d/file.go"}`, i), false, uint64(100+i))
		h.Done = append(h.Done, fmt.Sprintf("finished part %d of the export, with its tests", i))
	}
	full, dropped, err := Continuity(DefaultTemplate(), h, 300, 0, nil)
	if err != nil || dropped != 0 {
		t.Fatal(dropped, err)
	}
	size := tokens.Count(full)
	tests := []struct {
		name   string
		budget int
		check  func(t *testing.T, text string, dropped int)
	}{
		{"fits", size, func(t *testing.T, text string, dropped int) {
			if dropped != 0 || text != full {
				t.Errorf("dropped %d at exactly the size", dropped)
			}
		}},
		// A little less: only the runtime's oldest reads go.
		{"runtime half first", size - 60, func(t *testing.T, text string, dropped int) {
			if dropped == 0 || strings.Contains(text, "src/pkg00/") || !strings.Contains(text, "src/pkg59/") {
				t.Errorf("dropped %d, wrong items:\n%s", dropped, text)
			}
			if !strings.Contains(text, "- finished part 0 of") {
				t.Error("the assistant's half lost an item before the runtime's was empty")
			}
		}},
		// Much less: the assistant's Done goes too, oldest first, never
		// Objective or Next action.
		{"assistant half", size / 3, func(t *testing.T, text string, dropped int) {
			if strings.Contains(text, "## Files read") || strings.Contains(text, "- finished part 0 of") {
				t.Errorf("kept too much:\n%s", text)
			}
			for _, must := range []string{"ship the export feature", "write the partial-export test", "- finished part 59 of"} {
				if !strings.Contains(text, must) {
					t.Errorf("lost %q", must)
				}
			}
		}},
		{"impossible", 10, func(t *testing.T, text string, dropped int) {
			if !strings.Contains(text, "ship the export feature") || !strings.Contains(text, "write the partial-export test") {
				t.Error("Objective or Next action dropped")
			}
			if !strings.Contains(text, "## Remaining\n(none)") {
				t.Errorf("not everything dropped:\n%s", text)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text, dropped, err := Continuity(DefaultTemplate(), h, 300, tc.budget, nil)
			if err != nil {
				t.Fatal(err)
			}
			if dropped > 0 {
				line := fmt.Sprintf("\n(%d items dropped to stay within %d tokens; read the whole record with `handoff_history`.)\n", dropped, tc.budget)
				if !strings.HasSuffix(text, line) {
					t.Errorf("no dropped line %q:\n%s", line, text)
				}
				if n := tokens.Count(text); n > tc.budget && tc.name != "impossible" {
					t.Errorf("%d tokens over the budget %d", n, tc.budget)
				}
				// The least number of items was dropped.
				if tc.name != "impossible" {
					order := dropOrder(h)
					fewer, _ := DefaultTemplate().Render(without(h, order[:dropped-1]))
					if tokens.Count(text[:strings.Index(text, "# Handoff")]+fewer) <= tc.budget-30 {
						t.Errorf("dropped %d items, fewer would have fit", dropped)
					}
				}
			}
			tc.check(t, text, dropped)
		})
	}
}
