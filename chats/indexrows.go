package chats

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mirror-gateway/mirror/chats/search"
	"github.com/mirror-gateway/mirror/runtime/ids"
	bolt "go.etcd.io/bbolt"
)

// The indexer's reads of the record decode only what a search document
// holds: decoding each transcript row whole (usage, tool calls, sections,
// every payload field) into an Event was a fifth of the indexer's CPU under
// load. indexDoc finds the same messages decodeIfTranscript and
// transcriptMessage do (TestIndexDocMatchesDecodeRow compares the two).

// indexRow is what indexDoc reads of a row: its header's seq and time, a
// carried message, a finished turn's reply and a boundary's record.
type indexRow struct {
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Reply   string    `json:"reply"`
	Record  string    `json:"record"`
	Message *indexMsg `json:"message"`
}

// indexMsg is what indexDoc reads of a carried message.
type indexMsg struct {
	ID     string    `json:"id"`
	Role   string    `json:"role"`
	Text   string    `json:"text"`
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
	State  string    `json:"state"`
	TextAt uint64    `json:"text_at"`
}

// carrierTypes are the event types whose payload carries a message under
// "message" (and no field reply or record of another JSON type).
var carrierTypes = func() map[string]bool {
	out := map[string]bool{}
	for typ, mk := range payloads {
		if _, ok := mk().(carrier); ok {
			out[typ] = true
		}
	}
	return out
}()

// indexDoc is the search document of the row k, v of chat's records b: ok
// false when the row shows no transcript message with text. As decodeRow,
// it fills a message's text in from the row that holds it (TextAt). Every
// transcript row is a boundary or carries its message
// (TestIndexDocMatchesDecodeRow checks).
func indexDoc(b *bolt.Bucket, chat string, k, v []byte) (d search.Doc, ok bool, err error) {
	typ := string(rowTypeBytes(v))
	if !transcriptRow(typ) {
		return search.Doc{}, false, nil
	}
	var r indexRow
	if err := readIndexRow(v, &r); err != nil {
		return search.Doc{}, false, fmt.Errorf("chat %s: corrupt record row %d: %w", chat, binary.BigEndian.Uint64(k), err)
	}
	if typ == EvBoundary {
		if strings.TrimSpace(r.Record) == "" {
			return search.Doc{}, false, nil
		}
		return search.Doc{Message: ids.Message(r.Seq), Seq: r.Seq, Role: RoleBoundary, Text: r.Record, Time: r.Time}, true, nil
	}
	m := r.Message
	if m == nil {
		return search.Doc{}, false, nil
	}
	text, err := indexText(b, chat, typ, &r, 0)
	if err != nil {
		return search.Doc{}, false, err
	}
	if !isTranscript(Message{Role: m.Role}) || strings.TrimSpace(text) == "" {
		return search.Doc{}, false, nil // tool traffic, or nothing to find
	}
	return search.Doc{Message: m.ID, Seq: m.Seq, Role: m.Role, Text: text, Time: m.Time}, true, nil
}

// indexText is the text of r's message (r a row of type typ), filled in
// from the row that holds it as decodeRowDepth does.
func indexText(b *bolt.Bucket, chat, typ string, r *indexRow, depth int) (string, error) {
	m := r.Message
	switch at := m.TextAt; {
	case at == 0:
		return m.Text, nil
	case at == r.Seq && typ == EvTurnFinished:
		return r.Reply, nil
	default:
		sv := b.Get(seqKey(at))
		if sv == nil || depth > 2 {
			return "", fmt.Errorf("chat %s: record row %d names row %d for its text, which is missing", chat, r.Seq, at)
		}
		srcType := string(rowTypeBytes(sv))
		if !carrierTypes[srcType] {
			// Another kind of row (a tool's result): the whole way.
			src, err := decodeRowDepth(b, chat, seqKey(at), sv, depth+1)
			if err != nil {
				return "", err
			}
			return rowText(src), nil
		}
		var src indexRow
		if err := readIndexRow(sv, &src); err != nil {
			return "", fmt.Errorf("chat %s: corrupt record row %d: %w", chat, at, err)
		}
		if src.Message == nil {
			return "", nil
		}
		return indexText(b, chat, srcType, &src, depth+1)
	}
}

// readIndexRow reads row v into r: by scanIndexRow, or by encoding/json
// when that declines.
func readIndexRow(v []byte, r *indexRow) error {
	if scanIndexRow(v, r) {
		return nil
	}
	*r = indexRow{}
	return json.Unmarshal(v, r)
}
