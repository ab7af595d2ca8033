package telegram

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/monitor"
	"github.com/mirror-gateway/mirror/runtime"
	bolt "go.etcd.io/bbolt"
)

// allowedUpdates are the update types the bot handles.
var allowedUpdates = []string{"message", "edited_message", "callback_query"}

// SecretHeader carries the webhook secret token on Telegram's requests.
const SecretHeader = "X-Telegram-Bot-Api-Secret-Token"

func (b *Bot) offset() int {
	var n uint64
	_ = b.read(func(bk *bolt.Bucket) error { n = parseUint(bk.Get([]byte("offset"))); return nil })
	return int(n)
}

// pollLoop long-polls getUpdates. Each update is handled and its offset
// committed before the next; cancelling the bot's context aborts the poll
// in flight. Failures back off (409 conflicts slowest, with a clear log)
// rather than loop hot.
func (b *Bot) pollLoop() {
	defer b.wg.Done()
	offset := b.offset()
	backoff := time.Second
	conflicts := 0
	for b.ctx.Err() == nil {
		var done func(error, string)
		if b.opt.Monitor != nil {
			d, err := b.opt.Monitor.Telegram().Allow()
			if err != nil {
				if sleep(b.ctx, time.Second) != nil {
					return
				}
				continue
			}
			done = d
		}
		rctx, cancel := context.WithTimeout(b.ctx, b.opt.PollTimeout+15*time.Second)
		ups, err := b.with(rctx).GetUpdates(tgbotapi.UpdateConfig{Offset: offset, Timeout: int(b.opt.PollTimeout / time.Second),
			AllowedUpdates: allowedUpdates})
		cancel()
		err = redactErr(err)
		if b.ctx.Err() != nil {
			return
		}
		if err != nil {
			var te *tgbotapi.Error
			class := monitor.ClassNetwork
			wait := backoff
			backoff = min(backoff*2, 30*time.Second)
			switch {
			case errors.As(err, &te) && te.Code == 409:
				// Another instance polls this token, or a webhook is set:
				// retrying fast only fights it.
				class = monitor.ClassBadRequest
				conflicts++
				wait = min(time.Duration(conflicts)*5*time.Second, time.Minute)
				b.log.Error("telegram: getUpdates conflict: another process uses this bot token, or a webhook is set (telegram.mode: webhook elsewhere?); polling paused",
					"telegram_error", Redact(te.Message), "retry_in", wait)
			case errors.As(err, &te) && te.Code == 429:
				class, wait = monitor.ClassRateLimited, time.Duration(max(te.RetryAfter, 1))*time.Second
				b.opt.Metrics.Telegram429()
			case errors.As(err, &te) && te.Code >= 500:
				class = monitor.ClassServer
			case errors.As(err, &te) && (te.Code == 401 || te.Code == 404):
				class = monitor.ClassAuth
				b.log.Error("telegram: the Bot API refuses the token", "err", err)
			default:
				b.log.Warn("telegram: getUpdates failed", "err", err, "retry_in", wait)
			}
			if done != nil {
				done(err, class)
			}
			if sleep(b.ctx, wait) != nil {
				return
			}
			continue
		}
		if done != nil {
			done(nil, "")
		}
		backoff, conflicts = time.Second, 0
		for _, u := range ups {
			if u.UpdateID < offset {
				continue
			}
			if err := b.handle(u); err != nil {
				if b.ctx.Err() != nil {
					return
				}
				// Not committed: the update comes again on the next poll.
				b.log.Warn("telegram: update not handled; retrying", "update", u.UpdateID, "err", err)
				if sleep(b.ctx, backoff) != nil {
					return
				}
				break
			}
			offset = u.UpdateID + 1
		}
	}
}

// handle handles one update durably and commits offset past it, in one
// write with what the handler records.
func (b *Bot) handle(u tgbotapi.Update) error {
	var rec func(bk *bolt.Bucket) error
	var err error
	switch {
	case u.Message != nil:
		rec, err = b.onMessage(u.Message)
	case u.EditedMessage != nil:
		err = b.onEdit(u.EditedMessage)
	case u.CallbackQuery != nil:
		b.onCallback(u.CallbackQuery)
	}
	if err != nil {
		return err
	}
	next := strconv.Itoa(u.UpdateID + 1)
	return b.write(func(bk *bolt.Bucket) error {
		if rec != nil {
			if err := rec(bk); err != nil {
				return err
			}
		}
		return bk.Put([]byte("offset"), []byte(next))
	})
}

// transient says whether an error is worth handling the update again.
func transient(err error) bool {
	return !(errors.Is(err, chats.ErrBadInput) || errors.Is(err, chats.ErrNotFound) || errors.Is(err, chats.ErrInUse) || errors.Is(err, chats.ErrNoTurn))
}

func (b *Bot) onMessage(m *tgbotapi.Message) (func(bk *bolt.Bucket) error, error) {
	if m.From == nil || m.From.IsBot || m.Chat == nil {
		return nil, nil
	}
	tg, user := m.Chat.ID, m.From.ID
	text := m.Text
	if !m.Chat.IsPrivate() {
		var addressed bool
		text, addressed = b.addressed(m)
		if !addressed || !b.allowed(user) {
			return nil, nil // groups: only when addressed, only allowed users
		}
	} else if !b.allowed(user) {
		return nil, b.pair(m)
	}
	if strings.TrimSpace(text) == "" {
		b.notify(tg, "I can read text messages only, for now.", nil, m.MessageID)
		return nil, nil
	}
	if strings.HasPrefix(text, "/") {
		if handled, err := b.command(m, text); handled || err != nil {
			return nil, err
		}
	}
	chat, err := b.ensureChat(tg)
	if err != nil {
		return nil, err
	}
	msg, err := b.svc.Send(b.ctx, chat, text, fmt.Sprintf("tg:%d:%d", tg, m.MessageID), chats.ModeQueue, chats.Origin{})
	if err != nil {
		if transient(err) {
			return nil, err
		}
		b.notify(tg, "Not sent: "+err.Error(), nil, m.MessageID)
		return nil, nil
	}
	v, _ := json.Marshal(sentRecord{Chat: chat, Msg: msg.ID, Text: text})
	return func(bk *bolt.Bucket) error { return bk.Put(tgKey("m", tg, m.MessageID), v) }, nil
}

// sentRecord maps a Telegram message to the Mirror message it made.
type sentRecord struct {
	Chat string `json:"chat"`
	Msg  string `json:"msg"`
	Text string `json:"text"`
}

// addressed reports whether a group message is for the bot (a mention of
// it, a reply to it, or a command naming it), and the text without the
// mention.
func (b *Bot) addressed(m *tgbotapi.Message) (string, bool) {
	name := "@" + b.api.Self.UserName
	text := m.Text
	ok := m.ReplyToMessage != nil && m.ReplyToMessage.From != nil && m.ReplyToMessage.From.ID == b.api.Self.ID
	if b.api.Self.UserName != "" && strings.Contains(strings.ToLower(text), strings.ToLower(name)) {
		ok = true
		i := strings.Index(strings.ToLower(text), strings.ToLower(name))
		text = strings.TrimSpace(text[:i] + text[i+len(name):])
	}
	return text, ok
}

// pair answers a user without access with their pairing code, and nothing else.
func (b *Bot) pair(m *tgbotapi.Message) error {
	name := strings.TrimSpace(m.From.FirstName + " " + m.From.LastName)
	if m.From.UserName != "" {
		name += " (@" + m.From.UserName + ")"
	}
	var p Pairing
	if err := b.write(func(bk *bolt.Bucket) (err error) {
		p, err = pairingFor(bk, m.From.ID, m.Chat.ID, name, b.opt.Now())
		return err
	}); err != nil {
		return err
	}
	b.notify(m.Chat.ID, fmt.Sprintf("You have no access yet. Your pairing code is %s. Ask the owner of this Mirror to run:\n\nmirror pair approve %s\n\nThe code expires in an hour.", p.Code, p.Code), nil, 0)
	return nil
}

// ensureChat returns the Telegram chat's current Mirror chat, creating one
// on first use, and makes sure it is followed.
func (b *Bot) ensureChat(tg int64) (string, error) {
	chat := b.currentChat(tg)
	if chat != "" {
		if _, err := b.svc.Get(b.ctx, chat); err == nil {
			return chat, b.follow(tg, chat, nil)
		} else if !errors.Is(err, chats.ErrNotFound) {
			return "", err
		}
	}
	c, err := b.svc.Create(b.ctx, "", "", chats.Origin{})
	if err != nil {
		return "", err
	}
	return c.ID, b.setCurrent(tg, c.ID)
}

// setCurrent makes chat the current one of tg: persisted, followed, and the
// chats left behind retired once idle.
func (b *Bot) setCurrent(tg int64, chat string) error {
	if err := b.write(func(bk *bolt.Bucket) error { return bk.Put(tgKey("cur", tg), []byte(chat)) }); err != nil {
		return err
	}
	if err := b.follow(tg, chat, nil); err != nil {
		return err
	}
	b.unfollowOthers(tg, chat)
	return nil
}

func (b *Bot) onEdit(m *tgbotapi.Message) error {
	if m.From == nil || m.Chat == nil || !b.allowed(m.From.ID) {
		return nil
	}
	tg := m.Chat.ID
	var rec sentRecord
	var found bool
	_ = b.read(func(bk *bolt.Bucket) error {
		v := bk.Get(tgKey("m", tg, m.MessageID))
		found = v != nil && json.Unmarshal(v, &rec) == nil
		return nil
	})
	if !found || strings.TrimSpace(m.Text) == "" {
		return nil
	}
	_, err := b.svc.Edit(b.ctx, rec.Chat, rec.Msg, m.Text, chats.Origin{})
	switch {
	case errors.Is(err, chats.ErrInUse):
		b.notify(tg, "Already in use: the assistant picked this message up before the edit, so the edit was not applied.", nil, m.MessageID)
	case errors.Is(err, chats.ErrNotFound):
		b.notify(tg, "That message is no longer queued (it was deleted), so the edit was not applied.", nil, m.MessageID)
	case err != nil && transient(err):
		return err
	case err != nil:
		b.notify(tg, "Edit not applied: "+err.Error(), nil, m.MessageID)
	default:
		rec.Text = m.Text
		v, _ := json.Marshal(rec)
		if err := b.write(func(bk *bolt.Bucket) error { return bk.Put(tgKey("m", tg, m.MessageID), v) }); err != nil {
			return err
		}
		b.notify(tg, "Updated the queued message.", nil, m.MessageID)
	}
	return nil
}

func (b *Bot) onCallback(q *tgbotapi.CallbackQuery) {
	if q.From == nil || !b.allowed(q.From.ID) {
		b.answerCallback(q.ID, "You have no access to this bot.")
		return
	}
	verb, arg, _ := strings.Cut(q.Data, ":")
	ctx := b.ctx
	switch verb {
	case "y", "n":
		err := b.svc.AnswerApproval(ctx, arg, verb == "y", chats.Origin{})
		switch {
		case errors.Is(err, chats.ErrNotFound):
			b.answerCallback(q.ID, "This approval is no longer waiting: it was answered already, or its turn ended.")
		case err != nil:
			b.answerCallback(q.ID, "Could not answer: "+err.Error())
		case verb == "y":
			b.answerCallback(q.ID, "Allowed.")
		default:
			b.answerCallback(q.ID, "Denied.")
		}
	case "r", "s":
		action := runtime.Repeat
		if verb == "s" {
			action = runtime.Skip
		}
		delivered, err := b.svc.AnswerRecovery(ctx, arg, action, chats.Origin{})
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
	case "c":
		c, err := b.svc.Get(ctx, arg)
		if err != nil || q.Message == nil || q.Message.Chat == nil {
			b.answerCallback(q.ID, "That chat no longer exists.")
			return
		}
		if err := b.setCurrent(q.Message.Chat.ID, c.ID); err != nil {
			b.answerCallback(q.ID, "Could not switch: "+err.Error())
			return
		}
		b.answerCallback(q.ID, "Switched to "+c.Title)
		b.notify(q.Message.Chat.ID, "Now in chat: "+c.Title, nil, 0)
	case "d", "x":
		chat, msg, _ := strings.Cut(arg, ":")
		var rec sentRecord
		if verb == "x" && q.Message != nil && q.Message.Chat != nil {
			rec = b.findSent(q.Message.Chat.ID, chat, msg)
		}
		err := b.svc.Delete(ctx, chat, msg, chats.Origin{})
		switch {
		case errors.Is(err, chats.ErrInUse):
			b.answerCallback(q.ID, "Already in use: the assistant picked that message up.")
		case errors.Is(err, chats.ErrNotFound):
			b.answerCallback(q.ID, "That message is no longer queued.")
		case err != nil:
			b.answerCallback(q.ID, "Could not do it: "+err.Error())
		case verb == "d":
			b.answerCallback(q.ID, "Deleted.")
		case rec.Text == "":
			b.answerCallback(q.ID, "Deleted; its text is unknown here, so send it again.")
		default:
			tg := q.Message.Chat.ID
			_, err := b.svc.Send(ctx, chat, rec.Text, rec.clientID(tg, q.Message.ReplyToMessage)+":r", chats.ModeRedirect, chats.Origin{})
			if err != nil {
				b.answerCallback(q.ID, "Could not redirect: "+err.Error())
				return
			}
			b.answerCallback(q.ID, "Redirected: the assistant reads it now.")
		}
	default:
		b.answerCallback(q.ID, "This button is not known (it may be from an older version).")
	}
}

func (r sentRecord) clientID(tg int64, orig *tgbotapi.Message) string {
	if orig != nil {
		return fmt.Sprintf("tg:%d:%d", tg, orig.MessageID)
	}
	return fmt.Sprintf("tg:%d:%s", tg, r.Msg)
}

// findSent finds the record of Mirror message msg among tg's.
func (b *Bot) findSent(tg int64, chat, msg string) sentRecord {
	var out sentRecord
	prefix := string(tgKey("m", tg)) + "/"
	_ = b.read(func(bk *bolt.Bucket) error {
		c := bk.Cursor()
		for k, v := c.Seek([]byte(prefix)); k != nil && strings.HasPrefix(string(k), prefix); k, v = c.Next() {
			var r sentRecord
			if json.Unmarshal(v, &r) == nil && r.Chat == chat && r.Msg == msg {
				out = r
			}
		}
		return nil
	})
	return out
}

// command runs a bot command; handled is false for a slash text that is not
// one (such as the builtin model's /tool), which goes to the chat.
func (b *Bot) command(m *tgbotapi.Message, text string) (handled bool, err error) {
	tg := m.Chat.ID
	fields := strings.Fields(text)
	name, _, _ := strings.Cut(fields[0], "@")
	rest := strings.TrimSpace(strings.TrimPrefix(text, fields[0]))
	switch name {
	case "/start", "/help":
		b.notify(tg, helpText, nil, 0)
	case "/new":
		c, err := b.svc.Create(b.ctx, rest, "", chats.Origin{})
		if err != nil {
			if transient(err) {
				return true, err
			}
			b.notify(tg, "No new chat: "+err.Error(), nil, m.MessageID)
			return true, nil
		}
		if err := b.setCurrent(tg, c.ID); err != nil {
			return true, err
		}
		b.notify(tg, "New chat: "+c.Title+". Send a message to begin.", nil, 0)
	case "/chats":
		list, err := b.svc.List(b.ctx)
		if err != nil {
			return true, err
		}
		cur := b.currentChat(tg)
		var rows [][]tgbotapi.InlineKeyboardButton
		for i, c := range list {
			if i == 10 {
				break
			}
			label := truncate(c.Title, 40)
			if c.ID == cur {
				label = "✓ " + label
			}
			if c.State == chats.StateRunning {
				label += " (running)"
			}
			rows = append(rows, tgbotapi.NewInlineKeyboardRow(tgbotapi.NewInlineKeyboardButtonData(label, "c:"+c.ID)))
		}
		if len(rows) == 0 {
			b.notify(tg, "No chats yet. Send a message, or /new.", nil, 0)
			return true, nil
		}
		kb := tgbotapi.NewInlineKeyboardMarkup(rows...)
		b.notify(tg, "Your chats, most recent first. Tap one to switch:", &kb, 0)
	case "/stop":
		chat := b.currentChat(tg)
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			err := b.svc.Stop(b.ctx, chat, chats.Origin{})
			switch {
			case chat == "" || errors.Is(err, chats.ErrNoTurn) || errors.Is(err, chats.ErrNotFound):
				b.notify(tg, "Nothing is running.", nil, 0)
			case err != nil:
				b.notify(tg, "Could not stop: "+err.Error(), nil, 0)
			}
		}()
	case "/status":
		chat := b.currentChat(tg)
		c, err := b.svc.Get(b.ctx, chat)
		if chat == "" || errors.Is(err, chats.ErrNotFound) {
			b.notify(tg, "No current chat. Send a message, or /new.", nil, 0)
			return true, nil
		}
		if err != nil {
			return true, err
		}
		b.notify(tg, b.status(c), nil, 0)
	case "/compact":
		b.notify(tg, "Compaction is not available yet: /compact comes with a later version of Mirror. Nothing was changed.", nil, m.MessageID)
	case "/pin":
		if m.ReplyToMessage == nil {
			b.notify(tg, "Use /pin as a reply to the message to pin. (Pinning is not available yet, though.)", nil, m.MessageID)
		} else {
			b.notify(tg, "Pinning is not available yet: /pin comes with a later version of Mirror. Nothing was pinned.", nil, m.MessageID)
		}
	case "/changes", "/rewind":
		chat := b.currentChat(tg)
		if chat == "" {
			b.notify(tg, "No current chat.", nil, 0)
			return true, nil
		}
		out, err := b.svc.Command(b.ctx, chat, text, chats.Origin{})
		if err != nil {
			out = err.Error()
		}
		b.notify(tg, out, nil, 0)
	default:
		return false, nil
	}
	return true, nil
}

const helpText = `Mirror: send a message to talk to the assistant in your current chat.
/new [title] – start a new chat
/chats – list chats and switch
/stop – stop the running reply
/status – the current chat's state
/changes, /rewind N – file changes of the chat
/compact, /pin – coming later`

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
// by its update_id.
func (b *Bot) WebhookHandler() http.Handler {
	var mu sync.Mutex // one update at a time, in order
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
		var u tgbotapi.Update
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&u); err != nil {
			http.Error(w, "not an update", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if u.UpdateID < b.offset() {
			w.WriteHeader(http.StatusOK) // handled already
			return
		}
		if err := b.handle(u); err != nil {
			b.log.Warn("telegram: webhook update not handled", "update", u.UpdateID, "err", err)
			http.Error(w, "not handled; deliver again", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}

// PairingHandler serves the pairing API; mount it behind the access token:
//
//	GET  /api/telegram/pairing                 {"pairings":[PAIRING...]}
//	POST /api/telegram/pairing/{code}/approve  {"approved":PAIRING}, 404 for an unknown code
func (b *Bot) PairingHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/telegram/pairing", func(w http.ResponseWriter, r *http.Request) {
		var list []Pairing
		_ = b.read(func(bk *bolt.Bucket) error { list = pendingPairings(bk, b.opt.Now()); return nil })
		if list == nil {
			list = []Pairing{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"pairings": list})
	})
	mux.HandleFunc("POST /api/telegram/pairing/{code}/approve", func(w http.ResponseWriter, r *http.Request) {
		var p Pairing
		err := b.write(func(bk *bolt.Bucket) (err error) { p, err = approve(bk, r.PathValue("code"), b.opt.Now()); return err })
		switch {
		case errors.Is(err, ErrUnknownCode):
			writeJSON(w, http.StatusNotFound, map[string]any{"error": err.Error()})
			return
		case err != nil:
			writeJSON(w, http.StatusInternalServerError, map[string]any{"error": err.Error()})
			return
		}
		b.notify(p.Chat, "You have access now. Send a message to begin.", nil, 0)
		writeJSON(w, http.StatusOK, map[string]any{"approved": p})
	})
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
