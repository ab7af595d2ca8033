package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/anthropic"
	"github.com/mirror-gateway/mirror/runtime/provider/gemini"
	"github.com/mirror-gateway/mirror/runtime/provider/openai"
)

// diagJournal is a Host that keeps the diagnostics a turn reports.
type diagJournal struct {
	journal
	mu    sync.Mutex
	diags []Diagnostic
}

func (j *diagJournal) Diagnostic(d Diagnostic) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.diags = append(j.diags, d)
}

// testKey is every fake provider's key: the fakes echo it in their 400s.
const testKey = "sk-ant-api03-diagnosticsTESTKEY0123456789"

// diagFake is a fake of one provider's API on its real wire format: each
// response names its request the provider's way and the model that
// answered; a last user message with "fail400" is refused with 400
// (echoing the key the request carried), "fail503" with 503.
func diagFake(t *testing.T, kind string) *httptest.Server {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		body := string(raw)
		id := fmt.Sprintf("id-%s-%d", kind, n.Add(1))
		key := r.Header.Get("Authorization") + r.Header.Get("x-api-key") + r.Header.Get("x-goog-api-key")
		switch kind {
		case "openai":
			w.Header().Set("x-request-id", id)
		case "anthropic":
			w.Header().Set("request-id", id)
		}
		fail := func(status int, msg string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			gstatus, atype, otype := "INVALID_ARGUMENT", "invalid_request_error", "invalid_request_error"
			if status == 503 {
				gstatus, atype, otype = "UNAVAILABLE", "overloaded_error", "server_error"
			}
			switch kind {
			case "gemini":
				fmt.Fprintf(w, `{"error":{"code":%d,"message":%q,"status":%q}}`, status, msg, gstatus)
			case "anthropic":
				fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":%q}}`, atype, msg)
			default:
				fmt.Fprintf(w, `{"error":{"message":%q,"type":%q}}`, msg, otype)
			}
		}
		switch {
		case strings.Contains(body, "fail400"):
			fail(400, "the request is malformed; key "+key+" was used")
			return
		case strings.Contains(body, "fail503"):
			fail(503, "overloaded, try again later")
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		switch kind {
		case "openai":
			var req struct{ Model string }
			_ = json.Unmarshal(raw, &req)
			fmt.Fprintf(w, "data: {\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n", req.Model+"-0125")
		case "anthropic":
			fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-answered-1\",\"usage\":{\"input_tokens\":20,\"output_tokens\":1}}}\n\n"+
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"+
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n"+
				"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"+
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n"+
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
		case "gemini":
			fmt.Fprintf(w, "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"hi\"}]},\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":20,\"candidatesTokenCount\":1},\"modelVersion\":\"gemini-answered-001\",\"responseId\":%q}\n\n", id)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestEachAttemptLeavesADiagnostic runs real turns against each provider's
// fake: an answer leaves one ok row with the model that answered and the
// request id; a 400 one row and the turn fails; a 503 a row for each model
// of the chain. Each failed attempt is one log line; the key, which the
// fakes echo, is in neither.
func TestEachAttemptLeavesADiagnostic(t *testing.T) {
	for _, kind := range []string{"openai", "anthropic", "gemini"} {
		t.Run(kind, func(t *testing.T) {
			srv := diagFake(t, kind)
			var p provider.Provider
			switch kind {
			case "openai":
				p = openai.New(openai.Config{Name: "fake", BaseURL: srv.URL, APIKey: testKey})
			case "anthropic":
				p = anthropic.New(anthropic.Config{Name: "fake", BaseURL: srv.URL, APIKey: testKey})
			case "gemini":
				p = gemini.New(gemini.Config{Name: "fake", BaseURL: srv.URL, APIKey: testKey})
			}
			e, err := NewEngine([]*Model{
				{Name: "first", ProvName: "fake", ProvKind: kind, Provider: p, Remote: "remote-a", Window: 128000},
				{Name: "second", ProvName: "fake", ProvKind: kind, Provider: p, Remote: "remote-b", Window: 128000},
			}, map[string][]string{"default": {"first", "second"}}, config.Roles{Chat: "default"}, 4)
			if err != nil {
				t.Fatal(err)
			}
			var log bytes.Buffer
			var logMu sync.Mutex
			if err := e.Provision(Options{Log: slog.New(slog.NewTextHandler(lockedWriter{&log, &logMu}, nil))}); err != nil {
				t.Fatal(err)
			}
			answered := map[string]string{"openai": "remote-a-0125", "anthropic": "claude-answered-1", "gemini": "gemini-answered-001"}[kind]
			okID := "id-" + kind + "-1"
			// Gemini names only an answer (responseId); the others name
			// refusals too, in a header.
			failID := func(n int) string {
				if kind == "gemini" {
					return ""
				}
				return fmt.Sprintf("id-%s-%d", kind, n)
			}
			cases := []struct {
				text    string
				failed  bool
				want    []Diagnostic
				logLine int
			}{
				{"hello", false, []Diagnostic{{Kind: DiagAttempt, Purpose: PurposeTurn, Model: "first", Remote: "remote-a", Answered: answered, RequestID: okID, Attempt: 1, Outcome: OutcomeOK}}, 0},
				{"please fail400", true, []Diagnostic{{Kind: DiagAttempt, Purpose: PurposeTurn, Model: "first", Remote: "remote-a", RequestID: failID(2), Attempt: 1, Outcome: string(provider.ClassBadRequest), Status: 400}}, 1},
				{"please fail503", true, []Diagnostic{
					{Kind: DiagAttempt, Purpose: PurposeTurn, Model: "first", Remote: "remote-a", RequestID: failID(3), Attempt: 1, Outcome: string(provider.ClassOverloaded), Status: 503},
					{Kind: DiagAttempt, Purpose: PurposeTurn, Model: "second", Remote: "remote-b", RequestID: failID(4), Attempt: 2, Outcome: string(provider.ClassOverloaded), Status: 503},
				}, 2},
			}
			for i, c := range cases {
				j := &diagJournal{}
				logMu.Lock()
				before := strings.Count(log.String(), "model attempt failed")
				logMu.Unlock()
				_, err := e.Run(context.Background(), TurnInput{Chat: "c1", Turn: uint64(i + 1), Chain: "default", Host: j,
					History: []provider.Message{{Role: "user", Content: c.text}}}, func(string) error { return nil })
				if (err != nil) != c.failed {
					t.Fatalf("%s: err %v", c.text, err)
				}
				if len(j.diags) != len(c.want) {
					t.Fatalf("%s: %d diagnostics %+v, want %d", c.text, len(j.diags), j.diags, len(c.want))
				}
				for k, d := range j.diags {
					if d.LatencyMS < 0 || (c.failed) != (d.Error != "") {
						t.Errorf("%s: diagnostic %d latency %d error %q", c.text, k, d.LatencyMS, d.Error)
					}
					if strings.Contains(d.Error, "TESTKEY") {
						t.Errorf("%s: the key is in a diagnostic: %q", c.text, d.Error)
					}
					d.LatencyMS, d.Error = 0, ""
					if d != c.want[k] {
						t.Errorf("%s: diagnostic %d\n got %+v\nwant %+v", c.text, k, d, c.want[k])
					}
				}
				logMu.Lock()
				got := strings.Count(log.String(), "model attempt failed") - before
				logMu.Unlock()
				if got != c.logLine {
					t.Errorf("%s: %d log lines, want %d", c.text, got, c.logLine)
				}
			}
			if strings.Contains(log.String(), "TESTKEY") {
				t.Errorf("the key is in the log:\n%s", log.String())
			}
		})
	}
}

// lockedWriter serializes writes to a buffer the test reads.
type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
