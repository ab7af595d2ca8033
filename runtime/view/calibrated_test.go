package view

import (
	"errors"
	"math"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/budget"
	"github.com/mirror-gateway/mirror/runtime/tokens"
)

// scale is a Corrector that bills every model f times the local count.
type scale float64

func (f scale) Correct(_ string, n int) int { return int(math.Ceil(float64(n) * float64(f))) }

// The preflight, admission and the rows after a measurement are sized with
// the corrected count: a view that fits by the local count but not as the
// provider bills it is checkpointed, or refused when its active turn alone
// cannot fit. A measurement counts only for its epoch and Basis.
func TestSizesAreCorrected(t *testing.T) {
	bud, _ := budget.New(12000, "auto", 0) // ceiling 9,600
	basis := Basis{Model: "m", Prompt: "p", Tools: "t"}
	history := func() []Row {
		c := &conv{}
		for range 6 {
			c.user("a question about the figures", 1300)
			c.answer("Noted.", 3)
		}
		c.user("and now?", 5)
		return c.rows
	}
	alone := func() []Row {
		c := &conv{}
		c.user("one long message", 8400)
		return c.rows
	}
	tests := []struct {
		name       string
		rows       []Row
		correct    Corrector
		meas       Measurement
		stage      string // the refusing stage, "" when admitted
		checkpoint bool
		measured   bool
	}{
		{"history, raw", history(), nil, Measurement{}, "", false, false},
		{"history, corrected", history(), scale(1.5), Measurement{}, "", true, false},
		{"active turn, raw", alone(), nil, Measurement{}, "", false, false},
		{"active turn, corrected", alone(), scale(1.5), Measurement{}, "preflight", false, false},
		{"measured, the same basis", history(), scale(1.5), Measurement{Tokens: 8000, Seq: 12, Basis: basis}, "", false, true},
		{"measured, another model", history(), scale(1.5), Measurement{Tokens: 8000, Seq: 12, Basis: Basis{Model: "x", Prompt: "p", Tools: "t"}}, "", true, false},
		{"measured, other tools", history(), nil, Measurement{Tokens: 8000, Seq: 12, Basis: Basis{Model: "m", Prompt: "p"}}, "", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Materialize(Input{Rows: tc.rows, Budget: bud, Overhead: 100, Basis: basis, Correct: tc.correct, Measured: tc.meas})
			var be *BudgetError
			if tc.stage != "" {
				if !errors.As(err, &be) || be.Stage != tc.stage {
					t.Fatalf("err %v: want refused at %s", err, tc.stage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (v.Checkpoint != nil) != tc.checkpoint || v.Measured != tc.measured || v.Size > bud.Ceiling {
				t.Fatalf("checkpoint %v, measured %t, size %d: want checkpoint %t, measured %t, within %d", v.Checkpoint != nil, v.Measured, v.Size, tc.checkpoint, tc.measured, bud.Ceiling)
			}
			if tc.measured && v.Size != 8000+tc.correct.Correct("m", 5+tokens.MessageOverhead) {
				t.Fatalf("size %d: want the bill plus the corrected rows after it", v.Size)
			}
		})
	}
}
