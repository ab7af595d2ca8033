package telegram

import (
	"fmt"
	"time"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/gateway/limit"
)

// sendLimit is limits.messages_per_minute per Telegram user, the rate the
// WebSocket keeps per access token; nil when the config sets none.
func sendLimit(cfg *config.Config) *limit.Keyed[int64] {
	n := cfg.Limits.MessagesPerMinute
	if n <= 0 {
		return nil
	}
	return limit.New[int64](n, n, 1<<16)
}

// admitSend spends one message of user's rate, or tells the chat in plain
// text when the next may go and reports false (the update is then done:
// nothing is stored, nothing is retried).
func (b *Bot) admitSend(tg, user int64, replyTo int) bool {
	if b.sends == nil {
		return true
	}
	retry, ok := b.sends.Take(user)
	if !ok {
		secs := int((retry + time.Second - 1) / time.Second)
		b.notify(tg, fmt.Sprintf("Not sent: too many messages (at most %d a minute). Send it again in %d s.", b.opt.Config.Limits.MessagesPerMinute, secs), nil, replyTo)
	}
	return ok
}
