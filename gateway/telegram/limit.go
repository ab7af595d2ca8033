package telegram

import (
	"fmt"
	"time"

	"github.com/mirror-gateway/mirror/chats"
)

// rateKey is whose allowance a message spends: its person's, named as the
// browser's limit names them ("person:ID"), so a person with two linked
// Telegram accounts has one allowance; a user with no person (a gateway
// without people) spends their own.
func rateKey(sc chats.Scope, user int64) string {
	if id := sc.Person().ID; id != "" {
		return "person:" + id
	}
	return fmt.Sprintf("tg:%d", user)
}

// admitSend spends one message of the person's rate, or tells the place in
// plain text when the next may go and reports false (the update is then
// done: nothing is stored, nothing is retried).
func (b *Bot) admitSend(where place, sc chats.Scope, user int64, replyTo int) bool {
	if b.sends == nil {
		return true
	}
	retry, ok := b.sends.Take(rateKey(sc, user))
	if !ok {
		secs := int((retry + time.Second - 1) / time.Second)
		b.notify(where, fmt.Sprintf("Not sent: too many messages (at most %d a minute). Send it again in %d s.", b.opt.Config.Limits.MessagesPerMinute, secs), nil, replyTo)
	}
	return ok
}
