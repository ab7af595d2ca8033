package chats

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats/people"
	"github.com/mirror-gateway/mirror/runtime/ids"
)

// TestChargesRideTheFlush: the tokens a turn used travel in its flush, so
// a node that follows the chat counts the person's day as its owner does
// (a per-day limit holds across the cluster), once however often the
// flush is followed.
func TestChargesRideTheFlush(t *testing.T) {
	log := newMemLog()
	b := &env{t: t, path: filepath.Join(t.TempDir(), "mirror.db"), log: log}
	b.start()
	t.Cleanup(b.stop)
	reg, err := people.Open(b.db, "")
	if err != nil {
		t.Fatal(err)
	}
	chat := ids.NewChat()
	now := time.Unix(1700000000, 0).UTC()
	f := &Flush{Chat: chat, Meta: Chat{ID: chat, Title: "t", State: StateIdle, CreatedAt: now, UpdatedAt: now, Seq: 1},
		Events:  []*Event{NewEvent(chat, 1, now, &ChatCreated{Title: "t"})},
		Charges: []Charge{{Person: "p_alice", Day: "2026-12-03", Tokens: 120}}}
	for range 2 {
		if err := b.svc.Follow(bg, chat, 5, f); err != nil {
			t.Fatal(err)
		}
	}
	if n := reg.Usage("p_alice", "2026-12-03"); n != 120 {
		t.Fatalf("a followed flush's charge counted %d tokens, want 120 once", n)
	}
}

// TestDecodeFlushCharges: a charge names a person, a UTC day and a
// positive count; a purge carries none.
func TestDecodeFlushCharges(t *testing.T) {
	meta := `"meta":{"id":"c_f","seq":1}`
	for _, c := range []struct {
		name, charges string
		purge, ok     bool
	}{
		{"good", `[{"person":"p_1","day":"2026-12-03","tokens":5}]`, false, true},
		{"no person", `[{"person":"","day":"2026-12-03","tokens":5}]`, false, false},
		{"no tokens", `[{"person":"p_1","day":"2026-12-03","tokens":0}]`, false, false},
		{"not a day", `[{"person":"p_1","day":"yesterday","tokens":5}]`, false, false},
		{"unknown field", `[{"person":"p_1","day":"2026-12-03","tokens":5,"x":1}]`, false, false},
		{"purge with a charge", `[{"person":"p_1","day":"2026-12-03","tokens":5}]`, true, false},
	} {
		data := fmt.Sprintf(`{"chat":"c_f",%s,"charges":%s,"purge":%v}`, meta, c.charges, c.purge)
		_, err := DecodeFlush("c_f", []byte(data))
		if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrBadInput) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
