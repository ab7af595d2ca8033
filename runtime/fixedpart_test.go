package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/openai"
	"github.com/mirror-gateway/mirror/runtime/tokens"
	"github.com/mirror-gateway/mirror/runtime/view"
)

// billing is a fake OpenAI-compatible server that bills each request's
// real count: every message's content and its formatting overhead, and
// the tool definitions as the wire carries them. It answers "Noted."
type billing struct {
	mu     sync.Mutex
	billed []int
}

func (f *billing) serve(t testing.TB) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
			Tools []struct {
				Function struct {
					Name        string          `json:"name"`
					Description string          `json:"description"`
					Parameters  json.RawMessage `json:"parameters"`
				} `json:"function"`
			} `json:"tools"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, 400)
			return
		}
		n := tokens.ReplyOverhead
		for _, m := range req.Messages {
			n += tokens.Count(m.Content) + tokens.MessageOverhead
		}
		for _, d := range req.Tools {
			n += tokens.Count(d.Function.Name) + tokens.Count(d.Function.Description) + tokens.Count(string(d.Function.Parameters)) + tokens.MessageOverhead
		}
		f.mu.Lock()
		f.billed = append(f.billed, n)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Noted."}}]}`+"\n\n")
		fmt.Fprint(w, `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		fmt.Fprintf(w, `data: {"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":2,"total_tokens":%d}}`+"\n\n", n, n+2)
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// offerMore adds defs to the tools a turn with a chat offers, after the
// engine's own, as a long roster (many MCP servers, say) would. Call it
// before the first turn.
func offerMore(e *Engine, defs []provider.Tool) {
	e.offered(true)
	e.offeredDefs = append(e.offeredDefs, defs...)
	for _, d := range defs {
		e.roster = append(e.roster, d.Name)
	}
}

// roster is n tool definitions of about size tokens each.
func roster(n, size int) []provider.Tool {
	var out []provider.Tool
	for i := range n {
		var b strings.Builder
		for w, n := 0, 0; n < size; w++ {
			line := fmt.Sprintf("Field %d of record %d holds the value the caller passes in. ", w, i)
			b.WriteString(line)
			n += tokens.Count(line)
		}
		out = append(out, provider.Tool{Name: fmt.Sprintf("lookup_%02d", i), Description: b.String(),
			Parameters: []byte(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`)})
	}
	return out
}

// session plays a chat's part turn after turn, as chats does: it keeps
// the record's rows, the checkpoint in force and the last measurement, and
// carries them into each turn.
type session struct {
	t     testing.TB
	e     *Engine
	host  *journal
	rows  []view.Row
	seq   uint64
	cp    *view.Checkpoint
	meas  view.Measurement
	turns int
	// What happened, by turn (1-based).
	firstCheckpoint, firstBoundary int
	readingAtCheckpoint            ContextInfo
	checkpoints, boundaries        int
}

// turn sends text as the person's message and runs the turn.
func (s *session) turn(text string) TurnResult {
	s.t.Helper()
	s.turns++
	last := s.seq
	s.seq++
	s.rows = append(s.rows, view.Row{Seq: s.seq, Kind: view.KindUser, Text: text, Tokens: tokens.Count(text)})
	s.host.mu.Lock()
	s.host.seq = s.seq
	cps, bds := len(s.host.checkpoints), len(s.host.boundaries)
	s.host.mu.Unlock()
	in := TurnInput{Chat: "c", Turn: uint64(s.turns), Chain: "default", Host: s.host, Rows: s.rows, Picked: len(s.rows) - 1,
		Last: last, Checkpoint: s.cp, Measured: s.meas}
	s.e.Prepare(&in)
	if p := in.Prepared; p != nil && p.View.Checkpoint != nil {
		// Planned on the chat's goroutine: the chat stores it with the
		// pickup, as Host.Checkpoint would.
		s.host.Checkpoint(p.View.Checkpoint)
	}
	res, err := s.e.Run(context.Background(), in, func(string) error { return nil })
	if err != nil {
		s.t.Fatalf("turn %d: %v", s.turns, err)
	}
	s.host.mu.Lock()
	if len(s.host.checkpoints) > cps {
		s.cp = s.host.checkpoints[len(s.host.checkpoints)-1]
		s.checkpoints++
		if s.firstCheckpoint == 0 {
			s.firstCheckpoint, s.readingAtCheckpoint = s.turns, res.Context
		}
	}
	if len(s.host.boundaries) > bds {
		s.boundaries++
		if s.firstBoundary == 0 {
			s.firstBoundary = s.turns
		}
	}
	s.seq = s.host.seq
	s.host.mu.Unlock()
	if res.Boundary != nil {
		// The fresh conversation: its opening, and the message that
		// crossed, carried as typed.
		s.seq++
		s.rows = []view.Row{openingRow(res.Boundary.Opening, s.seq)}
		if res.Boundary.CarryFrom != 0 {
			s.seq++
			s.rows = append(s.rows, view.Row{Seq: s.seq, Kind: view.KindUser, Text: text, Tokens: tokens.Count(text)})
		}
		s.cp = nil
	}
	s.seq++
	s.rows = append(s.rows, view.Row{Seq: s.seq, Kind: view.KindAssistant, Text: res.Reply, Tokens: tokens.Count(res.Reply)})
	s.meas = res.Measured
	return res
}

// fixedSession is an engine on a 128k window, with the default limits,
// asking a billing fake, whose turns offer the engine's own tools plus
// extra definitions of extraTokens in all.
func fixedSession(t testing.TB, extraTokens int) *session {
	t.Helper()
	f := &billing{}
	m := &Model{Name: "m", ProvName: "fake", Provider: openai.New(openai.Config{Name: "fake", BaseURL: f.serve(t)}),
		Remote: "gpt-4o", Window: 128000, ContextLimit: config.ContextAuto, ContinuityBudget: 2000}
	e, err := NewEngine([]*Model{m}, map[string][]string{"default": {"m"}}, config.Roles{Chat: "default", Reflect: "default"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if extraTokens > 0 {
		offerMore(e, roster(extraTokens/1000, 1000))
	}
	return &session{t: t, e: e, host: &journal{}}
}

// words is a message of about n tokens.
func message(i, n int) string {
	var b strings.Builder
	for w := 0; b.Len() < n*5; w++ {
		fmt.Fprintf(&b, "Step %d, note %d: the figures for region %d are in. ", i, w, (i*7+w)%13)
	}
	return b.String()
}

// With a large fixed part (a long tool roster: over 70k of the 111,616-token
// ceiling of a 128k window), the provider's measurement reaches the 85 %
// checkpoint mark while the conversation is still below hard: the
// checkpoint fires by itself, before any boundary, and the requests after
// it are smaller. With Mirror's own few tools, hard comes first.
func TestACheckpointFiresBeforeHardWithALargeFixedPart(t *testing.T) {
	s := fixedSession(t, 75000)
	sz := s.e.sizer(s.e.models["m"], s.e.offered(true))
	if hard := 128000 / 4; sz.fixed < 70000 || sz.fixed+hard <= sz.budget.Mark {
		t.Fatalf("the test needs a fixed part (%d) that puts hard's share (%d) past the mark (%d)", sz.fixed, hard, sz.budget.Mark)
	}
	var billed []int
	for i := 1; s.firstCheckpoint == 0 && s.firstBoundary == 0; i++ {
		if i > 40 {
			t.Fatalf("40 turns, neither a checkpoint nor a boundary")
		}
		res := s.turn(message(i, 1500))
		billed = append(billed, res.Usage.InputTokens)
	}
	if s.firstBoundary != 0 {
		t.Fatalf("turn %d ran a boundary before any checkpoint (hard %d, mark %d, fixed %d, billed %v)",
			s.firstBoundary, sz.limits.Hard, sz.budget.Mark, sz.fixed, billed)
	}
	if r := s.readingAtCheckpoint; r.HardReached || r.Used >= r.Hard {
		t.Fatalf("the checkpoint came with the conversation at %d, hard %d reached", r.Used, r.Hard)
	}
	if cp := s.cp; cp == nil || cp.Trigger != view.TriggerAuto {
		t.Fatalf("checkpoint %+v, want one the measurement triggered", cp)
	}
	before := billed[len(billed)-2]
	if before < sz.budget.Mark {
		t.Fatalf("the request before the checkpoint was %d, below the mark %d", before, sz.budget.Mark)
	}
	if after := billed[len(billed)-1]; after >= before || after >= sz.budget.Mark {
		t.Fatalf("the checkpoint did not shrink the request: %d then %d (mark %d)", before, after, sz.budget.Mark)
	}
	// And it keeps working: more turns, no boundary, every request fits.
	for i := range 10 {
		if res := s.turn(message(100+i, 1500)); res.Usage.InputTokens > sz.budget.Ceiling {
			t.Fatalf("turn %d billed %d, past the ceiling %d", s.turns, res.Usage.InputTokens, sz.budget.Ceiling)
		}
	}
	if s.boundaries != 0 {
		t.Fatalf("%d boundaries after the checkpoint", s.boundaries)
	}

	// With only the engine's own tools, hard comes first.
	small := fixedSession(t, 0)
	for i := 1; small.firstCheckpoint == 0 && small.firstBoundary == 0; i++ {
		if i > 60 {
			t.Fatalf("60 turns, neither a checkpoint nor a boundary")
		}
		small.turn(message(i, 1500))
	}
	if small.firstBoundary == 0 {
		t.Fatalf("with a small fixed part a checkpoint (turn %d) came before hard", small.firstCheckpoint)
	}
}

// BenchmarkFixedPart runs a 40-turn session of ~1,500-token messages on a
// 128k window with the default limits, with the engine's own tools only
// and with a long roster on top, and reports which mechanism acted first
// and when: the turn of the first checkpoint and of the first boundary
// (0: none), how many of each, and the largest request billed against the
// ceiling. Run it with -benchtime=1x: one session is the measurement.
func BenchmarkFixedPart(b *testing.B) {
	for _, extra := range []int{0, 40000, 75000} {
		b.Run(fmt.Sprintf("extra=%dk", extra/1000), func(b *testing.B) {
			for b.Loop() {
				s := fixedSession(b, extra)
				sz := s.e.sizer(s.e.models["m"], s.e.offered(true))
				peak, total := 0, 0
				for i := 1; i <= 40; i++ {
					res := s.turn(message(i, 1500))
					peak = max(peak, res.Usage.InputTokens)
					total += res.Usage.InputTokens
				}
				b.ReportMetric(float64(sz.fixed), "fixed-tokens")
				b.ReportMetric(float64(sz.limits.Hard), "hard-tokens")
				b.ReportMetric(float64(s.firstCheckpoint), "first-checkpoint-turn")
				b.ReportMetric(float64(s.firstBoundary), "first-boundary-turn")
				b.ReportMetric(float64(s.checkpoints), "checkpoints")
				b.ReportMetric(float64(s.boundaries), "boundaries")
				b.ReportMetric(float64(peak)/float64(sz.budget.Ceiling)*100, "peak-%-of-ceiling")
				b.ReportMetric(float64(total)/40, "billed/turn")
			}
		})
	}
}
