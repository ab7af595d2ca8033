package chats

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/anthropic"
	"github.com/mirror-gateway/mirror/runtime/provider/gemini"
	"github.com/mirror-gateway/mirror/runtime/provider/openai"
	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
	"github.com/mirror-gateway/mirror/runtime/tools"
	"github.com/mirror-gateway/mirror/runtime/view"
)

// oggBytes is the start of an Ogg voice note: the sniffer reads it as
// application/ogg, which the blob store takes as audio.
func oggBytes() []byte {
	return append([]byte("OggS\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00"), bytes.Repeat([]byte{7}, 300)...)
}

// playOpenAI is a fake chat-completions server that records each request's
// messages as they came (raw JSON, so a test can check the parts and
// compare bytes across requests) and answers request n (from 0) as script
// says: a text, a tool call, or images in the answer (OpenAI-compatible
// routers' delta.images); without a script, every answer is "Seen.".
type playOpenAI struct {
	mu     sync.Mutex
	reqs   [][]json.RawMessage
	script func(n int) playAnswer
}

type playAnswer struct {
	text   string
	call   *provider.ToolCall
	images []string // data: URLs
}

func (f *playOpenAI) serve(t testing.TB) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, hr *http.Request) {
		var r struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.NewDecoder(hr.Body).Decode(&r); err != nil {
			http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, 400)
			return
		}
		f.mu.Lock()
		n := len(f.reqs)
		f.reqs = append(f.reqs, r.Messages)
		f.mu.Unlock()
		ans := playAnswer{text: "Seen."}
		if f.script != nil {
			ans = f.script(n)
		}
		delta := map[string]any{"role": "assistant"}
		finish := "stop"
		if ans.text != "" {
			delta["content"] = ans.text
		}
		if c := ans.call; c != nil {
			delta["tool_calls"] = []any{map[string]any{"index": 0, "id": c.ID, "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": c.Arguments}}}
			finish = "tool_calls"
		}
		if len(ans.images) > 0 {
			var ims []any
			for _, u := range ans.images {
				ims = append(ims, map[string]any{"type": "image_url", "image_url": map[string]any{"url": u}})
			}
			delta["images"] = ims
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, v := range []any{
			map[string]any{"choices": []any{map[string]any{"index": 0, "delta": delta}}},
			map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}},
			map[string]any{"choices": []any{}, "usage": map[string]any{"prompt_tokens": 900, "completion_tokens": 2}},
		} {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func (f *playOpenAI) requests() [][]json.RawMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]json.RawMessage(nil), f.reqs...)
}

// transcribing is an engine whose chat model is the env's and whose
// transcribe role is a whisper server at url.
func transcribing(url string) func(a *attachEnv) *runtime.Engine {
	return func(a *attachEnv) *runtime.Engine {
		eng, err := runtime.NewEngine([]*runtime.Model{
			{Name: "m", ProvName: "p", ProvKind: a.kind, Provider: a.model, Remote: "gpt-4o", Window: 128000, MaxOutput: 200},
			{Name: "stt", ProvName: "whisper", ProvKind: config.KindOpenAI, Provider: openai.New(openai.Config{Name: "whisper", BaseURL: url}), Remote: "whisper-1", Window: 8192},
		}, map[string][]string{"default": {"m"}, "stt": {"stt"}}, config.Roles{Chat: "default", Reflect: "default", Transcribe: "stt"}, 4)
		if err != nil {
			a.t.Fatal(err)
		}
		return eng
	}
}

// userTexts returns the text parts of a request's user messages.
func userTexts(t *testing.T, msgs []json.RawMessage) []string {
	t.Helper()
	var out []string
	for _, raw := range msgs {
		var m struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		if m.Role != "user" {
			continue
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(m.Content, &parts) != nil {
			var s string
			json.Unmarshal(m.Content, &s)
			out = append(out, s)
			continue
		}
		for _, p := range parts {
			if p.Type == "input_audio" {
				t.Errorf("audio reached the model as audio: %s", raw)
			}
			if p.Type == "text" {
				out = append(out, p.Text)
			}
		}
	}
	return out
}

// A voice note is transcribed through the transcribe role's server before
// the request: the transcript is stored (message.transcribed, carried by
// the snapshot), sent to the model in place of the audio, and sent as the
// same bytes after a restart. A failed transcription tells the person and
// the model, and the rest of the message still goes.
func TestVoiceNoteIsTranscribedStoredAndSent(t *testing.T) {
	for _, tc := range []struct {
		name     string
		status   int
		want     string // in the user message the model gets
		errorHas string // in message.transcribed's error
	}{
		{"heard", 0, "[voice note voice.ogg, transcribed]\nPlease book a table for two.", ""},
		{"server fails", 500, "[attachment voice.ogg (audio/ogg, 314 bytes) was not sent: voice.ogg could not be transcribed (whisper: server (HTTP 500)", "voice.ogg could not be transcribed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stt := &providertest.Whisper{Text: "  Please book a table for two. ", Status: tc.status}
			f := &playOpenAI{}
			a := newAttachEnv(t, openai.New(openai.Config{Name: "p", BaseURL: f.serve(t)}), config.KindOpenAI, transcribing(stt.Serve(t)))
			voice := oggBytes()
			att := a.upload(voice, "audio/ogg", "voice.ogg")
			c, s := a.openChat()
			a.turn(s, c.ID, "see the voice note", att.SHA256)

			if files := stt.Files(); len(files) != 1 || !bytes.Equal(files[0], voice) {
				t.Fatalf("the transcription server got %d files", len(files))
			}
			var tr *MessageTranscribed
			for _, ev := range s.events() {
				if ev.Type == EvMessageTranscribed {
					tr = pay[*MessageTranscribed](ev)
				}
			}
			if tr == nil || tr.Message == nil || len(tr.Message.Attachments) != 1 {
				t.Fatalf("no message.transcribed with the attachment: %s", typesOf(s.events()))
			}
			wantTranscript := ""
			if tc.status == 0 {
				wantTranscript = "Please book a table for two."
			}
			if got := tr.Message.Attachments[0].Transcript; got != wantTranscript || !strings.Contains(tr.Error, tc.errorHas) || (tc.errorHas == "") != (tr.Error == "") {
				t.Fatalf("message.transcribed: transcript %q, error %q", got, tr.Error)
			}
			var diags []string
			for _, ev := range s.events() {
				if d := pay[*Diagnosed](ev); d != nil && d.Diagnostic.Kind == runtime.DiagTranscribe {
					diags = append(diags, d.Diagnostic.Outcome)
				}
			}
			if want := map[bool]string{true: "ok", false: "server"}[tc.status == 0]; strings.Join(diags, " ") != want {
				t.Fatalf("transcription diagnostics %v, want %s", diags, want)
			}
			reqs := f.requests()
			texts := strings.Join(userTexts(t, reqs[0]), "\n")
			if !strings.Contains(texts, tc.want) || !strings.Contains(texts, "see the voice note") {
				t.Fatalf("the model got %q, want it to carry %q and the text", texts, tc.want)
			}

			// Stored: a restart shows the transcript in the snapshot and
			// sends the same bytes, without transcribing again.
			a.stop()
			a.start()
			s2 := newSub()
			if err := a.svc.Open(bg, c.ID, nil, s2, ""); err != nil {
				t.Fatal(err)
			}
			sn := s2.snapshot(t)
			var shown *Attachment
			for _, m := range sn.Messages {
				if len(m.Attachments) == 1 {
					shown = &m.Attachments[0]
				}
			}
			if shown == nil || shown.Transcript != wantTranscript {
				t.Fatalf("the snapshot's attachment: %+v", shown)
			}
			for _, m := range sn.Messages {
				if len(m.Attachments) == 1 && (m.TranscribeError != "") != (tc.errorHas != "") {
					t.Fatalf("the snapshot's message says %q of its transcription", m.TranscribeError)
				}
			}
			a.turn(s2, c.ID, "and?")
			reqs = f.requests()
			if n := len(stt.Files()); n != 1 {
				t.Fatalf("transcribed %d times", n)
			}
			for i := range reqs[0] {
				if !bytes.Equal(reqs[0][i], reqs[1][i]) {
					t.Fatalf("message %d differs after the restart:\n%.300s\n%.300s", i, reqs[0][i], reqs[1][i])
				}
			}
		})
	}
}

// snapshot returns the snapshot the sub got.
func (s *sub) snapshot(t *testing.T) *Snapshot {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.got {
		if d.Snapshot != nil {
			return d.Snapshot
		}
	}
	t.Fatal("no snapshot")
	return nil
}

// sendFileEngine is an engine whose chat model is the env's and whose
// tools work in workspace, send_file allowed.
func sendFileEngine(workspace string) func(a *attachEnv) *runtime.Engine {
	return func(a *attachEnv) *runtime.Engine {
		eng, err := runtime.NewEngine([]*runtime.Model{{Name: "m", ProvName: "p", ProvKind: a.kind, Provider: a.model, Remote: "gpt-4o", Window: 128000, MaxOutput: 200}},
			map[string][]string{"default": {"m"}}, config.Roles{Chat: "default", Reflect: "default"}, 4)
		if err != nil {
			a.t.Fatal(err)
		}
		reg, err := tools.New(tools.Options{Workspace: workspace, Policies: map[string]tools.Policy{tools.SendFile: tools.Allow}})
		if err != nil {
			a.t.Fatal(err)
		}
		if err := eng.Provision(runtime.Options{Tools: reg}); err != nil {
			a.t.Fatal(err)
		}
		return eng
	}
}

// send_file delivers a workspace file: file.sent, journaled between the
// call and its result, names a blob that is on disk, with the caption; an
// image in the model's reply is delivered the same way, without a call;
// a path out of the workspace is refused and nothing is stored.
func TestSendFileAndReplyImagesAreDelivered(t *testing.T) {
	ws := t.TempDir()
	chart := pngBytes(t, 6, 3)
	if err := os.WriteFile(filepath.Join(ws, "chart.png"), chart, 0o600); err != nil {
		t.Fatal(err)
	}
	// A PNG whose header is cut: the blob store refuses it, whole.
	if err := os.WriteFile(filepath.Join(ws, "broken.png"), chart[:20], 0o600); err != nil {
		t.Fatal(err)
	}
	drawn := pngBytes(t, 2, 2)
	f := &playOpenAI{script: func(n int) playAnswer {
		switch n {
		case 0:
			return playAnswer{call: &provider.ToolCall{ID: "call_1", Name: tools.SendFile, Arguments: `{"path":"chart.png","caption":"The chart"}`}}
		case 1:
			return playAnswer{call: &provider.ToolCall{ID: "call_2", Name: tools.SendFile, Arguments: `{"path":"../secret.txt"}`}}
		case 2:
			return playAnswer{call: &provider.ToolCall{ID: "call_3", Name: tools.SendFile, Arguments: `{"path":"broken.png"}`}}
		case 3:
			return playAnswer{text: "Sent."}
		}
		return playAnswer{text: "Here is a drawing.", images: []string{"data:image/png;base64," + base64.StdEncoding.EncodeToString(drawn)}}
	}}
	a := newAttachEnv(t, openai.New(openai.Config{Name: "p", BaseURL: f.serve(t)}), config.KindOpenAI, sendFileEngine(ws))
	c, s := a.openChat()
	a.turn(s, c.ID, "send me the chart")
	a.turn(s, c.ID, "draw something")

	var sent []*Event
	var order []string
	for _, ev := range s.events() {
		switch ev.Type {
		case EvFileSent:
			sent = append(sent, ev)
			order = append(order, ev.Type)
		case EvToolCall:
			order = append(order, ev.Type+":")
		case EvToolResult:
			order = append(order, ev.Type+":"+pay[*ToolResult](ev).Result.CallID)
		}
	}
	if len(sent) != 2 {
		t.Fatalf("%d file.sent, want 2: %s", len(sent), typesOf(s.events()))
	}
	if got := strings.Join(order[:4], " "); got != "tool.call: file.sent tool.result:call_1 tool.call:" {
		t.Errorf("order %s", got)
	}
	for i, want := range []struct {
		call    bool
		caption string
		data    []byte
		name    string
	}{{true, "The chart", chart, "chart.png"}, {false, "", drawn, "image-1.png"}} {
		ev := pay[*FileSent](sent[i])
		m := ev.Message
		if (ev.Call != nil) != want.call || m == nil || m.Role != provider.RoleAssistant || m.Text != want.caption || len(m.Attachments) != 1 || ev.Turn == "" {
			t.Fatalf("file.sent %d: %+v %+v", i, ev, m)
		}
		att := m.Attachments[0]
		if att.Name != want.name || att.Type != "image/png" || att.Size != int64(len(want.data)) {
			t.Errorf("file.sent %d attachment %+v", i, att)
		}
		fh, err := a.svc.Blobs().Open(att.SHA256)
		if err != nil {
			t.Fatalf("file.sent %d: blob: %v", i, err)
		}
		got, _ := io.ReadAll(fh)
		fh.Close()
		if !bytes.Equal(got, want.data) {
			t.Errorf("file.sent %d: the blob holds other bytes", i)
		}
	}
	results := map[string]*ToolOutcome{}
	for _, ev := range s.events() {
		if ev.Type == EvToolResult {
			results[pay[*ToolResult](ev).Result.CallID] = pay[*ToolResult](ev).Result
		}
	}
	if r := results["call_2"]; r == nil || !r.IsError || !strings.Contains(r.Content, "out of the workspace") {
		t.Errorf("send_file out of the workspace: %+v", r)
	}
	if r := results["call_3"]; r == nil || !r.IsError || !strings.Contains(r.Content, "the image cannot be read") {
		t.Errorf("send_file of a corrupt image: %+v", r)
	}
	// Two blobs, each in its folder; nothing of the refused ones.
	if got := entries(t, a.data); len(got) != 4 {
		t.Errorf("data/blobs holds %v, want two blobs", got)
	}
	// A snapshot shows the delivered files in the transcript.
	s2 := newSub()
	if err := a.svc.Open(bg, c.ID, nil, s2, ""); err != nil {
		t.Fatal(err)
	}
	files := 0
	for _, m := range s2.snapshot(t).Messages {
		if m.Role == provider.RoleAssistant && len(m.Attachments) == 1 {
			files++
		}
	}
	if files != 2 {
		t.Errorf("the snapshot shows %d delivered files, want 2", files)
	}
}

// A PDF reaches Anthropic as a document block and Gemini as inline data
// of type application/pdf, from the blob store, through a real turn.
func TestPDFReachesAnthropicAndGeminiAsADocument(t *testing.T) {
	pdf := providertest.PDF
	b64 := base64.StdEncoding.EncodeToString(pdf)
	for _, tc := range []struct {
		kind  string
		model func(url string) provider.Provider
		serve func(w http.ResponseWriter)
		check func(body []byte) bool
	}{
		{config.KindAnthropic, func(u string) provider.Provider {
			return anthropic.New(anthropic.Config{Name: "p", BaseURL: u + "/v1"})
		},
			func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "text/event-stream")
				for _, d := range []string{
					`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":900,"output_tokens":1}}}`,
					`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
					`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Seen."}}`,
					`{"type":"content_block_stop","index":0}`,
					`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}`,
					`{"type":"message_stop"}`,
				} {
					var ty struct{ Type string }
					json.Unmarshal([]byte(d), &ty)
					fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ty.Type, d)
				}
			},
			func(body []byte) bool {
				var r struct {
					Messages []struct {
						Role    string `json:"role"`
						Content []struct {
							Type   string `json:"type"`
							Source *struct {
								Type, MediaType, Data string
							} `json:"source"`
						} `json:"content"`
					} `json:"messages"`
				}
				json.Unmarshal(body, &r)
				for _, m := range r.Messages {
					for _, c := range m.Content {
						if c.Type == "document" && c.Source != nil && c.Source.Type == "base64" && c.Source.Data == b64 {
							return true
						}
					}
				}
				return false
			}},
		{config.KindGemini, func(u string) provider.Provider { return gemini.New(gemini.Config{Name: "p", BaseURL: u + "/v1beta"}) },
			func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Seen."}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":900,"candidatesTokenCount":2}}`+"\n\n")
			},
			func(body []byte) bool {
				var r struct {
					Contents []struct {
						Parts []struct {
							InlineData *struct {
								MimeType string `json:"mimeType"`
								Data     string `json:"data"`
							} `json:"inlineData"`
						} `json:"parts"`
					} `json:"contents"`
				}
				json.Unmarshal(body, &r)
				for _, c := range r.Contents {
					for _, p := range c.Parts {
						if p.InlineData != nil && p.InlineData.MimeType == "application/pdf" && p.InlineData.Data == b64 {
							return true
						}
					}
				}
				return false
			}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			var mu sync.Mutex
			var bodies [][]byte
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				bodies = append(bodies, b)
				mu.Unlock()
				tc.serve(w)
			}))
			defer srv.Close()
			a := newAttachEnv(t, tc.model(srv.URL), tc.kind)
			att := a.upload(pdf, "application/pdf", "brief.pdf")
			c, s := a.openChat()
			a.turn(s, c.ID, "summarize", att.SHA256)
			mu.Lock()
			defer mu.Unlock()
			if len(bodies) != 1 || !tc.check(bodies[0]) {
				t.Fatalf("%d requests; the PDF did not arrive as a document: %.600s", len(bodies), bodies)
			}
		})
	}
}

// An image a checkpoint masked comes back through its handle: the
// assistant calls tool_output with it, the result brings the image back
// into the view (a user message with the image right after the step's
// results), and the same rows give the same bytes after a restart.
func TestMaskedImageComesBackThroughItsHandle(t *testing.T) {
	png := pngBytes(t, 4, 5)
	handle := ""
	f := &playOpenAI{}
	f.script = func(n int) playAnswer {
		if n == 1 {
			return playAnswer{call: &provider.ToolCall{ID: "call_img", Name: "tool_output", Arguments: `{"tool_call_id":"` + handle + `"}`}}
		}
		return playAnswer{text: "Seen."}
	}
	a := newAttachEnv(t, openai.New(openai.Config{Name: "p", BaseURL: f.serve(t)}), config.KindOpenAI, sendFileEngine(t.TempDir()))
	att := a.upload(png, "image/png", "a.png")
	handle = view.ImageHandle(provider.Part{SHA256: att.SHA256})
	c, s := a.openChat()
	a.turn(s, c.ID, "what is this?", att.SHA256)
	a.turn(s, c.ID, "look at it again")

	want := "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
	reqs := f.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	last := reqs[2]
	var roles []string
	for _, raw := range last {
		var m struct{ Role string }
		json.Unmarshal(raw, &m)
		roles = append(roles, m.Role)
	}
	n := len(last)
	if n < 3 || roles[n-2] != "tool" || roles[n-1] != "user" {
		t.Fatalf("the request after tool_output ends %v, want tool then user", roles)
	}
	if urls, _ := imageURLs(t, last[n-1:]); len(urls) != 1 || urls[0] != want {
		t.Fatalf("the message after the result carries %d images, want the image", len(urls))
	}
	// After a restart the next turn sends the same messages, the image
	// brought back included.
	a.stop()
	a.start()
	s2 := newSub()
	if err := a.svc.Open(bg, c.ID, nil, s2, ""); err != nil {
		t.Fatal(err)
	}
	a.turn(s2, c.ID, "thanks")
	reqs = f.requests()
	next := reqs[len(reqs)-1]
	// The step's answer ("Seen.") followed the recovered image: everything
	// before it is the same bytes.
	for i := 0; i < n; i++ {
		if !bytes.Equal(last[i], next[i]) {
			t.Fatalf("message %d differs after the restart:\n%.300s\n%.300s", i, last[i], next[i])
		}
	}
}

// A message sent to steer a running turn (mode redirect) reaches the model
// at the turn's next tool boundary with its attachments, not as its text
// alone.
func TestRedirectCarriesItsAttachments(t *testing.T) {
	png := pngBytes(t, 3, 3)
	gate := make(chan struct{})
	f := &playOpenAI{script: func(n int) playAnswer {
		if n == 0 {
			<-gate // the redirect is accepted while the first request waits
			return playAnswer{call: &provider.ToolCall{ID: "call_1", Name: "list_dir", Arguments: `{}`}}
		}
		return playAnswer{text: "Seen."}
	}}
	a := newAttachEnv(t, openai.New(openai.Config{Name: "p", BaseURL: f.serve(t)}), config.KindOpenAI, sendFileEngine(t.TempDir()))
	att := a.upload(png, "image/png", "steer.png")
	c, s := a.openChat()
	if _, err := a.svc.Send(bg, c.ID, "list the files", "k1", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "turn.started", has(EvTurnStarted, 1))
	if _, err := a.svc.SendAttached(bg, c.ID, "and look at this", "k2", ModeRedirect, []string{att.SHA256}, Origin{}); err != nil {
		close(gate)
		t.Fatal(err)
	}
	close(gate)
	s.waitFor(t, "the turn's end", has(EvTurnFinished, 1))
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	want := "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
	if urls, _ := imageURLs(t, reqs[1]); len(urls) != 1 || urls[0] != want {
		t.Fatalf("the steered request carries %d images, want the image", len(urls))
	}
}
