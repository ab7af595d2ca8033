package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/builtin"
	"github.com/mirror-gateway/mirror/runtime/provider/openai"
	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
	"github.com/mirror-gateway/mirror/runtime/view"
)

// The audio a turn hears is in the messages it picked up and the person's
// messages right before them (a turn resumed after a crash picks nothing
// up again), never in earlier turns.
func TestHearFrom(t *testing.T) {
	u, a, c, tool := view.Row{Kind: view.KindUser}, view.Row{Kind: view.KindAssistant}, view.Row{Kind: view.KindContext}, view.Row{Kind: view.KindTool}
	for _, tc := range []struct {
		name   string
		rows   []view.Row
		picked int
		want   int
	}{
		{"picked one", []view.Row{u, a, u}, 2, 2},
		{"picked two", []view.Row{u, a, u, u}, 2, 2},
		{"resumed", []view.Row{u, a, u, c}, 4, 2},
		{"after a tool", []view.Row{u, a, tool, u}, 3, 3},
		{"nothing", []view.Row{u, a}, 2, 2},
		{"all", []view.Row{u}, 0, 0},
	} {
		if got := hearFrom(tc.rows, tc.picked); got != tc.want {
			t.Errorf("%s: hearFrom = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// The transcribe chain is asked in order: a model that cannot transcribe
// is passed over, a failure another server may not share goes to the next
// model, and one that would fail anywhere (a refused request) stops there.
func TestHearAsksTheChainInOrder(t *testing.T) {
	server := func(status int, calls *atomic.Int32) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			w.Header().Set("Content-Type", "application/json")
			if status != 200 {
				w.WriteHeader(status)
				w.Write([]byte(`{"error":{"message":"no","type":"server_error"}}`))
				return
			}
			json.NewEncoder(w).Encode(map[string]string{"text": "heard"})
		}))
		t.Cleanup(srv.Close)
		return srv.URL + "/v1"
	}
	part := providertest.NewPart(provider.PartAudio, "audio/ogg", "v.ogg", []byte("OggS voice"))
	for _, tc := range []struct {
		name   string
		first  int
		want   string
		second int32 // calls the second server got
		diags  string
	}{
		{"overloaded, then the next", 503, "heard", 1, "a:overloaded:503 b:ok:0"},
		{"refused: stop", 400, "", 0, "a:bad_request:400"},
		{"first answers", 200, "heard", 0, "a:ok:0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c1, c2 atomic.Int32
			models := []*Model{
				{Name: "chat", Provider: builtin.New(0), Remote: "echo", Window: 128000},
				{Name: "a", Provider: openai.New(openai.Config{Name: "a", BaseURL: server(tc.first, &c1)}), Remote: "whisper-1", Window: 8192},
				{Name: "b", Provider: openai.New(openai.Config{Name: "b", BaseURL: server(200, &c2)}), Remote: "whisper-1", Window: 8192},
			}
			e, err := NewEngine(models, map[string][]string{"default": {"chat"}, "stt": {"chat", "a", "b"}},
				config.Roles{Chat: "default", Reflect: "default", Transcribe: "stt"}, 2)
			if err != nil {
				t.Fatal(err)
			}
			j := &heardJournal{}
			got, err := e.hear(context.Background(), j, part)
			if got != tc.want || (err == nil) != (tc.want != "") || c2.Load() != tc.second || c1.Load() != 1 {
				t.Fatalf("hear = %q, %v; servers called %d, %d", got, err, c1.Load(), c2.Load())
			}
			if err != nil && !strings.Contains(err.Error(), "a:") {
				t.Fatalf("the error does not name the provider: %v", err)
			}
			// One diagnostic per attempt: the model, its outcome, the
			// status of a refusal.
			var outcomes []string
			for _, d := range j.got {
				if d.Kind != DiagTranscribe || d.Remote != "whisper-1" {
					t.Errorf("diagnostic %+v", d)
				}
				outcomes = append(outcomes, fmt.Sprintf("%s:%s:%d", d.Model, d.Outcome, d.Status))
			}
			if got := strings.Join(outcomes, " "); got != tc.diags {
				t.Errorf("diagnostics %q, want %q", got, tc.diags)
			}
		})
	}
}

// heardJournal keeps the diagnostics it is given.
type heardJournal struct{ got []Diagnostic }

func (j *heardJournal) Diagnostic(d Diagnostic) { j.got = append(j.got, d) }
