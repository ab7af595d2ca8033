package runtime

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/boundary"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/openai"
	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
	"github.com/mirror-gateway/mirror/runtime/tokens"
)

// chatReq is what the tests read of an OpenAI chat-completions request.
type chatReq struct {
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	ToolChoice json.RawMessage `json:"tool_choice"`
}

// forced says the request is the one forced ask for the record.
func (r chatReq) forced() bool { return len(r.ToolChoice) > 0 && string(r.ToolChoice) != "null" }

func (r chatReq) lastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// openaiFake is a chat-completions server speaking real SSE that answers
// each request with what reply picks, billing the request's local count.
func openaiFake(t *testing.T, reply func(chatReq) (string, []provider.ToolCall)) string {
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, hr *http.Request) {
		var r chatReq
		if err := json.NewDecoder(hr.Body).Decode(&r); err != nil {
			http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, 400)
			return
		}
		mu.Lock()
		text, calls := reply(r)
		mu.Unlock()
		billed := 0
		for _, m := range r.Messages {
			billed += tokens.Count(m.Content) + tokens.MessageOverhead
		}
		providertest.StreamOpenAI(w, text, calls, billed, 5)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// smallEngine is one fake OpenAI model with an 8000-token window: soft
// 1600, hard 2000.
func smallEngine(t *testing.T, url string) *Engine {
	t.Helper()
	e, err := NewEngine([]*Model{{Name: "m", ProvName: "fake", Provider: openai.New(openai.Config{Name: "fake", BaseURL: url}),
		Remote: "gpt-4o", Window: 8000, MaxOutput: 200, SoftRatio: 0.20, HardRatio: 0.25, ContinuityBudget: 2000}},
		map[string][]string{"default": {"m"}}, config.Roles{Chat: "default"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// At hard the forced ask goes unanswered: the boundary's words and the
// fresh conversation's opening say what really happened, carrying on from
// the handoff kept along the way when it names something still to do and
// waiting for the person when it does not (seed 001). An answer stands.
func TestTheWordsWhenTheForcedAskGoesUnanswered(t *testing.T) {
	answer := func(calls ...provider.ToolCall) func(chatReq) (string, []provider.ToolCall) {
		return func(r chatReq) (string, []provider.ToolCall) {
			if r.forced() {
				if len(calls) == 0 {
					return "I would rather keep going.", nil // not the call it was asked for
				}
				return "", calls
			}
			return "Noted.", nil
		}
	}
	tests := []struct {
		name      string
		kept      boundary.Handoff // what the handoff held before the ask
		reply     func(chatReq) (string, []provider.ToolCall)
		continued bool
		why       string
		opening   []string // what the opening says
		notSaid   []string
	}{
		{"unanswered, nothing owed", boundary.Handoff{Objective: "ship the export feature", Done: []string{"the endpoint"}},
			answer(), false, boundary.NotAnswered,
			[]string{"stopped here to wait for you", boundary.NotAnswered}, []string{"finished", "carries on"}},
		{"unanswered, something remains", boundary.Handoff{Objective: "ship the export feature", Remaining: []string{"the changelog line"}},
			answer(), true, boundary.NotAnsweredCarriesOn,
			[]string{"the work carries on here", "the changelog line"}, []string{"finished", "wait for you"}},
		{"unanswered, a step pending", boundary.Handoff{Objective: "ship the export feature",
			Steps: []boundary.Step{{State: boundary.StepDone, Text: "the endpoint"}, {State: boundary.StepPending, Text: "the changelog line"}}},
			answer(), true, boundary.NotAnsweredCarriesOn,
			[]string{"the work carries on here", "pending: the changelog line"}, []string{"finished"}},
		{"answered: finished", boundary.Handoff{},
			answer(provider.ToolCall{ID: "a1", Name: boundary.ToolHandoffUpdate, Arguments: `{"objective":"ship the export feature","done":["all of it"]}`},
				provider.ToolCall{ID: "a2", Name: boundary.ToolConsolidate, Arguments: `{"continue":false,"reason":"the export shipped"}`}),
			false, "", []string{"the work is finished"}, []string{"wait for you", "did not say"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := smallEngine(t, openaiFake(t, tc.reply))
			j := &journal{handoff: tc.kept, seq: 3}
			in := TurnInput{Chat: "c", Turn: 2, Chain: "default", Host: j, Picked: 2, Last: 2,
				History: []provider.Message{
					{Role: provider.RoleUser, Content: "The launch code is 4417. " + strings.Repeat("lorem ", 2300)},
					{Role: provider.RoleAssistant, Content: "Noted."},
					{Role: provider.RoleUser, Content: "Next part."}}}
			if _, err := e.Run(context.Background(), in, func(string) error { return nil }); err != nil {
				t.Fatal(err)
			}
			if len(j.boundaries) != 1 {
				t.Fatalf("%d boundaries", len(j.boundaries))
			}
			b := j.boundaries[0]
			if b.Reason != ReasonHard || b.Continued != tc.continued || b.Why != tc.why {
				t.Fatalf("boundary: reason %s, continued %v, why %q; want continued %v, why %q", b.Reason, b.Continued, b.Why, tc.continued, tc.why)
			}
			for _, s := range tc.opening {
				if !strings.Contains(b.Opening, s) {
					t.Errorf("the opening does not say %q:\n%s", s, b.Opening)
				}
			}
			for _, s := range tc.notSaid {
				if strings.Contains(b.Opening, s) {
					t.Errorf("the opening says %q:\n%s", s, b.Opening)
				}
			}
		})
	}
}

// A record whose steps are still pending or in progress is owed a
// continue: the assistant's consolidate with continue true stands, though
// Remaining and Next action are empty.
func TestPendingStepsAreOwedAContinue(t *testing.T) {
	e := smallEngine(t, openaiFake(t, func(r chatReq) (string, []provider.ToolCall) {
		if !strings.Contains(r.lastUser(), "wrap up this phase") || r.Messages[len(r.Messages)-1].Role == "tool" {
			return "Noted.", nil
		}
		return "", []provider.ToolCall{
			{ID: "h1", Name: boundary.ToolHandoffUpdate, Arguments: `{"objective":"ship the export feature","steps":[` +
				`{"state":"done","text":"the endpoint"},{"state":"in progress","text":"the partial-export test"},{"state":"pending","text":"the changelog line"}]}`},
			{ID: "c1", Name: boundary.ToolConsolidate, Arguments: `{"continue":true,"reason":"the endpoint phase is done"}`}}
	}))
	j := &journal{}
	in := TurnInput{Chat: "c", Turn: 1, Chain: "default", Host: j,
		History: []provider.Message{{Role: provider.RoleUser, Content: "Please wrap up this phase."}}}
	if _, err := e.Run(context.Background(), in, func(string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if len(j.boundaries) != 1 {
		t.Fatalf("%d boundaries", len(j.boundaries))
	}
	b := j.boundaries[0]
	if b.Reason != ReasonAssistant || !b.Continued || strings.Contains(b.Why, boundary.NotOwed) ||
		!strings.Contains(b.Opening, "the work carries on here") || !strings.Contains(b.Opening, "pending: the changelog line") {
		t.Fatalf("boundary: continued %v, why %q, opening:\n%s", b.Continued, b.Why, b.Opening)
	}
}
