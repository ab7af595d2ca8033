package chats

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/boundary"
	"github.com/mirror-gateway/mirror/runtime/hooks"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/openai"
	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
	"github.com/mirror-gateway/mirror/runtime/tokens"
	"github.com/mirror-gateway/mirror/runtime/view"
	bolt "go.etcd.io/bbolt"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// scripted is a fake OpenAI chat-completions server speaking real SSE. It
// keeps every request and answers by what the request is: the forced ask,
// reflect, or an ordinary turn (whose answer the test's reply func picks).
// Usage is billed as the request's local count, so the soft and hard lines
// move exactly as the test's messages grow.
type scripted struct {
	mu    sync.Mutex
	reqs  []wireReq
	asks  int
	reply func(r wireReq) (text string, calls []provider.ToolCall)
}

type wireReq struct {
	Messages []struct {
		Role       string `json:"role"`
		Content    string `json:"content"`
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []struct {
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	ToolChoice *struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tool_choice"`
	Tools []json.RawMessage `json:"tools"`
}

// last returns the content of the last message of role.
func (r wireReq) last(role string) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == role {
			return r.Messages[i].Content
		}
	}
	return ""
}

func (r wireReq) reflecting() bool {
	return len(r.Tools) == 0 && len(r.Messages) > 0 && strings.HasPrefix(r.Messages[0].Content, "You read a conversation")
}

func (f *scripted) serve(t testing.TB) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, hr *http.Request) {
		var r wireReq
		if err := json.NewDecoder(hr.Body).Decode(&r); err != nil {
			http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, 400)
			return
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, r)
		var text string
		var calls []provider.ToolCall
		switch {
		case r.ToolChoice != nil:
			f.asks++
			calls = []provider.ToolCall{{ID: fmt.Sprintf("ask_%d", f.asks), Name: boundary.ToolHandoffUpdate,
				Arguments: `{"objective":"ship the export feature","done":["the endpoint and its schema"],"remaining":["the partial-export test"],"next_action":"write the partial-export test"}`}}
		case r.reflecting():
			text = "## Launch code\nThe person's launch code is 4417."
		default:
			text, calls = f.reply(r)
		}
		billed := 0
		for _, m := range r.Messages {
			billed += tokens.Count(m.Content) + tokens.MessageOverhead
		}
		if len(r.Tools) > 0 {
			b, _ := json.Marshal(r.Tools)
			billed += tokens.Count(string(b))
		}
		f.mu.Unlock()
		providertest.StreamOpenAI(w, text, calls, billed, 5)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func (f *scripted) requests() []wireReq {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]wireReq(nil), f.reqs...)
}

// longEnv is a chat service on a fake OpenAI model with a small window:
// 8000 tokens, soft 1600, hard 2000.
type longEnv struct {
	*env
	fake    *scripted
	dataDir string
}

func newLongEnv(t *testing.T, reply func(wireReq) (string, []provider.ToolCall)) *longEnv {
	return newLongEnvWith(t, reply, 0.25, nil)
}

func newLongEnvWith(t *testing.T, reply func(wireReq) (string, []provider.ToolCall), hard float64, hk *hooks.Runner) *longEnv {
	t.Helper()
	f := &scripted{reply: reply}
	url := f.serve(t)
	le := &longEnv{env: &env{t: t, path: filepath.Join(t.TempDir(), "mirror.db")}, fake: f, dataDir: t.TempDir()}
	if err := os.Chmod(le.dataDir, 0o700); err != nil { // as datadir.Prepare makes it
		t.Fatal(err)
	}
	db, err := OpenDB(le.path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	store, err := NewStore(db)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := runtime.NewEngine([]*runtime.Model{{Name: "m", ProvName: "fake", Provider: openai.New(openai.Config{Name: "fake", BaseURL: url}),
		Remote: "gpt-4o", Window: 8000, MaxOutput: 200, SoftRatio: 0.20, HardRatio: hard, ContinuityBudget: 2000}},
		map[string][]string{"default": {"m"}}, config.Roles{Chat: "default", Reflect: "default"}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Provision(runtime.Options{DataDir: le.dataDir, Hooks: hk}); err != nil {
		t.Fatal(err)
	}
	le.db, le.store = db, store
	le.svc = New(Options{Store: store, Turner: eng, Idle: time.Minute, DataDir: le.dataDir})
	t.Cleanup(le.stop)
	return le
}

// words is a message of about n tokens that says fact first.
func words(fact string, n int) string {
	return fact + " " + strings.Repeat("lorem ", n)
}

// turn sends text and waits for its turn to finish.
func (le *longEnv) turn(t *testing.T, s *sub, chat, text string) {
	t.Helper()
	n := count(s.events(), EvTurnFinished) + count(s.events(), EvTurnFailed)
	if _, err := le.svc.Send(bg, chat, text, fmt.Sprintf("k%d", time.Now().UnixNano()), "", Origin{}); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "the turn's end", func(evs []*Event) bool { return count(evs, EvTurnFinished)+count(evs, EvTurnFailed) > n })
}

func plain(r wireReq) (string, []provider.ToolCall) {
	if strings.Contains(r.last("user"), "recall the launch code") && r.Messages[len(r.Messages)-1].Role != "tool" {
		return "", []provider.ToolCall{{ID: "recall_1", Name: boundary.ToolRecallHistory, Arguments: `{"query":"launch code"}`}}
	}
	return "Noted.", nil
}

func contextLine(r wireReq) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if m := r.Messages[i]; m.Role == "system" && strings.HasPrefix(m.Content, "<runtime-context") {
			return m.Content
		}
	}
	return ""
}

func TestALongSessionReachesSoftThenHardAndCarriesOn(t *testing.T) {
	le := newLongEnv(t, plain)
	c := le.chat()
	s := newSub()
	if err := le.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	le.turn(t, s, c.ID, words("The launch code is 4417.", 300))
	softAt := 0
	for i := 2; i <= 8 && count(s.events(), EvBoundary) == 0; i++ {
		le.turn(t, s, c.ID, words(fmt.Sprintf("Step %d of the export.", i), 300))
		if softAt == 0 && strings.Contains(contextLine(le.lastChatRequest(t)), "Soft 1600: reached.") {
			softAt = i
		}
	}
	if softAt == 0 {
		for _, r := range le.fake.requests() {
			t.Log(contextLine(r))
		}
		t.Fatal("the soft line never appeared")
	}
	reqs := le.fake.requests()
	for _, r := range reqs {
		line := contextLine(r)
		if strings.Contains(line, "Soft 1600: not reached") && strings.Contains(line, boundary.SoftAdvice) {
			t.Fatalf("the advice came before soft: %q", line)
		}
		if strings.Contains(line, "Soft 1600: reached.") && !strings.Contains(line, boundary.SoftAdvice) {
			t.Fatalf("soft reached without its advice: %q", line)
		}
	}
	evs := s.events()
	if count(evs, EvBoundary) != 1 || le.fake.asks != 1 {
		t.Fatalf("%d boundaries, %d asks; want 1 and 1 (%s)", count(evs, EvBoundary), le.fake.asks, typesOf(evs))
	}
	var b *BoundaryCrossed
	for _, ev := range evs {
		if ev.Type == EvBoundary {
			b = pay[*BoundaryCrossed](ev)
		}
	}
	if b.Reason != runtime.ReasonHard || !b.Continued || len(b.Notes) != 1 {
		t.Fatalf("boundary %+v", b)
	}
	// The message that crossed hard went into the fresh conversation
	// verbatim, right after the continuity message.
	r := le.lastChatRequest(t)
	if len(r.Messages) < 3 || !strings.HasPrefix(r.Messages[1].Content, "This conversation was consolidated and cleared") ||
		!strings.HasPrefix(r.Messages[2].Content, "Step ") {
		t.Fatalf("the request after the boundary: %+v", r.Messages)
	}
	golden(t, "continuity.golden", r.Messages[1].Content)
	record, err := boundary.ReadHandoff(le.dataDir, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "handoff.golden", record)
	if notes, _ := os.ReadDir(filepath.Join(le.dataDir, "memory")); len(notes) != 1 {
		t.Fatalf("memory notes: %v", notes)
	}
	// recall_history finds the fact the boundary archived.
	le.turn(t, s, c.ID, "Please recall the launch code.")
	var found bool
	for _, ev := range le.durable(c.ID) {
		if r := pay[*ToolResult](ev); r != nil && r.Result.Name == boundary.ToolRecallHistory && strings.Contains(r.Result.Content, "4417") {
			found = true
		}
	}
	if !found {
		t.Fatal("recall_history did not find the archived fact")
	}
	// A restart rebuilds the same conversation: the request after it
	// starts from the continuity message again.
	le.restart2(t)
	s2 := newSub()
	if err := le.svc.Open(bg, c.ID, nil, s2, ""); err != nil {
		t.Fatal(err)
	}
	le.turn(t, s2, c.ID, "And now?")
	if r := le.lastChatRequest(t); !strings.HasPrefix(r.Messages[1].Content, "This conversation was consolidated and cleared") {
		t.Fatalf("after a restart the conversation starts with %q", r.Messages[1].Content)
	}
}

func (le *longEnv) restart2(t *testing.T) {
	t.Helper()
	eng := le.svc.opt.Turner
	opt := le.svc.opt
	le.stop()
	db, err := OpenDB(le.path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	store, err := NewStore(db)
	if err != nil {
		t.Fatal(err)
	}
	opt.Store, opt.Turner = store, eng
	le.db, le.store, le.svc = db, store, New(opt)
}

func (le *longEnv) lastChatRequest(t *testing.T) wireReq {
	t.Helper()
	reqs := le.fake.requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].ToolChoice == nil && !reqs[i].reflecting() {
			return reqs[i]
		}
	}
	t.Fatal("no chat request")
	return wireReq{}
}

func TestAFailedArchiveChangesNothingAndTheNextTurnTriesAgain(t *testing.T) {
	le := newLongEnv(t, plain)
	c := le.chat()
	s := newSub()
	if err := le.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	le.store.archiveHook = func() error { return errors.New("disk full") }
	for i := 1; i <= 8 && count(s.events(), EvBoundaryFailed) == 0; i++ {
		le.turn(t, s, c.ID, words(fmt.Sprintf("Part %d.", i), 300))
	}
	evs := s.events()
	if count(evs, EvBoundaryFailed) != 1 || count(evs, EvBoundary) != 0 {
		t.Fatalf("want one boundary.failed and no boundary: %s", typesOf(evs))
	}
	// The failed commit's rows gave back their seqs: boundary.failed follows
	// the last durable event, and says why.
	for i, ev := range evs {
		if bf := pay[*BoundaryFailed](ev); bf != nil {
			if prev := evs[i-1]; ev.Seq != prev.Seq+1 || !strings.Contains(bf.Error, "disk full") {
				t.Fatalf("boundary.failed %d after %s %d: %q", ev.Seq, prev.Type, prev.Seq, bf.Error)
			}
		}
	}
	// Everything is as it was: the turn went on over the whole conversation.
	r := le.lastChatRequest(t)
	if !strings.HasPrefix(r.Messages[1].Content, "Part 1.") {
		t.Fatalf("the conversation changed after a failed archive: starts %q", r.Messages[1].Content)
	}
	err := le.db.View(func(tx *bolt.Tx) error {
		if b, _ := subBucket(tx, bucketArchive, c.ID, false); b != nil && b.Stats().KeyN > 0 {
			return errors.New("an archive entry was written")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The next turn tries again, without asking for the record twice.
	le.store.archiveHook = nil
	le.turn(t, s, c.ID, "Next part.")
	if count(s.events(), EvBoundary) != 1 || le.fake.asks != 1 {
		t.Fatalf("after the failure: %d boundaries, %d asks", count(s.events(), EvBoundary), le.fake.asks)
	}
}

func TestAMidTurnCrossingWaitsForTheTurnsEnd(t *testing.T) {
	// Each answer to "work" is a long step calling handoff_update: the
	// step carries the conversation past hard in the middle of the turn.
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
	before := len(le.fake.requests())
	le.turn(t, s, c.ID, "Now do the work.")
	evs := le.durable(c.ID)
	// Order: the tool's result, then the boundary, then the continuity
	// message; the request that would have crossed hard was never sent.
	var order []string
	for _, ev := range evs {
		switch ev.Type {
		case EvToolResult, EvBoundary, EvContinuity, EvTurnFinished:
			order = append(order, ev.Type)
		}
	}
	want := []string{EvTurnFinished, EvToolResult, EvBoundary, EvContinuity, EvTurnFinished}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	for _, r := range le.fake.requests()[before:] {
		if !r.reflecting() && len(r.Messages) > 0 && r.Messages[len(r.Messages)-1].Role == "tool" {
			t.Fatal("a request past hard was sent with the tool result")
		}
	}
	if le.fake.asks != 0 {
		t.Fatalf("the assistant had written its record, yet it was asked %d times", le.fake.asks)
	}
}

// golden compares got with testdata/name, rewriting it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		t.Fatalf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestCompactTakesACheckpointAndGlobalSearchGetsTheTurnBack(t *testing.T) {
	reply := func(r wireReq) (string, []provider.ToolCall) {
		last := r.Messages[len(r.Messages)-1]
		if strings.Contains(r.last("user"), "look back") && last.Role != "tool" {
			return "", []provider.ToolCall{{ID: "gs1", Name: boundary.ToolGlobalSearch, Arguments: `{"around_message_id":"m2"}`}}
		}
		return "Noted.", nil
	}
	le := newLongEnvWith(t, reply, 0.9, nil)
	c := le.chat()
	s := newSub()
	if err := le.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	le.turn(t, s, c.ID, words("The first request names the blue door.", 700))
	for i := 2; i <= 4; i++ {
		le.turn(t, s, c.ID, words(fmt.Sprintf("Request %d.", i), 700))
	}
	before := le.lastChatRequest(t)
	if _, err := le.svc.Command(bg, c.ID, "/compact keep the plan", Origin{}); err != nil {
		t.Fatal(err)
	}
	le.turn(t, s, c.ID, "Go on.")
	var cp *CheckpointTaken
	for _, ev := range le.durable(c.ID) {
		if ev.Type == EvCheckpoint {
			cp = pay[*CheckpointTaken](ev)
		}
	}
	if cp == nil {
		t.Fatal("/compact took no checkpoint")
	}
	var plan view.Checkpoint
	if err := json.Unmarshal(cp.Checkpoint, &plan); err != nil || plan.Trigger != view.TriggerManual || plan.Evicted == 0 || cp.Through != plan.Evicted {
		t.Fatalf("checkpoint %+v (%v)", plan, err)
	}
	after := le.lastChatRequest(t)
	if len(after.Messages) >= len(before.Messages)+2 || strings.Contains(after.Messages[1].Content, "blue door") && len(after.Messages[1].Content) > 2000 {
		t.Fatalf("the view did not shrink: %d messages before, %d after", len(before.Messages), len(after.Messages))
	}
	// The evicted first request comes back whole through global_search.
	le.turn(t, s, c.ID, "Please look back at the first request.")
	var found bool
	for _, ev := range le.durable(c.ID) {
		if r := pay[*ToolResult](ev); r != nil && r.Result.Name == boundary.ToolGlobalSearch && strings.Contains(r.Result.Content, "blue door") {
			found = true
		}
	}
	if !found {
		t.Fatal("global_search did not bring the evicted message back")
	}
	// The snapshot draws the divider after the last evicted message.
	s2 := newSub()
	if err := le.svc.Open(bg, c.ID, nil, s2, ""); err != nil {
		t.Fatal(err)
	}
	if sn := firstSnapshot(t, s2); sn.CheckpointThrough != plan.Evicted || sn.Context == nil {
		t.Fatalf("snapshot divider %d context %+v, want %d", sn.CheckpointThrough, sn.Context, plan.Evicted)
	}
}

func TestABlockingPreCompactHookSkipsTheCheckpoint(t *testing.T) {
	dir := t.TempDir()
	got := filepath.Join(dir, "stdin.json")
	hk := hooks.New(config.Hooks{PreCompact: []config.Hook{{Command: "cat > " + got + "; echo 'not now' >&2; exit 2", Timeout: 10 * time.Second}}}, dir)
	le := newLongEnvWith(t, plain, 0.9, hk)
	c := le.chat()
	s := newSub()
	if err := le.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 4; i++ {
		le.turn(t, s, c.ID, words(fmt.Sprintf("Request %d.", i), 700))
	}
	if _, err := le.svc.Command(bg, c.ID, "/compact keep the plan", Origin{}); err != nil {
		t.Fatal(err)
	}
	le.turn(t, s, c.ID, "Go on.")
	if n := count(le.durable(c.ID), EvCheckpoint); n != 0 {
		t.Fatalf("a blocked checkpoint was taken (%d)", n)
	}
	// The block is a diagnostic of the turn, with the reason the hook gave.
	var block *runtime.Diagnostic
	for _, ev := range le.durable(c.ID) {
		if d := pay[*Diagnosed](ev); d != nil && d.Diagnostic.Kind == runtime.DiagHook {
			block = d.Diagnostic
		}
	}
	if block == nil || block.Name != "PreCompact" || block.Outcome != runtime.OutcomeBlocked || block.Error != "not now" {
		t.Fatalf("the block's diagnostic: %+v", block)
	}
	raw, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	var in map[string]any
	if err := json.Unmarshal(raw, &in); err != nil || in["hook_event_name"] != "PreCompact" || in["trigger"] != "manual" || in["custom_instructions"] != "keep the plan" {
		t.Fatalf("the hook read %s (%v)", raw, err)
	}
}

func TestARequestThatCannotFitIsRefusedBeforeItIsSent(t *testing.T) {
	le := newLongEnv(t, plain)
	c := le.chat()
	s := newSub()
	if err := le.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	le.turn(t, s, c.ID, words("Far too much.", 9000))
	var failed *Event
	for _, ev := range s.events() {
		if ev.Type == EvTurnFailed {
			failed = ev
		}
	}
	if failed == nil || pay[*TurnFailed](failed).Class != "budget" || !strings.Contains(pay[*TurnFailed](failed).Error, "ceiling") {
		t.Fatalf("want a budget failure, got %+v", failed)
	}
	if n := len(le.fake.requests()); n != 0 {
		t.Fatalf("%d requests were sent", n)
	}
}

func TestASteerReadAsHardIsCrossedGoesIntoTheFreshConversation(t *testing.T) {
	asked, proceed := make(chan struct{}, 1), make(chan struct{})
	reply := func(r wireReq) (string, []provider.ToolCall) {
		last := r.Messages[len(r.Messages)-1]
		if last.Role == "tool" || !strings.Contains(r.last("user"), "do the work") {
			return "Done with this part.", nil
		}
		asked <- struct{}{}
		<-proceed // the person steers while the step is being answered
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
	if _, err := le.svc.Send(bg, c.ID, "Now do the work.", "work", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-asked:
	case <-time.After(wait):
		t.Fatal("the step was never asked for")
	}
	if _, err := le.svc.Send(bg, c.ID, "Also mention the blue door.", "steer", ModeRedirect, Origin{}); err != nil {
		t.Fatal(err)
	}
	close(proceed)
	s.waitFor(t, "the turn's end", has(EvTurnFinished, 2))
	r := le.lastChatRequest(t)
	if len(r.Messages) < 3 || !strings.HasPrefix(r.Messages[1].Content, "This conversation was consolidated") || r.Messages[2].Content != "Also mention the blue door." {
		t.Fatalf("the request after the boundary: %+v", r.Messages)
	}
	if count(le.durable(c.ID), EvBoundary) != 1 {
		t.Fatal("no boundary")
	}
}

func TestAnEndedBoundaryAddsNoAnswer(t *testing.T) {
	reply := func(r wireReq) (string, []provider.ToolCall) {
		if r.Messages[len(r.Messages)-1].Role == "tool" || !strings.Contains(r.last("user"), "wrap up") {
			return "Noted.", nil
		}
		return "STEPTEXT", []provider.ToolCall{
			{ID: "h1", Name: boundary.ToolHandoffUpdate, Arguments: `{"objective":"ship the export feature","done":["all of it"]}`},
			{ID: "c1", Name: boundary.ToolConsolidate, Arguments: `{"continue":false,"reason":"the export shipped"}`}}
	}
	le := newLongEnv(t, reply)
	c := le.chat()
	s := newSub()
	if err := le.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	le.turn(t, s, c.ID, "Please wrap up.")
	var b, fin *Event
	for _, ev := range le.durable(c.ID) {
		switch ev.Type {
		case EvBoundary:
			b = ev
		case EvTurnFinished:
			fin = ev
		}
	}
	if b == nil || pay[*BoundaryCrossed](b).Reason != runtime.ReasonAssistant || pay[*BoundaryCrossed](b).Continued {
		t.Fatalf("boundary %+v", b)
	}
	if fin == nil || fin.Message() != nil || fin.Seq < b.Seq {
		t.Fatalf("the turn's finish after an ended boundary: %+v", fin)
	}
}
