package chats

import (
	"path/filepath"
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
