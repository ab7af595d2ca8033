package chats

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/ids"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tools"
	bolt "go.etcd.io/bbolt"
)

// The host keeps a turn's media: transcripts and delivered files.
var (
	_ runtime.Transcripts = (*host)(nil)
	_ runtime.FileSender  = (*host)(nil)
)

// Transcribed stores what the transcribe role heard in a picked message's
// audio (message.transcribed), before the request that carries it is sent:
// the message's audio attachments carry their transcripts from now on, in
// the record, in snapshots and in every later view. failed, when not
// empty, is why the others were not heard; the model gets it in their
// place, and the event's Error says it to the person.
func (h *host) Transcribed(id string, heard map[string]string, failed string) error {
	return h.a.exec(func() error {
		a := h.a
		if err := a.usable(); err != nil {
			return err
		}
		m := a.findPicked(id)
		if m == nil {
			return fmt.Errorf("message %s: %w", id, ErrNotFound)
		}
		hear(m, heard, failed)
		a.touch()
		c := *m
		a.append(&MessageTranscribed{Turn: h.t.id, Message: &c, Error: failed}, Origin{})
		return a.flush()
	})
}

// hear puts transcripts on m's audio attachments (a copy: the slice may
// be shared with stored events) and notes why the rest were not heard.
func hear(m *Message, heard map[string]string, failed string) {
	atts := append([]Attachment(nil), m.Attachments...)
	for i := range atts {
		if t, ok := heard[atts[i].SHA256]; ok && KindOf(atts[i].Type) == KindAudio {
			atts[i].Transcript = t
		}
	}
	m.Attachments, m.TranscribeError = atts, failed
}

// replayTranscribed applies a stored message.transcribed row to the
// conversation being loaded.
func (a *actor) replayTranscribed(ev *MessageTranscribed) {
	if ev.Message == nil {
		return
	}
	for i := len(a.msgs) - 1; i >= 0; i-- {
		if a.msgs[i].ID == ev.Message.ID {
			heard := map[string]string{}
			for _, att := range ev.Message.Attachments {
				if att.Transcript != "" {
					heard[att.SHA256] = att.Transcript
				}
			}
			hear(&a.msgs[i], heard, ev.Error)
			a.touch()
			return
		}
	}
}

// SendFile delivers a file to the person: the bytes go into the blob
// store (streamed, written and synced), then a file.sent row names them.
// call is the send_file call, nil for an image of the model's reply.
func (h *host) SendFile(ctx context.Context, call *provider.ToolCall, d tools.Delivery) error {
	b := h.a.s.opt.Blobs
	if b == nil {
		return fmt.Errorf("%w: attachments are not enabled (no data dir)", ErrBadInput)
	}
	att, err := b.Put(d.Body, d.MediaType, d.Name)
	if err != nil {
		return err
	}
	return h.a.exec(func() error {
		a := h.a
		if err := a.usable(); err != nil {
			return err
		}
		seq := a.seq + 1
		m := &Message{ID: ids.Message(seq), Seq: seq, Role: provider.RoleAssistant, Text: d.Caption,
			State: MsgDone, Turn: h.t.id, Attachments: []Attachment{att}}
		p := &FileSent{Turn: h.t.id, Message: m}
		if call != nil {
			c := *call
			p.Call = &c
		}
		ev := a.append(p, Origin{})
		m.Time = ev.Time
		return a.flush()
	})
}

// imageBack answers tool_output for an image handle (view.ImageHandle):
// the image a checkpoint masked, found among the chat's stored messages,
// comes back as a part of the result.
func (s *Service) imageBack(chat, handle string) (runtime.ToolResult, error) {
	prefix, ok := ids.ParseImage(handle)
	if !ok {
		return runtime.ToolResult{}, fmt.Errorf("%w: %q is not an image handle (img_ and 16 hex digits)", ErrBadInput, handle)
	}
	var found *Attachment
	var from string
	err := s.store.db.View(func(tx *bolt.Tx) error {
		return eventsSince(tx, chat, 0, func(ev *Event) error {
			m := ev.Message()
			if found != nil || m == nil {
				return nil
			}
			for _, att := range m.Attachments {
				if KindOf(att.Type) == KindImage && strings.HasPrefix(att.SHA256, prefix) {
					found, from = &att, m.ID
					return nil
				}
			}
			return nil
		})
	})
	if err != nil {
		return runtime.ToolResult{}, err
	}
	if found == nil {
		return runtime.ToolResult{}, fmt.Errorf("%w: no image %q in this chat", ErrNotFound, handle)
	}
	text := fmt.Sprintf("The image %s of %s is attached again, after these results.", nameOr(found.Name, "image"), from)
	return runtime.ToolResult{Content: text, Full: text, Parts: s.parts([]Attachment{*found}, "")}, nil
}

func nameOr(name, alt string) string {
	if name != "" {
		return name
	}
	return alt
}

// outcomeAttachments is what a result brought back, as stored attachments.
func outcomeAttachments(parts []provider.Part) []Attachment {
	if len(parts) == 0 {
		return nil
	}
	out := make([]Attachment, len(parts))
	for i, p := range parts {
		out[i] = Attachment{SHA256: p.SHA256, Type: p.MediaType, Size: p.Size, Name: p.Name, Width: p.Width, Height: p.Height}
	}
	return out
}

// MediaRefused keeps, as a diagnostic of chat (kind media), why a file of
// the person's message did not reach the model: an unsupported kind, a
// file past its limit, a failed download, a file whose content is not what
// it says (a corrupt image). via names the transport (telegram, browser),
// outcome one of runtime's media outcomes, reason what the person was told
// (redacted and cut as every diagnostic). The person is told by the
// transport; this is the record's side of it (issue 16 item 7). A chat
// that does not exist or cannot write keeps none.
func (s *Service) MediaRefused(ctx context.Context, chat, via, outcome, reason string) {
	s.mediaRefused(ctx, chat, via, outcome, reason, Origin{})
}

// mediaRefused is MediaRefused with the origin of the row (who sent the
// file).
func (s *Service) mediaRefused(ctx context.Context, chat, via, outcome, reason string, o Origin) {
	if s.routed(ctx, chat) {
		_ = routeErr(ctx, s, chat, opFrame{Op: opMediaRefused, Via: via, Outcome: outcome, Reason: reason}, o)
		return
	}
	d := runtime.Diagnostic{Kind: runtime.DiagMedia, Name: via, Outcome: outcome, Error: runtime.DiagError(fmt.Errorf("%s", reason))}
	_ = s.do(ctx, chat, func(a *actor) error {
		if a.usable() != nil {
			return nil
		}
		a.append(&Diagnosed{Diagnostic: &d}, o)
		return a.flush()
	})
}

// RefusalOutcome is the media outcome of an error Upload or Blobs.Put
// refused a file with: too_large, bad_file (content that contradicts its
// type, a corrupt image, an empty file) or error.
func RefusalOutcome(err error) string {
	switch {
	case errors.Is(err, ErrTooLarge):
		return runtime.OutcomeTooLarge
	case errors.Is(err, ErrBadInput):
		return runtime.OutcomeBadFile
	}
	return runtime.OutcomeError
}
