package telegram

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/chats/people"
	"github.com/mirror-gateway/mirror/monitor"
	"github.com/mirror-gateway/mirror/runtime"
)

// allowedUpdates are the update types the bot handles.
var allowedUpdates = []string{"message", "edited_message", "callback_query"}

// SecretHeader carries the webhook secret token on Telegram's requests.
const SecretHeader = "X-Telegram-Bot-Api-Secret-Token"

func (b *Bot) offset() int {
	var n uint64
	_ = b.read(func(bk stateBucket) error { n = parseUint(bk.Get([]byte("offset"))); return nil })
	return int(n)
}

// Backoff of the polling loop: transient failures start at pollBackoff and
// double up to maxPollBackoff; a 409 Conflict (another poller, or a webhook
// set) starts at conflictBackoff and doubles up to maxConflictBackoff,
// because polling fast only fights the other instance.
const (
	pollBackoff        = time.Second
	maxPollBackoff     = 30 * time.Second
	conflictBackoff    = 5 * time.Second
	maxConflictBackoff = time.Minute
	// maxBreakerWait bounds one wait for an open Telegram breaker.
	maxBreakerWait = time.Minute
)

// pollLoop long-polls getUpdates (single-node mode: the offset is in the
// bot's bucket).
func (b *Bot) pollLoop() {
	defer b.wg.Done()
	_ = b.poll(b.ctx, b.offset())
}

// poll long-polls getUpdates from offset until ctx ends. Each update is
// handled and its offset committed before the next; ending ctx aborts the
// poll in flight, and no update is handled once it ended (in cluster mode
// ctx is the leader's stint: see leadLoop). Failures back off exponentially
// (bounded) and are reported to the Telegram breaker; while the breaker is
// open the loop waits for its cooldown instead of asking. A 409 Conflict is
// logged once per episode with what to do, and once more when polling works
// again. It returns the error of a cluster offset that could not be
// committed (the stint ends and the next one loads the offset again).
func (b *Bot) poll(ctx context.Context, offset int) error {
	backoff, conflict, updBackoff := pollBackoff, conflictBackoff, pollBackoff
	inConflict, breakerLogged := false, false
	for ctx.Err() == nil {
		var done func(error, string)
		if b.opt.Monitor != nil {
			d, err := b.opt.Monitor.TelegramPolling().Allow()
			if err != nil {
				wait := pollBackoff
				var oe *monitor.OpenError
				if errors.As(err, &oe) {
					wait = min(max(time.Until(oe.RetryAt), pollBackoff), maxBreakerWait)
				}
				if !breakerLogged {
					b.log.Warn("telegram: the Telegram breaker is open; polling waits for its cooldown", "err", err, "retry_in", wait)
					breakerLogged = true
				}
				if b.pause(ctx, wait) != nil {
					return nil
				}
				continue
			}
			done = d
		}
		rctx, cancel := context.WithTimeout(ctx, b.opt.PollTimeout+15*time.Second)
		var ups []polled
		resp, err := b.with(rctx).Request(tgbotapi.UpdateConfig{Offset: offset, Timeout: int(b.opt.PollTimeout / time.Second),
			AllowedUpdates: allowedUpdates})
		cancel()
		if err == nil {
			ups, err = decodeUpdates(resp.Result)
		}
		err = redactErr(err)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			var te *tgbotapi.Error
			class := monitor.ClassNetwork
			wait := backoff
			backoff = min(backoff*2, maxPollBackoff)
			switch {
			case errors.As(err, &te) && te.Code == 409:
				// Another instance polls this token, or a webhook is set:
				// retrying fast only fights it. Counted by the polling
				// breaker (unclassified), so a lasting conflict shows on the
				// Monitor; sending is not held up by it.
				class = ""
				wait = conflict
				conflict = min(conflict*2, maxConflictBackoff)
				if !inConflict {
					inConflict = true
					b.log.Error("telegram: getUpdates conflict: another process polls this bot token, or a webhook is set for it "+
						"(stop the other instance, or use telegram.mode: webhook); polling backs off until the conflict ends",
						"telegram_error", Redact(te.Message), "retry_in", wait)
				} else {
					b.log.Debug("telegram: getUpdates conflict goes on", "retry_in", wait)
				}
			case errors.As(err, &te) && te.Code == 429:
				class, wait = monitor.ClassRateLimited, time.Duration(max(te.RetryAfter, 1))*time.Second
				b.opt.Metrics.Telegram429()
			case errors.As(err, &te) && te.Code >= 500:
				class = monitor.ClassServer
				b.log.Warn("telegram: getUpdates failed", "err", err, "retry_in", wait)
			case errors.As(err, &te) && (te.Code == 401 || te.Code == 404):
				class = monitor.ClassAuth
				b.log.Error("telegram: the Bot API refuses the token", "err", err, "retry_in", wait)
			default:
				b.log.Warn("telegram: getUpdates failed", "err", err, "retry_in", wait)
			}
			if done != nil {
				done(err, class)
			}
			if b.pause(ctx, wait) != nil {
				return nil
			}
			continue
		}
		if done != nil {
			done(nil, "")
		}
		if inConflict {
			b.log.Info("telegram: getUpdates works again; the conflict ended")
		}
		backoff, conflict, inConflict, breakerLogged = pollBackoff, conflictBackoff, false, false
		for _, p := range ups {
			if p.u.UpdateID < offset {
				continue
			}
			if ctx.Err() != nil {
				return nil // no longer the leader: the next one handles it
			}
			if err := b.process(p); err != nil {
				if b.ctx.Err() != nil {
					return nil
				}
				var oe *offsetError
				if errors.As(err, &oe) {
					return err
				}
				// Not committed: the update comes again on the next poll,
				// after a pause, not at once.
				b.log.Warn("telegram: update not handled; retrying", "update", p.u.UpdateID, "err", err)
				if b.pause(ctx, updBackoff) != nil {
					return nil
				}
				updBackoff = min(updBackoff*2, maxPollBackoff)
				break
			}
			updBackoff = pollBackoff
			offset = p.u.UpdateID + 1
		}
	}
	return nil
}

// polled is one update of a getUpdates answer (or a webhook post) and its
// raw JSON, kept for the quarantine; bad is set (and u holds only the
// update_id) when it could not be decoded.
type polled struct {
	u   tgbotapi.Update
	raw json.RawMessage
	bad error
}

// decodeUpdates decodes getUpdates' result one update at a time, so one
// malformed update is skipped alone instead of failing the whole batch
// forever. An entry without an update_id cannot be confirmed and is left out.
func decodeUpdates(raw json.RawMessage) ([]polled, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("getUpdates: the result is not a list of updates: %w", err)
	}
	out := make([]polled, 0, len(items))
	for _, it := range items {
		var id struct {
			UpdateID *int `json:"update_id"`
		}
		if json.Unmarshal(it, &id) != nil || id.UpdateID == nil {
			continue
		}
		var u tgbotapi.Update
		if err := json.Unmarshal(it, &u); err != nil {
			out = append(out, polled{u: tgbotapi.Update{UpdateID: *id.UpdateID}, raw: it, bad: err})
			continue
		}
		out = append(out, polled{u: u, raw: it})
	}
	return out, nil
}

// tellBad tells the sender of a message that could not be read, so they do
// not take it as delivered: only in a private chat, only a user with
// access (nothing of any chat reaches anyone else).
func (b *Bot) tellBad(raw []byte) {
	var u struct {
		Message *struct {
			MessageID any `json:"message_id"` // a number when it is one
			From      *struct {
				ID int64 `json:"id"`
			} `json:"from"`
			Chat *struct {
				ID   int64  `json:"id"`
				Type string `json:"type"`
			} `json:"chat"`
		} `json:"message"`
	}
	if json.Unmarshal(raw, &u) != nil || u.Message == nil || u.Message.From == nil || u.Message.Chat == nil ||
		u.Message.Chat.Type != "private" || !b.allowed(u.Message.From.ID) {
		return
	}
	reply := 0
	if id, ok := u.Message.MessageID.(float64); ok {
		reply = int(id)
	}
	b.notify(at(u.Message.Chat.ID), "I could not read that message, so it did not reach the assistant; please send it again.", nil, reply)
}

// handle handles one update durably and commits offset past it, in one
// write with what the handler records.
func (b *Bot) handle(u tgbotapi.Update, tp updateTopics) error {
	var rec func(bk stateBucket) error
	var after func()
	var err error
	switch {
	case u.Message != nil:
		rec, after, err = b.onMessage(u.Message, tp.Message)
		if after != nil {
			defer after() // also when what follows fails, or panics
		}
	case u.EditedMessage != nil:
		err = b.onEdit(u.EditedMessage, tp.Edited)
	case u.CallbackQuery != nil:
		err = b.onCallback(u.CallbackQuery)
	}
	if err != nil {
		return err
	}
	next := strconv.Itoa(u.UpdateID + 1)
	if b.opt.Offsets == nil || rec != nil {
		// In cluster mode too, when handling recorded something: the
		// offset rides in the same replicated write, so a new leader
		// that caught up never handles the update again, even when the
		// shared offset (below) was not committed (nextUpdate takes the
		// larger). An update that recorded nothing moves the shared
		// offset alone.
		err = b.write(func(bk stateBucket) error {
			if rec != nil {
				if err := rec(bk); err != nil {
					return err
				}
			}
			return bk.Put([]byte("offset"), []byte(next))
		})
		if err != nil {
			return err
		}
	}
	return b.commitShared(u.UpdateID + 1)
}

// transient says whether an error is worth handling the update again.
func transient(err error) bool {
	return !(errors.Is(err, chats.ErrBadInput) || errors.Is(err, chats.ErrNotFound) || errors.Is(err, chats.ErrInUse) || errors.Is(err, chats.ErrNoTurn) ||
		errors.Is(err, chats.ErrRateLimited) || // a person's daily tokens: say so ("Not sent: ...")
		errors.Is(err, chats.ErrTooLarge)) // a full queue: say so ("Not sent: ...") rather than handle the update again
}

func (b *Bot) onMessage(m *tgbotapi.Message, tf topicFields) (func(bk stateBucket) error, func(), error) {
	if m.Chat == nil {
		return nil, nil, nil
	}
	if m.From == nil || m.From.IsBot {
		return nil, nil, nil
	}
	where, user := place{m.Chat.ID, tf.thread()}, m.From.ID
	if err := b.learnTopic(where, tf, user); err != nil {
		return nil, nil, err
	}
	var imageLimit int64 = MaxBotDownload
	if bl := b.svc.Blobs(); bl != nil {
		imageLimit = bl.Limits().Image
	}
	md := mediaOf(m, imageLimit)
	group := m.MediaGroupID
	if !validGroup(group) {
		group = ""
	}
	text := m.Text
	if text == "" {
		text = m.Caption
	}
	if !m.Chat.IsPrivate() {
		var addressed bool
		text, addressed = b.addressed(m)
		if !b.allowed(user) {
			return nil, nil, nil
		}
		if !addressed && group != "" && len(md.files) > 0 {
			// A later part of an album whose first part was addressed.
			addressed = b.gatheringGroup(where, group)
		}
		if !addressed {
			return nil, nil, nil // groups: only when addressed, only allowed users
		}
	} else if !b.allowed(user) {
		return nil, nil, b.pair(m)
	}
	if md.standIn != "" {
		text = md.standIn
	}
	if md.unsupported != "" {
		note := "I cannot read " + md.unsupported + " yet, so it did not reach the assistant (I read text, photos, files, voice and audio messages, video messages and stickers)."
		b.mediaRefused(m, where, []refusal{{note, runtime.OutcomeUnsupported}})
		if strings.TrimSpace(text) == "" {
			b.notify(where, note, nil, m.MessageID)
			return nil, nil, nil
		}
		// Its caption is passed on: nothing else of the message is lost.
		b.notify(where, note+" Its caption was passed on.", nil, m.MessageID)
		return b.passOn(m, where, text, nil)
	}
	if len(md.files) > 0 {
		return b.onFiles(m, where, text, md.files, group)
	}
	if strings.TrimSpace(text) == "" {
		if strings.TrimSpace(m.Text) != "" {
			b.notify(where, "Write your message along with the mention.", nil, m.MessageID)
		}
		return nil, nil, nil
	}
	if strings.HasPrefix(text, "/") && md.standIn == "" {
		if handled, err := b.command(m, where, text); handled || err != nil {
			return nil, nil, err
		}
	}
	return b.passOn(m, where, text, nil)
}

// onFiles fetches a message's files into the blob store and passes the
// message on with them; each file that cannot be passed on is told to the
// person, and the rest (its caption, the other files) still goes. A part
// of an album is recorded to be passed on with its other parts.
func (b *Bot) onFiles(m *tgbotapi.Message, where place, text string, files []fileRef, group string) (func(bk stateBucket) error, func(), error) {
	var sums, problems []string
	var refused []refusal
	// The files are stored as the sender's: until a message names them,
	// only they may fetch them (as a browser upload is).
	sc, ok := b.as(m.From.ID)
	if !ok {
		return nil, nil, nil
	}
	for _, f := range files {
		a, problem, err := b.fetch(b.ctx, sc, f)
		if err != nil {
			return nil, nil, err
		}
		if problem.text != "" {
			b.log.Info("telegram: a file was not passed on", "tg", where.tg, "kind", f.what, "reason", problem.text)
			problems = append(problems, problem.text)
			refused = append(refused, problem)
			continue
		}
		sums = append(sums, a.SHA256)
	}
	if len(problems) > 0 {
		b.mediaRefused(m, where, refused)
		b.notify(where, strings.Join(problems, "\n"), nil, m.MessageID)
	}
	if strings.TrimSpace(text) == "" {
		text = ""
	}
	if group != "" {
		part, _ := json.Marshal(groupPart{Msg: m.MessageID, User: m.From.ID, Caption: text, Sums: sums})
		k := groupKey{where, group}
		rec := func(bk stateBucket) error { return bk.Put(groupPartKey(where, group, m.MessageID), part) }
		return rec, func() { b.armGroup(k, b.albumQuiet()) }, nil
	}
	if len(sums) == 0 && text == "" {
		return nil, nil, nil
	}
	return b.passOn(m, where, text, sums)
}

// mediaRefused leaves a diagnostic (kind media) of each file of a message
// that was not passed on in the Telegram chat's current chat, so the record
// says what the person was told and why (issue 16 item 7).
func (b *Bot) mediaRefused(m *tgbotapi.Message, where place, refused []refusal) {
	sc, ok := b.as(m.From.ID)
	if !ok {
		return // nobody's chat to keep it in
	}
	chat, err := b.ensureChat(where, sc)
	if err != nil {
		b.log.Warn("telegram: no chat to keep a refused file's diagnostic in", "tg", where.tg, "err", err)
		return
	}
	for _, r := range refused {
		sc.MediaRefused(b.ctx, chat, "telegram", r.outcome, r.text) // by the sender
	}
}

// passOn sends the person's message to the Telegram chat's current chat
// and returns the record of it, to commit with the offset.
func (b *Bot) passOn(m *tgbotapi.Message, where place, text string, sums []string) (func(bk stateBucket) error, func(), error) {
	sc, ok := b.as(m.From.ID)
	if !ok {
		return nil, nil, nil
	}
	if !b.admitSend(where, sc, m.From.ID, m.MessageID) {
		return nil, nil, nil
	}
	chat, err := b.ensureChat(where, sc)
	if err != nil {
		return nil, nil, err
	}
	msg, err := sc.SendAttached(b.ctx, chat, text, fmt.Sprintf("tg:%d:%d", where.tg, m.MessageID), chats.ModeQueue, sums, chats.Origin{})
	if err != nil {
		if transient(err) && !errors.Is(err, chats.ErrUnknownAttachment) {
			return nil, nil, err
		}
		b.notify(where, "Not sent: "+err.Error(), nil, m.MessageID)
		return nil, nil, nil
	}
	v, _ := json.Marshal(sentRecord{Chat: chat, Msg: msg.ID, Text: text, Atts: sums})
	return func(bk stateBucket) error {
		if len(sums) > 0 {
			// For replies about the message's files (a transcript).
			if err := bk.Put(tgKey("mm", chat, msg.ID), []byte(fmt.Sprintf("%d:%d", where.tg, m.MessageID))); err != nil {
				return err
			}
		}
		return bk.Put(tgKey("m", where.tg, m.MessageID), v)
	}, nil, nil
}

// sentRecord maps a Telegram message to the Mirror message it shows: a
// person's message the bot passed on (with its text, kept for Redirect), or
// one of the bot's replies (Reply).
type sentRecord struct {
	Chat  string `json:"chat"`
	Msg   string `json:"msg"`
	Text  string `json:"text,omitempty"`
	Reply bool   `json:"reply,omitempty"`
	// Atts are the sha256s of the message's attachments (for Redirect and
	// for an edit that empties the caption).
	Atts []string `json:"atts,omitempty"`
}

// addressed reports whether a group message is for the bot, and its text
// (or, for media, its caption) without the mention. A message is for the
// bot when it mentions it (a "mention" entity naming @botusername, a
// "text_mention" of the bot, or a command such as /status@botusername) or
// replies to one of its messages. A bare /command is not: in a group it may
// be meant for another bot. Entities are read through parseEntities, so
// offsets out of order, overlapping or past the text are harmless.
func (b *Bot) addressed(m *tgbotapi.Message) (string, bool) {
	self := b.api.Self
	text, ents := m.Text, m.Entities
	if text == "" {
		text, ents = m.Caption, m.CaptionEntities
	}
	ok := m.ReplyToMessage != nil && m.ReplyToMessage.From != nil && m.ReplyToMessage.From.ID == self.ID
	if self.UserName == "" {
		return text, ok
	}
	name := "@" + strings.ToLower(self.UserName)
	if len(ents) == 0 {
		// No entities (a client that sends none): a whole-word @mention
		// found in the text itself stands for one. The match is ASCII, so
		// its UTF-16 length is its byte length.
		if i := indexFold(text, name); i >= 0 && !wordByte(strings.ToLower(text[i+len(name):]), 0) {
			ents = []tgbotapi.MessageEntity{{Type: "mention", Offset: utf16Len(text[:i]), Length: len(name)}}
		}
	}
	et := parseEntities(text, ents)
	var strip []span // mentions of the bot to remove
	for _, s := range et.spans {
		word := et.text(s)
		switch s.Type {
		case "mention":
			if strings.ToLower(word) == name {
				ok = true
				strip = append(strip, s)
			}
		case "text_mention":
			if s.User != nil && s.User.ID == self.ID {
				ok = true
			}
		case "bot_command":
			if cmd, at, found := strings.Cut(word, "@"); found {
				if "@"+strings.ToLower(at) != name {
					return text, false // a command for another bot
				}
				ok = true
				// Keep the command, drop the bot's name: /status@bot → /status.
				strip = append(strip, span{Start: s.Start + utf16Len(cmd), End: s.End})
			}
		}
	}
	return strings.TrimSpace(et.without(strip)), ok
}

// indexFold is the byte index of the ASCII name in s, matched without
// regard to case and not in the middle of a word, or -1.
func indexFold(s, name string) int {
	for i := 0; i+len(name) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(name)], name) && (i == 0 || !wordByte(strings.ToLower(s[i-1:i]), 0)) {
			return i
		}
	}
	return -1
}

// wordByte reports whether s[i] continues a username.
func wordByte(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	c := s[i]
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z'
}

// pair answers a user without access with their pairing code, and nothing
// else: once per code, so at most once an hour (the code's life) however
// often they write, also across restarts, since the code is in the
// database. Their name is stored Printable: they choose it, and the owner
// reads it in a terminal.
func (b *Bot) pair(m *tgbotapi.Message) error {
	name := strings.TrimSpace(m.From.FirstName + " " + m.From.LastName)
	if m.From.UserName != "" {
		name += " (@" + m.From.UserName + ")"
	}
	var p Pairing
	var issued bool
	if err := b.write(func(bk stateBucket) (err error) {
		p, issued, err = pairingFor(bk, m.From.ID, m.Chat.ID, Printable(name), b.opt.Now())
		return err
	}); err != nil {
		return err
	}
	if issued {
		b.notify(at(m.Chat.ID), fmt.Sprintf("You have no access yet. Your pairing code is %s. Ask the owner of this Mirror to run:\n\nmirror pair approve %s\n\nThe code expires in an hour.", p.Code, p.Code), nil, 0)
	}
	return nil
}

// ensureChat returns the place's current Mirror chat, creating one on
// first use (a topic's is named after the topic), and makes sure it is
// followed.
func (b *Bot) ensureChat(where place, sc chats.Scope) (string, error) {
	chat := b.chatAt(where)
	if chat != "" {
		if where.tg < 0 {
			// A group's chat is shared by its allowed members.
			if _, err := b.svc.Get(b.ctx, chat); err == nil {
				b.joinGroupChat(sc, chat)
			}
		}
		if _, err := sc.Get(b.ctx, chat); err == nil {
			return chat, b.follow(where, chat, nil)
		} else if !errors.Is(err, chats.ErrNotFound) {
			return "", err
		}
	}
	title := ""
	if where.thread != 0 {
		title = b.topicTitle(where)
	}
	c, err := sc.Create(b.ctx, title, "", chats.Origin{})
	if err != nil {
		return "", err
	}
	if err := b.setCurrent(where, c.ID); err != nil {
		return "", err
	}
	if where.tg < 0 {
		// The first answer in a group says whose chat this is.
		b.notify(where, sharedNote(where), nil, 0)
	}
	return c.ID, nil
}

// setCurrent makes chat the current one of where: persisted, followed,
// and the chats left behind retired once idle.
func (b *Bot) setCurrent(where place, chat string) error {
	if err := b.write(func(bk stateBucket) error { return bk.Put(tgKey("cur", where), []byte(chat)) }); err != nil {
		return err
	}
	if err := b.follow(where, chat, nil); err != nil {
		return err
	}
	b.unfollowOthers(where, chat)
	return nil
}

func (b *Bot) onEdit(m *tgbotapi.Message, tf topicFields) error {
	if m.From == nil || m.Chat == nil || !b.allowed(m.From.ID) {
		return nil
	}
	where := place{m.Chat.ID, tf.thread()}
	var rec sentRecord
	var found bool
	_ = b.read(func(bk stateBucket) error {
		v := bk.Get(tgKey("m", where.tg, m.MessageID))
		found = v != nil && json.Unmarshal(v, &rec) == nil
		return nil
	})
	text := m.Text
	caption := text == ""
	if caption {
		text = m.Caption // a file's caption is its message's text
	}
	if !m.Chat.IsPrivate() {
		text, _ = b.addressed(m) // the mention was not passed on either
	}
	if strings.TrimSpace(text) == "" {
		text = ""
	}
	if !found && caption && m.MediaGroupID != "" {
		// A part of an album still gathering: its record takes the caption.
		if ok, err := b.editGathered(where, m.MediaGroupID, m.MessageID, text); ok || err != nil {
			return err
		}
	}
	if !found || rec.Reply || text == "" && (!caption || len(rec.Atts) == 0) {
		return nil
	}
	var keep []string
	if text == "" {
		keep = rec.Atts // the caption was removed: the files stay
	}
	sc, _ := b.as(m.From.ID)
	_, err := sc.EditAttached(b.ctx, rec.Chat, rec.Msg, &text, keep, chats.Origin{})
	switch {
	case errors.Is(err, chats.ErrInUse):
		b.notify(where, "Already in use: the assistant picked this message up before the edit, so the edit was not applied.", nil, m.MessageID)
	case errors.Is(err, chats.ErrNotFound):
		b.notify(where, "That message is no longer queued (it was deleted), so the edit was not applied.", nil, m.MessageID)
	case err != nil && transient(err):
		return err
	case err != nil:
		b.notify(where, "Edit not applied: "+err.Error(), nil, m.MessageID)
	default:
		rec.Text = text
		v, _ := json.Marshal(rec)
		if err := b.write(func(bk stateBucket) error { return bk.Put(tgKey("m", where.tg, m.MessageID), v) }); err != nil {
			return err
		}
		b.notify(where, "Updated the queued message.", nil, m.MessageID)
	}
	return nil
}

// onCallback answers a button press. It returns an error only when the
// press must be handled again (the update is then not committed): a
// Redirect whose message was deleted but not yet sent again.
func (b *Bot) onCallback(q *tgbotapi.CallbackQuery) error {
	var sc chats.Scope
	ok := false
	if q.From != nil {
		sc, ok = b.as(q.From.ID)
	}
	if !ok {
		b.answerCallback(q.ID, "You have no access to this bot.")
		return nil
	}
	p, err := decodePress(q.Data)
	if err != nil {
		b.answerCallback(q.ID, "This button is not known (it may be from an older version).")
		return nil
	}
	ctx := b.ctx
	switch p.Verb {
	case verbAllow, verbDeny:
		err := sc.AnswerApproval(ctx, p.ID, p.Verb == verbAllow, chats.Origin{})
		switch {
		case errors.Is(err, chats.ErrNotFound):
			b.answerCallback(q.ID, "This approval is no longer waiting: it was answered already, or its turn ended.")
		case err != nil:
			b.answerCallback(q.ID, "Could not answer: "+err.Error())
		case p.Verb == verbAllow:
			b.answerCallback(q.ID, "Allowed.")
		default:
			b.answerCallback(q.ID, "Denied.")
		}
	case verbForChat:
		err := sc.AllowForChat(ctx, p.ID, chats.Origin{})
		switch {
		case errors.Is(err, chats.ErrNotFound):
			b.answerCallback(q.ID, "This approval is no longer waiting: it was answered already, or its turn ended.")
		case err != nil:
			b.answerCallback(q.ID, "Could not answer: "+err.Error())
		default:
			b.answerCallback(q.ID, "Allowed for this chat.")
		}
	case verbRepeat, verbSkip:
		action := runtime.Repeat
		if p.Verb == verbSkip {
			action = runtime.Skip
		}
		delivered, err := sc.AnswerRecovery(ctx, p.ID, action, chats.Origin{})
		switch {
		case errors.Is(err, chats.ErrNotFound):
			b.answerCallback(q.ID, "This recovery is no longer waiting: it was answered already.")
		case err != nil:
			b.answerCallback(q.ID, "Could not answer: "+err.Error())
		case !delivered:
			b.answerCallback(q.ID, "Held: the answer reaches the chat as soon as it is back.")
		default:
			b.answerCallback(q.ID, "Answered: "+action+".")
		}
	case verbSwitch:
		if q.Message != nil && q.Message.Chat != nil && !q.Message.Chat.IsPrivate() {
			b.answerCallback(q.ID, "Switch chats in a private chat with me.")
			return nil
		}
		c, err := sc.Get(ctx, p.ID)
		if err != nil || q.Message == nil || q.Message.Chat == nil {
			b.answerCallback(q.ID, "That chat no longer exists.")
			return nil
		}
		if err := b.setCurrent(at(q.Message.Chat.ID), c.ID); err != nil {
			b.answerCallback(q.ID, "Could not switch: "+err.Error())
			return nil
		}
		b.answerCallback(q.ID, "Switched to "+c.Title)
		b.notify(at(q.Message.Chat.ID), "Now in chat: "+c.Title, nil, 0)
	case verbMore:
		if q.Message == nil || q.Message.Chat == nil || !q.Message.Chat.IsPrivate() {
			b.answerCallback(q.ID, "Switch chats in a private chat with me.")
			return nil
		}
		if err := b.sendChatList(sc, at(q.Message.Chat.ID), p.ID); err != nil {
			b.answerCallback(q.ID, "Could not list more chats: "+err.Error())
			return nil
		}
		b.answerCallback(q.ID, "More chats")
	case verbDelete, verbRedirect:
		if p.Verb == verbRedirect {
			answer, err := b.redirect(q, sc, p.Chat, p.Msg)
			b.answerCallback(q.ID, answer)
			return err
		}
		err := sc.Delete(ctx, p.Chat, p.Msg, chats.Origin{})
		switch {
		case errors.Is(err, chats.ErrInUse):
			b.answerCallback(q.ID, "Already in use: the assistant picked that message up.")
		case errors.Is(err, chats.ErrNotFound):
			b.answerCallback(q.ID, "That message is no longer queued (it was deleted or redirected).")
		case err != nil:
			b.answerCallback(q.ID, "Could not delete: "+err.Error())
		default:
			b.answerCallback(q.ID, "Deleted.")
		}
	default:
		b.answerCallback(q.ID, "This button is not known (it may be from an older version).")
	}
	return nil
}

// redirectIntent is what a Redirect press records before it deletes the
// pending message: the text to send again and the Telegram message that
// maps to it.
type redirectIntent struct {
	Text string   `json:"text"`
	Key  string   `json:"key"`
	Atts []string `json:"atts,omitempty"`
}

// redirect turns pending message msg of chat into a redirect: chats has no
// way to change a message's mode, so the message is deleted and its text
// sent again with mode redirect, under a client id derived from the
// original, so a repeated press (or a press handled again after a crash)
// never makes a second message. What the press did is recorded first, so
// a press interrupted between the delete and the send is finished by the
// next one. It returns the answer for the button.
func (b *Bot) redirect(q *tgbotapi.CallbackQuery, sc chats.Scope, chat, msg string) (string, error) {
	if q.Message == nil || q.Message.Chat == nil {
		return "This button no longer works: its message is gone.", nil
	}
	tg := q.Message.Chat.ID
	ikey := tgKey("x", chat, msg)
	var in redirectIntent
	begun := false
	_ = b.read(func(bk stateBucket) error {
		v := bk.Get(ikey)
		begun = v != nil && json.Unmarshal(v, &in) == nil
		return nil
	})
	if !begun {
		rec, key := b.findSent(tg, chat, msg)
		if rec.Text == "" && len(rec.Atts) == 0 {
			return "I do not know that message's text here, so I cannot redirect it; it stays queued.", nil
		}
		in = redirectIntent{Text: rec.Text, Key: string(key), Atts: rec.Atts}
		v, _ := json.Marshal(in)
		if err := b.write(func(bk stateBucket) error { return bk.Put(ikey, v) }); err != nil {
			return "Could not redirect: " + err.Error(), nil
		}
	}
	err := sc.Delete(b.ctx, chat, msg, chats.Origin{})
	switch {
	case errors.Is(err, chats.ErrInUse):
		return "Already in use: the assistant picked that message up.", nil
	case errors.Is(err, chats.ErrNotFound) && !begun:
		_ = b.write(func(bk stateBucket) error { return bk.Delete(ikey) })
		return "That message is no longer queued (it was deleted or redirected).", nil
	case errors.Is(err, chats.ErrNotFound):
		// Deleted by an earlier press of this button: finish its send.
	case err != nil:
		return "Could not redirect: " + err.Error(), nil
	}
	m, err := sc.SendAttached(b.ctx, chat, in.Text, redirectClientID(chat, msg), chats.ModeRedirect, in.Atts, chats.Origin{})
	if err != nil {
		// The message is deleted but not yet sent again: handle the press
		// again (its intent is kept and its client id is the same, so a
		// second try finishes the job and never makes two messages).
		answer := "Could not redirect yet; it is tried again: " + err.Error()
		if errors.Is(err, chats.ErrBadInput) {
			return "Could not redirect: " + err.Error(), nil
		}
		return answer, err
	}
	if m.State != "" && m.State != chats.MsgPending {
		return "Already in use: the assistant picked that message up.", nil
	}
	if in.Key != "" {
		// Edits of the person's Telegram message now change the redirect.
		v, _ := json.Marshal(sentRecord{Chat: chat, Msg: m.ID, Text: in.Text, Atts: in.Atts})
		if err := b.write(func(bk stateBucket) error { return bk.Put([]byte(in.Key), v) }); err != nil {
			b.log.Warn("telegram: redirect mapping not stored", "err", err)
		}
	}
	return "Redirected: the assistant reads it at its next step.", nil
}

// redirectClientID is the client id of the redirect made of pending
// message msg: derived from it alone, so every press makes the same one.
func redirectClientID(chat, msg string) string { return "tgx:" + chat + ":" + msg }

// findSent finds the record of Mirror message msg among tg's, and its key.
func (b *Bot) findSent(tg int64, chat, msg string) (sentRecord, []byte) {
	var out sentRecord
	var key []byte
	prefix := string(tgKey("m", tg)) + "/"
	_ = b.read(func(bk stateBucket) error {
		c := bk.Cursor()
		for k, v := c.Seek([]byte(prefix)); k != nil && strings.HasPrefix(string(k), prefix); k, v = c.Next() {
			var r sentRecord
			if json.Unmarshal(v, &r) == nil && r.Chat == chat && r.Msg == msg && !r.Reply {
				out, key = r, append([]byte(nil), k...)
			}
		}
		return nil
	})
	return out, key
}

// command runs a bot command; handled is false for a slash text that is not
// one (such as the builtin model's /tool), which goes to the chat.
func (b *Bot) command(m *tgbotapi.Message, where place, text string) (handled bool, err error) {
	sc, ok := b.as(m.From.ID)
	if !ok {
		return true, nil
	}
	fields := strings.Fields(text)
	name, _, _ := strings.Cut(fields[0], "@")
	rest := strings.TrimSpace(strings.TrimPrefix(text, fields[0]))
	switch name {
	case "/start", "/help":
		help := helpText
		if !m.Chat.IsPrivate() {
			help += "\n\n" + sharedNote(where)
		}
		b.notify(where, help, nil, 0)
	case "/new":
		// In a topic, /new starts the topic afresh: the topic gets a new
		// chat (named as asked, else after the topic) and the old one stays
		// in its people's lists. A chat never leaves its topic, so the
		// topic's replies never land anywhere else.
		title := rest
		if title == "" && where.thread != 0 {
			title = b.topicTitle(where)
		}
		c, err := sc.Create(b.ctx, title, "", chats.Origin{})
		if err != nil {
			if transient(err) {
				return true, err
			}
			b.notify(where, "No new chat: "+err.Error(), nil, m.MessageID)
			return true, nil
		}
		if err := b.setCurrent(where, c.ID); err != nil {
			return true, err
		}
		switch {
		case where.thread != 0:
			b.notify(where, "New chat for this topic: "+c.Title+". The previous one stays in the chat list. Send a message to begin.", nil, 0)
		default:
			b.notify(where, "New chat: "+c.Title+". Send a message to begin.", nil, 0)
		}
	case "/chats":
		if !m.Chat.IsPrivate() {
			// The list shows every chat's title (its first message): not
			// for everyone in a group. A group keeps its own current chat.
			b.notify(where, "In a group, /chats would show every chat's title to all its members; use it in a private chat with me. /new starts a chat for this group.", nil, m.MessageID)
			return true, nil
		}
		if err := b.sendChatList(sc, where, ""); err != nil {
			return true, err
		}
	case "/stop":
		chat := b.chatAt(where)
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			err := sc.Stop(b.ctx, chat, chats.Origin{})
			switch {
			case chat == "" || errors.Is(err, chats.ErrNoTurn) || errors.Is(err, chats.ErrNotFound):
				b.notify(where, "Nothing is running.", nil, 0)
			case err != nil:
				b.notify(where, "Could not stop: "+err.Error(), nil, 0)
			default:
				// Stop holds what was queued behind the turn: say so, or
				// the chat would look stuck.
				if c, err := sc.Get(b.ctx, chat); err == nil && c.Paused && c.Pending > 0 {
					b.notify(where, heldText(c.Pending), nil, 0)
				}
			}
		}()
	case "/status":
		chat := b.chatAt(where)
		c, err := sc.Get(b.ctx, chat)
		if chat == "" || errors.Is(err, chats.ErrNotFound) {
			b.notify(where, "No current chat. Send a message, or /new.", nil, 0)
			return true, nil
		}
		if err != nil {
			return true, err
		}
		// The chat's own /status adds the Context line.
		out, err := b.runCommand(chat, "/status")
		if err != nil {
			return true, err
		}
		b.notify(where, b.status(c)+"\n"+out, nil, 0)
	case "/pin", "/unpin":
		chat, cmd, problem := b.pinCommand(where.tg, name, m.ReplyToMessage)
		if problem != "" {
			b.notify(where, problem, nil, m.MessageID)
			return true, nil
		}
		out, err := b.runCommand(chat, cmd)
		if err != nil {
			return true, err
		}
		b.notify(where, out, nil, m.MessageID)
	default:
		// Every other command of the chats table runs on the current
		// chat as typed, so a command added there works here too.
		if _, ok := chats.LookupCommand(name); !ok {
			return false, nil
		}
		chat := b.chatAt(where)
		if chat == "" {
			b.notify(where, "No current chat. Send a message, or /new.", nil, m.MessageID)
			return true, nil
		}
		// As typed, without a group's @botname: "/compact keep the plan".
		out, err := b.runCommand(chat, strings.TrimSpace(name+" "+rest))
		if err != nil {
			return true, err
		}
		b.notify(where, out, nil, m.MessageID)
	}
	return true, nil
}

// runCommand runs a slash command of chat and returns what to show: its
// answer, or its error's text when the command refused (unknown command,
// bad arguments). Only a transient failure is returned as an error, so the
// update is handled again.
func (b *Bot) runCommand(chat, text string) (string, error) {
	out, err := b.runCmd(b.ctx, chat, text, chats.Origin{})
	switch {
	case err != nil && (errors.Is(err, chats.ErrClosed) || b.ctx.Err() != nil):
		return "", err
	case err != nil:
		return "Not done: " + err.Error(), nil
	case strings.TrimSpace(out) == "":
		return "Done.", nil
	}
	return out, nil
}

// pinCommand makes the /pin or /unpin command (name) of a reply: the chat
// that owns the Mirror message the replied-to Telegram message shows, and
// "/pin <id>". problem is what to tell the person instead when that is
// impossible.
func (b *Bot) pinCommand(tg int64, name string, reply *tgbotapi.Message) (chat, cmd, problem string) {
	what := strings.TrimPrefix(name, "/")
	if reply == nil {
		return "", "", "Send " + name + " as a reply to the message to " + what + " (one of mine, or one of yours I passed on)."
	}
	rec, ok := b.mapped(tg, reply.MessageID)
	if !ok || rec.Msg == "" {
		return "", "", "I cannot " + what + " that message: it is not one I know (only my replies and the messages I passed on to the assistant can be pinned)."
	}
	return rec.Chat, name + " " + rec.Msg, ""
}

// mapped returns the Mirror message a Telegram message of tg shows.
func (b *Bot) mapped(tg int64, id int) (sentRecord, bool) {
	var rec sentRecord
	var found bool
	_ = b.read(func(bk stateBucket) error {
		v := bk.Get(tgKey("m", tg, id))
		found = v != nil && json.Unmarshal(v, &rec) == nil
		return nil
	})
	return rec, found
}

// helpText is what /help and /start answer: the chats table's commands as
// Telegram takes them, and Telegram's own.
var helpText = buildHelp(chats.Commands())

// ownCommands act on the Telegram chat itself (which Mirror chat is
// current), so they are Telegram's, not the chats table's.
var ownCommands = []chats.CommandSpec{{Name: "/chats", Help: "list chats and switch"}}

// tgUsage is how Telegram takes the table's commands it runs its own way:
// /new also switches to the new chat, /status adds the chat's state, and
// /pin and /unpin name their message by being a reply to it.
var tgUsage = map[string]chats.CommandSpec{
	"/new":    {Name: "/new", Args: "[title]", Help: "start a new chat and switch to it"},
	"/status": {Name: "/status", Help: "the current chat's state and context"},
	"/pin":    {Name: "/pin", Help: "as a reply: pin that message into the assistant's context"},
	"/unpin":  {Name: "/unpin", Help: "as a reply: unpin that message"},
}

// buildHelp writes the help: one line per command, Telegram's own after
// /new, then the rest of the table in its order.
func buildHelp(table []chats.CommandSpec) string {
	var b strings.Builder
	b.WriteString("Mirror: send a message to talk to the assistant in your current chat.\n")
	line := func(c chats.CommandSpec) {
		if u, ok := tgUsage[c.Name]; ok {
			c = u
		}
		b.WriteString(c.Usage() + " – " + c.Help + "\n")
	}
	for _, c := range table {
		if c.Name == "/new" {
			line(c)
		}
	}
	for _, c := range ownCommands {
		line(c)
	}
	for _, c := range table {
		if c.Name != "/new" {
			line(c)
		}
	}
	b.WriteString("In a group, mention me (@name) or reply to me.")
	return b.String()
}

func (b *Bot) status(c chats.Chat) string {
	models := b.opt.Config.Chains[c.Chain]
	chain := c.Chain
	if len(models) > 0 {
		chain += " (" + strings.Join(models, " → ") + ")"
	}
	return fmt.Sprintf("Chat: %s\nState: %s\nPending: %d\nModels: %s", c.Title, c.State, c.Pending, chain)
}

// setWebhook registers the webhook with its secret token. v5.5.1 predates
// secret_token, so the request is made by hand.
func (b *Bot) setWebhook(ctx context.Context) error {
	allowed, _ := json.Marshal(allowedUpdates)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := b.with(rctx).MakeRequest("setWebhook", tgbotapi.Params{
		"url": b.cfg.WebhookURL, "secret_token": b.secret, "max_connections": "1", "allowed_updates": string(allowed)})
	if err != nil {
		return fmt.Errorf("telegram: setWebhook %s: %w", b.cfg.WebhookURL, redactErr(err))
	}
	return nil
}

// WebhookPath is where WebhookHandler is mounted: telegram.webhook_path, or
// /telegram/webhook.
func (b *Bot) WebhookPath() string {
	if b.cfg.WebhookPath != "" {
		return b.cfg.WebhookPath
	}
	return "/telegram/webhook"
}

// WebhookHandler receives Telegram's webhook posts. It is not behind the
// access token; a request without the right secret header gets 401. An
// update is answered 200 only once handled durably; anything else is
// answered 500, so Telegram delivers it again, and a repeat is recognised
// by its update_id. In cluster mode a node that does not lead forwards the
// update to the leader and answers as the leader did.
func (b *Bot) WebhookHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get(SecretHeader)
		if subtle.ConstantTimeCompare([]byte(got), []byte(b.secret)) != 1 {
			http.Error(w, "wrong or missing secret token", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
			return
		}
		p, err := decodeOne(raw)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if b.opt.Leader != nil && !b.leading() {
			ctx, cancel := context.WithTimeout(r.Context(), forwardTimeout)
			err := b.opt.Leader.Forward(ctx, raw)
			cancel()
			if err != nil {
				b.log.Warn("telegram: webhook update not passed to the leader", "update", p.u.UpdateID, "err", err)
				http.Error(w, "not handled; deliver again", http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusOK)
			return
		}
		if err := b.receive(p); err != nil {
			b.log.Warn("telegram: webhook update not handled", "update", p.u.UpdateID, "err", err)
			http.Error(w, "not handled; deliver again", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}

// decodeOne decodes a webhook post: exactly one update.
func decodeOne(raw []byte) (polled, error) {
	ups, err := decodeUpdates(append(append([]byte("["), raw...), ']'))
	if err != nil || len(ups) != 1 {
		return polled{}, errors.New("not an update: a JSON object with an update_id is expected")
	}
	return ups[0], nil
}

// receive handles one update Telegram posted (to this node, or to another
// that forwarded it here), one at a time, in order: a repeat of one handled
// already is recognised by its update_id. A poison update is quarantined
// and counts as handled: Telegram would deliver it again and again.
func (b *Bot) receive(p polled) error {
	b.hookMu.Lock()
	defer b.hookMu.Unlock()
	next, err := b.nextUpdate(b.ctx)
	if err != nil {
		return err
	}
	if p.u.UpdateID < next {
		return nil // handled already
	}
	return b.process(p)
}

// PairingHandler serves the pairing API; mount it behind the access token:
//
//	GET  /api/telegram/pairing                 {"pairings":[PAIRING...]}
//	POST /api/telegram/pairing/{code}/approve  {"approved":PAIRING}, 404 for an unknown code
func (b *Bot) PairingHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/telegram/pairing", func(w http.ResponseWriter, r *http.Request) {
		var list []Pairing
		_ = b.read(func(bk stateBucket) error { list = pendingPairings(bk, b.opt.Now()); return nil })
		if list == nil {
			list = []Pairing{}
		}
		for i := range list {
			list[i] = list[i].shown()
		}
		writeJSON(w, http.StatusOK, map[string]any{"pairings": list})
	})
	mux.HandleFunc("POST /api/telegram/pairing/{code}/approve", func(w http.ResponseWriter, r *http.Request) {
		var p Pairing
		err := b.writeAny(func(bk stateBucket) (err error) {
			p, err = approve(bk, r.PathValue("code"), r.URL.Query().Get("person"), b.opt.Now())
			return err
		})
		switch {
		case errors.Is(err, ErrUnknownCode):
			writeJSON(w, http.StatusNotFound, map[string]any{"error": err.Error()})
			return
		case errors.Is(err, people.ErrBadInput):
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": err.Error()})
			return
		case err != nil:
			writeJSON(w, http.StatusInternalServerError, map[string]any{"error": err.Error()})
			return
		}
		b.notify(at(p.Chat), "You have access now. Send a message to begin.", nil, 0)
		writeJSON(w, http.StatusOK, map[string]any{"approved": p.shown()})
	})
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// chatsPerPage is how many chats one /chats message offers.
const chatsPerPage = 10

// sendChatList sends Telegram chat tg one page of the chats, most recently
// updated first, starting after cursor after ("" for the newest), as
// buttons that switch; a last "More chats" button asks for the next page.
// The page is read from the index by last update, not from every chat.
func (b *Bot) sendChatList(sc chats.Scope, where place, after string) error {
	page, err := sc.ListPage(b.ctx, after, chatsPerPage) // the chats this person may see
	if errors.Is(err, chats.ErrBadInput) {
		b.notify(where, "That list is out of date; send /chats again.", nil, 0)
		return nil
	}
	if err != nil {
		return err
	}
	cur := b.chatAt(where)
	var rows [][]choice
	for _, c := range page.Chats {
		label := truncate(c.Title, 40)
		if c.ID == cur {
			label = "✓ " + label
		}
		if c.State == chats.StateRunning {
			label += " (running)"
		}
		rows = append(rows, []choice{{label, press{Verb: verbSwitch, ID: c.ID}}})
	}
	if len(rows) == 0 {
		if after == "" {
			b.notify(where, "No chats yet. Send a message, or /new.", nil, 0)
		} else {
			b.notify(where, "No more chats.", nil, 0)
		}
		return nil
	}
	text := "Your chats, most recent first. Tap one to switch:"
	if after != "" {
		text = "More chats, most recent first. Tap one to switch:"
	}
	if page.Next != "" {
		more := press{Verb: verbMore, ID: page.Next}
		if _, err := more.encode(); err == nil {
			rows = append(rows, []choice{{"More chats…", more}})
		} else {
			text += fmt.Sprintf("\n(%d chats in all; the browser lists the rest.)", page.Total)
		}
	}
	kb, err := keyboard(rows...)
	if err != nil {
		return err
	}
	b.notify(where, text, &kb, 0)
	return nil
}

// heldText says how many queued messages a Stop held and how to go on.
func heldText(n int) string {
	if n == 1 {
		return "Stopped. 1 queued message is held: send a message or /continue to go on."
	}
	return fmt.Sprintf("Stopped. %d queued messages are held: send a message or /continue to go on.", n)
}
