package gateway

import (
	"testing"

	"github.com/mirror-gateway/mirror/config"
)

// TestOneAllowanceAcrossTransports: limits.messages_per_minute is one
// allowance per person whichever way they write: what alice spent in the
// browser is spent on Telegram too.
func TestOneAllowanceAcrossTransports(t *testing.T) {
	f := newFolksWith(t, edgeOpts{people: true, telegram: true,
		mutate: func(c *config.Config) { c.Limits.MessagesPerMinute = 2 }})
	// newFolks sent one message of alice's from her browser; one is left.
	if _, err := f.people.Link("alice", 7001); err != nil {
		t.Fatal(err)
	}
	f.update(`{"update_id":40,"message":{"message_id":1,"from":{"id":7001,"is_bot":false,"first_name":"A"},"chat":{"id":7001,"type":"private"},"date":1700000000,"text":"the last one"}}`)
	f.update(`{"update_id":41,"message":{"message_id":2,"from":{"id":7001,"is_bot":false,"first_name":"A"},"chat":{"id":7001,"type":"private"},"date":1700000000,"text":"one too many"}}`)
	waitSent(t, f.sent, "Not sent: too many messages (at most 2 a minute)")
}
