package chats

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// Managing chats: rename, archive, delete with an undo window, reuse of an
// empty new chat, export. Search is in index.go.

// DefaultUndoDelete is how long a deleted chat can be restored.
const DefaultUndoDelete = 10 * time.Second

// ErrSearchOff is returned by Search when no index was configured.
var ErrSearchOff = errors.New("search is not available: no index is open")

// busyError refuses to delete a chat that works or waits; errors.Is
// ErrInUse.
type busyError struct{ chat string }

func (e busyError) Error() string {
	return fmt.Sprintf("chat %s is working or waits for an answer: stop it, or answer it, before deleting", e.chat)
}
func (e busyError) Unwrap() error { return ErrInUse }

// manage is the Service's state for deferred deletes and the indexer.
type manage struct {
	mu     sync.Mutex
	timers map[string]*time.Timer // chat id → its pending purge
	closed bool
	wg     sync.WaitGroup // purges running
	ix     *indexer       // nil without Options.Search
}

func (s *Service) startManage() {
	s.manage.timers = map[string]*time.Timer{}
	if s.opt.Search != nil {
		s.manage.ix = newIndexer(s, s.opt.Search)
		go s.manage.ix.run()
	}
}

// stopManage stops the purge timers, waits for running purges, and stops
// the indexer. What was not purged is purged at the next Resume; what was
// not indexed, at the indexer's next start (from its marks).
func (s *Service) stopManage() {
	m := &s.manage
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	for id, t := range m.timers {
		t.Stop()
		delete(m.timers, id)
	}
	m.mu.Unlock()
	m.wg.Wait()
	if m.ix != nil {
		m.ix.close()
	}
}

func (s *Service) undoWindow() time.Duration {
	if s.opt.UndoDelete > 0 {
		return s.opt.UndoDelete
	}
	return DefaultUndoDelete
}

// announce tells list watchers of a change flush does not compare
// (archived, deleted, restored, the chain).
func (a *actor) announce() {
	c := a.info()
	l := a.listed
	if l.Title == c.Title && l.Archived == c.Archived && l.Chain == c.Chain && sameTime(l.DeleteAt, c.DeleteAt) {
		return
	}
	a.listed = c
	a.s.notifyList(c, false, nil)
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// manageChat changes a chat's metadata on its goroutine with change,
// commits it, and tells the list watchers.
func (s *Service) manageChat(ctx context.Context, id string, change func(a *actor) error) (Chat, error) {
	return doValue(ctx, s, id, func(a *actor) (Chat, error) {
		if a.broken != nil {
			return Chat{}, a.broken
		}
		if err := change(a); err != nil {
			return Chat{}, err
		}
		a.b.dirty = true
		if err := a.flush(); err != nil {
			return Chat{}, err
		}
		a.announce()
		return a.info(), nil
	})
}

// Rename sets a chat's title. A chat renamed keeps its title: the first
// message names only a chat still called DefaultTitle.
func (s *Service) Rename(ctx context.Context, id, title string) (Chat, error) {
	if s.routed(ctx, id) {
		return routeOp[Chat](ctx, s, id, opFrame{Op: opRename, Title: title}, Origin{})
	}
	title = strings.TrimSpace(title)
	switch {
	case title == "":
		return Chat{}, fmt.Errorf("%w: the title is empty", ErrBadInput)
	case !utf8.ValidString(title):
		return Chat{}, fmt.Errorf("%w: the title is not valid UTF-8", ErrBadInput)
	case utf8.RuneCountInString(title) > MaxTitleRunes:
		return Chat{}, fmt.Errorf("%w: title longer than %d characters", ErrBadInput, MaxTitleRunes)
	}
	title = strings.Join(strings.Fields(title), " ") // one line
	return s.manageChat(ctx, id, func(a *actor) error {
		if a.meta.DeleteAt != nil {
			return fmt.Errorf("chat %s was deleted: %w", id, ErrNotFound)
		}
		a.meta.Title = title
		return nil
	})
}

// SetChain sets the chain of models a chat's turns ask (one of
// runtime.yaml's chains; "" goes back to the chat role's chain). A turn
// running keeps the chain it started with; the next one uses the new one.
func (s *Service) SetChain(ctx context.Context, id, chain string) (Chat, error) {
	if s.routed(ctx, id) {
		return routeOp[Chat](ctx, s, id, opFrame{Op: opSetChain, Chain: chain}, Origin{})
	}
	if chain == "" {
		chain = s.opt.Turner.ChatChain()
	} else if !s.opt.Turner.HasChain(chain) {
		return Chat{}, fmt.Errorf("%w: no chain %q in runtime.yaml", ErrBadInput, chain)
	}
	return s.manageChat(ctx, id, func(a *actor) error {
		if a.meta.DeleteAt != nil {
			return fmt.Errorf("chat %s was deleted: %w", id, ErrNotFound)
		}
		a.meta.Chain = chain
		return nil
	})
}

// Archive hides a chat from the main list (archived true) or brings it
// back. An archived chat keeps working: it can be opened, written to and
// searched.
func (s *Service) Archive(ctx context.Context, id string, archived bool) (Chat, error) {
	if s.routed(ctx, id) {
		return routeOp[Chat](ctx, s, id, opFrame{Op: opArchive, Archived: archived}, Origin{})
	}
	return s.manageChat(ctx, id, func(a *actor) error {
		if a.meta.DeleteAt != nil {
			return fmt.Errorf("chat %s was deleted: %w", id, ErrNotFound)
		}
		a.meta.Archived = archived
		return nil
	})
}

// DeleteChat deletes a chat, deferred: it is listed nowhere at once, and
// goes for good (record, archives, pending queue, ledger, handoff folder,
// search documents, and the attachment files no other row names) when the
// undo window has passed, unless RestoreChat undoes it first. The deadline
// is stored with the chat, so a restart keeps it: a chat whose window
// passed while the gateway was down goes at the next start. A chat that
// works or waits for an answer is refused (ErrInUse): stop it first.
func (s *Service) DeleteChat(ctx context.Context, id string) (Chat, error) {
	if s.routed(ctx, id) {
		return routeOp[Chat](ctx, s, id, opFrame{Op: opDeleteChat}, Origin{})
	}
	c, err := s.manageChat(ctx, id, func(a *actor) error {
		if a.meta.DeleteAt != nil {
			return nil // deleted already: the first deadline stands
		}
		if a.turn != nil || len(a.pending) > 0 || a.meta.Resume || len(a.recoveries) > 0 || len(a.approvals) > 0 {
			return busyError{id}
		}
		at := time.Now().UTC().Add(s.undoWindow())
		a.meta.DeleteAt = &at
		return nil
	})
	if err == nil {
		s.schedulePurge(id, *c.DeleteAt)
	}
	return c, err
}

// RestoreChat undoes DeleteChat while the undo window is open. A chat not
// deleted is answered as it is.
func (s *Service) RestoreChat(ctx context.Context, id string) (Chat, error) {
	if s.routed(ctx, id) {
		return routeOp[Chat](ctx, s, id, opFrame{Op: opRestoreChat}, Origin{})
	}
	c, err := s.manageChat(ctx, id, func(a *actor) error {
		a.meta.DeleteAt = nil
		return nil
	})
	if err == nil {
		s.cancelPurge(id)
	}
	return c, err
}

// cancelPurge stops chat id's pending purge, if any.
func (s *Service) cancelPurge(id string) {
	m := &s.manage
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.timers[id]; t != nil {
		t.Stop()
		delete(m.timers, id)
	}
}

// purgeGrace is how long after a deleted chat's deadline a node that did
// not delete it (a follower, or any node after a restart, in cluster
// mode) asks for its purge itself: the owner's purge normally lands
// first and cancels that; and how soon a purge the cluster did not
// confirm is tried again.
const purgeGrace = 15 * time.Second

// schedulePurge purges chat id at at (at once when at has passed).
func (s *Service) schedulePurge(id string, at time.Time) {
	m := &s.manage
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	if t := m.timers[id]; t != nil {
		t.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(max(0, time.Until(at)), func() {
		m.mu.Lock()
		if m.closed || m.timers[id] != t {
			m.mu.Unlock()
			return // stopped or replaced
		}
		delete(m.timers, id)
		m.wg.Add(1)
		m.mu.Unlock()
		defer m.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.purge(ctx, id); err != nil && !errors.Is(err, ErrClosed) {
			s.log.Warn("delete chat", "chat", id, "err", err)
			if s.opt.RecordLog != nil {
				// Not confirmed (too few nodes, the chat moving): the
				// purge is due still, on whichever node owns the chat.
				s.schedulePurge(id, time.Now().Add(purgeGrace))
			}
		}
	})
	m.timers[id] = t
}

// resumeDeletes schedules the purges a previous process left: a chat
// whose window passed goes now, the others when theirs does. It reads the
// set of chats awaiting deletion (bucketDeleting), never every chat.
func (s *Service) resumeDeletes() {
	type due struct {
		id string
		at time.Time
	}
	var list []due
	_ = s.store.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketDeleting).ForEach(func(k, _ []byte) error {
			if c, ok, err := loadChat(tx, string(k)); err == nil && ok && c.DeleteAt != nil {
				list = append(list, due{c.ID, *c.DeleteAt})
			}
			return nil
		})
	})
	for _, d := range list {
		if s.opt.RecordLog != nil {
			d.at = d.at.Add(purgeGrace) // its owner purges it first (followDelete)
		}
		s.schedulePurge(d.id, d.at)
	}
}

// errNotYet says a purge came before its chat's deadline.
var errNotYet = errors.New("the undo window is still open")

// purge removes a deleted chat whose undo window has passed, on its
// goroutine, so nothing can write to it meanwhile; the actor then leaves
// the registry and every later request finds no chat.
//
// In cluster mode the purge runs on the chat's owner (a node that owns no
// one takes it), which appends it to the chat's log as a purge flush
// (see actor.remove): every node applies it, so the chat is gone from
// every node's list, history and search, not only the owner's.
func (s *Service) purge(ctx context.Context, id string) error {
	if s.routed(ctx, id) {
		err := routeErr(ctx, s, id, opFrame{Op: opPurge}, Origin{})
		if errors.Is(err, ErrNotFound) {
			return nil // gone already
		}
		return err
	}
	gone, err := doValue(ctx, s, id, func(a *actor) (bool, error) {
		switch {
		case a.meta.DeleteAt == nil:
			return false, nil // restored
		case time.Now().Before(*a.meta.DeleteAt):
			return false, errNotYet
		case a.turn != nil || len(a.pending) > 0 || !a.b.empty():
			return false, busyError{id}
		}
		if err := a.remove(ctx); err != nil {
			return false, err
		}
		a.gone()
		return true, nil
	})
	if errors.Is(err, errNotYet) {
		var at time.Time
		_ = s.store.db.View(func(tx *bolt.Tx) error {
			if c, ok, _ := loadChat(tx, id); ok && c.DeleteAt != nil {
				at = *c.DeleteAt
			}
			return nil
		})
		s.schedulePurge(id, at)
		return nil
	}
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	if !gone && err == nil {
		return nil // restored
	}
	// Gone now, or before (a purge a crash cut short): what it kept
	// outside the record goes too.
	s.indexLater(id)
	ferr := s.dropFiles(id)
	if _, berr := s.CollectBlobs(ctx); berr != nil {
		return fmt.Errorf("chat %s deleted; its attachment files stay until the next collection: %w", id, berr)
	}
	if ferr != nil {
		return fmt.Errorf("chat %s deleted; its handoff folder stays until the next prune: %w", id, ferr)
	}
	return nil
}

// CreateReusing answers "New chat": the newest chat of the chain that is
// still empty (never written to, still DefaultTitle, not archived or
// deleted) when there is one, so pressing New chat again and again leaves
// one empty chat, not many; otherwise a new chat. reused says which.
func (s *Service) CreateReusing(ctx context.Context, chain string, o Origin) (c Chat, reused bool, err error) {
	return s.createReusing(ctx, chain, o, nil)
}

// createReusing is CreateReusing reusing only a chat mine says is the
// asker's own (nil: any).
func (s *Service) createReusing(ctx context.Context, chain string, o Origin, mine func(id string) bool) (c Chat, reused bool, err error) {
	want := chain
	if want == "" {
		want = s.opt.Turner.ChatChain()
	}
	var found *Chat
	// Only the chats never written to are candidates (bucketEmpty): what
	// this reads does not grow with the store.
	err = s.store.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketEmpty).ForEach(func(k, _ []byte) error {
			e, ok, err := loadChat(tx, string(k))
			if err != nil || !ok {
				return nil
			}
			if mine != nil && !mine(e.ID) {
				return nil // another person's empty chat is not this one's to reuse
			}
			if reusable(&e) && e.Chain == want && (found == nil || e.UpdatedAt.After(found.UpdatedAt)) {
				found = &e
			}
			return nil
		})
	})
	if err != nil {
		return Chat{}, false, err
	}
	if found != nil {
		found.State = StateIdle
		return *found, true, nil
	}
	c, err = s.Create(ctx, "", chain, o)
	return c, false, err
}

// Export calls head (when not nil) with the chat, then fn with every
// message of its transcript, oldest first (as a snapshot and chat.history
// pages show them, before and after boundaries). It reads the record page
// by page in short read transactions, so a long export holds nothing open.
func (s *Service) Export(ctx context.Context, id string, head func(Chat), fn func(Message) error) (Chat, error) {
	if s.routed(ctx, id) {
		return s.exportRemote(ctx, id, head, fn)
	}
	type start struct {
		c    Chat
		pins map[string]bool
	}
	h, err := doValue(ctx, s, id, func(a *actor) (start, error) {
		if a.meta.DeleteAt != nil {
			return start{}, fmt.Errorf("chat %s was deleted: %w", id, ErrNotFound)
		}
		return start{a.info(), maps.Clone(a.pins)}, nil
	})
	if err != nil {
		return Chat{}, err
	}
	c, pins := h.c, h.pins
	if head != nil {
		head(c)
	}
	after := uint64(0)
	for {
		if err := ctx.Err(); err != nil {
			return c, err
		}
		var page []Message
		var more bool
		err := s.store.db.View(func(tx *bolt.Tx) (err error) {
			page, after, more, err = transcriptForward(tx, id, after, 500)
			return err
		})
		if err != nil {
			return c, err
		}
		for _, m := range page {
			if p, ok := pins[m.ID]; ok {
				m.Pinned = p
			}
			if err := fn(m); err != nil {
				return c, err
			}
		}
		if !more {
			return c, nil
		}
	}
}

// transcriptForward reads up to max transcript messages of chat stored
// after seq after, oldest first; last is the seq of the last row read,
// more whether rows remain after it.
func transcriptForward(tx *bolt.Tx, chat string, after uint64, max int) (out []Message, last uint64, more bool, err error) {
	b, _ := subBucket(tx, bucketRecords, chat, false)
	last = after
	if b == nil {
		return nil, last, false, nil
	}
	c := b.Cursor()
	for k, v := c.Seek(seqKey(after + 1)); k != nil; k, v = c.Next() {
		if len(out) >= max {
			return out, last, true, nil
		}
		ev, err := decodeIfTranscript(b, chat, k, v)
		if err != nil {
			return nil, last, false, err
		}
		last = seqOf(k)
		if ev == nil {
			continue
		}
		if m, ok := transcriptMessage(ev); ok {
			out = append(out, m)
		}
	}
	return out, last, false, nil
}

// decodeIfTranscript decodes a row that may show a transcript message;
// nil for the others, which are not decoded.
func decodeIfTranscript(b *bolt.Bucket, chat string, k, v []byte) (*Event, error) {
	if !transcriptRow(rowType(v)) {
		return nil, nil
	}
	return decodeRow(b, chat, k, v)
}

// remove deletes everything stored of the chat, on its goroutine. On one
// node that is one bbolt write. In cluster mode the removal is chat
// state every node must share, so it is a purge flush appended to the
// chat's log fenced at the actor's position (refused if another node owns
// the chat now), then applied here by the same code that applies it on
// the followers (putFlushAt), and the log's older entries of the chat are
// dropped when the log can (RecordForgetter).
func (a *actor) remove(ctx context.Context) error {
	s := a.s
	if s.opt.RecordLog == nil {
		return s.store.Write(ctx, func(tx *bolt.Tx) error { return s.removeChatTx(tx, a.id) })
	}
	f := &Flush{Chat: a.id, Meta: a.meta, Purge: true}
	pos, err := a.appendLog(f)
	if err != nil {
		return err
	}
	if err := s.store.Write(ctx, func(tx *bolt.Tx) error {
		_, _, _, err := s.putFlushAt(tx, a.id, pos, f)
		return err
	}); err != nil {
		// The log holds the purge: this node applies it when it next
		// reads the chat's tail (or follows it).
		if a.own != nil {
			s.markStale(a.id, a.own)
		}
		a.breakDown(err)
		return a.broken
	}
	s.removedHere(a.id)
	if fg, ok := s.opt.RecordLog.(RecordForgetter); ok {
		if err := fg.Forget(ctx, a.id, pos); err != nil {
			s.log.Warn("a purged chat's older records stay in the cluster's log", "chat", a.id, "err", err)
		}
	}
	return nil
}

// gone ends the actor of a chat just removed: every later request finds
// no chat, and its subscribers are told it closed.
func (a *actor) gone() {
	a.broken = fmt.Errorf("chat %s was deleted: %w", a.id, ErrNotFound)
	a.s.evict(a)
	for sub := range a.subs {
		sub.Deliver(Delivery{Closed: a.id})
	}
	a.subs = map[Subscriber]struct{}{}
}
