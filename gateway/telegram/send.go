package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
	"github.com/mirror-gateway/mirror/monitor"
)

// Bot API error texts we act on (wire-formats §1.3).
const (
	errNotModified    = "message is not modified"
	errParse          = "can't parse entities"
	errEditNotFound   = "message to edit not found"
	errDeleteNotFound = "message to delete not found"
)

// callOpts say how one request is made.
type callOpts struct {
	chat  int64 // the Telegram chat it goes to; 0 for none
	paced bool  // counts against the chat's one-a-second pacing
	once  bool  // best effort: no retry (typing actions)
	prio  int   // its place in the global queue (prioFirst, prioFinal, prioEdit)
}

// errUncertain says a sendMessage went on the wire twice and both answers
// were lost: Telegram may show it twice already, so it is not sent a third
// time. The Bot API has no idempotency key; this bounds the duplicates.
var errUncertain = errors.New("the answers to two sends of this message were lost; it most likely arrived, so it is not sent again")

// errBusy says a best-effort send was skipped: the budget had no room.
var errBusy = errors.New("telegram: no room in the send budget now; skipped")

// maxUncertainSends is how many times one sendMessage may go on the wire
// without an answer: the second try may make one visible duplicate, never
// more.
const maxUncertainSends = 2

// call makes one Bot API request: paced per chat and globally (by
// priority, within Telegram's per-bot budget in every sliding second),
// guarded by the Telegram breaker, retrying 429 after retry_after and
// transient failures with backoff until ctx ends. Errors that retrying
// cannot fix (400, 401, 403) return at once. A request, once on the wire,
// is not cancelled by ctx: its answer is needed to record what was sent. A
// sendMessage whose answer is lost after it was written may have arrived:
// it is sent again once, and after a second such loss call gives up with
// errUncertain rather than risk a second duplicate.
func (b *Bot) call(ctx context.Context, o callOpts, c tgbotapi.Chattable) (*tgbotapi.APIResponse, error) {
	_, isSend := c.(tgbotapi.MessageConfig)
	return b.callDo(ctx, o, method(c), isSend, func(api *tgbotapi.BotAPI) (*tgbotapi.APIResponse, error) { return api.Request(c) })
}

// callDo is call for any request: do makes it once on the API it is
// given (bound to the attempt's context). name is the method, for errors
// and logs; isSend says a repeat would show a message twice, so a lost
// answer is retried at most once.
func (b *Bot) callDo(ctx context.Context, o callOpts, name string, isSend bool, do func(api *tgbotapi.BotAPI) (*tgbotapi.APIResponse, error)) (*tgbotapi.APIResponse, error) {
	backoff := 250 * time.Millisecond
	uncertain := 0
	var err error
	for attempt := 0; ; attempt++ {
		if o.paced {
			if err := b.pacer(o.chat).wait(ctx); err != nil {
				return nil, err
			}
		}
		var slot *grant
		if o.once {
			// Best effort: never queued, so it holds up no other send
			// (nor its own sender's next, more urgent one).
			if slot = b.global.try(); slot == nil {
				return nil, errBusy
			}
		} else if slot, err = b.global.wait(ctx, o.prio); err != nil {
			return nil, err
		}
		done := func(error, string) {}
		if b.opt.Monitor != nil {
			d, err := b.opt.Monitor.Telegram().Allow()
			if err != nil {
				b.global.finish(slot) // nothing was sent
				if o.once {
					return nil, err
				}
				wait := time.Second
				var oe *monitor.OpenError
				if errors.As(err, &oe) && time.Until(oe.RetryAt) > wait {
					wait = min(time.Until(oe.RetryAt), 30*time.Second)
				}
				if err := b.pause(ctx, wait); err != nil {
					return nil, err
				}
				continue
			}
			done = d
		}
		var wrote atomic.Bool
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		var resp *tgbotapi.APIResponse
		resp, err = do(b.withTrace(rctx, &wrote))
		cancel()
		b.global.finish(slot)
		if o.paced {
			// Telegram counts when a send reaches it, which may be as late
			// as its answer: the next send waits a full interval from here.
			b.pacer(o.chat).sent(time.Now())
		}
		err = redactErr(err)
		if err == nil {
			done(nil, "")
			b.opt.Metrics.TelegramSend(true)
			return resp, nil
		}
		b.opt.Metrics.TelegramSend(false)
		var te *tgbotapi.Error
		var wait time.Duration
		switch {
		case errors.As(err, &te) && te.Code == 429:
			b.opt.Metrics.Telegram429()
			done(err, monitor.ClassRateLimited)
			wait = time.Duration(max(te.RetryAfter, 1)) * time.Second
			if o.chat != 0 {
				b.pacer(o.chat).delay(time.Now().Add(wait))
			}
		case errors.As(err, &te) && te.Code >= 500:
			done(err, monitor.ClassServer)
			wait = backoff
		case errors.As(err, &te):
			class := monitor.ClassBadRequest
			if te.Code == 401 || te.Code == 403 {
				class = monitor.ClassAuth
			}
			done(err, class)
			return nil, fmt.Errorf("telegram %s: %w", name, err)
		default:
			done(err, monitor.ClassNetwork)
			wait = backoff
			if isSend && wrote.Load() {
				// Written, unanswered: Telegram may have it.
				if uncertain++; uncertain >= maxUncertainSends {
					b.log.Warn("telegram: "+name+" answer lost twice; not sent again", "chat", o.chat, "err", err)
					return nil, fmt.Errorf("telegram %s: %w (last: %w)", name, errUncertain, err)
				}
			}
		}
		if o.once {
			return nil, fmt.Errorf("telegram %s: %w", name, err)
		}
		if wait == backoff {
			backoff = min(backoff*2, 30*time.Second)
		}
		if attempt == 0 || attempt%10 == 9 {
			b.log.Warn("telegram request failed; retrying", "method", name, "err", err, "retry_in", wait)
		}
		if err := b.pause(ctx, wait); err != nil {
			return nil, err
		}
	}
}

func method(c tgbotapi.Chattable) string {
	switch c.(type) {
	case tgbotapi.MessageConfig:
		return "sendMessage"
	case tgbotapi.EditMessageTextConfig:
		return "editMessageText"
	case tgbotapi.CallbackConfig:
		return "answerCallbackQuery"
	case tgbotapi.ChatActionConfig:
		return "sendChatAction"
	case tgbotapi.DeleteMessageConfig:
		return "deleteMessage"
	case tgbotapi.FileConfig:
		return "getFile"
	}
	return "request"
}

func isAPIError(err error, text string) bool {
	var te *tgbotapi.Error
	return errors.As(err, &te) && strings.Contains(te.Message, text)
}

// sendText sends a message rendered as HTML, and as plain text when
// Telegram refuses the entities, at the priority of a first text (a short
// answer). It returns the new message's id.
func (b *Bot) sendText(ctx context.Context, to place, html, plain string, kb *tgbotapi.InlineKeyboardMarkup, replyTo int) (int, error) {
	return b.sendTextAt(ctx, to, html, plain, kb, replyTo, prioFirst)
}

// sendTextAt is sendText at priority prio. The request is written by hand
// (sendMessageParams): the library's MessageConfig has no
// message_thread_id, which a send into a forum topic needs.
func (b *Bot) sendTextAt(ctx context.Context, to place, html, plain string, kb *tgbotapi.InlineKeyboardMarkup, replyTo int, prio int) (int, error) {
	o := callOpts{chat: to.tg, paced: true, prio: prio}
	send := func(text, mode string) (*tgbotapi.APIResponse, error) {
		params, err := sendMessageParams(to, text, mode, kb, replyTo)
		if err != nil {
			return nil, err
		}
		return b.callDo(ctx, o, "sendMessage", true, func(api *tgbotapi.BotAPI) (*tgbotapi.APIResponse, error) {
			return api.MakeRequest("sendMessage", params)
		})
	}
	resp, err := send(html, tgbotapi.ModeHTML)
	if err != nil && isAPIError(err, errParse) {
		resp, err = send(plain, "")
	}
	if err != nil {
		return 0, err
	}
	var msg tgbotapi.Message
	if err := json.Unmarshal(resp.Result, &msg); err != nil {
		return 0, fmt.Errorf("telegram sendMessage: decode answer: %w", err)
	}
	return msg.MessageID, nil
}

// sendMessageParams are a sendMessage's parameters, as the library would
// write them, plus the topic: message_thread_id only for a topic (the
// General topic, thread 0, must go without one).
func sendMessageParams(to place, text, mode string, kb *tgbotapi.InlineKeyboardMarkup, replyTo int) (tgbotapi.Params, error) {
	params := tgbotapi.Params{"chat_id": strconv.FormatInt(to.tg, 10), "text": text, "disable_web_page_preview": "true"}
	params.AddNonEmpty("parse_mode", mode)
	addThread(params, to)
	if replyTo != 0 {
		params.AddNonZero("reply_to_message_id", replyTo)
		params.AddBool("allow_sending_without_reply", true)
	}
	if kb != nil {
		if err := params.AddInterface("reply_markup", *kb); err != nil {
			return nil, err
		}
	}
	return params, nil
}

// addThread names the topic of a send into one.
func addThread(params tgbotapi.Params, to place) {
	if to.thread != 0 {
		params["message_thread_id"] = strconv.Itoa(to.thread)
	}
}

// editText replaces a message's text (and its buttons: nil removes them),
// at the priority of a final text.
// "message is not modified" is success: the message already shows it.
func (b *Bot) editText(ctx context.Context, chat int64, id int, html, plain string, kb *tgbotapi.InlineKeyboardMarkup) error {
	return b.editTextAt(ctx, chat, id, html, plain, kb, prioFinal)
}

// editTextAt is editText at priority prio.
func (b *Bot) editTextAt(ctx context.Context, chat int64, id int, html, plain string, kb *tgbotapi.InlineKeyboardMarkup, prio int) error {
	e := tgbotapi.NewEditMessageText(chat, id, html)
	e.ParseMode = tgbotapi.ModeHTML
	e.DisableWebPagePreview = true
	e.ReplyMarkup = kb
	_, err := b.call(ctx, callOpts{chat: chat, paced: true, prio: prio}, e)
	if err != nil && isAPIError(err, errParse) {
		e.Text, e.ParseMode = plain, ""
		_, err = b.call(ctx, callOpts{chat: chat, paced: true, prio: prio}, e)
	}
	if err != nil && isAPIError(err, errNotModified) {
		return nil
	}
	return err
}

// notify sends a short plain reply to place to, in the background so that
// update handling never waits on a chat's pacing.
func (b *Bot) notify(to place, text string, kb *tgbotapi.InlineKeyboardMarkup, replyTo int) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		if _, err := b.sendText(b.ctx, to, escape(text), text, kb, replyTo); err != nil && b.ctx.Err() == nil {
			b.log.Warn("telegram reply failed", "chat", to.tg, "thread", to.thread, "err", err)
		}
	}()
}

// answerCallback answers a button press; Telegram shows the spinner until
// it is answered, so it is always answered. answerCallbackQuery returns
// true, not a Message: Request, not Send.
func (b *Bot) answerCallback(id, text string) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		if _, err := b.call(b.ctx, callOpts{prio: prioFirst}, tgbotapi.NewCallback(id, text)); err != nil && b.ctx.Err() == nil {
			b.log.Warn("telegram answerCallbackQuery failed", "err", err)
		}
	}()
}

// typing shows "typing…" in place to (in its topic: sendChatAction takes
// message_thread_id too).
func (b *Bot) typing(ctx context.Context, to place) {
	params := tgbotapi.Params{"chat_id": strconv.FormatInt(to.tg, 10), "action": tgbotapi.ChatTyping}
	addThread(params, to)
	_, _ = b.callDo(ctx, callOpts{chat: to.tg, once: true, prio: prioEdit}, "sendChatAction", false, func(api *tgbotapi.BotAPI) (*tgbotapi.APIResponse, error) {
		return api.MakeRequest("sendChatAction", params)
	})
}
