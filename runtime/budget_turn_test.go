package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/boundary"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/openai"
	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
	"github.com/mirror-gateway/mirror/runtime/tokens"
	"github.com/mirror-gateway/mirror/runtime/tools"
	"github.com/mirror-gateway/mirror/runtime/view"
)

// wireReq is what the windowed fake reads of a chat-completions request.
type wireReq struct {
	Messages []struct {
		Role      string `json:"role"`
		Content   string `json:"content"`
		ToolCalls []struct {
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
}

func (r *wireReq) forced() bool { return len(r.ToolChoice) > 0 && string(r.ToolChoice) != "null" }

// reflect says the request is reflect's (its system message says so).
func (r *wireReq) reflect() bool {
	return len(r.Messages) > 0 && strings.Contains(r.Messages[0].Content, "about to be archived")
}

func (r *wireReq) last() string {
	if n := len(r.Messages); n > 0 {
		return r.Messages[n-1].Role
	}
	return ""
}

// windowed is a fake OpenAI-compatible model with a context window: it
// bills each request's real count (every message's content and tool calls,
// their formatting, the tool definitions as the wire carries them), scaled
// by scale as a provider whose tokenizer counts more than tiktoken's would,
// and refuses a request past its window as OpenAI does. It keeps the size
// of every request it received.
type windowed struct {
	window int
	scale  float64 // 0 is 1
	reply  func(r *wireReq) (string, []provider.ToolCall)

	mu    sync.Mutex
	sizes []int // billed size of every request received
	kinds []string
}

func (f *windowed) serve(t testing.TB) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, hr *http.Request) {
		var r wireReq
		if err := json.NewDecoder(hr.Body).Decode(&r); err != nil {
			http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, 400)
			return
		}
		n := tokens.ReplyOverhead
		for _, m := range r.Messages {
			n += tokens.Count(m.Content) + tokens.MessageOverhead
			for _, c := range m.ToolCalls {
				n += tokens.Count(c.Function.Name) + tokens.Count(c.Function.Arguments)
			}
		}
		for _, d := range r.Tools {
			n += tokens.Count(d.Function.Name) + tokens.Count(d.Function.Description) + tokens.Count(string(d.Function.Parameters)) + tokens.MessageOverhead
		}
		if f.scale > 0 {
			n = int(math.Ceil(float64(n) * f.scale))
		}
		kind := "turn"
		switch {
		case r.forced():
			kind = "ask"
		case r.reflect():
			kind = "reflect"
		}
		f.mu.Lock()
		f.sizes = append(f.sizes, n)
		f.kinds = append(f.kinds, kind)
		text, calls := "", []provider.ToolCall(nil)
		if n <= f.window {
			text, calls = f.reply(&r)
		}
		f.mu.Unlock()
		if n > f.window {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			fmt.Fprintf(w, `{"error":{"message":"This model's maximum context length is %d tokens. However, your messages resulted in %d tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}`, f.window, n)
			return
		}
		providertest.StreamOpenAI(w, text, calls, n, 5)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// received is the billed size and kind of every request so far.
func (f *windowed) received() ([]int, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.sizes...), append([]string(nil), f.kinds...)
}

// windowEngine is one model on the windowed fake, with the default limits
// (soft 0.20, hard 0.25 of the window) and reflect on the same chain.
func windowEngine(t *testing.T, f *windowed, reg *tools.Registry) *Engine {
	t.Helper()
	m := &Model{Name: "m", ProvName: "fake", Provider: openai.New(openai.Config{Name: "fake", BaseURL: f.serve(t)}),
		Remote: "gpt-4o", Window: f.window, ContextLimit: config.ContextAuto, ContinuityBudget: 1500}
	e, err := NewEngine([]*Model{m}, map[string][]string{"default": {"m"}}, config.Roles{Chat: "default", Reflect: "default"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Provision(Options{Tools: reg}); err != nil {
		t.Fatal(err)
	}
	return e
}

// words is a message of n English words.
func words(n int) string {
	vocab := strings.Fields("the quarterly EBITDA reconciliation for region-7 (Q3/2026) showed €4,417.25 of amortisation; " +
		"freight-costs rose 12.5% while FX-swings [USD/EUR] offset the warehouse-lease accruals, per ledger #A-0913.")
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(vocab[(i*7+i/len(vocab))%len(vocab)])
	}
	return b.String()
}

// record plays the chat's record for runTurn: rows, seq, the checkpoint
// and the measurement, carried from turn to turn as chats carries them.
type record struct {
	host *journal
	rows []view.Row
	seq  uint64
	cp   *view.Checkpoint
	meas view.Measurement
	turn uint64
}

// send stores text as the person's message and runs its turn through
// Prepare and Run, as the chat does; the turn's answer joins the rows.
func (rec *record) send(t *testing.T, e *Engine, text string) (TurnResult, error) {
	t.Helper()
	rec.turn++
	last := rec.seq
	rec.seq++
	rec.rows = append(rec.rows, view.Row{Seq: rec.seq, Kind: view.KindUser, Text: text, Tokens: tokens.Count(text)})
	rec.host.mu.Lock()
	rec.host.seq = rec.seq
	rec.host.conv = rec.rows
	cps := len(rec.host.checkpoints)
	rec.host.mu.Unlock()
	in := TurnInput{Chat: "c", Turn: rec.turn, Chain: "default", Host: rec.host, Rows: rec.rows, Picked: len(rec.rows) - 1,
		Last: last, Checkpoint: rec.cp, Measured: rec.meas}
	e.Prepare(&in)
	res, err := e.Run(context.Background(), in, func(string) error { return nil })
	rec.host.mu.Lock()
	if len(rec.host.checkpoints) > cps {
		rec.cp = rec.host.checkpoints[len(rec.host.checkpoints)-1]
	}
	rec.seq = rec.host.seq
	rec.host.mu.Unlock()
	if res.Boundary != nil {
		rec.host.mu.Lock()
		rec.rows = append([]view.Row(nil), rec.host.fresh...)
		rec.host.mu.Unlock()
		rec.cp = nil
	}
	if res.Reply != "" {
		rec.seq++
		rec.rows = append(rec.rows, view.Row{Seq: rec.seq, Kind: view.KindAssistant, Text: res.Reply, Tokens: tokens.Count(res.Reply)})
	}
	rec.meas = res.Measured
	return res, err
}

// The case: on a 12k-window model that bills real counts, a
// 9,000-word message is refused for its own turn, before anything is sent;
// the next message carries the conversation past hard, and the boundary's
// record ask and reflect are built through the view and the request budget:
// no request the fake receives is larger than its window.
func TestEveryRequestFitsTheWindow(t *testing.T) {
	f := &windowed{window: 12000, reply: func(r *wireReq) (string, []provider.ToolCall) {
		switch {
		case r.forced():
			return "", []provider.ToolCall{{ID: "h1", Name: boundary.ToolHandoffUpdate,
				Arguments: `{"objective":"review the quarterly figures","remaining":["summarise the figures"]}`}}
		case r.reflect():
			return "NOTHING", nil
		}
		return "Noted.", nil
	}}
	e := windowEngine(t, f, nil)
	rec := &record{host: &journal{}}
	if _, err := rec.send(t, e, "Hello, a short question first."); err != nil {
		t.Fatal(err)
	}
	before, _ := f.received()

	big := words(9000)
	res, err := rec.send(t, e, big)
	var be *view.BudgetError
	if !errors.As(err, &be) || res.End != Failed || res.Class != ClassBudget {
		t.Fatalf("the 9,000-word turn: err %v, ended %s (%s); want a budget error", err, res.End, res.Class)
	}
	if be.Size <= be.Limit || be.Limit != 12000-2400 || !strings.Contains(be.Hint, "shorter message") {
		t.Fatalf("budget error %+v: want its size over the 9,600-token ceiling and what to do", be)
	}
	if after, _ := f.received(); len(after) != len(before) {
		t.Fatalf("the refused turn sent %d requests", len(after)-len(before))
	}

	res, err = rec.send(t, e, "Now summarise the figures, please.")
	if err != nil {
		t.Fatal(err)
	}
	if res.Boundary == nil || res.Boundary.Reason != ReasonHard || res.Boundary.CarryFrom == 0 {
		t.Fatalf("boundary %+v: want the next message to cross hard and be carried", res.Boundary)
	}
	if res.Reply != "Noted." || res.End != Answered {
		t.Fatalf("reply %q, ended %s: want the carried message answered", res.Reply, res.End)
	}
	sizes, kinds := f.received()
	sent := map[string]int{}
	for i, n := range sizes {
		if n > f.window {
			t.Errorf("request %d (%s) was %d tokens, over the %d-token window", i, kinds[i], n, f.window)
		}
		sent[kinds[i]]++
	}
	// The view evicts the refused message into a card, so the record ask
	// and reflect both fit and are sent.
	if sent["ask"] != 1 || sent["reflect"] != 1 {
		t.Errorf("requests %v: want the record ask and reflect sent once each", kinds)
	}
	if !strings.Contains(res.Boundary.Record, "summarise the figures") || res.Boundary.Why != "" {
		t.Errorf("why %q; the record does not carry the assistant's answer to the ask:\n%s", res.Boundary.Why, res.Boundary.Record)
	}
}

// A conversation that crosses hard inside a long tool loop: the boundary
// runs after the last tool result, and the turn goes on in the fresh
// conversation, so the person gets an answer, whatever the record says is
// left (an answered ask that leaves nothing, one that leaves work, an ask
// that goes unanswered).
func TestABoundaryInsideAToolLoopStillAnswers(t *testing.T) {
	dir := t.TempDir()
	for i := range 12 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part%02d.txt", i)), []byte(words(700)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := tools.New(tools.Options{Workspace: dir})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		ask       []provider.ToolCall
		continued bool
	}{
		{"the record leaves nothing", []provider.ToolCall{{ID: "h1", Name: boundary.ToolHandoffUpdate,
			Arguments: `{"objective":"read the report parts","done":["read parts 0 to 5"]}`}}, false},
		{"the record leaves work", []provider.ToolCall{{ID: "h1", Name: boundary.ToolHandoffUpdate,
			Arguments: `{"objective":"read the report parts","remaining":["read the rest"]}`}}, true},
		{"the ask goes unanswered", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &windowed{window: 12000, reply: func(r *wireReq) (string, []provider.ToolCall) {
				switch {
				case r.forced():
					if tc.ask == nil {
						return "I would rather keep reading.", nil
					}
					return "", tc.ask
				case r.reflect():
					return "NOTHING", nil
				case strings.HasPrefix(r.Messages[1].Content, "This conversation"):
					return "The summary: figures are in, freight costs rose.", nil // the fresh conversation
				}
				n := 0
				for _, m := range r.Messages {
					if m.Role == "tool" {
						n++
					}
				}
				return "", []provider.ToolCall{{ID: fmt.Sprintf("r%d", n), Name: "read_file", Arguments: fmt.Sprintf(`{"path":"part%02d.txt"}`, n)}}
			}}
			e := windowEngine(t, f, reg)
			rec := &record{host: &journal{}}
			res, err := rec.send(t, e, "Read every part of the report and summarise it.")
			if err != nil {
				t.Fatal(err)
			}
			if res.Boundary == nil || res.Boundary.Reason != ReasonHard || res.Boundary.Continued != tc.continued {
				t.Fatalf("boundary %+v: want one at hard, continued %t", res.Boundary, tc.continued)
			}
			if res.Reply == "" || res.End != Answered {
				t.Fatalf("reply %q, ended %s: want the turn answered in the fresh conversation", res.Reply, res.End)
			}
			sizes, kinds := f.received()
			for i, n := range sizes {
				if n > f.window {
					t.Errorf("request %d (%s) was %d tokens, over the window", i, kinds[i], n)
				}
			}
		})
	}
}

// sized is words cut to about n tokens.
func sized(n int) string {
	lo, hi := 1, n
	for lo < hi { // the fewest words that count n tokens or more
		mid := (lo + hi) / 2
		if tokens.Count(words(mid)) < n {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return words(lo)
}

// A model whose tokenizer counts 1.5 times what tiktoken does: once its
// first bill taught the calibration that, the view's preflight and
// admission size requests with the corrected count, margin included. A
// request of about 8,400 local tokens fits the 9,600-token ceiling by the
// raw count (and by the uncalibrated prior's 10 % margin) but bills 12,600,
// past the 12k window: it is refused locally when the active turn alone is
// that large, and checkpointed (older turns evicted into a card) when the
// history is, so the provider never receives a request past its window.
func TestAdmissionUsesTheCalibratedCount(t *testing.T) {
	tests := []struct {
		name    string
		history func() []provider.Message
		refused bool
	}{
		{"the active turn alone", func() []provider.Message {
			return []provider.Message{{Role: provider.RoleUser, Content: sized(8400)}}
		}, true},
		{"a long history", func() []provider.Message {
			var h []provider.Message
			for range 6 {
				h = append(h, provider.Message{Role: provider.RoleUser, Content: sized(1380)}, provider.Message{Role: provider.RoleAssistant, Content: "Noted."})
			}
			return append(h, provider.Message{Role: provider.RoleUser, Content: "And now, what do the figures say?"})
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &windowed{window: 12000, scale: 1.5, reply: func(*wireReq) (string, []provider.ToolCall) { return "Noted.", nil }}
			e := windowEngine(t, f, nil)
			run := func(hist []provider.Message) (TurnResult, error) {
				return e.Run(context.Background(), TurnInput{Chat: "c", Turn: 1, Chain: "default", History: hist, Picked: len(hist) - 1},
					func(string) error { return nil })
			}
			if _, err := run([]provider.Message{{Role: provider.RoleUser, Content: "Hello."}}); err != nil {
				t.Fatal(err)
			}
			if ratio, _, n := e.cal.Factors("m"); n != 1 || ratio < 1.4 {
				t.Fatalf("the first bill taught ratio %.2f from %d bills", ratio, n)
			}
			hist := tc.history()
			if est := e.estimate(provider.Request{Messages: append([]provider.Message{{Role: provider.RoleSystem, Content: SystemPrompt}}, hist...)}, ""); est*110/100 > 9600 || est*3/2 <= 12000 {
				t.Fatalf("the request is %d tokens locally: it must fit the ceiling by the prior and overflow the window as billed", est)
			}
			res, err := run(hist)
			var be *view.BudgetError
			if tc.refused {
				if !errors.As(err, &be) || res.End != Failed || res.Class != ClassBudget || be.Size <= be.Limit {
					t.Fatalf("err %v, ended %s (%s): want refused locally with the budget error", err, res.End, res.Class)
				}
			} else if err != nil || res.Reply != "Noted." {
				t.Fatalf("err %v, reply %q: want the turn checkpointed and answered", err, res.Reply)
			}
			sizes, _ := f.received()
			for i, n := range sizes {
				if n > f.window {
					t.Errorf("request %d billed %d, past the %d-token window", i, n, f.window)
				}
			}
			if want := 1 + map[bool]int{true: 0, false: 1}[tc.refused]; len(sizes) != want {
				t.Errorf("%d requests sent, want %d", len(sizes), want)
			}
		})
	}
}

// A provider's measurement speaks for the next view only when it was taken
// for the same view epoch, model, system prompt and tools: one billed past
// the checkpoint mark sizes the view then, and is otherwise ignored (the
// local count sizes it, far below).
func TestAMeasurementCountsOnlyForWhatItMeasured(t *testing.T) {
	f := &windowed{window: 12000, reply: func(*wireReq) (string, []provider.ToolCall) { return "Noted.", nil }}
	e := windowEngine(t, f, nil)
	basis := e.sizer(e.chains["default"][0], e.offered(true)).basis
	var rows []view.Row
	for i := range 12 {
		kind, text := view.KindUser, fmt.Sprintf("Question %d about the figures.", i)
		if i%2 == 1 {
			kind, text = view.KindAssistant, "Noted."
		}
		rows = append(rows, view.Row{Seq: uint64(i + 1), Kind: kind, Text: text, Tokens: tokens.Count(text)})
	}
	other := func(change func(*view.Basis)) view.Basis { b := basis; change(&b); return b }
	tests := []struct {
		name  string
		meas  view.Measurement
		takes bool
	}{
		{"the same view", view.Measurement{Tokens: 9000, Seq: 11, Basis: basis}, true},
		{"another epoch", view.Measurement{Tokens: 9000, Seq: 11, Epoch: 3, Basis: basis}, false},
		{"another model", view.Measurement{Tokens: 9000, Seq: 11, Basis: other(func(b *view.Basis) { b.Model = "big" })}, false},
		{"another system prompt", view.Measurement{Tokens: 9000, Seq: 11, Basis: other(func(b *view.Basis) { b.Prompt = fingerprint("You are someone else.") })}, false},
		{"other tools", view.Measurement{Tokens: 9000, Seq: 11, Basis: other(func(b *view.Basis) { b.Tools = "" })}, false},
		{"one stored before it said what it measured", view.Measurement{Tokens: 9000, Seq: 11}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := TurnInput{Chat: "c", Turn: 7, Chain: "default", Host: &journal{seq: 12}, Rows: rows, Picked: len(rows) - 1, Last: 11, Measured: tc.meas}
			e.Prepare(&in)
			p := in.Prepared
			if p == nil || p.Err != nil {
				t.Fatalf("prepared %+v", p)
			}
			if p.View.Measured != tc.takes || (p.View.Size >= 9000) != tc.takes {
				t.Fatalf("measured %t, size %d: want the measurement taken %t (else the local count, far below it)", p.View.Measured, p.View.Size, tc.takes)
			}
		})
	}
	// And the turn records what it measured, for the next view to compare.
	res, err := e.Run(context.Background(), TurnInput{Chat: "c", Turn: 8, Chain: "default", Host: &journal{seq: 12}, Rows: rows, Picked: len(rows) - 1, Last: 11},
		func(string) error { return nil })
	if err != nil || res.Measured.Basis != basis || res.Measured.Tokens == 0 {
		t.Fatalf("err %v, measured %+v: want the bill with its basis %+v", err, res.Measured, basis)
	}
}

// Reflect's transcript labels each of the turn's rows with the seq the
// journal stored it at, even when other rows of the chat (a message the
// person queues meanwhile) land right after each one: the label is the
// seq the journal returned, never the record's last seq read after it.
func TestReflectLabelsNameTheRowsTheJournalStored(t *testing.T) {
	dir := t.TempDir()
	for i := range 6 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part%02d.txt", i)), []byte(words(700)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := tools.New(tools.Options{Workspace: dir})
	if err != nil {
		t.Fatal(err)
	}
	var transcript string
	f := &windowed{window: 12000, reply: func(r *wireReq) (string, []provider.ToolCall) {
		switch {
		case r.forced():
			return "", []provider.ToolCall{{ID: "h1", Name: boundary.ToolHandoffUpdate, Arguments: `{"objective":"read the parts","remaining":["the rest"]}`}}
		case r.reflect():
			transcript = r.Messages[1].Content
			return "NOTHING", nil
		case strings.HasPrefix(r.Messages[1].Content, "This conversation"):
			return "Summary.", nil
		}
		n := 0
		for _, m := range r.Messages {
			if m.Role == "tool" {
				n++
			}
		}
		return fmt.Sprintf("Reading part %d.", n), []provider.ToolCall{{ID: fmt.Sprintf("r%d", n), Name: "read_file", Arguments: fmt.Sprintf(`{"path":"part%02d.txt"}`, n)}}
	}}
	e := windowEngine(t, f, reg)
	rec := &record{host: &journal{lands: 1}}
	if _, err := rec.send(t, e, "Read every part."); err != nil {
		t.Fatal(err)
	}
	steps := map[uint64]bool{}
	for _, s := range rec.host.steps {
		steps[s] = true
	}
	labels := regexp.MustCompile(`\[event (\d+), assistant\]\nReading part`).FindAllStringSubmatch(transcript, -1)
	if len(labels) == 0 || len(steps) == 0 {
		t.Fatalf("steps %v; reflect read:\n%s", rec.host.steps, transcript)
	}
	for _, l := range labels {
		seq, _ := strconv.ParseUint(l[1], 10, 64)
		if !steps[seq] {
			t.Errorf("a step labelled event %d; the journal stored the steps at %v", seq, rec.host.steps)
		}
	}
}

// Reflect's request fits its model's ceiling: the oldest rows are left out
// (and the prompt says how many) when the whole transcript would not, and
// answer refuses, before sending, the one case left: the newest row alone
// too large.
func TestReflectFitsItsModel(t *testing.T) {
	f := &windowed{window: 12000, reply: func(*wireReq) (string, []provider.ToolCall) { return "NOTHING", nil }}
	e := windowEngine(t, f, nil)
	m := e.chains["default"][0]
	doc := func(seq uint64, n int) (boundary.Doc, int) {
		text := sized(n)
		return boundary.Doc{Seq: seq, Role: provider.RoleUser, Text: text}, tokens.Count(text)
	}
	tests := []struct {
		name    string
		sizes   []int
		dropped int
		refused bool
	}{
		{"all of it", []int{1000, 1000, 1000}, 0, false},
		{"the newest of it", []int{3000, 3000, 3000, 3000, 1000}, 2, false},
		{"nothing fits", []int{1000, 11000}, 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var docs []boundary.Doc
			var toks []int
			for i, n := range tc.sizes {
				d, k := doc(uint64(i+1), n)
				docs, toks = append(docs, d), append(toks, k)
			}
			msgs := e.reflectPrompt(m, docs, toks)
			left := strings.Contains(msgs[1].Content, "oldest rows of the conversation are left out")
			if left != (tc.dropped > 0) || (tc.dropped > 0 && !strings.Contains(msgs[1].Content, fmt.Sprintf("The %d oldest", tc.dropped))) {
				t.Fatalf("want %d rows left out; the transcript starts:\n%.300s", tc.dropped, msgs[1].Content)
			}
			if want := fmt.Sprintf("[event %d, user]", tc.dropped+1); !strings.Contains(msgs[1].Content, want) {
				t.Fatalf("the transcript lacks %s", want)
			}
			before, _ := f.received()
			_, _, _, err := e.answer(context.Background(), e.chains["default"], provider.Request{Messages: msgs}, asker{}, func(string) error { return nil })
			after, _ := f.received()
			var be *view.BudgetError
			if tc.refused != errors.As(err, &be) || (tc.refused && len(after) != len(before)) {
				t.Fatalf("err %v, %d requests sent: want refused %t, before sending", err, len(after)-len(before), tc.refused)
			}
			if !tc.refused && (err != nil || after[len(after)-1] > f.window) {
				t.Fatalf("err %v, billed %v", err, after)
			}
		})
	}
}
