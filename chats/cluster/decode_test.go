package cluster

import (
	"encoding/json"
	"testing"
)

// FuzzDecodeBatch: whatever bytes a record message holds, decoding either
// fails or gives events of the chat with increasing seqs that encode back
// to a batch that decodes the same.
func FuzzDecodeBatch(f *testing.F) {
	good, _ := json.Marshal(events("c_f", 1, 2))
	f.Add(good)
	f.Add([]byte(`[]`))
	f.Add([]byte(`[null]`))
	f.Add([]byte(`[{"type":"turn.failed","chat":"c_other","seq":1,"time":"2026-01-01T00:00:00Z"}]`))
	f.Add([]byte(`[{"type":"turn.failed","chat":"c_f","seq":2},{"type":"turn.failed","chat":"c_f","seq":1}]`))
	f.Add([]byte(`{"type":"x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, err := decodeBatch("c_f", data)
		if err != nil {
			return
		}
		for i, e := range evs {
			if e.Chat != "c_f" || i > 0 && e.Seq <= evs[i-1].Seq {
				t.Fatalf("accepted %s", data)
			}
		}
		again, err := json.Marshal(evs)
		if err != nil {
			t.Fatal(err)
		}
		if evs2, err := decodeBatch("c_f", again); err != nil || len(evs2) != len(evs) {
			t.Fatalf("re-encoded batch %s: %v", again, err)
		}
	})
}
