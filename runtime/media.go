package runtime

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tools"
	"github.com/mirror-gateway/mirror/runtime/view"
)

// Transcripts is a Host that keeps what the transcribe role heard in a
// person's voice notes: Transcribed stores it (message.transcribed) before
// the request that carries it is sent. heard maps an audio attachment's
// sha256 to its transcript; failed, when not empty, says why the others
// could not be heard (the model gets that note in their place).
type Transcripts interface {
	Transcribed(message string, heard map[string]string, failed string) error
}

// FileSender is a Host that delivers files to the person: send_file's
// (call set) and the images of a model's reply (call nil). SendFile stores
// the bytes as a blob, written and synced, then the file.sent row.
type FileSender interface {
	SendFile(ctx context.Context, call *provider.ToolCall, d tools.Delivery) error
}

// Diagnostic kinds of media (see Diagnostic).
const (
	DiagTranscribe = "transcribe" // one attempt of the transcribe role at a voice note
	DiagDelivery   = "delivery"   // an image of a model's answer that could not be delivered
	DiagMedia      = "media"      // a file of the person's message that did not reach the model (Name: the transport)
)

// Outcomes of a media diagnostic (DiagMedia) besides OutcomeError.
const (
	OutcomeUnsupported = "unsupported"     // a kind Mirror does not pass on (a video, a location)
	OutcomeTooLarge    = "too_large"       // past its kind's limit, or the Bot API's 20 MB
	OutcomeDownload    = "download_failed" // the transport could not fetch it
	OutcomeBadFile     = "bad_file"        // content that contradicts its type: a corrupt image, an empty file
)

// transcriber is a provider with an /audio/transcriptions endpoint (the
// openai adapter).
type transcriber interface {
	Transcribe(ctx context.Context, model string, audio io.Reader, mediaType, name string) (string, error)
}

// unheard reports whether rows hold an audio part the transcribe role has
// not read yet (neither transcribed nor withheld).
func unheard(rows []view.Row) bool {
	for _, r := range rows {
		if r.Kind != view.KindUser {
			continue
		}
		for _, p := range r.Parts {
			if p.Kind == provider.PartAudio && p.Transcript == "" && p.Withheld == "" {
				return true
			}
		}
	}
	return false
}

// transcribes reports whether a turn over in transcribes first: a
// transcribe role is set, the Host can store transcripts, and the
// messages the turn picked up carry audio not heard yet.
func (e *Engine) transcribes(in *TurnInput, rows []view.Row, picked int) bool {
	if e.roles.Transcribe == "" || in.Host == nil {
		return false
	}
	if _, ok := in.Host.(Transcripts); !ok {
		return false
	}
	return unheard(rows[hearFrom(rows, picked):])
}

// hearFrom is where the messages a turn answers begin: the ones it picked
// up, and the person's messages right before them, which a turn resumed
// after a crash answers without picking them up again (a crash may have
// come before their audio was heard).
func hearFrom(rows []view.Row, picked int) int {
	i := min(picked, len(rows))
	for i > 0 && (rows[i-1].Kind == view.KindUser || rows[i-1].Kind == view.KindContext) {
		i--
	}
	return i
}

// transcribe reads the audio of the messages the turn picked up through
// the transcribe role, stores what it heard, and puts the transcripts in
// the rows in place of the audio, before the view is built. A part that
// could not be heard is withheld with the reason, and the rest of the
// message goes on; only a stopped turn or a failed write ends the turn.
func (t *turn) transcribe() error {
	if !t.e.transcribes(&t.in, t.rows[:t.end], t.picked) {
		return nil
	}
	th := t.in.Host.(Transcripts)
	owned := false // the caller's rows are shared: copied before the first change
	for i := hearFrom(t.rows[:t.end], t.picked); i < t.end; i++ {
		r := &t.rows[i]
		if r.Kind != view.KindUser || !unheard([]view.Row{*r}) {
			continue
		}
		parts := slices.Clone(r.Parts) // the caller's rows are not ours to change
		heard := map[string]string{}
		var failed []string
		for j := range parts {
			p := &parts[j]
			if p.Kind != provider.PartAudio || p.Transcript != "" || p.Withheld != "" {
				continue
			}
			text, err := t.e.hear(t.ctx, t.in.askerFor(PurposeTurn, false).journal, *p)
			if err != nil && t.ctx.Err() != nil {
				return err
			}
			switch {
			case err != nil:
				failed = append(failed, fmt.Sprintf("%s could not be transcribed (%v)", partName(*p), err))
			case text == "":
				failed = append(failed, partName(*p)+" could not be transcribed (no speech was heard)")
			default:
				p.Transcript, heard[p.SHA256] = text, text
			}
		}
		reason := strings.Join(failed, "; ")
		for j := range parts {
			if p := &parts[j]; p.Kind == provider.PartAudio && p.Transcript == "" && p.Withheld == "" {
				p.Withheld = reason
			}
		}
		if reason != "" && t.e.log != nil {
			t.e.log.Warn("transcription failed", "chat", t.in.Chat, "message", r.MessageID(), "err", reason)
		}
		if err := th.Transcribed(r.MessageID(), heard, reason); err != nil {
			return err
		}
		if !owned {
			t.rows, owned = slices.Clone(t.rows), true
		}
		t.rows[i].Parts = parts
	}
	return nil
}

// hear asks the transcribe chain's models in order for p's transcript,
// under the provider concurrency cap; the next model is asked only when
// another may not share the failure. Each attempt leaves a diagnostic in
// journal (nil: none), as a model request does.
func (e *Engine) hear(ctx context.Context, journal DiagnosticJournal, p provider.Part) (string, error) {
	if p.Source == nil {
		return "", fmt.Errorf("the audio has no source")
	}
	err := fmt.Errorf("no model of chain %q can transcribe (it needs a provider of kind openai)", e.roles.Transcribe)
	n := 0
	for _, m := range e.chains[e.roles.Transcribe] {
		tr, ok := m.Provider.(transcriber)
		if !ok {
			continue
		}
		n++
		start := time.Now()
		var text string
		text, err = e.hearWith(ctx, tr, m, p)
		if journal != nil {
			d := Diagnostic{Kind: DiagTranscribe, Model: m.Name, Remote: m.Remote, Attempt: n, Outcome: OutcomeOK,
				LatencyMS: time.Since(start).Milliseconds()}
			switch pe := providerError(err); {
			case err == nil:
			case ctx.Err() != nil:
				d.Outcome = OutcomeCanceled
			case pe != nil:
				d.Outcome, d.Status, d.RequestID = string(pe.Class), pe.Status, pe.RequestID
			default:
				d.Outcome = OutcomeError
			}
			d.Error = DiagError(err)
			journal.Diagnostic(d)
		}
		if err == nil || ctx.Err() != nil || !provider.ClassOf(err).Retryable() {
			return text, err
		}
	}
	return "", err
}

func (e *Engine) hearWith(ctx context.Context, tr transcriber, m *Model, p provider.Part) (string, error) {
	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-e.sem }()
	rc, err := p.Source.Open()
	if err != nil {
		return "", err
	}
	defer rc.Close()
	// Streamed into the request: a voice note is never held whole.
	return tr.Transcribe(ctx, m.Remote, io.LimitReader(rc, provider.MaxPartBytes), p.MediaType, p.Name)
}

func partName(p provider.Part) string {
	if p.Name != "" {
		return p.Name
	}
	return "the " + p.Kind
}

// sendMeta gives a tool call the Host's file delivery, when it has one.
func sendMeta(h Host, call provider.ToolCall) func(context.Context, tools.Delivery) error {
	fs, ok := h.(FileSender)
	if !ok {
		return nil
	}
	return func(ctx context.Context, d tools.Delivery) error { return fs.SendFile(ctx, &call, d) }
}

// deliverImages hands the person the images a model's answer carried
// (Gemini's inlineData, OpenAI-compatible servers' message images), each
// stored and shown as a file.sent without a call. A Host that cannot
// deliver files leaves them out; a failed delivery is logged, never the
// turn's failure: the answer's text still stands.
func (t *turn) deliverImages(res provider.Result) {
	fs, ok := t.in.Host.(FileSender)
	if !ok || len(res.Images) == 0 {
		return
	}
	for i, img := range res.Images {
		name := "image-" + strconv.Itoa(i+1) + extOf(img.MediaType)
		err := fs.SendFile(t.ctx, nil, tools.Delivery{Body: bytes.NewReader(img.Data), MediaType: img.MediaType, Name: name})
		if err == nil {
			continue
		}
		if j, ok := t.in.Host.(DiagnosticJournal); ok {
			j.Diagnostic(Diagnostic{Kind: DiagDelivery, Outcome: OutcomeError, Error: DiagError(err)})
		}
		if t.e.log != nil {
			t.e.log.Warn("reply image not delivered", "chat", t.in.Chat, "type", img.MediaType, "bytes", len(img.Data), "err", DiagError(err))
		}
	}
}

// extOf is the usual file extension of an image media type.
func extOf(mediaType string) string {
	switch mediaType {
	case "image/png":
		return ".png"
	case "image/jpeg":
		return ".jpg"
	case "image/webp":
		return ".webp"
	case "image/gif":
		return ".gif"
	}
	if exts, _ := mime.ExtensionsByType(mediaType); len(exts) > 0 {
		return exts[0]
	}
	return ""
}

// withRecovered is the step's tool messages followed, when a result
// brought attachments back (an image got back through its handle), by one
// user message carrying them: a tool message is text on every provider,
// and a user message after the step's results is valid on all of them.
// The view shapes stored rows the same way (view.Materialize).
func withRecovered(msgs []provider.Message, kind string, results []ToolResult) []provider.Message {
	var parts []provider.Part
	for _, r := range results {
		parts = append(parts, r.Parts...)
	}
	if len(parts) == 0 {
		return msgs
	}
	return append(msgs, view.RecoveredMessage(kind, parts))
}
