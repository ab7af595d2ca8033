package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
	"github.com/mirror-gateway/mirror/chats"
)

// followKey is a (place, Mirror chat) pair: one follower each.
type followKey struct {
	where place
	chat  string
}

// follower streams one Mirror chat into one Telegram chat. It is the chat's
// Subscriber: Deliver only queues, and the follower's goroutine does the
// sending, so a slow Bot API never slows the chat.
type follower struct {
	b   *Bot
	key followKey
	st  followState
	// ctx is what the follower runs under: the bot's, or in cluster mode
	// the leader's stint it was started in (only the leader sends).
	ctx context.Context
	// release counts the follower's goroutine out (the bot's and the
	// stint's).
	release func()

	mu     sync.Mutex
	queue  []chats.Delivery
	signal chan struct{}
	retire atomic.Bool

	seen    uint64 // last durable seq applied (st.LastSeq is the persisted one)
	running bool
	reply   string
	dirty   bool
	shown   []string // the HTML each message of the turn shows
	typeAt  time.Time
	// wait is the quota-wait line shown under the streamed reply (see
	// waitLine); "" once the turn proceeds.
	wait string
}

// Deliver implements chats.Subscriber; it never blocks.
func (f *follower) Deliver(d chats.Delivery) {
	f.mu.Lock()
	f.queue = append(f.queue, d)
	f.mu.Unlock()
	select {
	case f.signal <- struct{}{}:
	default:
	}
}

func (f *follower) take() []chats.Delivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queue
	f.queue = nil
	return q
}

// follow makes sure Telegram chat tg follows Mirror chat chat, subscribing
// before it returns, so nothing sent to the chat afterwards is missed. st is
// the persisted state to resume from (nil: start from a snapshot). A new
// follower's state is committed before follow returns, so a message the
// chat accepts afterwards is followed after a crash too: the restart
// resumes from the seq the follow began at and delivers its answer.
func (b *Bot) follow(where place, chat string, st *followState) error {
	key := followKey{where, chat}
	b.mu.Lock()
	if f := b.followers[key]; f != nil {
		f.retire.Store(false)
		b.mu.Unlock()
		return nil
	}
	if b.closed {
		b.mu.Unlock()
		return chats.ErrClosed
	}
	ctx, release, err := b.followerRun()
	if err != nil {
		b.mu.Unlock()
		return err
	}
	f := &follower{b: b, key: key, signal: make(chan struct{}, 1), ctx: ctx, release: release}
	fresh := st == nil
	if fresh {
		// A follower retired in memory may have left its record behind.
		if old, ok := b.loadFollow(where, chat); ok {
			st, fresh = &old, false
		}
	}
	if st != nil {
		f.st = *st
	}
	f.st.TG, f.st.Thread, f.st.Chat = where.tg, where.thread, chat
	f.seen = f.st.LastSeq
	b.followers[key] = f
	b.mu.Unlock()
	var since *uint64
	if !fresh {
		// Resume after the last event handled, even 0: a stored follower
		// must see every event after it, not a snapshot that may have
		// passed over a whole turn.
		s := f.seen
		since = &s
	}
	if err := b.svc.Open(f.ctx, chat, since, f, ""); err != nil {
		b.mu.Lock()
		delete(b.followers, key)
		b.mu.Unlock()
		f.release()
		if errors.Is(err, chats.ErrNotFound) {
			_ = b.write(func(bk stateBucket) error { return bk.Delete(tgKey("f", where, chat)) })
		}
		return fmt.Errorf("telegram: follow chat %s: %w", chat, err)
	}
	if fresh {
		// The snapshot Open delivered is the first delivery: its seq is
		// where a restart resumes.
		f.mu.Lock()
		if len(f.queue) > 0 && f.queue[0].Snapshot != nil {
			f.seen = max(f.seen, f.queue[0].Snapshot.Seq)
		}
		f.mu.Unlock()
		if err := f.save(); err != nil {
			b.mu.Lock()
			delete(b.followers, key)
			b.mu.Unlock()
			f.release()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = b.svc.Unsubscribe(ctx, chat, f)
			return fmt.Errorf("telegram: follow chat %s: %w", chat, err)
		}
	}
	go f.run()
	return nil
}

// loadFollow reads the stored state of the pair (where, chat).
func (b *Bot) loadFollow(where place, chat string) (followState, bool) {
	var st followState
	found := false
	_ = b.read(func(bk stateBucket) error {
		if v := bk.Get(tgKey("f", where, chat)); v != nil {
			found = json.Unmarshal(v, &st) == nil
		}
		return nil
	})
	return st, found
}

// unfollowOthers retires every follower of where but the one of keep: each
// ends once its chat has nothing running or waiting for an answer, so a
// reply or an approval of the chat left behind still arrives.
func (b *Bot) unfollowOthers(where place, keep string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, f := range b.followers {
		if k.where == where && k.chat != keep {
			f.retire.Store(true)
			select {
			case f.signal <- struct{}{}:
			default:
			}
		}
	}
}

func (f *follower) run() {
	b := f.b
	defer f.release()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = b.svc.Unsubscribe(ctx, f.key.chat, f)
		// Gone with its stint (cluster mode) or the bot: the next stint
		// starts it again from its stored state.
		b.mu.Lock()
		if b.followers[f.key] == f {
			delete(b.followers, f.key)
		}
		b.mu.Unlock()
	}()
	typing := time.NewTimer(time.Hour)
	defer typing.Stop()
	for {
		for _, d := range f.take() {
			if err := f.apply(d); err != nil {
				if f.ctx.Err() != nil {
					return
				}
				b.log.Warn("telegram: follower", "chat", f.key.chat, "tg", f.key.where.tg, "thread", f.key.where.thread, "err", err)
			}
		}
		if f.ctx.Err() != nil {
			return
		}
		if f.dirty && f.running {
			if err := f.stream(); err != nil && f.ctx.Err() == nil {
				b.log.Warn("telegram: streaming edit", "chat", f.key.chat, "err", err)
			}
			f.dirty = false
			continue // take what arrived meanwhile before waiting
		}
		if f.retire.Load() && !f.running && len(f.st.Asks) == 0 && f.quiet() {
			b.mu.Lock()
			if f.retire.Load() {
				// Its stored state goes under the lock too, so a new
				// follower of the same chat (a switch back) cannot save
				// its state in between and lose it to this delete.
				delete(b.followers, f.key)
				_ = b.write(func(bk stateBucket) error { return bk.Delete(tgKey("f", f.key.where, f.key.chat)) })
				b.mu.Unlock()
				return
			}
			b.mu.Unlock()
		}
		if f.running {
			if now := time.Now(); !now.Before(f.typeAt) {
				b.typing(f.ctx, f.key.where)
				f.typeAt = now.Add(4 * time.Second) // the action shows for about 5 s
			}
			typing.Reset(time.Until(f.typeAt))
		}
		select {
		case <-f.signal:
		case <-typing.C:
		case <-f.ctx.Done():
			return
		}
	}
}

// quiet reports whether the chat has nothing running, queued or waiting to
// resume, and the follower has applied every event of it, so a retired
// follower may go: an answer to a recovery starts (and may even finish) the
// turn it resumes before the follower has seen any event of it.
func (f *follower) quiet() bool {
	c, err := f.b.svc.Get(f.ctx, f.key.chat)
	if errors.Is(err, chats.ErrNotFound) {
		return true
	}
	return err == nil && c.State != chats.StateRunning && c.Pending == 0 && !c.Resume && c.Seq <= f.seen
}

func (f *follower) save() error { return f.saveWith(nil) }

// saveWith persists the follower's state and, in the same write, what more
// puts.
func (f *follower) saveWith(more func(bk stateBucket) error) error {
	f.st.LastSeq = f.seen
	v, _ := json.Marshal(f.st)
	if f.b.afterSave != nil {
		defer f.b.afterSave()
	}
	return f.b.write(func(bk stateBucket) error {
		if more != nil {
			if err := more(bk); err != nil {
				return err
			}
		}
		return bk.Put(tgKey("f", f.key.where, f.key.chat), v)
	})
}

func (f *follower) newTurn(turn string) {
	f.adopt(turn)
	f.running, f.reply, f.dirty, f.wait = true, "", false, ""
	f.typeAt = time.Time{}
}

// adopt makes turn the one the follower shows. A turn that resumes an
// interrupted one (the next turn of the chat: chats gives it nothing else
// to answer) continues in the messages the interrupted one had started,
// so no cut-off reply is left behind; any other turn starts afresh.
func (f *follower) adopt(turn string) {
	if f.st.Turn == turn {
		return
	}
	if f.st.Interrupted && !f.st.Landed && len(f.st.MsgIDs) > 0 {
		f.st.Turn, f.st.Interrupted = turn, false
		return
	}
	f.st.Turn, f.st.MsgIDs, f.st.Landed, f.st.Interrupted, f.shown = turn, nil, false, false, nil
}

func (f *follower) apply(d chats.Delivery) error {
	b := f.b
	switch {
	case d.Closed != "":
		// The chat dropped us; resume after what we applied.
		s := f.seen
		return b.svc.Open(f.ctx, f.key.chat, &s, f, "")
	case d.Snapshot != nil:
		sn := d.Snapshot
		f.seen = max(f.seen, sn.Seq)
		f.running = false
		if sn.Running != nil {
			f.newTurn(sn.Running.Turn)
			f.reply, f.dirty = sn.Running.Text, sn.Running.Text != ""
		}
		for _, ap := range sn.Approvals {
			if err := f.askApproval(&ap); err != nil {
				return err
			}
		}
		for _, r := range sn.Recoveries {
			if err := f.ask(r.ID, recoveryText(&r), verbRepeat, verbSkip, "Repeat", "Skip"); err != nil {
				return err
			}
		}
		return nil
	}
	ev := d.Event
	switch p := ev.Payload.(type) {
	case *chats.ReplyDelta:
		if f.running && p.Turn == f.st.Turn {
			r := []rune(f.reply)
			off := min(max(p.Offset, 0), len(r))
			f.reply = string(r[:off]) + p.Text
			f.dirty = true
			f.wait = ""
		}
		return nil
	case *chats.QuotaWait:
		// Not durable (it carries the last durable seq): shown, never
		// counted as seen.
		if f.running && p.Turn == f.st.Turn {
			f.wait, f.dirty = waitLine(p), true
		}
		return nil
	case *chats.ToolProgress:
		// Not durable either: the running call's progress, as the status.
		if f.running && p.Turn == f.st.Turn && p.Call != nil {
			f.wait, f.dirty = progressLine(p), true
		}
		return nil
	}
	if ev.Seq <= f.seen {
		return nil // already applied (a resume overlapping what we had)
	}
	f.seen = ev.Seq
	if f.wait != "" && ev.Turn() == f.st.Turn {
		f.wait = "" // the turn went on (a tool call, its end)
		f.dirty = f.reply != ""
	}
	switch p := ev.Payload.(type) {
	case *chats.TurnStarted:
		f.newTurn(p.Turn)
	case *chats.TurnFinished:
		text := p.Reply
		if p.Stopped {
			text = strings.TrimSpace(text + "\n\n(stopped)")
		}
		return f.land(p.Turn, text, msgID(p.Message))
	case *chats.TurnFailed:
		if p.Class == "interrupted" {
			// The turn goes on when the chat is back, in the messages it
			// had started.
			f.running = false
			if p.Turn == f.st.Turn && !f.st.Landed && len(f.st.MsgIDs) > 0 {
				f.st.Interrupted = true
			}
			return f.save()
		}
		text := f.reply
		if p.Message != nil && p.Message.Text != "" {
			text = p.Message.Text
		}
		return f.land(p.Turn, strings.TrimSpace(text+"\n\n⚠️ "+p.Error), msgID(p.Message))
	case *chats.MessageAccepted:
		m := p.Message
		if m != nil && f.running && strings.HasPrefix(m.ClientID, fmt.Sprintf("tg:%d:", f.key.where.tg)) && !strings.HasSuffix(m.ClientID, ":r") {
			kb, err := keyboard([]choice{
				{"Delete", press{Verb: verbDelete, Chat: f.key.chat, Msg: m.ID}},
				{"Redirect now", press{Verb: verbRedirect, Chat: f.key.chat, Msg: m.ID}}})
			if err != nil {
				// Cannot happen with Mirror's ids; the ack is a courtesy, the
				// message is queued either way.
				b.log.Warn("telegram: queued-message buttons", "chat", f.key.chat, "err", err)
				return nil
			}
			reply := 0
			if _, id, ok := strings.Cut(strings.TrimPrefix(m.ClientID, "tg:"), ":"); ok {
				fmt.Sscan(id, &reply)
			}
			const t = "Queued: I will answer it after the current reply. Edit your message to change it."
			id, err := b.sendText(f.ctx, f.key.where, t, t, &kb, reply)
			if err != nil {
				return err
			}
			if f.st.Acks == nil {
				f.st.Acks = map[string]int{}
			}
			f.st.Acks[m.ID] = id
			return f.save()
		}
	case *chats.MessagePicked, *chats.MessageDeleted:
		if m := ev.Message(); m != nil {
			if id, ok := f.st.Acks[m.ID]; ok {
				delete(f.st.Acks, m.ID)
				t := "Picked up: the assistant is reading it."
				if ev.Type == chats.EvMessageDeleted {
					t = "Deleted from the queue."
					if f.redirecting(m.ID) {
						t = "Redirected: the assistant reads it at its next step."
					}
				}
				if err := b.editText(f.ctx, f.key.where.tg, id, t, t, nil); err != nil && !isAPIError(err, errEditNotFound) {
					return err
				}
				return f.save()
			}
		}
	case *chats.FileSent:
		return f.sendFile(p)
	case *chats.MessageTranscribed:
		return f.transcribed(p)
	case *chats.ApprovalRequested:
		if ap := p.Approval; ap != nil {
			return f.askApproval(ap)
		}
	case *chats.RecoveryRequested:
		if r := p.Recovery; r != nil {
			return f.ask(r.ID, recoveryText(r), verbRepeat, verbSkip, "Repeat", "Skip")
		}
	case *chats.ApprovalResolved:
		if ap := p.Approval; ap != nil {
			out := "Denied."
			switch {
			case ap.Reason != "":
				out = "Not answered: " + ap.Reason + "."
			case ap.Allow != nil && *ap.Allow && ap.ForChat:
				out = "Allowed, and " + ap.Tool + " is allowed for this chat from now on."
			case ap.Allow != nil && *ap.Allow:
				out = "Allowed."
			}
			html, plain := approvalMessage(ap, false)
			return f.resolveHTML(ap.ID, html+"\n"+escape(out), plain+"\n"+out)
		}
	case *chats.RecoveryResolved:
		if r := p.Recovery; r != nil {
			return f.resolve(r.ID, recoveryText(r)+"\nAnswered: "+r.Action+".")
		}
	}
	return nil
}

// redirecting reports whether pending message id is being redirected (a
// Redirect press deleted it to send it again).
func (f *follower) redirecting(id string) bool {
	found := false
	_ = f.b.read(func(bk stateBucket) error {
		found = bk.Get(tgKey("x", f.key.chat, id)) != nil
		return nil
	})
	return found
}

// recoveryText asks about an interrupted call, saying what became of its
// process when the gateway came back.
func recoveryText(r *chats.Recovery) string {
	text := fmt.Sprintf("The gateway stopped while %s %s was running.", r.Call.Name, truncate(r.Call.Arguments, 600))
	if note := r.ProcessNote(); note != "" {
		text += " " + note
	}
	return text + " Repeat it, or skip it?"
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// ask sends a question with two buttons, the verbs yes and no of id, once
// per id.
func (f *follower) ask(id, text, yes, no, yesLabel, noLabel string) error {
	return f.askHTML(id, escape(text), text, []choice{{yesLabel, press{Verb: yes, ID: id}}, {noLabel, press{Verb: no, ID: id}}})
}

// askApproval asks about an approval: Allow and Deny, and below them
// Allow for this chat.
func (f *follower) askApproval(ap *chats.Approval) error {
	html, plain := approvalMessage(ap, true)
	return f.askHTML(ap.ID, html, plain,
		[]choice{{"Allow", press{Verb: verbAllow, ID: ap.ID}}, {"Deny", press{Verb: verbDeny, ID: ap.ID}}},
		[]choice{{"Allow for this chat", press{Verb: verbForChat, ID: ap.ID}}})
}

// askHTML sends a question (html, and plain should Telegram refuse the
// HTML) with rows of buttons, once per id.
func (f *follower) askHTML(id, html, text string, rows ...[]choice) error {
	if _, ok := f.st.Asks[id]; ok {
		return nil
	}
	kb, err := keyboard(rows...)
	markup := &kb
	if err != nil {
		// An id too long for a button: Telegram would refuse the whole
		// message, and a retry would fail the same way. Ask without them.
		f.b.log.Warn("telegram: question buttons", "chat", f.key.chat, "err", err)
		const note = "\n(Answer it in the browser: its buttons do not fit in Telegram.)"
		html, text = html+escape(note), text+note
		markup = nil
	}
	msg, err := f.b.sendTextAt(f.ctx, f.key.where, html, text, markup, 0, prioFinal)
	if err != nil {
		return err
	}
	if f.st.Asks == nil {
		f.st.Asks = map[string]int{}
	}
	f.st.Asks[id] = msg
	return f.save()
}

// resolve replaces a question's buttons with its outcome.
func (f *follower) resolve(id, text string) error { return f.resolveHTML(id, escape(text), text) }

// resolveHTML is resolve with the outcome as HTML (and plain text).
func (f *follower) resolveHTML(id, html, text string) error {
	msg, ok := f.st.Asks[id]
	if !ok {
		return f.save()
	}
	delete(f.st.Asks, id)
	if err := f.b.editText(f.ctx, f.key.where.tg, msg, html, text, nil); err != nil && !isAPIError(err, errEditNotFound) {
		return err
	}
	return f.save()
}

// show makes the turn's messages show text: parts already showing it are
// left alone, known messages are edited, and only a part with no message
// yet is sent; each new message id is persisted at once, so no later retry
// or restart sends that part again. final says text is the turn's last:
// its sends and edits go before streaming edits, and a reply's first
// message before both.
func (f *follower) show(text string, final bool) error {
	b := f.b
	if strings.TrimSpace(text) == "" {
		text = "(no text)"
	}
	prio := prioEdit
	if final {
		prio = prioFinal
	}
	parts := split(text, MaxMessage)
	for i, p := range parts {
		html := render(p)
		if i < len(f.shown) && f.shown[i] == html {
			continue
		}
		if i < len(f.st.MsgIDs) {
			if f.st.MsgIDs[i] == 0 {
				continue // sent, its id lost with Telegram's answer: cannot be edited
			}
			err := b.editTextAt(f.ctx, f.key.where.tg, f.st.MsgIDs[i], html, p, nil, prio)
			if err == nil {
				f.setShown(i, html)
				continue
			}
			if !isAPIError(err, errEditNotFound) {
				return err
			}
			// Someone deleted that message: send the part again.
			f.st.MsgIDs = f.st.MsgIDs[:i]
		}
		sp := prio
		if i == 0 {
			sp = prioFirst
		}
		id, err := b.sendTextAt(f.ctx, f.key.where, html, p, nil, 0, sp)
		if errors.Is(err, errUncertain) {
			id, err = 0, nil // most likely shown; never sent a third time
		}
		if err != nil {
			return err
		}
		f.st.MsgIDs = append(f.st.MsgIDs, id)
		f.setShown(i, html)
		if err := f.save(); err != nil {
			return err
		}
	}
	if final && len(f.st.MsgIDs) > len(parts) {
		// A resumed turn's answer is shorter than the interrupted one's
		// streamed text: its parts past the end go.
		for _, id := range f.st.MsgIDs[len(parts):] {
			if id == 0 {
				continue
			}
			if _, err := b.call(f.ctx, callOpts{chat: f.key.where.tg, paced: true, prio: prioFinal}, tgbotapi.NewDeleteMessage(f.key.where.tg, id)); err != nil && !isAPIError(err, errDeleteNotFound) {
				var te *tgbotapi.Error
				if !errors.As(err, &te) {
					return err
				}
				// Too old to delete (48 h): say where the reply is.
				const t = "(This part was replaced by the reply above.)"
				if err := b.editTextAt(f.ctx, f.key.where.tg, id, t, t, nil, prioFinal); err != nil && !isAPIError(err, errEditNotFound) {
					return err
				}
			}
		}
		f.st.MsgIDs = f.st.MsgIDs[:len(parts)]
		f.shown = f.shown[:min(len(f.shown), len(parts))]
		if err := f.save(); err != nil {
			return err
		}
	}
	return nil
}

func (f *follower) setShown(i int, html string) {
	for len(f.shown) <= i {
		f.shown = append(f.shown, "")
	}
	f.shown[i] = html
}

func (f *follower) stream() error {
	text := f.reply
	if f.wait != "" {
		text = strings.TrimSpace(text + "\n\n" + f.wait)
	}
	if strings.TrimSpace(text) == "" {
		return nil
	}
	return f.show(text, false)
}

func msgID(m *chats.Message) string {
	if m == nil {
		return ""
	}
	return m.ID
}

// land puts a turn's final text into its messages, exactly once: a
// replayed turn.finished whose text landed already does nothing, and one
// that had not landed edits the messages recorded for the turn. Each of
// the turn's Telegram messages is then mapped to msg, the Mirror message
// it shows (for /pin as a reply), in the same write.
func (f *follower) land(turn, text, msg string) error {
	f.adopt(turn)
	f.running, f.dirty = false, false
	if !f.st.Landed {
		if err := f.show(text, true); err != nil {
			if f.ctx.Err() != nil {
				return err // shutting down: the replay after restart lands it
			}
			f.b.log.Warn("telegram: final text not delivered", "chat", f.key.chat, "tg", f.key.where.tg, "thread", f.key.where.thread, "err", err)
		}
		f.st.Landed = true
	}
	if f.b.afterLand != nil {
		defer f.b.afterLand()
	}
	if msg == "" {
		return f.save()
	}
	v, _ := json.Marshal(sentRecord{Chat: f.key.chat, Msg: msg, Reply: true})
	ids := append([]int(nil), f.st.MsgIDs...)
	return f.saveWith(func(bk stateBucket) error {
		for _, id := range ids {
			if id == 0 {
				continue
			}
			if err := bk.Put(tgKey("m", f.key.where.tg, id), v); err != nil {
				return err
			}
		}
		return nil
	})
}
