package telegram

import (
	"testing"
	"time"
)

// TestStopSaysWhatItHeld: /stop with a message queued behind the running
// turn says the message is held (it does not start on its own), and
// /continue starts it.
func TestStopSaysWhatItHeld(t *testing.T) {
	st := newStackWith(t, stackOpts{delay: time.Millisecond})
	st.fake.pushText(111, 111, `/tool shell {"command":"echo held"}`)
	st.fake.waitFor("approval", func() bool { return st.fake.hasTextLocked(111, "wants to run shell") })
	st.fake.pushText(111, 111, "and then this")
	chat := st.bot.currentChat(111)
	st.fake.waitFor("queued", func() bool {
		st.fake.mu.Unlock()
		defer st.fake.mu.Lock()
		c, err := st.bot.svc.Get(st.bot.ctx, chat)
		return err == nil && c.Pending == 1
	})
	st.fake.pushText(111, 111, "/stop")
	st.fake.waitFor("held", func() bool {
		return st.fake.hasTextLocked(111, "1 queued message is held: send a message or /continue")
	})
	st.fake.pushText(111, 111, "/continue")
	st.fake.waitFor("started", func() bool { return st.fake.hasTextLocked(111, "1 queued message started.") })
}
