package chats

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats/search"
	"github.com/mirror-gateway/mirror/runtime/provider"
	bolt "go.etcd.io/bbolt"
)

// indexDocByDecodeRow is what the indexer read of a row before indexDoc:
// the row decoded whole, its transcript message when it has text.
func indexDocByDecodeRow(b *bolt.Bucket, chat string, k, v []byte) (search.Doc, bool, error) {
	ev, err := decodeIfTranscript(b, chat, k, v)
	if err != nil || ev == nil {
		return search.Doc{}, false, err
	}
	m, ok := transcriptMessage(ev)
	if !ok || strings.TrimSpace(m.Text) == "" {
		return search.Doc{}, false, nil
	}
	return search.Doc{Message: m.ID, Seq: m.Seq, Role: m.Role, Text: m.Text, Time: m.Time}, true, nil
}

// TestIndexDocMatchesDecodeRow: for every kind of row, the indexer's scan
// finds the document decoding the row whole finds (none, or an error,
// alike), texts stored in another row included.
func TestIndexDocMatchesDecodeRow(t *testing.T) {
	for typ := range payloads {
		if transcriptRow(typ) && typ != EvBoundary && !carrierTypes[typ] {
			t.Errorf("transcript rows of type %s carry no message: indexDoc does not read them", typ)
		}
	}

	at := time.Date(2026, 5, 6, 7, 8, 9, 10, time.UTC)
	msg := func(seq uint64, role, text string, textAt uint64) *Message {
		return &Message{ID: "m" + string(rune('a'+seq)), Seq: seq, Role: role, Text: text, Time: at.Add(time.Duration(seq)), State: MsgDone, textAt: textAt}
	}
	step := msg(5, provider.RoleAssistant, "", 0)
	step.State = MsgStep
	step.ToolCalls = []provider.ToolCall{{ID: "call1", Name: "search"}}
	blank := msg(13, provider.RoleUser, " \n ", 0)
	evs := []Payload{
		1:  &ChatCreated{Title: "Garden"},
		2:  &MessageAccepted{Message: msg(2, provider.RoleUser, "where do the tomatoes go", 0)},
		3:  &MessagePicked{Message: msg(2, provider.RoleUser, "where do the tomatoes go", 2), Turn: "t1"}, // text in row 2
		4:  &TurnStarted{Turn: "t1"},
		5:  &AssistantStep{Message: step, Turn: "t1"},
		6:  &ToolResult{Turn: "t1", Result: &ToolOutcome{CallID: "call1", Name: "search", Content: "tomatoes like sun"}},
		7:  &Continuity{Message: msg(7, provider.RoleUser, "the tool said: tomatoes like sun", 6), Turn: "t1"}, // text in a tool's row
		8:  &TurnFinished{Message: msg(8, provider.RoleAssistant, "By the south wall.", 0), Turn: "t1", Reply: "By the south wall."},
		9:  &TurnFailed{Message: msg(9, provider.RoleAssistant, "half an ans", 0), Turn: "t2", Error: "cut"},
		10: &BoundaryCrossed{Turn: "t3", Reason: "hard", Record: "The handoff record: tomatoes."},
		11: &BoundaryCrossed{Turn: "t4", Reason: "hard"},
		12: &FileSent{Message: msg(12, provider.RoleAssistant, "here is the plan", 0), Turn: "t5"},
		13: &MessagePicked{Message: blank, Turn: "t6"},
		14: &MessagePicked{Turn: "t7"},
		15: &AssistantStep{Message: msg(15, "tool", "a tool's answer", 0), Turn: "t8"},
		16: &MessagePicked{Message: msg(16, provider.RoleUser, "lost", 99), Turn: "t9"},            // names a row that is not there
		17: &MessagePicked{Message: msg(17, provider.RoleUser, "again: tomatoes", 3), Turn: "t10"}, // names a row that names another
		18: &TurnFinished{Message: msg(18, provider.RoleAssistant, "a reply of its own", 0), Turn: "t11", Reply: "another reply"},
	}
	db, err := bolt.Open(filepath.Join(t.TempDir(), "rows.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const chat = "c_rows"
	if err := db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketRecords); err != nil {
			return err
		}
		var rows []*Event
		for seq, p := range evs {
			if p != nil {
				rows = append(rows, NewEvent(chat, uint64(seq), at.Add(time.Duration(seq)*time.Second), p))
			}
		}
		return writeRows(tx, chat, rows)
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.View(func(tx *bolt.Tx) error {
		b, _ := subBucket(tx, bucketRecords, chat, false)
		found := 0
		return b.ForEach(func(k, v []byte) error {
			got, gotOK, gotErr := indexDoc(b, chat, k, v)
			want, wantOK, wantErr := indexDocByDecodeRow(b, chat, k, v)
			if got != want || gotOK != wantOK || (gotErr == nil) != (wantErr == nil) {
				t.Errorf("row %d %s:\n got %+v %v %v\nwant %+v %v %v", seqOf(k), rowType(v), got, gotOK, gotErr, want, wantOK, wantErr)
			}
			if gotOK {
				found++
			}
			if seqOf(k) == uint64(len(evs)-1) && found < 7 {
				t.Errorf("only %d rows have a document: the rows are not what this test means", found)
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkIndexDoc: reading the rows of a turn as the indexer does, by
// indexDoc and (decodeRow) as it did before; per turn.
func BenchmarkIndexDoc(b *testing.B) {
	at := time.Date(2026, 5, 6, 7, 8, 9, 10, time.UTC)
	question := "Where should the tomatoes go this year, given the new shed on the south side?"
	reply := strings.Repeat("Tomatoes like sun and shelter from the wind, so the south wall is best. ", 6)
	db, err := bolt.Open(filepath.Join(b.TempDir(), "rows.db"), 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	const chat = "c_bench"
	if err := db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketRecords); err != nil {
			return err
		}
		q := &Message{ID: "m2", Seq: 2, Role: provider.RoleUser, Text: question, Time: at, State: MsgDone, ClientID: "k1", Tokens: 17}
		picked := *q
		picked.textAt = 2
		a := &Message{ID: "m5", Seq: 5, Role: provider.RoleAssistant, Text: reply, Time: at, State: MsgDone, Turn: "t1", Tokens: 90}
		return writeRows(tx, chat, []*Event{
			NewEvent(chat, 2, at, &MessageAccepted{Message: q}),
			NewEvent(chat, 3, at, &MessagePicked{Message: &picked, Turn: "t1"}),
			NewEvent(chat, 4, at, &TurnStarted{Turn: "t1"}),
			NewEvent(chat, 5, at, &TurnFinished{Message: a, Turn: "t1", Reply: reply, Model: "gpt-test",
				Usage: provider.Usage{InputTokens: 1200, OutputTokens: 90, CachedTokens: 1024}}),
		})
	}); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		read func(b *bolt.Bucket, chat string, k, v []byte) (search.Doc, bool, error)
	}{{"indexDoc", indexDoc}, {"decodeRow", indexDocByDecodeRow}} {
		b.Run(tc.name, func(bb *testing.B) {
			bb.ReportAllocs()
			for bb.Loop() {
				if err := db.View(func(tx *bolt.Tx) error {
					rb, _ := subBucket(tx, bucketRecords, chat, false)
					n := 0
					err := rb.ForEach(func(k, v []byte) error {
						_, ok, err := tc.read(rb, chat, k, v)
						if ok {
							n++
						}
						return err
					})
					if err == nil && n != 2 {
						bb.Fatalf("%d documents in a turn; want 2", n)
					}
					return err
				}); err != nil {
					bb.Fatal(err)
				}
			}
		})
	}
}

// FuzzScanIndexRow: whatever the bytes, a row scanIndexRow reads is one
// encoding/json reads, to the same fields.
func FuzzScanIndexRow(f *testing.F) {
	at := time.Date(2026, 5, 6, 7, 8, 9, 10, time.UTC)
	m := &Message{ID: "m2", Seq: 2, Role: provider.RoleUser, Text: "tomatoes \"quoted\" \u00e9\n", Time: at, State: MsgDone, TextAt: 1,
		ToolCalls: []provider.ToolCall{{ID: "c1", Name: "search", Arguments: `{"q":[1,2.5e3,true,null,"x"]}`}}}
	for _, p := range []Payload{
		&MessagePicked{Message: m, Turn: "t1"},
		&TurnFinished{Message: m, Turn: "t1", Reply: "By the south wall.", Usage: provider.Usage{InputTokens: 10}},
		&BoundaryCrossed{Turn: "t3", Reason: "hard", Record: "The handoff record", Notes: []string{"a", "b"}},
		&MessagePicked{Turn: "t7"},
	} {
		f.Add(NewEvent("c", 3, at, p).JSON())
	}
	f.Add([]byte(`{"type":"message.picked","seq":3,"message":null,"Seq":4}`))
	f.Add([]byte(`{"seq":01,"time":"2026-05-06T07:08:09Z","reply":"\u00e9\ud83d\ude00","message":{"text":"a\qb"}}`))
	f.Fuzz(func(t *testing.T, row []byte) {
		var scanned, decoded indexRow
		if !scanIndexRow(row, &scanned) {
			return
		}
		if err := json.Unmarshal(row, &decoded); err != nil {
			t.Fatalf("%q: read, but encoding/json says %v", row, err)
		}
		if !reflect.DeepEqual(scanned, decoded) {
			t.Fatalf("%q:\n scanned %+v %+v\n decoded %+v %+v", row, scanned, scanned.Message, decoded, decoded.Message)
		}
	})
}
