package chats

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/view"
	bolt "go.etcd.io/bbolt"
)

// BenchmarkEventJSON encodes one event of each type (the goldens) afresh:
// the cost of Event.JSON, paid once per event however many subscribers
// receive it.
func BenchmarkEventJSON(b *testing.B) {
	evs := goldenEvents()
	size := 0
	for _, ev := range evs {
		size += len(ev.JSON())
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		for _, ev := range evs {
			ev.once, ev.raw = sync.Once{}, nil // encode afresh
			_ = ev.JSON()
		}
	}
}

// BenchmarkRowBytes encodes the golden record's events as rows (text_at
// instead of repeated texts).
func BenchmarkRowBytes(b *testing.B) {
	evs := goldenRowEvents()
	b.ReportAllocs()
	for b.Loop() {
		for _, ev := range evs {
			ev.once, ev.raw = sync.Once{}, nil
			_ = rowBytes(ev)
		}
	}
}

// BenchmarkDecodeRows decodes the golden record's rows (the rows a load, a
// snapshot page or a since replay reads), text_at references included.
func BenchmarkDecodeRows(b *testing.B) {
	db, rows := loadGoldenRows(b)
	size := 0
	for _, r := range rows {
		size += len(r[1])
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	err := db.View(func(tx *bolt.Tx) error {
		rb := tx.Bucket(bucketRecords).Bucket([]byte("c_golden"))
		for b.Loop() {
			for _, r := range rows {
				if _, err := decodeRow(rb, "c_golden", r[0], r[1]); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkTurnEventsJSON encodes a turn's stored and sent events afresh (the
// wire bytes every subscriber shares).
func BenchmarkTurnEventsJSON(b *testing.B) {
	text := "Mirror answers this benchmark with a steady stream of ordinary words. "
	user := &Message{ID: "m12", Role: provider.RoleUser, Text: "question 12: what is <b>144</b>?", Seq: 12, Time: goldenTime, State: MsgPicked, ClientID: "k12", Tokens: 9, Turn: "t13"}
	reply := &Message{ID: "m14", Role: provider.RoleAssistant, Text: text + text + text + text + text, Seq: 14, Time: goldenTime, State: MsgDone, Turn: "t13", Tokens: 80, Model: "default"}
	ci := &runtime.ContextInfo{Used: 1000, Window: 128000, Soft: 100000, Hard: 120000, Request: 3000, Ceiling: 120000, NextCheckpoint: 102000, Line: "Context: 1000 of 128000"}
	ps := []Payload{&MessageAccepted{Message: user}, &MessagePicked{Message: user, Turn: "t13"}, &TurnStarted{Turn: "t13"},
		&ContextReading{Turn: "t13", Model: "default", ContextInfo: ci},
		&RuntimeContext{Turn: "t13", Sections: json.RawMessage(`[{"key":"context","text":"Context: 1000 of 128000"}]`), Tokens: 14},
		&ReplyDelta{Turn: "t13", Offset: 40, Text: text}, &TurnFinished{Message: reply, Turn: "t13", Reply: reply.Text,
			Usage: provider.Usage{InputTokens: 1000, OutputTokens: 80}, Model: "default", Measured: &view.Measurement{Tokens: 1000, Seq: 13}}}
	b.ReportAllocs()
	for b.Loop() {
		for i, p := range ps {
			e := NewEvent("c1", uint64(12+i), goldenTime, p)
			if len(e.JSON()) == 0 {
				b.Fatal("no bytes")
			}
		}
	}
}
