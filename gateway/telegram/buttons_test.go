package telegram

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mirror-gateway/mirror/runtime/ids"
)

// TestButtonData writes each verb's button and reads it back, with the
// forms Mirror's real ids take, and refuses what Telegram or the decoder
// could not take.
func TestButtonData(t *testing.T) {
	chat := ids.NewChat()
	long := chat + strings.Repeat("0", maxCallbackData)
	for _, tc := range []struct {
		name string
		p    press
		data string // "" when encode must refuse
	}{
		{"allow", press{Verb: verbAllow, ID: "a_c_0123456789abcdef_0123456789abcdef"}, "y:a_c_0123456789abcdef_0123456789abcdef"},
		{"deny", press{Verb: verbDeny, ID: "a_x_1"}, "n:a_x_1"},
		{"repeat", press{Verb: verbRepeat, ID: "r_x_1"}, "r:r_x_1"},
		{"skip", press{Verb: verbSkip, ID: "r_x_1"}, "s:r_x_1"},
		{"switch", press{Verb: verbSwitch, ID: "c_0123456789abcdef"}, "c:c_0123456789abcdef"},
		{"delete", press{Verb: verbDelete, Chat: "c_1", Msg: "m12"}, "d:c_1:m12"},
		{"redirect", press{Verb: verbRedirect, Chat: "c_1", Msg: "m12"}, "x:c_1:m12"},
		{"exactly 64 bytes", press{Verb: verbSwitch, ID: strings.Repeat("z", 62)}, "c:" + strings.Repeat("z", 62)},
		{"65 bytes", press{Verb: verbSwitch, ID: strings.Repeat("z", 63)}, ""},
		{"a long chat id", press{Verb: verbDelete, Chat: long, Msg: "m1"}, ""},
		{"unknown verb", press{Verb: "q", ID: "1"}, ""},
		{"no verb", press{ID: "1"}, ""},
		{"empty id", press{Verb: verbAllow}, ""},
		{"delete without message", press{Verb: verbDelete, Chat: "c_1"}, ""},
		{"delete without chat", press{Verb: verbDelete, Msg: "m1"}, ""},
		{"a chat id with a colon", press{Verb: verbRedirect, Chat: "c:1", Msg: "m1"}, ""},
		{"one-id verb with a chat", press{Verb: verbAllow, ID: "a", Chat: "c"}, ""},
		{"pair verb with an id", press{Verb: verbDelete, ID: "a", Chat: "c", Msg: "m"}, ""},
		{"not UTF-8", press{Verb: verbSwitch, ID: "\xff"}, ""},
	} {
		data, err := tc.p.encode()
		if tc.data == "" {
			if err == nil || !errors.Is(err, errButton) {
				t.Errorf("%s: encode = %q, %v; want it refused", tc.name, data, err)
			}
			continue
		}
		if err != nil || data != tc.data {
			t.Errorf("%s: encode = %q, %v; want %q", tc.name, data, err, tc.data)
			continue
		}
		if back, err := decodePress(data); err != nil || back != tc.p {
			t.Errorf("%s: decode %q = %+v, %v; want %+v", tc.name, data, back, err, tc.p)
		}
	}
}

// TestDecodePress reads the data presses may carry, old and forged.
func TestDecodePress(t *testing.T) {
	for _, tc := range []struct {
		data string
		want press
		ok   bool
	}{
		{"y:a_1", press{Verb: verbAllow, ID: "a_1"}, true},
		{"s:", press{Verb: verbSkip}, true}, // an id chats does not know: answered as stale
		{"n:bogus", press{Verb: verbDeny, ID: "bogus"}, true},
		{"c:a:b", press{Verb: verbSwitch, ID: "a:b"}, true},
		{"d:c_1:m1:extra", press{Verb: verbDelete, Chat: "c_1", Msg: "m1:extra"}, true},
		{"x:c_1:m1", press{Verb: verbRedirect, Chat: "c_1", Msg: "m1"}, true},
		{"", press{}, false},
		{"y", press{}, false},
		{"zz:1", press{}, false},
		{"Y:a_1", press{}, false},
		{"x:", press{}, false},
		{"x:c_1", press{}, false},
		{"x:c_1:", press{}, false},
		{"d::m1", press{}, false},
		{"c:" + strings.Repeat("z", 63), press{}, false}, // past 64 bytes
	} {
		got, err := decodePress(tc.data)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("decodePress(%q) = %+v, %v; want %+v, ok %v", tc.data, got, err, tc.want, tc.ok)
		}
	}
}

// TestKeyboard: a keyboard with one button that cannot be written is
// refused whole; otherwise each button carries its press.
func TestKeyboard(t *testing.T) {
	kb, err := keyboard([]choice{{"Allow", press{Verb: verbAllow, ID: "a_1"}}, {"Deny", press{Verb: verbDeny, ID: "a_1"}}},
		[]choice{{"Chat", press{Verb: verbSwitch, ID: "c_1"}}})
	if err != nil || len(kb.InlineKeyboard) != 2 || len(kb.InlineKeyboard[0]) != 2 ||
		*kb.InlineKeyboard[0][1].CallbackData != "n:a_1" || *kb.InlineKeyboard[1][0].CallbackData != "c:c_1" {
		t.Fatalf("keyboard = %+v, %v", kb, err)
	}
	if _, err := keyboard([]choice{{"Allow", press{Verb: verbAllow, ID: strings.Repeat("a", 70)}}}); err == nil {
		t.Fatal("a keyboard with a button past 64 bytes was written")
	}
}

// FuzzDecodePress: any data decodes or is refused without panicking; what
// decodes has a known verb, fits Telegram's limit and, when its id is not
// empty, writes back to the same bytes.
func FuzzDecodePress(f *testing.F) {
	for _, s := range []string{"y:a_c_0123456789abcdef_0123456789abcdef", "d:c_1:m1", "x:", "s:", "c:a:b", "", ":", "zz:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		p, err := decodePress(data)
		if err != nil {
			if !errors.Is(err, errButton) {
				t.Fatalf("decodePress(%q): error %v is not errButton", data, err)
			}
			return
		}
		if !knownVerb(p.Verb) || len(data) > maxCallbackData {
			t.Fatalf("decodePress(%q) = %+v accepted", data, p)
		}
		if p.ID == "" && !pairVerb(p.Verb) || !utf8.ValidString(data) {
			return // a stale or forged button, answered as such; never written
		}
		back, err := p.encode()
		if err != nil || back != data {
			t.Fatalf("decodePress(%q) = %+v, written back as %q, %v", data, p, back, err)
		}
	})
}

// TestAskWithAnIDTooLongForButtons: a question whose buttons would pass
// Telegram's 64 bytes (which refuses the whole message, every retry) is
// asked without them, pointing to the browser; one that fits has them.
func TestAskWithAnIDTooLongForButtons(t *testing.T) {
	st := newStackWith(t, stackOpts{delay: time.Millisecond})
	// A follower of its own, with no goroutine: nothing else touches it.
	f := &follower{b: st.bot, key: followKey{at(111), ids.NewChat()}, signal: make(chan struct{}, 1), ctx: st.bot.ctx}
	long := "a_" + strings.Repeat("c", 60) + "_0123456789abcdef"
	if err := f.ask(long, "Run ls?", verbAllow, verbDeny, "Allow", "Deny"); err != nil {
		t.Fatalf("ask with a long id: %v", err)
	}
	if err := f.ask("a_c_1_0123456789abcdef", "Run pwd?", verbAllow, verbDeny, "Allow", "Deny"); err != nil {
		t.Fatal(err)
	}
	st.fake.mu.Lock()
	defer st.fake.mu.Unlock()
	noButtons, buttons := st.fake.msgWithLocked(111, "Run ls?"), st.fake.msgWithLocked(111, "Run pwd?")
	if noButtons == nil || !strings.Contains(noButtons.Text, "Answer it in the browser") || strings.Contains(noButtons.Markup, "callback_data") {
		t.Fatalf("the long question went as %+v", noButtons)
	}
	if buttons == nil || !strings.Contains(buttons.Markup, `"y:a_c_1_0123456789abcdef"`) {
		t.Fatalf("the short question went as %+v", buttons)
	}
}
