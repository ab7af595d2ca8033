package telegram

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

// The button verbs: what a press of an inline button asks for. Each is the
// first byte of the button's callback_data, then ":" and its arguments.
// They are stored in Telegram's copies of the messages, so a verb once
// sent keeps its meaning in later versions.
const (
	verbAllow    = "y" // allow approval ID
	verbDeny     = "n" // deny approval ID
	verbRepeat   = "r" // repeat recovery ID
	verbSkip     = "s" // skip recovery ID
	verbSwitch   = "c" // make chat ID the Telegram chat's current one
	verbDelete   = "d" // delete pending message Msg of Chat
	verbRedirect = "x" // make pending message Msg of Chat a redirect
	verbMore     = "m" // send the next page of /chats, after list cursor ID
	verbForChat  = "a" // allow approval ID, and its tool for every call of the chat
)

// maxCallbackData is Telegram's limit on a button's callback_data, in bytes
// (https://core.telegram.org/bots/api#inlinekeyboardbutton): a longer one
// makes the whole sendMessage fail.
const maxCallbackData = 64

// errButton is why button data could not be written or read.
var errButton = errors.New("telegram: button data")

// press is what one button says: its verb and its arguments. ID is the
// approval, recovery or chat a one-argument verb names; Chat and Msg are
// the chat and pending message of delete and redirect.
type press struct {
	Verb      string
	ID        string
	Chat, Msg string
}

// pairVerb reports whether verb takes a chat and a message rather than one id.
func pairVerb(verb string) bool { return verb == verbDelete || verb == verbRedirect }

func knownVerb(verb string) bool {
	switch verb {
	case verbAllow, verbDeny, verbRepeat, verbSkip, verbSwitch, verbDelete, verbRedirect, verbMore, verbForChat:
		return true
	}
	return false
}

// encode writes p as callback_data. It refuses what decode could not read
// back as p (an unknown verb, a missing or empty argument, a chat id with
// ":", invalid UTF-8) and anything past Telegram's 64 bytes, so a button
// is never sent that Telegram would refuse or that would answer as another.
func (p press) encode() (string, error) {
	if !knownVerb(p.Verb) {
		return "", fmt.Errorf("%w: unknown verb %q", errButton, p.Verb)
	}
	var data string
	if pairVerb(p.Verb) {
		if p.ID != "" || p.Chat == "" || p.Msg == "" || strings.Contains(p.Chat, ":") {
			return "", fmt.Errorf("%w: %s needs a chat without \":\" and a message", errButton, p.Verb)
		}
		data = p.Verb + ":" + p.Chat + ":" + p.Msg
	} else {
		if p.ID == "" || p.Chat != "" || p.Msg != "" {
			return "", fmt.Errorf("%w: %s needs one id", errButton, p.Verb)
		}
		data = p.Verb + ":" + p.ID
	}
	if len(data) > maxCallbackData {
		return "", fmt.Errorf("%w: %d bytes, Telegram takes at most %d", errButton, len(data), maxCallbackData)
	}
	if !utf8.ValidString(data) {
		return "", fmt.Errorf("%w: not UTF-8", errButton)
	}
	return data, nil
}

// decodePress reads a button's callback_data. It refuses data without a
// known verb and ":", over 64 bytes, or a delete or redirect without both
// its chat and its message. A one-id verb takes any id, even an empty one:
// whether it names a waiting approval, recovery or chat is for chats to
// say, so an old button gets the same answer as a stale one.
func decodePress(data string) (press, error) {
	if len(data) > maxCallbackData {
		return press{}, fmt.Errorf("%w: %d bytes, over Telegram's %d", errButton, len(data), maxCallbackData)
	}
	verb, arg, ok := strings.Cut(data, ":")
	if !ok || !knownVerb(verb) {
		return press{}, fmt.Errorf("%w: no known verb in %q", errButton, data)
	}
	if !pairVerb(verb) {
		return press{Verb: verb, ID: arg}, nil
	}
	chat, msg, _ := strings.Cut(arg, ":")
	if chat == "" || msg == "" {
		return press{}, fmt.Errorf("%w: %s without its chat and message", errButton, verb)
	}
	return press{Verb: verb, Chat: chat, Msg: msg}, nil
}

// choice is one button: its label and what a press of it says.
type choice struct {
	label string
	press press
}

// keyboard writes rows of choices as an inline keyboard. It fails as a
// whole when one button cannot be written, so a message never goes out
// with a button missing or one Telegram would refuse.
func keyboard(rows ...[]choice) (tgbotapi.InlineKeyboardMarkup, error) {
	out := make([][]tgbotapi.InlineKeyboardButton, 0, len(rows))
	for _, r := range rows {
		row := make([]tgbotapi.InlineKeyboardButton, 0, len(r))
		for _, c := range r {
			data, err := c.press.encode()
			if err != nil {
				return tgbotapi.InlineKeyboardMarkup{}, err
			}
			row = append(row, tgbotapi.NewInlineKeyboardButtonData(c.label, data))
		}
		out = append(out, row)
	}
	return tgbotapi.NewInlineKeyboardMarkup(out...), nil
}
