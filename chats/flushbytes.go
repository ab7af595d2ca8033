package chats

import "encoding/json"

// flushBytes is what writeFlush stores of a flush that depends on the
// flush alone: its metadata's JSON and each event's row (rowBytes). The
// actor encodes them before it hands its write to the store, on its own
// goroutine: the store's one committer runs every chat's write in turn,
// and holds the database's writer lock while it does, so what a write
// encodes there, every chat of the group waits for.
type flushBytes struct {
	meta []byte
	rows [][]byte
}

// encodeFlush encodes f's metadata and rows, as writeFlush stores them.
// f must not change afterwards (the metadata's LogPos included).
func encodeFlush(f *Flush) *flushBytes {
	enc := &flushBytes{rows: make([][]byte, len(f.Events))}
	enc.meta, _ = json.Marshal(f.Meta)
	for i, ev := range f.Events {
		enc.rows[i] = rowBytes(ev)
	}
	return enc
}
