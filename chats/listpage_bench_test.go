package chats

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/runtime/ids"
	bolt "go.etcd.io/bbolt"
)

// BenchmarkListPage is one page of the chat list (DefaultListPage chats)
// out of a store of 10,000 chats, read the way the chat list reads it:
// what the list costs, which must not grow with the store.
func BenchmarkListPage(b *testing.B) {
	const chats = 10000
	st := openTestStore(b, filepath.Join(b.TempDir(), "m.db"))
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	err := st.db.Update(func(tx *bolt.Tx) error {
		for i := range chats {
			c := Chat{ID: ids.NewChat(), Title: fmt.Sprint("a chat of the list ", i), Chain: "default", State: StateIdle,
				CreatedAt: at, UpdatedAt: at.Add(time.Duration(i) * time.Second), Seq: 40}
			meta, _ := json.Marshal(c)
			if err := putMeta(tx, time.Time{}, &c, meta); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	after := ""
	for b.Loop() {
		err := st.db.View(func(tx *bolt.Tx) error {
			p, err := listPage(tx, after, DefaultListPage, nil)
			if err != nil {
				return err
			}
			if len(p.Chats) != DefaultListPage && p.Next != "" {
				return fmt.Errorf("a page of %d chats", len(p.Chats))
			}
			after = p.Next // walk the list, from the top again at its end
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
