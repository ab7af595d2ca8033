package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"sort"
	"strings"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
	"github.com/mirror-gateway/mirror/chats"
)

// Bot API limits of what the bot sends (core.telegram.org/bots/api,
// sendPhoto and "Sending files").
const (
	// maxPhotoBytes: a photo sent by upload is at most 10 MB.
	maxPhotoBytes = 10 << 20
	// maxPhotoSides: a photo's width and height must not exceed 10000 in
	// total, and their ratio must be at most 20.
	maxPhotoSides = 10000
	maxPhotoRatio = 20
	// maxCaption is the longest caption (UTF-16 units, after entities).
	maxCaption = 1024
)

// asPhoto reports whether an attachment can go by sendPhoto: a JPEG, PNG,
// WebP or GIF within the photo limits. Anything else goes by sendDocument.
func asPhoto(a chats.Attachment) bool {
	switch a.Type {
	case "image/jpeg", "image/png", "image/webp", "image/gif":
	default:
		return false
	}
	if a.Size > maxPhotoBytes || a.Width+a.Height > maxPhotoSides {
		return false
	}
	if a.Width > 0 && a.Height > 0 && (a.Width > maxPhotoRatio*a.Height || a.Height > maxPhotoRatio*a.Width) {
		return false
	}
	return true
}

// fileName is the name a sent file carries: its own, or one made of its
// hash and type.
func fileName(a chats.Attachment) string {
	if a.Name != "" {
		return a.Name
	}
	n := a.SHA256
	if len(n) > 12 {
		n = n[:12]
	}
	if _, sub, ok := strings.Cut(a.Type, "/"); ok && sub != "" && !strings.ContainsAny(sub, "+.;") {
		return n + "." + sub
	}
	return n
}

// sendAttachment sends one stored file to chat tg: sendPhoto when it is a
// photo Telegram takes, else (or when Telegram refuses the photo)
// sendDocument, as a multipart upload streamed from the blob store. The
// caption goes with it when it fits, else as a text right after. It is
// paced and budgeted like every send, and returns the new message's id.
func (b *Bot) sendAttachment(ctx context.Context, to place, a chats.Attachment, caption string) (int, error) {
	blobs := b.svc.Blobs()
	if blobs == nil {
		return 0, errors.New("this Mirror stores no attachments")
	}
	withCaption := caption != "" && utf16Len(caption) <= maxCaption
	params := map[string]string{"chat_id": fmt.Sprint(to.tg)}
	addThread(params, to)
	if withCaption {
		params["caption"] = caption
	}
	open := func() (io.ReadCloser, error) { return blobs.Open(a.SHA256) }
	o := callOpts{chat: to.tg, paced: true, prio: prioFinal}
	var resp *tgbotapi.APIResponse
	var err error
	if asPhoto(a) {
		resp, err = b.callDo(ctx, o, "sendPhoto", true, func(api *tgbotapi.BotAPI) (*tgbotapi.APIResponse, error) {
			return b.upload(api, "sendPhoto", params, "photo", fileName(a), open)
		})
		var te *tgbotapi.Error
		if err != nil && errors.As(err, &te) && te.Code == 400 {
			// Dimensions or format Telegram will not take as a photo: the
			// same file as a document.
			b.log.Info("telegram: photo refused; sending it as a document", "err", err)
			resp = nil
		} else if err != nil {
			return 0, err
		}
	}
	if resp == nil {
		resp, err = b.callDo(ctx, o, "sendDocument", true, func(api *tgbotapi.BotAPI) (*tgbotapi.APIResponse, error) {
			return b.upload(api, "sendDocument", params, "document", fileName(a), open)
		})
		if err != nil {
			return 0, err
		}
	}
	var msg tgbotapi.Message
	if err := json.Unmarshal(resp.Result, &msg); err != nil {
		return 0, fmt.Errorf("telegram: decode the answer to a file send: %w", err)
	}
	if caption != "" && !withCaption {
		if _, err := b.sendTextAt(ctx, to, escape(caption), caption, nil, msg.MessageID, prioFinal); err != nil {
			return msg.MessageID, err
		}
	}
	return msg.MessageID, nil
}

// upload makes one multipart/form-data request to method: params as
// fields, then the file from open under field, streamed through a pipe so
// it is never held in memory. The library's own UploadFiles drops the
// error code of a refusal (so a 429 would not be retried); this keeps it.
func (b *Bot) upload(api *tgbotapi.BotAPI, method string, params map[string]string, field, name string, open func() (io.ReadCloser, error)) (*tgbotapi.APIResponse, error) {
	body, err := open()
	if err != nil {
		return nil, &tgbotapi.Error{Code: 400, Message: "the file to send cannot be read: " + err.Error()}
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer body.Close()
		keys := make([]string, 0, len(params))
		for k := range params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if err := mw.WriteField(k, params[k]); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		part, err := mw.CreateFormFile(field, name)
		if err == nil {
			_, err = io.Copy(part, body)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	defer func() {
		pr.Close() // a request that ended early stops the writer
		<-done
	}()
	endpoint := b.cfg.APIEndpoint
	if endpoint == "" {
		endpoint = tgbotapi.APIEndpoint
	}
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf(endpoint, b.opt.Token, method), pr)
	if err != nil {
		return nil, redactErr(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := api.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var ar tgbotapi.APIResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&ar); err != nil {
		return nil, fmt.Errorf("%s: the answer is not a Bot API response (HTTP %d): %w", method, resp.StatusCode, err)
	}
	if !ar.Ok {
		e := &tgbotapi.Error{Code: ar.ErrorCode, Message: ar.Description}
		if ar.Parameters != nil {
			e.ResponseParameters = *ar.Parameters
		}
		return &ar, e
	}
	return &ar, nil
}

// sendFile renders a file.sent event: the file, with its caption, to the
// Telegram chat. It runs in the follower, after the event's seq is taken
// and before the follower's state is saved, like a reply's text: the
// follower's stored state is the outbox, so a restart neither loses the
// file nor (past the one send a crash can interrupt) sends it twice. A
// file Telegram refuses is replaced by a note saying so.
func (f *follower) sendFile(ev *chats.FileSent) error {
	m := ev.Message
	if m == nil || len(m.Attachments) == 0 {
		return f.save()
	}
	b := f.b
	var ids []int
	for i, a := range m.Attachments {
		caption := ""
		if i == 0 {
			caption = m.Text
		}
		id, err := b.sendAttachment(f.ctx, f.key.where, a, caption)
		if errors.Is(err, errUncertain) {
			id, err = 0, nil // most likely shown; never sent a third time
		}
		if err != nil {
			if f.ctx.Err() != nil {
				return err // shutting down: sent after the restart
			}
			b.log.Warn("telegram: a file was not delivered", "chat", f.key.chat, "tg", f.key.where.tg, "err", err)
			note := fmt.Sprintf("The assistant sent you a file (%s, %s), but Telegram did not take it: %s", fileName(a), sizeText(a.Size), Redact(err.Error()))
			if id, err = b.sendTextAt(f.ctx, f.key.where, escape(note), note, nil, 0, prioFinal); err != nil && f.ctx.Err() != nil {
				return err
			}
		}
		if id != 0 {
			ids = append(ids, id)
		}
	}
	v, _ := json.Marshal(sentRecord{Chat: f.key.chat, Msg: m.ID, Reply: true})
	return f.saveWith(func(bk stateBucket) error {
		for _, id := range ids {
			if err := bk.Put(tgKey("m", f.key.where.tg, id), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// transcribed renders a message.transcribed event: a reply to the
// person's voice message with what it says (or why it could not be
// read), in the Telegram chat it came from.
func (f *follower) transcribed(ev *chats.MessageTranscribed) error {
	m := ev.Message
	if m == nil {
		return f.save()
	}
	b := f.b
	var origin string
	_ = b.read(func(bk stateBucket) error { origin = string(bk.Get(tgKey("mm", f.key.chat, m.ID))); return nil })
	if origin == "" {
		// Not recorded yet: the record commits with the update that passed
		// the message on, and a quick transcription can come first. The
		// message's client id says the same (tg:<chat>:<message_id>).
		origin, _ = strings.CutPrefix(m.ClientID, "tg:")
	}
	var tg int64
	var reply int
	if _, err := fmt.Sscanf(origin, "%d:%d", &tg, &reply); err != nil || tg != f.key.where.tg {
		return f.save() // not a message of this Telegram chat
	}
	var said []string
	for _, a := range m.Attachments {
		if t := strings.TrimSpace(a.Transcript); t != "" && chats.KindOf(a.Type) == chats.KindAudio {
			said = append(said, t)
		}
	}
	var html, plain string
	switch {
	case len(said) > 0:
		t := truncate(strings.Join(said, "\n\n"), 3500)
		html, plain = "🎙 <i>"+escape(t)+"</i>", "🎙 "+t
	case ev.Error != "":
		plain = "I could not transcribe your voice message: " + truncate(ev.Error, 500)
		html = escape(plain)
	default:
		return f.save()
	}
	if _, err := b.sendTextAt(f.ctx, f.key.where, html, plain, nil, reply, prioFinal); err != nil && f.ctx.Err() != nil {
		return err
	}
	return f.save()
}
