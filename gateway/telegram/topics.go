package telegram

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/mirror-gateway/mirror/chats"
)

// Forum topics. In a forum supergroup each topic is a conversation of its
// own, named by the message_thread_id of its messages; the bot gives each
// its own Mirror chat, so topics run in parallel like chats do. The
// library (Bot API 5.5) predates topics: the fields are read from the raw
// update (topicFields) and the sends that must land in a topic are made by
// hand with message_thread_id (send.go, outbox.go).
//
// The General topic is the forum's chat itself: its messages carry no
// message_thread_id, and a send into it must leave message_thread_id out,
// because Telegram refuses message_thread_id=1 with "message thread not
// found" (tdlib/telegram-bot-api#798). So it is thread 0, like a group
// without topics.
//
// In a group without topics, message_thread_id marks a reply thread, not
// a topic (is_topic_message is false): the whole group stays one place.

// generalTopic is the thread id Telegram gives the General topic where it
// gives one at all (service messages about it).
const generalTopic = 1

// place is where the bot talks: a Telegram chat and, in a forum
// supergroup, one of its topics (thread; 0 for any chat without topics and
// for the General topic). Each place has its own current Mirror chat and
// its own followers; pacing stays per Telegram chat, since Telegram's
// flood limits count the whole chat.
type place struct {
	tg     int64
	thread int
}

// at is the place of a Telegram chat without topics.
func at(tg int64) place { return place{tg: tg} }

// String is the place as the bucket's keys name it: "<tg>" for thread 0,
// the form the keys had before topics, so existing records keep their
// meaning, and "<tg>:<thread>" in a topic. parsePlace reads it back.
func (p place) String() string {
	if p.thread == 0 {
		return strconv.FormatInt(p.tg, 10)
	}
	return strconv.FormatInt(p.tg, 10) + ":" + strconv.Itoa(p.thread)
}

// errPlace is why a key's place part could not be read.
var errPlace = errors.New("telegram: not a place")

// parsePlace reads what String wrote, and only that: parsePlace(s) is
// p with p.String() == s, so a key has one spelling.
func parsePlace(s string) (place, error) {
	tgs, ths, topic := strings.Cut(s, ":")
	tg, err := strconv.ParseInt(tgs, 10, 64)
	if err != nil || strconv.FormatInt(tg, 10) != tgs {
		return place{}, fmt.Errorf("%w: %q", errPlace, s)
	}
	if !topic {
		return place{tg: tg}, nil
	}
	th, err := strconv.Atoi(ths)
	if err != nil || th <= 0 || strconv.Itoa(th) != ths {
		return place{}, fmt.Errorf("%w: %q", errPlace, s)
	}
	return place{tg: tg, thread: th}, nil
}

// topicName is a forum_topic_created or forum_topic_edited: the name, when
// it says one (an edit may change only the icon).
type topicName struct {
	Name *string `json:"name"`
}

// topicFields are the forum fields of a message that the library's
// Message lacks.
type topicFields struct {
	Thread  int  `json:"message_thread_id"`
	IsTopic bool `json:"is_topic_message"`
	Chat    struct {
		IsForum bool `json:"is_forum"`
	} `json:"chat"`
	Created *topicName `json:"forum_topic_created"`
	Edited  *topicName `json:"forum_topic_edited"`
	// Reply is what the message replies to: in a topic, a message that
	// replies to nothing else replies to the topic's creation, so its
	// name comes with every message of the topic.
	Reply *struct {
		Created *topicName `json:"forum_topic_created"`
	} `json:"reply_to_message"`
}

// thread is the topic the message belongs to, 0 outside topics (a chat
// without them, the General topic, a reply thread of a plain group).
func (t topicFields) thread() int {
	if !t.Chat.IsForum || t.Thread <= generalTopic {
		return 0
	}
	if !t.IsTopic && t.Created == nil && t.Edited == nil {
		return 0
	}
	return t.Thread
}

// name is the topic's name the message carries, if any.
func (t topicFields) name() string {
	for _, n := range []*topicName{t.Edited, t.Created} {
		if n != nil && n.Name != nil {
			return *n.Name
		}
	}
	if t.Reply != nil && t.Reply.Created != nil && t.Reply.Created.Name != nil {
		return *t.Reply.Created.Name
	}
	return ""
}

// updateTopics are the forum fields of the messages an update may carry
// that the bot places (a button press needs none: its answer is a popup).
type updateTopics struct {
	Message topicFields `json:"message"`
	Edited  topicFields `json:"edited_message"`
}

// readTopics reads an update's forum fields from its raw JSON; a field of
// the wrong type reads as absent (the library decoded the rest already).
func readTopics(raw []byte) updateTopics {
	var u updateTopics
	if json.Unmarshal(raw, &u) != nil {
		// One bad field must not lose the others: read each part alone.
		var parts struct {
			Message json.RawMessage `json:"message"`
			Edited  json.RawMessage `json:"edited_message"`
		}
		_ = json.Unmarshal(raw, &parts)
		_ = json.Unmarshal(parts.Message, &u.Message)
		_ = json.Unmarshal(parts.Edited, &u.Edited)
	}
	return u
}

// topicTitle is the stored name of a topic (key "tn/<place>"), kept from
// its creation or last rename until its chat exists, which then takes it
// as its title.
func (b *Bot) topicTitle(p place) string {
	var name string
	_ = b.read(func(bk stateBucket) error { name = string(bk.Get(tgKey("tn", p))); return nil })
	return name
}

// learnTopic keeps what a message of user says about its topic. A
// creation or a rename by someone with access names the topic's chat: it
// renames the chat when there is one (the same rename as the browser's),
// else the name waits for the chat the topic's first message makes; one
// by anyone else changes nothing of Mirror's (a group may hold strangers).
// Any other message of a topic carries the topic's first name (in its
// reply_to_message), kept when none is known yet: a topic created before
// the bot joined is named too.
func (b *Bot) learnTopic(p place, t topicFields, user int64) error {
	if p.thread == 0 {
		return nil
	}
	if (t.Created != nil || t.Edited != nil) && !b.allowed(user) {
		return nil
	}
	name := strings.TrimSpace(t.name())
	if name == "" {
		return nil // an edit of the icon only, or nothing about the topic
	}
	if r := []rune(name); len(r) > chats.MaxTitleRunes {
		name = string(r[:chats.MaxTitleRunes]) // Telegram allows 128; a title fits anyway
	}
	if t.Created == nil && t.Edited == nil {
		if b.topicTitle(p) != "" {
			return nil
		}
		return b.write(func(bk stateBucket) error { return bk.Put(tgKey("tn", p), []byte(name)) })
	}
	if err := b.write(func(bk stateBucket) error { return bk.Put(tgKey("tn", p), []byte(name)) }); err != nil {
		return err
	}
	chat := b.chatAt(p)
	if chat == "" {
		return nil
	}
	_, err := b.svc.Rename(b.ctx, chat, name)
	switch {
	case errors.Is(err, chats.ErrNotFound):
		return nil // the chat was deleted: the next message makes a new one
	case errors.Is(err, chats.ErrBadInput):
		b.log.Info("telegram: a topic's name does not fit a chat title; the chat keeps its title", "tg", p.tg, "thread", p.thread, "err", err)
		return nil
	}
	return err
}

// sharedNote tells a group (or a topic) that its chat is shared: said when
// its chat begins and with /help there.
func sharedNote(where place) string {
	what := "This group has one chat with the assistant"
	if where.thread != 0 {
		what = "This topic is its own chat with the assistant (each topic is one, answered in parallel)"
	}
	return what + ": every allowed member's message addressed to me goes to it, and my replies are visible to everyone here."
}
