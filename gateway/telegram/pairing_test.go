package telegram

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// pairingCodes returns the codes stored in the database (expired or not).
func (st *stack) pairingCodes() []Pairing {
	var out []Pairing
	_ = st.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		for k, v := c.Seek([]byte("p/")); k != nil && strings.HasPrefix(string(k), "p/"); k, v = c.Next() {
			var p Pairing
			_ = json.Unmarshal(v, &p)
			out = append(out, p)
		}
		return nil
	})
	return out
}

func (st *stack) advance(d time.Duration) {
	st.nowMu.Lock()
	st.now = st.now.Add(d)
	st.nowMu.Unlock()
}

// TestPairingReplyOncePerHour: a stranger who writes again and again gets
// one pairing reply per code, that is at most one an hour, also across a
// restart; once the code has expired it is pruned, and the next message
// gets a new code.
func TestPairingReplyOncePerHour(t *testing.T) {
	st := testStack(t, time.Millisecond, nil)
	const stranger = 333
	for _, text := range []string{"hi", "hello?", "anyone?"} {
		st.fake.pushText(stranger, stranger, text)
	}
	st.fake.waitFor("pairing code", func() bool { return st.fake.hasTextLocked(stranger, "pairing code") })
	st.restart(t)
	st.fake.pushText(stranger, stranger, "after the restart")
	// Updates are handled in order: once 111 is answered, the stranger's
	// messages before it were handled, and any reply to them was queued
	// (paced per chat, in order) before the approval's message below.
	st.fake.pushText(111, 111, "barrier")
	st.waitReply(t, 111, "You said: «barrier»")
	codes := st.pairingCodes()
	if len(codes) != 1 {
		t.Fatalf("%d codes stored, want 1: %+v", len(codes), codes)
	}
	// An hour later the code has expired: pruned, and a new code is sent.
	st.advance(PairingTTL + time.Minute)
	st.fake.pushText(stranger, stranger, "an hour later")
	st.fake.waitFor("a second code", func() bool { return count(st.fake.textsLocked(stranger), "pairing code") == 2 })
	now := st.pairingCodes()
	if len(now) != 1 || now[0].Code == codes[0].Code || !st.clock().Before(now[0].ExpiresAt) {
		t.Fatalf("codes after expiry %+v, want only a new one (the old %s pruned)", now, codes[0].Code)
	}
	// Approving it sends "You have access now"; before it, exactly the two
	// codes reached the stranger.
	rec := httptest.NewRecorder()
	st.bot.PairingHandler().ServeHTTP(rec, httptest.NewRequest("POST", "/api/telegram/pairing/"+now[0].Code+"/approve", nil))
	if rec.Code != 200 {
		t.Fatalf("approve: %d %s", rec.Code, rec.Body)
	}
	st.fake.waitFor("access", func() bool { return st.fake.hasTextLocked(stranger, "You have access now") })
	if got := st.fake.texts(stranger); len(got) != 3 || count(got, "pairing code") != 2 {
		t.Fatalf("the stranger got %d messages, want two codes then access: %q", len(got), got)
	}
}

// TestPairingNamesEscaped: a stranger's name full of terminal controls is
// stored and listed escaped, over the HTTP route as well.
func TestPairingNamesEscaped(t *testing.T) {
	st := testStack(t, time.Millisecond, nil)
	st.fake.push("message", fmt.Sprintf(`{"message_id":%d,"from":{"id":444,"is_bot":false,"first_name":"Eve\u001b[2J\u001b]0;owned\u0007","last_name":"\u202eevil\n\u009b31m","username":"eve"},"chat":{"id":444,"type":"private"},"date":1767225600,"text":"hi"}`, nextMsgID()))
	st.fake.waitFor("pairing code", func() bool { return st.fake.hasTextLocked(444, "pairing code") })
	rec := httptest.NewRecorder()
	st.bot.PairingHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/telegram/pairing", nil))
	var body struct{ Pairings []Pairing }
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || len(body.Pairings) != 1 {
		t.Fatalf("list %s: %v", rec.Body, err)
	}
	const want = `Eve\x1b[2J\x1b]0;owned\a \u202eevil\n\u009b31m (@eve)`
	if got := body.Pairings[0].Name; got != want {
		t.Fatalf("name %q, want %q", got, want)
	}
	if stored := st.pairingCodes()[0].Name; stored != want {
		t.Fatalf("stored name %q, want %q", stored, want)
	}
}

func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Ann Lee (@ann)", "Ann Lee (@ann)"},
		{"Zoë 😀 👨‍👩‍👧 محمد", "Zoë 😀 👨‍👩‍👧 محمد"}, // ZWJ and right-to-left text stay
		{"a\x1b[31mb", `a\x1b[31mb`},
		{"line\nbreak\r\t", `line\nbreak\r\t`},
		{"del\x7f c1\u0085\u009b", `del\x7f c1\u0085\u009b`},
		{"bidi\u202eoverride\u2066iso\u2069\u200f", `bidi\u202eoverride\u2066iso\u2069\u200f`},
		{"sep\u2028\u2029", `sep\u2028\u2029`},
		{"bad\xff\xfeutf8", `bad\xff\xfeutf8`},
		{`back\slash \x41`, `back\slash \x41`},
	} {
		got := Printable(tc.in)
		if got != tc.want {
			t.Errorf("Printable(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if again := Printable(got); again != got {
			t.Errorf("Printable is not idempotent on %q: %q", got, again)
		}
	}
}

func FuzzPrintable(f *testing.F) {
	f.Add("a\x1b[2J\u202e\xff")
	f.Fuzz(func(t *testing.T, s string) {
		got := Printable(s)
		for _, r := range got {
			if unsafeRune(r) || r == '\uFFFD' && !strings.ContainsRune(s, '\uFFFD') {
				t.Fatalf("Printable(%q) = %q keeps %U", s, got, r)
			}
		}
		if Printable(got) != got {
			t.Fatalf("not idempotent on %q", s)
		}
	})
}
