package chats

import (
	"fmt"
	"testing"
	"time"
)

// A pass of the indexer commits the chats it indexes in batches of up to
// indexBatch documents: under load, a pass is one commit of the index
// (one segment), not one per indexPage rows.
func TestIndexCommitsAPassInBatches(t *testing.T) {
	for _, tc := range []struct {
		batch, commits int
	}{
		{1000, 1}, // the four chats' turns in one commit
		{1, 4},    // a commit after each chat
	} {
		t.Run(fmt.Sprintf("batch=%d", tc.batch), func(t *testing.T) {
			never := make(chan time.Time)
			oldPause, oldBatch := indexPause, indexBatch
			// Every pause lasts until a search cuts it short.
			indexPause = func(time.Duration) <-chan time.Time { return never }
			indexBatch = tc.batch
			t.Cleanup(func() { indexPause, indexBatch = oldPause, oldBatch })
			e := manageEnv(t, time.Hour)
			var ids []string
			for range 4 {
				ids = append(ids, e.chat().ID)
			}
			if _, err := e.svc.Search(bg, "anything", 10); err != nil { // the indexer has caught up
				t.Fatal(err)
			}
			ix := e.svc.manage.ix
			before := ix.commits.Load()
			for i, id := range ids {
				e.talk(id, fmt.Sprintf("question%d", i))
			}
			if n := ix.commits.Load() - before; n != 0 {
				t.Fatalf("%d index commits during the pause", n)
			}
			// The search cuts the pause short and waits for the pass,
			// which indexes the four chats.
			for i := range ids {
				if hits, err := e.svc.Search(bg, fmt.Sprintf("question%d", i), 10); err != nil || len(hits) != 2 {
					t.Fatalf("question%d: %+v %v", i, hits, err)
				}
			}
			if n := ix.commits.Load() - before; n != int64(tc.commits) {
				t.Errorf("the pass took %d index commits, want %d", n, tc.commits)
			}
		})
	}
}
