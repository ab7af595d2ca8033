package chats

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mirror-gateway/mirror/chats/search"
	bolt "go.etcd.io/bbolt"
)

// The search indexer feeds committed transcript rows into the full-text
// index (chats/search), off the chats' goroutines: a commit only marks its
// chat dirty. Each chat's mark in the index says how far it is indexed, and
// the set bucketSearch (chatindex.go) names the chats changed since the
// indexer last caught up with them, so at start the indexer reads only
// those; after a crash, or with a new index, it checks every chat against
// its mark instead. Either runs in the background, after the gateway
// listens. A search first waits (briefly) for a pass of the indexer that
// began after it, so it finds what was committed before it.

// indexPage bounds the rows one catch-up step reads in one transaction.
const indexPage = 2000

// indexBatch bounds what one commit of the index holds (documents, plus one
// per chat). A pass under load, about a second of turns (some 2,600
// documents at 100 chats), so goes in one commit, one new segment: cut at
// indexPage, it was two, and a segment of a few hundred documents costs
// more per document to build, and then to merge, than one of thousands.
// It bounds the memory a commit takes while bleve builds its segment
// (some 10 KB a document). Tests change it.
var indexBatch = 4000

// searchWait bounds how long a search waits for the indexer to catch up
// before it answers from what is indexed.
const searchWait = 3 * time.Second

type indexer struct {
	s *Service
	x *search.Index

	mu    sync.Mutex
	dirty map[string]bool
	// A pass indexes the chats dirty when it began. started and finished
	// count them; passed is closed (and replaced) as each one ends; wanted
	// is the pass the searches waiting need, so the indexer does not pause
	// before it.
	started, finished, wanted uint64
	passed                    chan struct{}

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
	once sync.Once

	titles map[string]string // title last indexed per chat (indexer goroutine only)

	// urgent cuts the pause between drains short (indexPace): a search waits.
	urgent chan struct{}
	// commits counts the index's batches, for tests.
	commits atomic.Int64
	// caught are the chats indexed since the last sweep, with the mark
	// they reached (goneMark: dropped as deleted); sweep takes them out of
	// bucketSearch when the store holds nothing newer (indexer goroutine
	// only).
	caught map[string]uint64
}

// goneMark is caught's mark of a chat dropped from the index as deleted.
const goneMark = ^uint64(0)

// sweepEvery is how often the indexer takes the chats it caught up with
// out of bucketSearch (one write, in the store's group commit); it also
// does at stop.
const sweepEvery = 30 * time.Second

func newIndexer(s *Service, x *search.Index) *indexer {
	return &indexer{s: s, x: x, dirty: map[string]bool{}, passed: make(chan struct{}), kick: make(chan struct{}, 1),
		urgent: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), titles: map[string]string{}, caught: map[string]uint64{}}
}

// indexLater marks chat as having rows (or a title) to index.
func (s *Service) indexLater(chat string) {
	if ix := s.manage.ix; ix != nil {
		ix.touch(chat)
	}
}

func (ix *indexer) touch(chat string) {
	ix.mu.Lock()
	ix.dirty[chat] = true
	ix.mu.Unlock()
	select {
	case ix.kick <- struct{}{}:
	default:
	}
}

func (ix *indexer) close() {
	ix.once.Do(func() { close(ix.stop) })
	<-ix.done
}

// wait returns once everything committed before it is indexed, or ctx is
// done: once the pass under way has ended when nothing is dirty, otherwise
// the next one (the first pass, the catch-up at start, in any case). It is
// not a wait for nothing to be dirty, which under a steady stream of turns
// never comes.
func (ix *indexer) wait(ctx context.Context) {
	ix.mu.Lock()
	target := ix.started
	if len(ix.dirty) > 0 || ix.started == 0 {
		target++
	}
	if ix.finished >= target {
		ix.mu.Unlock()
		return
	}
	ix.wanted = max(ix.wanted, target)
	ch := ix.passed
	ix.mu.Unlock()
	select {
	case ix.urgent <- struct{}{}:
	default:
	}
	for {
		select {
		case <-ch:
		case <-ctx.Done():
			return
		case <-ix.done:
			return
		}
		ix.mu.Lock()
		ok := ix.finished >= target
		ch = ix.passed
		ix.mu.Unlock()
		if ok {
			return
		}
	}
}

// searchWaits says a search waits for a pass not begun yet.
func (ix *indexer) searchWaits() bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.wanted > ix.started
}

// indexPace is the least time between two drains while chats keep
// changing, unless a search waits: each drain is one commit of the index,
// and a commit per turn under load made a stream of tiny segments that the
// index then spent more CPU merging than the turns took. A change after a
// quiet spell is indexed at once.
const indexPace = time.Second

// indexPause is the pause before the next drain when the last one ended
// since ago: nil for none. Tests replace it.
var indexPause = func(since time.Duration) <-chan time.Time {
	if since >= indexPace {
		return nil
	}
	return time.After(indexPace - since)
}

// indexApplying, when set, runs before each batch goes to the index (tests
// hold a pass there).
var indexApplying func()

func (ix *indexer) run() {
	defer close(ix.done)
	if err := ix.startup(); err != nil {
		ix.s.log.Warn("search index: catch up at start", "err", err)
	}
	sweep := time.NewTicker(sweepEvery)
	defer sweep.Stop()
	for {
		if !ix.drain() {
			ix.stopped()
			return
		}
		last := time.Now()
		select {
		case <-ix.stop:
			ix.stopped()
			return
		case <-ix.kick:
		case <-sweep.C:
			if err := ix.sweep(); err != nil {
				ix.s.log.Warn("search index: the set of chats to index stays as it was", "err", err)
			}
		}
		select { // a token left by a search the last pass answered
		case <-ix.urgent:
		default:
		}
		if ix.searchWaits() {
			continue
		}
		if pause := indexPause(time.Since(last)); pause != nil {
			select {
			case <-pause:
			case <-ix.urgent:
			case <-ix.stop:
				ix.stopped()
				return
			}
		}
	}
}

// stopped takes out of bucketSearch, at stop, what was caught up with.
// What is left there is what the next start indexes.
func (ix *indexer) stopped() {
	if err := ix.sweep(); err != nil {
		ix.s.log.Warn("search index: the set of chats to index stays as it was", "err", err)
	}
}

// sweep takes the chats caught up with out of bucketSearch, those the
// store holds nothing newer of (a chat written since stays). bucketSearch
// so always holds every chat not indexed as stored: what failed to index
// stays there too.
func (ix *indexer) sweep() error {
	if len(ix.caught) == 0 {
		return nil
	}
	caught := ix.caught
	err := ix.s.store.Write(context.Background(), func(tx *bolt.Tx) error {
		set := tx.Bucket(bucketSearch)
		for id, mark := range caught {
			c, ok, err := loadChat(tx, id)
			switch {
			case err != nil:
				continue // damaged: stays, and is tried again
			case !ok && mark != goneMark, ok && (mark == goneMark || c.Seq > mark || ix.titles[id] != c.Title):
				continue // changed since: stays
			}
			if err := set.Delete([]byte(id)); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		ix.caught = map[string]uint64{}
	}
	return err
}

// startup marks dirty the chats the index may be behind on: those in
// bucketSearch when the index was closed cleanly (it holds every chat as
// of their last change before then); otherwise every chat the index is
// behind on, and every chat the index holds that is no longer stored
// (deleted while it was not looking).
func (ix *indexer) startup() error {
	if ix.x.Rebuilt() {
		ix.s.log.Info("search index: written by an older version, made again; refilled from the record in the background")
	}
	if ix.x.Clean() {
		var ids []string
		err := ix.s.store.db.View(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketSearch).ForEach(func(k, _ []byte) error {
				ids = append(ids, string(k))
				return nil
			})
		})
		if err != nil {
			return err
		}
		ix.mu.Lock()
		for _, id := range ids {
			ix.dirty[id] = true
		}
		ix.mu.Unlock()
		return nil
	}
	return ix.checkAll()
}

// checkAll marks dirty every chat the index is behind on, and every chat
// the index holds that is no longer stored, and puts them in bucketSearch
// too, so a stop before they are indexed leaves them there for the next
// start. If that cannot be written, the index is not marked as closed
// cleanly at stop, and the next start checks every chat again. Only those
// not in bucketSearch yet are written (every chat write puts its chat
// there): a start with nothing to add commits nothing.
func (ix *indexer) checkAll() error {
	indexed, err := ix.x.Chats()
	if err != nil {
		return err
	}
	stored := map[string]bool{}
	var behind, unlisted []string
	err = ix.s.store.db.View(func(tx *bolt.Tx) error {
		err := tx.Bucket(bucketChats).ForEach(func(k, v []byte) error {
			var c Chat
			if err := json.Unmarshal(v, &c); err != nil {
				return nil
			}
			stored[c.ID] = true
			mark, err := ix.x.Mark(c.ID)
			if err != nil {
				return err
			}
			if mark < c.Seq || mark == 0 {
				behind = append(behind, c.ID)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, id := range indexed {
			if !stored[id] {
				behind = append(behind, id)
			}
		}
		unlisted = notIn(tx.Bucket(bucketSearch), behind)
		return nil
	})
	if err != nil {
		return err
	}
	if len(unlisted) > 0 {
		err = ix.s.store.Write(context.Background(), func(tx *bolt.Tx) error {
			set := tx.Bucket(bucketSearch)
			for _, id := range unlisted {
				if err := set.Put([]byte(id), nil); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		ix.x.Taint()
		ix.s.log.Warn("search index: the chats to index are checked again at the next start", "err", err)
	}
	ix.mu.Lock()
	for _, id := range behind {
		ix.dirty[id] = true
	}
	ix.mu.Unlock()
	return nil
}

// notIn is the ids set does not hold, in their order.
func notIn(set *bolt.Bucket, ids []string) []string {
	var out []string
	c := set.Cursor()
	for _, id := range ids {
		if k, _ := c.Seek([]byte(id)); string(k) != id {
			out = append(out, id)
		}
	}
	return out
}

// drain is one pass: it indexes the chats dirty as it begins; false when
// stopped. The updates of many chats go in one batch (one commit of the
// index), so catching up a thousand chats at start is a few commits, not a
// thousand. What is made dirty meanwhile waits for the next pass, after
// the pause (indexPause): a pass that went on until nothing was dirty
// never paused under a steady stream of turns, and committed the index
// tens of times a second, each small segment then merged into the rest.
func (ix *indexer) drain() bool {
	ix.mu.Lock()
	if len(ix.dirty) == 0 && ix.started > 0 {
		ix.mu.Unlock()
		return true
	}
	ids := make([]string, 0, len(ix.dirty))
	for id := range ix.dirty {
		ids = append(ids, id)
	}
	ix.dirty = map[string]bool{}
	ix.started++
	ix.mu.Unlock()
	if !ix.pass(ids) {
		return false
	}
	ix.mu.Lock()
	ix.finished++
	close(ix.passed)
	ix.passed = make(chan struct{})
	ix.mu.Unlock()
	return true
}

// pass indexes the chats ids; false when stopped.
func (ix *indexer) pass(ids []string) bool {
	var batch []search.Update
	size := 0
	flush := func() bool {
		if len(batch) == 0 {
			return true
		}
		ok := true
		if indexApplying != nil {
			indexApplying()
		}
		ix.commits.Add(1)
		if err := ix.x.ApplyAll(batch); err != nil {
			ok = false
			ix.s.log.Warn("search index: chats not indexed (again at their next change or start)", "chats", len(batch), "err", err)
		} else {
			for _, u := range batch {
				if u.Title != nil {
					ix.titles[u.Chat] = *u.Title
				}
				ix.caught[u.Chat] = u.Mark
			}
		}
		batch, size = nil, 0
		return ok
	}
	for _, id := range ids {
		select {
		case <-ix.stop:
			return false
		default:
		}
		for {
			u, gone, more, mark, err := ix.read(id)
			if err != nil {
				ix.s.log.Warn("search index: chat not indexed", "chat", id, "err", err)
				break
			}
			if gone {
				flush()
				delete(ix.titles, id)
				if err := ix.x.DropChat(id); err != nil {
					ix.s.log.Warn("search index: deleted chat's documents stay", "chat", id, "err", err)
				} else {
					ix.caught[id] = goneMark
				}
				break
			}
			if u == nil {
				ix.caught[id] = mark // nothing new: as indexed as it is stored
			} else {
				batch = append(batch, *u)
				size += len(u.Docs) + 1
			}
			if (more || size >= indexBatch) && !flush() {
				break // the next read would start from the same mark
			}
			if !more {
				break
			}
		}
	}
	flush()
	return true
}

// read returns chat's next update: its transcript rows after its mark (at
// most indexPage rows; more says others follow) and its title when it
// changed; nil when there is nothing new (mark is then the chat's mark).
// gone says the chat is no longer stored.
func (ix *indexer) read(chat string) (u *search.Update, gone, more bool, mark uint64, err error) {
	mark, err = ix.x.Mark(chat)
	if err != nil {
		return nil, false, false, 0, err
	}
	var docs []search.Doc
	var title *string
	last := mark
	err = ix.s.store.db.View(func(tx *bolt.Tx) error {
		c, ok, err := loadChat(tx, chat)
		if err != nil {
			return err
		}
		if !ok {
			gone = true
			return nil
		}
		if t, seen := ix.titles[chat]; !seen || t != c.Title {
			title = &c.Title
		}
		b, _ := subBucket(tx, bucketRecords, chat, false)
		if b == nil {
			return nil
		}
		cur := b.Cursor()
		n := 0
		for k, v := cur.Seek(seqKey(mark + 1)); k != nil; k, v = cur.Next() {
			if n == indexPage {
				more = true
				break
			}
			n++
			d, ok, err := indexDoc(b, chat, k, v)
			if err != nil {
				return err
			}
			last = seqOf(k)
			if ok {
				docs = append(docs, d)
			}
		}
		return nil
	})
	if err != nil || gone || (title == nil && last == mark) {
		return nil, gone, false, mark, err
	}
	return &search.Update{Chat: chat, Title: title, Docs: docs, Mark: last}, false, more, last, nil
}

func seqOf(k []byte) uint64 { return binary.BigEndian.Uint64(k) }

// SearchHit is a search result with the chat it belongs to.
type SearchHit struct {
	search.Hit
	Title    string `json:"title"`
	Archived bool   `json:"archived,omitempty"`
}

// Search finds query in every chat's title and transcript, best first, at
// most limit hits (0: 50). It first lets the indexer catch up with what
// was committed before it (for a few seconds at most). Deleted chats are
// never found.
func (s *Service) Search(ctx context.Context, query string, limit int) ([]SearchHit, error) {
	return s.searchIn(ctx, query, limit, nil)
}

// searchIn is Search over the chats visible reports true for (nil: all).
func (s *Service) searchIn(ctx context.Context, query string, limit int, visible func(id string) bool) ([]SearchHit, error) {
	ix := s.manage.ix
	if ix == nil {
		return nil, ErrSearchOff
	}
	wctx, cancel := context.WithTimeout(ctx, searchWait)
	ix.wait(wctx)
	cancel()
	var out []SearchHit
	err := s.store.db.View(func(tx *bolt.Tx) error {
		metas := map[string]*Chat{}
		chat := func(id string) *Chat {
			if c, ok := metas[id]; ok {
				return c
			}
			c, ok, err := loadChat(tx, id)
			var p *Chat
			if err == nil && ok && c.DeleteAt == nil && (visible == nil || visible(id)) {
				p = &c
			}
			metas[id] = p
			return p
		}
		hits, err := ix.x.Search(query, limit, func(id string) bool { return chat(id) != nil })
		if err != nil {
			return err
		}
		for _, h := range hits {
			c := chat(h.Chat)
			out = append(out, SearchHit{Hit: h, Title: c.Title, Archived: c.Archived})
		}
		return nil
	})
	if errors.Is(err, search.ErrBadQuery) {
		return nil, fmt.Errorf("%w: %w", ErrBadInput, err)
	}
	return out, err
}
