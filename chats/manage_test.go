package chats

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats/search"
	"github.com/mirror-gateway/mirror/config/datadir"
	bolt "go.etcd.io/bbolt"
)

// manageEnv is an env with a data dir (blobs, handoff folders) and a
// search index.
func manageEnv(t *testing.T, undo time.Duration) *env {
	t.Helper()
	data, err := datadir.Prepare(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, path: filepath.Join(t.TempDir(), "mirror.db"), gate: newGate(true), dataDir: data,
		searchDir: filepath.Join(data, "search"), undo: undo}
	e.start()
	t.Cleanup(e.stop)
	return e
}

// talk sends text to chat and waits for its answer.
func (e *env) talk(chat, text string) {
	e.t.Helper()
	s := newSub()
	if err := e.svc.Open(bg, chat, nil, s, ""); err != nil {
		e.t.Fatal(err)
	}
	defer e.svc.Unsubscribe(bg, chat, s)
	if _, err := e.svc.Send(bg, chat, text, "k-"+text, "", Origin{}); err != nil {
		e.t.Fatal(err)
	}
	s.waitFor(e.t, "the answer to "+text, func(evs []*Event) bool {
		return slices.ContainsFunc(evs, func(ev *Event) bool {
			return ev.Type == EvTurnFinished && strings.Contains(pay[*TurnFinished](ev).Reply, text)
		})
	})
}

func listed(t *testing.T, svc *Service) map[string]Chat {
	t.Helper()
	list, err := svc.List(bg)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Chat{}
	for _, c := range list {
		out[c.ID] = c
	}
	return out
}

// stored reports whether anything of chat is left in the database.
func (e *env) stored(chat string) []string {
	var left []string
	_ = e.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketChats).Get([]byte(chat)) != nil {
			left = append(left, "chats")
		}
		for _, p := range [][]byte{bucketRecords, bucketPending, bucketClientIDs, bucketOutputs, bucketArchive} {
			if tx.Bucket(p).Bucket([]byte(chat)) != nil {
				left = append(left, string(p))
			}
		}
		return nil
	})
	return left
}

// eventually polls cond, bounded by wait, waking on each purge or index
// step the service finishes (there is no event for them: a poll with a
// short tick is the bounded wait).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// TestDeleteUndoThenPurge: a deleted chat is listed nowhere and takes no
// message; undo brings it back whole; deleted again, it goes for good when
// the window passes, with its record, search documents and the attachment
// files only it named.
func TestDeleteUndoThenPurge(t *testing.T) {
	e := manageEnv(t, 200*time.Millisecond)
	keep, doomed := e.chat(), e.chat()
	only, err := e.svc.Upload(bg, strings.NewReader("only the doomed chat"), "text/plain", "f.txt")
	if err != nil {
		t.Fatal(err)
	}
	e.talk(keep.ID, "zebra in the kept chat")
	s := newSub()
	if err := e.svc.Open(bg, doomed.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.SendAttached(bg, doomed.ID, "zebra crossing plans", "a", "", []string{only.SHA256}, Origin{}); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "turn", has(EvTurnFinished, 1))

	e.undo = time.Hour // the restart below keeps the chat deleted, not purged
	e.svc.opt.UndoDelete = time.Hour
	c, err := e.svc.DeleteChat(bg, doomed.ID)
	if err != nil || c.DeleteAt == nil || time.Until(*c.DeleteAt) < 30*time.Minute {
		t.Fatalf("delete: %+v %v", c, err)
	}
	if _, ok := listed(t, e.svc)[doomed.ID]; ok {
		t.Fatal("a deleted chat is still listed")
	}
	if _, err := e.svc.Send(bg, doomed.ID, "more", "b", "", Origin{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("send to a deleted chat: %v", err)
	}
	hits, err := e.svc.Search(bg, "zebra", 10)
	if err != nil || chatsOf(hits) != keep.ID {
		t.Fatalf("search while deleted: %+v %v", hits, err)
	}

	// A restart inside the window: still deleted, still undoable.
	e.restart()
	if _, err := e.svc.Resume(bg); err != nil {
		t.Fatal(err)
	}
	if _, ok := listed(t, e.svc)[doomed.ID]; ok {
		t.Fatal("after a restart the deleted chat is listed")
	}
	if c, err := e.svc.RestoreChat(bg, doomed.ID); err != nil || c.DeleteAt != nil {
		t.Fatalf("undo: %+v %v", c, err)
	}
	if c, ok := listed(t, e.svc)[doomed.ID]; !ok || c.Title != doomed.Title {
		t.Fatal("undo did not bring the chat back")
	}
	if hits, err := e.svc.Search(bg, "zebra", 10); err != nil || !strings.Contains(chatsOf(hits), doomed.ID) {
		t.Fatalf("search after undo: %+v %v", hits, err)
	}

	// Deleted again with a short window: it goes for good.
	e.svc.opt.UndoDelete = 50 * time.Millisecond
	e.blobs.now = func() time.Time { return time.Now().Add(36 * time.Hour) } // the upload is past its TTL
	if _, err := e.svc.DeleteChat(bg, doomed.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the purge", func() bool { return len(e.stored(doomed.ID)) == 0 })
	eventually(t, "the blob collected", func() bool {
		f, err := e.blobs.Open(only.SHA256)
		if f != nil {
			f.Close()
		}
		return err != nil
	})
	if _, err := e.svc.RestoreChat(bg, doomed.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("undo after the window: %v", err)
	}
	if hits, err := e.svc.Search(bg, "zebra", 10); err != nil || chatsOf(hits) != keep.ID {
		t.Fatalf("search after the purge: %+v %v", hits, err)
	}
	if left := e.stored(keep.ID); len(left) == 0 {
		t.Fatal("the other chat went too")
	}
}

// chatsOf lists the chats hits belong to, sorted, comma-separated.
func chatsOf(hits []SearchHit) string {
	var ids []string
	for _, h := range hits {
		if !slices.Contains(ids, h.Chat) {
			ids = append(ids, h.Chat)
		}
	}
	slices.Sort(ids)
	return strings.Join(ids, ",")
}

// TestDeleteWindowPassedWhileDown: a chat whose undo window passed while
// the gateway was stopped goes at the next start; a running chat is
// refused.
func TestDeleteWindowPassedWhileDown(t *testing.T) {
	e := manageEnv(t, time.Hour)
	c := e.chat()
	e.talk(c.ID, "hello")
	if _, err := e.svc.DeleteChat(bg, c.ID); err != nil {
		t.Fatal(err)
	}
	e.stop()
	db, err := OpenDB(e.path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, _, err := loadChat(tx, c.ID)
		if err != nil {
			return err
		}
		past := time.Now().Add(-time.Minute)
		meta.DeleteAt = &past
		v, _ := json.Marshal(meta)
		return tx.Bucket(bucketChats).Put([]byte(c.ID), v)
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	e.start()
	if _, err := e.svc.Resume(bg); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the purge at start", func() bool { return len(e.stored(c.ID)) == 0 })

	// A chat whose turn runs is refused, and stays.
	g := newGate(false)
	e.gate = g
	e.restart()
	busy := e.chat()
	if _, err := e.svc.Send(bg, busy.ID, "question", "q", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	recvStarted(t, g)
	if _, err := e.svc.DeleteChat(bg, busy.ID); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "stop it") {
		t.Fatalf("delete while running: %v", err)
	}
	g.release <- struct{}{}
}

func TestRenameArchiveAndReuse(t *testing.T) {
	e := manageEnv(t, time.Hour)
	w := &watcher{}
	defer e.svc.Watch(w)()
	a, reused, err := e.svc.CreateReusing(bg, "", Origin{})
	if err != nil || reused {
		t.Fatal(a, reused, err)
	}
	for range 2 { // New chat pressed again: the same empty chat
		b, reused, err := e.svc.CreateReusing(bg, "", Origin{})
		if err != nil || !reused || b.ID != a.ID {
			t.Fatalf("reuse: %+v %v %v", b, reused, err)
		}
	}
	e.talk(a.ID, "first words")
	b, reused, err := e.svc.CreateReusing(bg, "", Origin{})
	if err != nil || reused || b.ID == a.ID {
		t.Fatalf("a chat with a message was reused: %+v %v", b, err)
	}

	for _, tc := range []struct {
		title, want string
		err         error
	}{
		{"  Trip   plans\nfor May ", "Trip plans for May", nil},
		{"   ", "", ErrBadInput},
		{strings.Repeat("x", MaxTitleRunes+1), "", ErrBadInput},
		{"bad \xff", "", ErrBadInput},
	} {
		c, err := e.svc.Rename(bg, b.ID, tc.title)
		if !errors.Is(err, tc.err) || (tc.err == nil && c.Title != tc.want) {
			t.Errorf("rename %q: %+v %v", tc.title, c, err)
		}
	}
	e.talk(b.ID, "a first message names only an unnamed chat")
	if c := listed(t, e.svc)[b.ID]; c.Title != "Trip plans for May" {
		t.Fatalf("title after the first message: %q", c.Title)
	}
	if hits, err := e.svc.Search(bg, "trip", 5); err != nil || len(hits) == 0 || hits[0].Kind != "title" || hits[0].Chat != b.ID {
		t.Fatalf("the new title is not searchable: %+v %v", hits, err)
	}

	if c, err := e.svc.Archive(bg, b.ID, true); err != nil || !c.Archived {
		t.Fatal(c, err)
	}
	if c := listed(t, e.svc)[b.ID]; !c.Archived {
		t.Fatal("archived is not stored")
	}
	if !w.saw(func(c Chat) bool { return c.ID == b.ID && c.Archived }) {
		t.Fatal("list watchers were not told of the archive")
	}
	e.restart()
	if c := listed(t, e.svc)[b.ID]; !c.Archived {
		t.Fatal("archived lost in a restart")
	}
	if c, err := e.svc.Archive(bg, b.ID, false); err != nil || c.Archived {
		t.Fatal(c, err)
	}
	if _, err := e.svc.Rename(bg, "c_missing", "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rename of a missing chat: %v", err)
	}
}

type watcher struct {
	mu   sync.Mutex
	seen []Chat
}

func (w *watcher) ChatChanged(c Chat, created bool) {
	w.mu.Lock()
	w.seen = append(w.seen, c)
	w.mu.Unlock()
}

func (w *watcher) saw(pred func(Chat) bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.ContainsFunc(w.seen, pred)
}

// TestSearchCatchesUpFromItsMarks: what a run without the index (or a
// crash before the indexer got to it) committed is indexed at the next
// start, from each chat's mark; hits carry the message and a highlighted
// snippet.
func TestSearchCatchesUpFromItsMarks(t *testing.T) {
	e := manageEnv(t, time.Hour)
	c := e.chat()
	e.talk(c.ID, "the aardvark question")
	hits, err := e.svc.Search(bg, "aardvark", 10)
	if err != nil || len(hits) != 2 { // the question and its answer
		t.Fatalf("hits %+v %v", hits, err)
	}
	h := hits[slices.IndexFunc(hits, func(h SearchHit) bool { return h.Role == "user" })]
	if h.Chat != c.ID || h.Message == "" || h.Seq == 0 || h.Title != "test" {
		t.Fatalf("hit %+v", h)
	}
	if i := slices.IndexFunc(h.Snippet, func(p search.Part) bool { return p.Hit }); i < 0 || h.Snippet[i].Text != "aardvark" {
		t.Fatalf("snippet %+v", h.Snippet)
	}
	mark, _ := e.index.Mark(c.ID)

	// A run without the index.
	dir := e.searchDir
	e.searchDir = ""
	e.restart()
	e.talk(c.ID, "the okapi question")
	if _, err := e.svc.Search(bg, "okapi", 10); !errors.Is(err, ErrSearchOff) {
		t.Fatalf("search without an index: %v", err)
	}
	e.searchDir = dir
	e.restart()
	hits, err = e.svc.Search(bg, "okapi", 10)
	if err != nil || len(hits) != 2 {
		t.Fatalf("not caught up: %+v %v", hits, err)
	}
	if m2, _ := e.index.Mark(c.ID); m2 <= mark {
		t.Fatalf("mark %d, was %d", m2, mark)
	}
	if hits, _ := e.svc.Search(bg, "aardvark", 10); len(hits) != 2 {
		t.Fatalf("indexed twice or lost: %+v", hits)
	}
	// As one types: a prefix of the last word finds it.
	if hits, _ := e.svc.Search(bg, "oka", 10); len(hits) != 2 {
		t.Fatalf("prefix: %+v", hits)
	}
	for _, q := range []string{"", "   ", strings.Repeat("q", 600)} {
		if _, err := e.svc.Search(bg, q, 10); !errors.Is(err, ErrBadInput) {
			t.Errorf("query %q: %v", q, err)
		}
	}

	// A chat deleted while the index was not looking leaves it at the
	// next start.
	e.searchDir = ""
	e.restart()
	e.svc.opt.UndoDelete = time.Millisecond
	if _, err := e.svc.DeleteChat(bg, c.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the purge", func() bool { return len(e.stored(c.ID)) == 0 })
	e.searchDir = dir
	e.restart()
	if hits, err := e.svc.Search(bg, "aardvark", 10); err != nil || len(hits) != 0 {
		t.Fatalf("a deleted chat's documents stayed: %+v %v", hits, err)
	}
	if ids, _ := e.index.Chats(); len(ids) != 0 {
		t.Fatalf("indexed chats %v", ids)
	}
}

// TestExportMatchesTheTranscript: Export gives what a snapshot and its
// history pages show, in order, pins included.
func TestExportMatchesTheTranscript(t *testing.T) {
	e := manageEnv(t, time.Hour)
	c := e.chat()
	for i := range 4 {
		e.talk(c.ID, fmt.Sprintf("message %d with **markdown** and <tags>", i))
	}
	var got []Message
	if _, err := e.svc.Export(bg, c.ID, nil, func(m Message) error { got = append(got, m); return nil }); err != nil {
		t.Fatal(err)
	}
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	var snap *Snapshot
	eventually(t, "the snapshot", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, d := range s.got {
			if d.Snapshot != nil {
				snap = d.Snapshot
			}
		}
		return snap != nil
	})
	want := snap.Messages
	if len(got) != 8 || len(want) != 8 {
		t.Fatalf("export %d messages, snapshot %d", len(got), len(want))
	}
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(want)
	if string(a) != string(b) {
		t.Fatalf("export differs from the snapshot:\n%s\n%s", a, b)
	}
}
