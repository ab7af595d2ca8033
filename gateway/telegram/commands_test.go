package telegram

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
)

// TestEveryChatCommandInTelegram: each command of the chats table has a
// line of the help, and sent in Telegram it is run by the bot (its own
// way, or handed to the chat's Command as typed), never passed to the
// assistant as a message.
func TestEveryChatCommandInTelegram(t *testing.T) {
	seam := &cmdSeam{}
	st := newStackWith(t, stackOpts{delay: time.Millisecond, prep: seam.install})
	st.fake.pushText(111, 111, "hi")
	st.waitReply(t, 111, "You said")
	lines := strings.Split(helpText, "\n")
	// What the commands Telegram runs its own way answer; every other
	// command reaches Command as typed.
	own := map[string]string{
		"/new":   "New chat:",
		"/stop":  "Nothing is running",
		"/pin":   "Send /pin as a reply",
		"/unpin": "Send /unpin as a reply",
	}
	for _, cmd := range chats.Commands() {
		t.Run(cmd.Name, func(t *testing.T) {
			if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, cmd.Name+" ") }) {
				t.Errorf("the help has no line for %s:\n%s", cmd.Name, helpText)
			}
			before, texts := len(seam.got()), len(st.fake.texts(111))
			st.fake.pushText(111, 111, cmd.Name)
			if want, ok := own[cmd.Name]; ok {
				st.fake.waitFor(want, func() bool { return count(st.fake.textsLocked(111)[texts:], want) > 0 })
				return
			}
			st.fake.waitFor(cmd.Name+" handed to Command", func() bool { return slices.Contains(seam.got()[before:], cmd.Name) })
			want := "cmd: " + cmd.Name
			if cmd.Name == "/changes" { // the seam lets it through to the real Command
				want = "No file tools are configured"
			}
			st.fake.waitFor(want, func() bool { return count(st.fake.textsLocked(111)[texts:], want) > 0 })
		})
	}
	if got := st.fake.texts(111); count(got, "You said /") != 0 {
		t.Fatalf("a command reached the assistant as a message: %q", got)
	}
}
