package chats

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/openai"
	"github.com/mirror-gateway/mirror/runtime/tokens"
)

// BenchmarkLongSession runs a 300-turn scripted session against a fake
// OpenAI server twice, with boundaries (hard at 10 % of a 200k window) and
// without (hard at the whole window), and reports the input tokens billed:
// with boundaries the cost per turn stays flat.
func BenchmarkLongSession(b *testing.B) {
	const turns = 300
	for b.Loop() {
		with := longSession(b, turns, 0.08, 0.10)
		without := longSession(b, turns, 0.99, 1.0)
		b.ReportMetric(float64(with.total), "billed-with")
		b.ReportMetric(float64(without.total), "billed-without")
		b.ReportMetric(float64(without.total)/float64(with.total), "ratio")
		b.ReportMetric(float64(with.boundaries), "boundaries")
		b.ReportMetric(float64(with.last), "last-turn-with")
		b.ReportMetric(float64(without.last), "last-turn-without")
	}
}

type sessionCost struct {
	total, last, boundaries int
}

func longSession(b *testing.B, turns int, soft, hard float64) sessionCost {
	b.Helper()
	f := &scripted{reply: func(wireReq) (string, []provider.ToolCall) { return "Noted; carrying on with the next step.", nil }}
	url := f.serve(b)
	dir := b.TempDir()
	db, err := OpenDB(filepath.Join(dir, "m.db"), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	store, err := NewStore(db)
	if err != nil {
		b.Fatal(err)
	}
	eng, err := runtime.NewEngine([]*runtime.Model{{Name: "m", ProvName: "fake", Provider: openai.New(openai.Config{Name: "fake", BaseURL: url}),
		Remote: "gpt-4o", Window: 200000, MaxOutput: 1000, SoftRatio: soft, HardRatio: hard, ContinuityBudget: 2000}},
		map[string][]string{"default": {"m"}}, config.Roles{Chat: "default", Reflect: "default"}, 4)
	if err != nil {
		b.Fatal(err)
	}
	svc := New(Options{Store: store, Turner: eng, Idle: time.Minute})
	defer func() {
		svc.Close(bg)
		store.Close()
		db.Close()
	}()
	c, err := svc.Create(bg, "long", "", Origin{})
	if err != nil {
		b.Fatal(err)
	}
	s := newSub()
	if err := svc.Open(bg, c.ID, nil, s, ""); err != nil {
		b.Fatal(err)
	}
	var cost sessionCost
	for i := range turns {
		if _, err := svc.Send(bg, c.ID, words("Step "+strconv.Itoa(i)+" of the work.", 300), "k"+strconv.Itoa(i), "", Origin{}); err != nil {
			b.Fatal(err)
		}
		s.waitFor(b, "turn", has(EvTurnFinished, i+1))
	}
	for _, ev := range s.events() {
		switch ev.Type {
		case EvTurnFinished:
			cost.total += pay[*TurnFinished](ev).Usage.InputTokens
			cost.last = pay[*TurnFinished](ev).Usage.InputTokens
		case EvBoundary:
			cost.boundaries++
		}
	}
	return cost
}

// BenchmarkSizeTurn is the cost of sizing a turn (the rows of the
// conversation and the view built from them) against how many rows the
// chat's record holds before its latest boundary: constant in the old rows.
func BenchmarkSizeTurn(b *testing.B) {
	eng, err := runtime.NewEngine([]*runtime.Model{{Name: "m", Provider: nil, Remote: "gpt-4o", Window: 200000}},
		map[string][]string{"default": {"m"}}, config.Roles{Chat: "default"}, 1)
	if err != nil {
		b.Fatal(err)
	}
	tokens.Count("load the encoding before measuring")
	for _, old := range []int{0, 10_000, 100_000} {
		b.Run(fmt.Sprintf("old=%d", old), func(b *testing.B) {
			a := &actor{}
			a.msgs = make([]Message, 0, old+201)
			for i := range old + 200 {
				role := provider.RoleUser
				if i%2 == 1 {
					role = provider.RoleAssistant
				}
				a.msgs = append(a.msgs, Message{ID: "m" + strconv.Itoa(i+2), Seq: uint64(i + 2), Role: role, State: MsgDone,
					Text: "a message of the conversation, about twenty tokens long when it is counted", Tokens: 20})
			}
			a.conv.start = old // a boundary after the old rows
			b.ReportAllocs()
			for b.Loop() {
				in := runtime.TurnInput{Chain: "default", Rows: a.rows(), Host: &host{a: a}}
				in.Picked = len(in.Rows) - 1
				eng.Prepare(&in)
				if in.Prepared == nil || in.Prepared.Err != nil {
					b.Fatal("no view")
				}
			}
		})
	}
}
