package chats

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2"
)

// TestSearchIndexOfOldFormatIsRebuilt: a search index written by an older
// version (no format key), closed cleanly and claiming every chat indexed
// to past its last row, yet holding none of their messages, is rebuilt at
// start and refilled from the record: its messages are found again.
func TestSearchIndexOfOldFormatIsRebuilt(t *testing.T) {
	e := manageEnv(t, time.Hour)
	a, b := e.chat(), e.chat()
	e.talk(a.ID, "the aardvark question")
	e.talk(b.ID, "the badger question")
	if hits, err := e.svc.Search(bg, "aardvark", 10); err != nil || len(hits) != 2 {
		t.Fatalf("hits %+v %v", hits, err)
	}
	e.stop()

	if err := os.RemoveAll(e.searchDir); err != nil {
		t.Fatal(err)
	}
	old, err := bleve.New(e.searchDir, bleve.NewIndexMapping())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{a.ID, b.ID} {
		if err := old.SetInternal([]byte("hw/"+id), []byte("1000")); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.searchDir, "mirror-closed-cleanly"), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	e.start()
	for _, q := range []string{"aardvark", "badger"} {
		if hits, err := e.svc.Search(bg, q, 10); err != nil || len(hits) != 2 {
			t.Errorf("%s after the rebuild: %+v %v; want the question and its answer", q, hits, err)
		}
	}
}
