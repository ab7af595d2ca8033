package ids

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestNumbered(t *testing.T) {
	for _, tc := range []struct {
		id    string
		parse func(string) (uint64, bool)
		n     uint64
		ok    bool
	}{
		{"m1", ParseMessage, 1, true},
		{"m0", ParseMessage, 0, true},
		{"m18446744073709551615", ParseMessage, math.MaxUint64, true},
		{"t42", ParseTurn, 42, true},
		{"m18446744073709551616", ParseMessage, 0, false}, // overflows
		{"m", ParseMessage, 0, false},
		{"", ParseMessage, 0, false},
		{"m07", ParseMessage, 0, false}, // not as Message writes it
		{"m+7", ParseMessage, 0, false},
		{"m-7", ParseMessage, 0, false},
		{"m7 ", ParseMessage, 0, false},
		{"M7", ParseMessage, 0, false},
		{"t7", ParseMessage, 0, false}, // a turn is not a message
		{"m7", ParseTurn, 0, false},
		{"t١", ParseTurn, 0, false}, // a non-ASCII digit
		{"7", ParseTurn, 0, false},
		{"m12", CitedMessage, 12, true},
		{"12", CitedMessage, 12, true}, // as the assistant may cite it
		{"t12", CitedMessage, 0, false},
		{"m012", CitedMessage, 0, false},
		{"t3", CitedTurn, 3, true},
		{"3", CitedTurn, 3, true}, // /rewind 3
		{"m3", CitedTurn, 0, false},
		{"", CitedTurn, 0, false},
	} {
		n, ok := tc.parse(tc.id)
		if n != tc.n || ok != tc.ok {
			t.Errorf("parse %q = %d, %v; want %d, %v", tc.id, n, ok, tc.n, tc.ok)
		}
	}
	for _, n := range []uint64{0, 1, 9, 10, 12345, math.MaxUint64} {
		if got, ok := ParseMessage(Message(n)); !ok || got != n {
			t.Errorf("ParseMessage(Message(%d)) = %d, %v", n, got, ok)
		}
		if got, ok := ParseTurn(Turn(n)); !ok || got != n {
			t.Errorf("ParseTurn(Turn(%d)) = %d, %v", n, got, ok)
		}
	}
	if Message(5) != "m5" || Turn(5) != "t5" {
		t.Errorf("formats changed: %s %s", Message(5), Turn(5))
	}
}

func TestOwned(t *testing.T) {
	chat := NewChat()
	if !ParseChat(chat) || len(chat) != 18 {
		t.Fatalf("NewChat() = %q, not parsed back", chat)
	}
	for _, tc := range []struct {
		name, id, chat string
		parse          func(string) (string, bool)
	}{
		{"approval", NewApproval(chat), chat, ParseApproval},
		{"recovery", NewRecovery(chat), chat, ParseRecovery},
		{"approval of an odd chat id", NewApproval("x_y__z"), "x_y__z", ParseApproval},
	} {
		if got, ok := tc.parse(tc.id); !ok || got != tc.chat {
			t.Errorf("%s: parse %q = %q, %v; want %q", tc.name, tc.id, got, ok, tc.chat)
		}
	}
	if a, b := NewApproval(chat), NewApproval(chat); a == b {
		t.Errorf("two approvals of one chat share the id %s", a)
	}
	if !strings.HasPrefix(NewRecovery(chat), RecoveryPrefix(chat)) {
		t.Errorf("RecoveryPrefix(%s) = %q is not the start of its recovery ids", chat, RecoveryPrefix(chat))
	}
	nonce := "0123456789abcdef"
	for _, tc := range []struct {
		id    string
		parse func(string) (string, bool)
	}{
		{"a_" + chat + "_", ParseApproval},                 // no nonce
		{"a__" + nonce, ParseApproval},                     // no chat
		{"a_" + nonce, ParseApproval},                      // no separator
		{"a_" + chat + "_0123456789ABCDEF", ParseApproval}, // upper case
		{"a_" + chat + "_0123456789abcde", ParseApproval},  // short
		{"a_" + chat + "_0123456789abcdef0", ParseApproval},
		{"r_" + chat + "_" + nonce, ParseApproval}, // a recovery is not an approval
		{"a_" + chat + "_" + nonce, ParseRecovery},
		{"", ParseRecovery},
	} {
		if got, ok := tc.parse(tc.id); ok {
			t.Errorf("parse %q = %q, accepted", tc.id, got)
		}
	}
	for _, id := range []string{"", "c_", "c_" + nonce + "0", "c_0123456789ABCDEF", "C_" + nonce, "s_" + nonce} {
		if ParseChat(id) {
			t.Errorf("ParseChat(%q) accepted", id)
		}
	}
	if s := NewSession(); !ParseSession(s) || ParseChat(s) {
		t.Errorf("NewSession() = %q: ParseSession %v, ParseChat %v", s, ParseSession(s), ParseChat(s))
	}
}

// An image handle is img_ and the first 16 hex digits of the sha256; the
// parser takes back exactly that.
func TestImage(t *testing.T) {
	sum := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	h := Image(sum)
	if p, ok := ParseImage(h); h != "img_0123456789abcdef" || !ok || p != sum[:16] {
		t.Errorf("Image = %q, parsed %q %v", h, p, ok)
	}
	for _, bad := range []string{"img_0123456789abcde", "img_0123456789abcdefa", "img_0123456789abcdeg", "img_0123456789ABCDEF", "out_0123456789abcdef", "img_"} {
		if _, ok := ParseImage(bad); ok {
			t.Errorf("ParseImage(%q) accepted", bad)
		}
	}
}

func TestOutputAndCall(t *testing.T) {
	h := Output("a long tool output")
	if !ParseOutput(h) || len(h) != 4+16 || Output("a long tool output") != h || Output("another") == h {
		t.Errorf("Output: %q, parsed %v", h, ParseOutput(h))
	}
	for _, bad := range []string{"", "out_", "out_0123", h + "0", strings.ToUpper(h), "call_0123456789abcdef"} {
		if ParseOutput(bad) {
			t.Errorf("ParseOutput(%q) accepted", bad)
		}
	}
	for _, tc := range []struct {
		id, suffix string
		ok         bool
	}{
		{Call("3"), "3", true},
		{"call_abc-DEF_9", "abc-DEF_9", true}, // OpenAI's own form
		{"call_", "", false},
		{"toolu_01", "", false},
		{"call_a b", "", false},
		{"call_ü", "", false},
	} {
		if s, ok := ParseCall(tc.id); s != tc.suffix || ok != tc.ok {
			t.Errorf("ParseCall(%q) = %q, %v; want %q, %v", tc.id, s, ok, tc.suffix, tc.ok)
		}
	}
}

// FuzzParse feeds any text to every parser: none panics, and what one
// accepts is exactly what its writer writes for the value it read.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"m1", "t0", "m01", "c_0123456789abcdef", "a_c_0123456789abcdef_0123456789abcdef",
		"r_x_0123456789abcdef", "s_0123456789abcdef", "out_0123456789abcdef", "img_0123456789abcdef", "img_0123456789ABCDEF", "call_x", "", "_", "a__"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, ok := ParseMessage(s); ok && Message(n) != s {
			t.Errorf("ParseMessage(%q) = %d, written %q", s, n, Message(n))
		}
		if n, ok := ParseTurn(s); ok && Turn(n) != s {
			t.Errorf("ParseTurn(%q) = %d, written %q", s, n, Turn(n))
		}
		if chat, ok := ParseApproval(s); ok && (chat == "" || owned(prefixApproval, chat, s[len(s)-2*nonceBytes:]) != s) {
			t.Errorf("ParseApproval(%q) = %q", s, chat)
		}
		if chat, ok := ParseRecovery(s); ok && (chat == "" || !strings.HasPrefix(s, RecoveryPrefix(chat))) {
			t.Errorf("ParseRecovery(%q) = %q", s, chat)
		}
		if n, ok := CitedMessage(s); ok && Message(n) != s && strconv.FormatUint(n, 10) != s {
			t.Errorf("CitedMessage(%q) = %d", s, n)
		}
		if n, ok := CitedTurn(s); ok && Turn(n) != s && strconv.FormatUint(n, 10) != s {
			t.Errorf("CitedTurn(%q) = %d", s, n)
		}
		if suffix, ok := ParseCall(s); ok && Call(suffix) != s {
			t.Errorf("ParseCall(%q) = %q", s, suffix)
		}
		if ParseChat(s) && (len(s) != 18 || ParseSession(s)) {
			t.Errorf("ParseChat(%q) accepted a malformed id", s)
		}
		if ParseOutput(s) && len(s) != 20 {
			t.Errorf("ParseOutput(%q) accepted a malformed handle", s)
		}
		if p, ok := ParseImage(s); ok && Image(p) != s {
			t.Errorf("ParseImage(%q) = %q, written %q", s, p, Image(p))
		}
	})
}

// FuzzRoundTrip writes ids of any values and reads them back.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint64(0), "c_0123456789abcdef", "x")
	f.Add(uint64(math.MaxUint64), "a_b_", "call_9")
	f.Fuzz(func(t *testing.T, n uint64, chat, suffix string) {
		if got, ok := ParseMessage(Message(n)); !ok || got != n {
			t.Errorf("message %d read back as %d, %v", n, got, ok)
		}
		if got, ok := ParseTurn(Turn(n)); !ok || got != n {
			t.Errorf("turn %d read back as %d, %v", n, got, ok)
		}
		if chat != "" {
			if got, ok := ParseApproval(NewApproval(chat)); !ok || got != chat {
				t.Errorf("approval of %q read back as %q, %v", chat, got, ok)
			}
			if got, ok := ParseRecovery(NewRecovery(chat)); !ok || got != chat {
				t.Errorf("recovery of %q read back as %q, %v", chat, got, ok)
			}
		}
		if got, ok := ParseCall(Call(suffix)); ok && got != suffix {
			t.Errorf("call %q read back as %q", suffix, got)
		}
	})
}
