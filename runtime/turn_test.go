package runtime

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/monitor"
	"github.com/mirror-gateway/mirror/runtime/boundary"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/builtin"
	"github.com/mirror-gateway/mirror/runtime/provider/openai"
	"github.com/mirror-gateway/mirror/runtime/quota"
	"github.com/mirror-gateway/mirror/runtime/tools"
	"github.com/mirror-gateway/mirror/runtime/view"
	bolt "go.etcd.io/bbolt"
)

func openMonitor(t *testing.T) *monitor.Monitor {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "m.db"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m, err := monitor.Open(db, config.Default(), monitor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); db.Close() })
	return m
}

// failing is a fake OpenAI server that answers every request with a real
// 500 error body, counting the requests.
func failing(t *testing.T, hits *atomic.Int32) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(500)
		fmt.Fprint(w, `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestChainMovesOnWhenABreakerOpens(t *testing.T) {
	var hits atomic.Int32
	flaky := openai.New(openai.Config{Name: "flaky", BaseURL: failing(t, &hits)})
	e, err := NewEngine([]*Model{
		{Name: "first", ProvName: "flaky", Provider: flaky, Remote: "gpt-x", Window: 128000},
		{Name: "backup", ProvName: "builtin", Provider: builtin.New(0), Remote: "echo", Window: 128000},
	}, map[string][]string{"default": {"first", "backup"}}, config.Roles{Chat: "default"}, 4)
	if err != nil {
		t.Fatal(err)
	}
	mon := openMonitor(t)
	if err := e.Provision(Options{Monitor: mon}); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		res, err := e.Run(context.Background(), TurnInput{Chain: "default", History: []provider.Message{{Role: "user", Content: "hi"}}},
			func(string) error { return nil })
		if err != nil || res.Model != "backup" || res.End != Answered {
			t.Fatalf("turn %d: model %q, ended %s, %v", i, res.Model, res.End, err)
		}
	}
	if n := hits.Load(); n != int32(monitor.DefaultThresholds.Failures) {
		t.Fatalf("the failing provider was asked %d times; its breaker should have opened after %d", n, monitor.DefaultThresholds.Failures)
	}
	open := mon.Unresolved()
	if len(open) != 1 || open[0].ID != "provider:flaky/gpt-x" || open[0].State != "open" {
		t.Fatalf("unresolved %+v", open)
	}
}

// looping is a fake OpenAI server whose model always asks for the same call.
func looping(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"missing.txt\"}"}}]},"finish_reason":null}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// journal is the smallest Host: it records and allows everything, and
// keeps a conversation's record in memory.
type journal struct {
	mu             sync.Mutex
	calls, results int
	seq            uint64
	contexts       []ContextInfo
	checkpoints    []*view.Checkpoint
	handoff        boundary.Handoff
	asked          bool
	boundaries     []Boundary
	failBoundary   error
	// conv is the conversation's rows as the chat holds them, when a test
	// sets it: a boundary carries the person's messages from it into fresh,
	// the rows it returns.
	conv, fresh []view.Row
	// lands is how many other rows land right after each step or result
	// the turn stores, as a chat's rows do while the turn runs.
	lands int
	steps []uint64 // the seqs Step returned
	// proposals are what each approval was asked with, in order.
	proposals []*tools.Proposal
}

func (j *journal) Context(ci ContextInfo, _ []view.Section, _ int) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.contexts = append(j.contexts, ci)
	return nil
}
func (j *journal) Checkpoint(cp *view.Checkpoint) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.checkpoints = append(j.checkpoints, cp)
	return nil
}
func (j *journal) Handoff() (boundary.Handoff, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.handoff, j.asked
}
func (j *journal) Last() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.seq
}
func (j *journal) HandoffUpdated(h boundary.Handoff, asked, answered bool) (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.seq++
	j.asked = j.asked || asked
	if answered {
		j.handoff = h
		j.handoff.JudgedSeq = j.seq
	}
	return j.seq, nil
}
func (j *journal) Boundary(b Boundary) ([]view.Row, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.failBoundary != nil {
		return nil, j.failBoundary
	}
	j.boundaries = append(j.boundaries, b)
	// As the chat does: the assistant's half carries over as where the
	// work stands, and it is asked anew should the fresh conversation
	// reach hard without a word.
	j.asked, j.handoff.JudgedSeq, j.handoff.Seen = false, 0, boundary.Seen{}
	j.seq++
	fresh := []view.Row{{Seq: j.seq, Kind: view.KindUser, Text: b.Opening}}
	for _, r := range j.conv {
		// The person's messages from CarryFrom on go into the fresh
		// conversation as typed, as the chat carries them.
		if b.CarryFrom > 0 && r.Kind == view.KindUser && r.Seq >= b.CarryFrom {
			j.seq++
			r.Seq = j.seq
			fresh = append(fresh, r)
		}
	}
	j.fresh = fresh
	return fresh, nil
}
func (j *journal) Lookup(context.Context, provider.ToolCall) (ToolResult, error) {
	return ToolResult{Content: "nothing archived"}, nil
}

func (j *journal) Step(string, []provider.ToolCall) (uint64, error) {
	seq := j.next()
	j.mu.Lock()
	j.steps = append(j.steps, seq)
	j.mu.Unlock()
	return seq, nil
}
func (j *journal) CallStarted(provider.ToolCall) error { j.calls++; return nil }
func (j *journal) Approve(_ context.Context, _ provider.ToolCall, change *tools.Proposal) (bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.proposals = append(j.proposals, change)
	return true, nil
}
func (j *journal) CallFinished(provider.ToolCall, ToolResult) (uint64, error) {
	j.results++
	return j.next(), nil
}

// next stores a row: its seq, and after it the rows that land meanwhile
// (lands: a message the person queues while the turn runs).
func (j *journal) next() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.seq++
	seq := j.seq
	j.seq += uint64(j.lands)
	return seq
}
func (j *journal) Redirects() ([]provider.Message, error) { return nil, nil }
func (j *journal) QuotaWait(quota.Wait)                   {}

func TestTheSameFailingCallPausesTheTurn(t *testing.T) {
	m := openai.New(openai.Config{Name: "loop", BaseURL: looping(t)})
	e, err := NewEngine([]*Model{{Name: "m", ProvName: "loop", Provider: m, Remote: "m", Window: 128000}},
		map[string][]string{"default": {"m"}}, config.Roles{Chat: "default"}, 4)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.New(tools.Options{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	mon := openMonitor(t)
	if err := e.Provision(Options{Tools: reg, Monitor: mon}); err != nil {
		t.Fatal(err)
	}
	j := &journal{}
	res, err := e.Run(context.Background(), TurnInput{Chat: "c1", Turn: 7, Chain: "default", Host: j,
		History: []provider.Message{{Role: "user", Content: "read it"}}}, func(string) error { return nil })
	var loop *ToolLoopError
	if !errors.As(err, &loop) || loop.Tool != "read_file" {
		t.Fatalf("err %v, want a tool loop", err)
	}
	if res.End != Failed || res.Class != ClassToolLoop {
		t.Fatalf("the turn ended %s (%s), want failed (tool_loop)", res.End, res.Class)
	}
	if want := monitor.DefaultThresholds.ToolLoopFailures; j.calls != want || j.results != want {
		t.Fatalf("%d calls, %d results; want %d of each", j.calls, j.results, want)
	}
	if open := mon.Unresolved(); len(open) != 1 || open[0].Kind != "tool_loop" || open[0].Scope != "c1" {
		t.Fatalf("unresolved %+v", open)
	}
}
