package chats

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Cluster mode (Options.RecordLog set): a chat's record lives in the cluster's
// log, one Flush per actor commit, and this node's bbolt is a
// materialization of it (Chat.LogPos says how far). Only the chat's owner
// writes: it Adopts the chat with its Fence and the log position its
// claim left, appends each flush fenced at the chat's position, and
// applies the same flush to bbolt once the log confirmed it. A node that
// loses the chat is told (Disown), and its actor stops without writing.

// heldRetry is how soon a turn that could not start, its fence not
// holding just then, is tried again.
const heldRetry = 250 * time.Millisecond

// catchUpTimeout bounds reading a chat's log tail when it is loaded.
const catchUpTimeout = 30 * time.Second

// owned is this node's ownership of one chat in cluster mode.
type owned struct {
	fence Fence
	at    uint64 // the log position the next flush appends after
	// stale says the log may hold more than this node applied (a claim
	// just taken, or a write the store did not confirm, which may have
	// landed): the tail is read before the chat is loaded.
	stale bool
	// reloading says a goroutine loads the chat again (reloadLater);
	// again, that it must try once more after a load it already made.
	reloading, again bool
	// wait is how long the next reload waits: it doubles across reloads
	// whose chat failed to write again, until a write is confirmed.
	wait time.Duration
	// unconfirmed says a write of this node's was not confirmed and none
	// has been since: the log may have moved on by it (appendLog).
	unconfirmed bool
	// idle says the chat's last actor left memory idle with nothing that
	// needs this node (actor.releasable), and none loaded since: LetGo
	// may give the chat up. Set under the chat's shard lock.
	idle bool
}

// replicas are the chats this node owns, by id.
type replicas struct {
	mu sync.Mutex
	m  map[string]*owned
}

// Adopt makes this node the chat's owner: f is its hold on the chat and
// at the log position its claim left (the next flush appends after it).
// A loaded actor of the chat is stopped and unloaded first; then the
// local bbolt catches up with every flush after the chat's LogPos, each
// in its own write with its position, and the chat is loaded as after a
// restart: pending messages start, an interrupted turn is answered once,
// and an unfinished tool call becomes one Repeat/Skip question. A chat
// the log does not hold yet (about to be created) is adopted unloaded.
func (s *Service) Adopt(ctx context.Context, chat string, f Fence, at uint64) error {
	if s.opt.RecordLog == nil {
		return errors.New("chats: Adopt is for cluster mode (Options.RecordLog)")
	}
	if f == nil {
		return fmt.Errorf("%w: Adopt without a fence", ErrBadInput)
	}
	o := &owned{fence: f, at: at, stale: true}
	s.replica.mu.Lock()
	if s.replica.m == nil {
		s.replica.m = map[string]*owned{}
	}
	s.replica.m[chat] = o
	s.replica.mu.Unlock()
	s.unload(chat, fmt.Errorf("chat %s was adopted again by this node; the turn goes on from the record", chat))
	err := s.do(ctx, chat, func(a *actor) error { return nil })
	if errors.Is(err, ErrNotFound) && s.caughtUp(chat, o) {
		return nil // nothing stored yet: Create follows
	}
	if err != nil {
		s.dropOwned(chat, o)
		return fmt.Errorf("chat %s: adopt: %w", chat, err)
	}
	return nil
}

// Disown says this node lost the chat (its lease): the running turn stops
// (cause: another node owns the chat), no tool runs, nothing is written,
// and the chat leaves memory. It does not wait for the turn to end.
func (s *Service) Disown(chat string) {
	s.replica.mu.Lock()
	delete(s.replica.m, chat)
	s.replica.mu.Unlock()
	s.unload(chat, fmt.Errorf("chat %s: %w", chat, ErrFenced))
}

// LetGo gives up this node's ownership of chat when it is idle here: its
// last actor left memory idle with nothing unfinished (no turn, pending
// message, open question or work left) and no actor was loaded since.
// True when it did: the chat is then as after Disown (nothing of it is
// written here any more) and its owner lease may go. False keeps it: it
// is loaded, busy, its record's tail is unread, or its last write was
// not confirmed. The cluster's router calls it under the chat's lock, so
// no frame runs on the chat meanwhile.
func (s *Service) LetGo(chat string) bool {
	sh := s.shardOf(chat)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.m[chat] != nil {
		return false
	}
	s.replica.mu.Lock()
	defer s.replica.mu.Unlock()
	o := s.replica.m[chat]
	if o == nil || !o.idle || o.stale || o.unconfirmed || o.reloading {
		return false
	}
	delete(s.replica.m, chat)
	return true
}

// busy says chat's actor was loaded (under its shard lock): an idle
// ownership is idle no more.
func (s *Service) busy(a *actor) {
	if a.own == nil {
		return
	}
	s.replica.mu.Lock()
	a.own.idle = false
	s.replica.mu.Unlock()
}

// unload takes the chat's actor, if loaded, out of the registry now and
// stops it on its goroutine with cause: it writes nothing more.
func (s *Service) unload(chat string, cause error) {
	sh := s.shardOf(chat)
	sh.mu.Lock()
	a := sh.m[chat]
	if a != nil {
		delete(sh.m, chat)
	}
	sh.mu.Unlock()
	if a != nil {
		go a.post(func() { a.disown(cause) })
	}
}

// disown stops the actor for good without writing: its turn is cancelled
// with cause (its tools see a broken chat), subscribers are told the chat
// closed, and the run loop exits once the turn is gone. On its goroutine.
func (a *actor) disown(cause error) {
	if a.broken != nil {
		return
	}
	a.broken = cause
	a.s.log.Warn("chat unloaded: it writes nothing more here", "chat", a.id, "err", cause)
	a.s.evict(a)
	if a.turn != nil {
		a.turn.cancel(cause)
	}
	for sub := range a.subs {
		sub.Deliver(Delivery{Closed: a.id})
	}
	a.subs = map[Subscriber]struct{}{}
}

// owner is nil when this node may write the chat: single-node mode, or
// the owner that adopted it and was not disowned. Its writes are fenced
// by the log itself, so a lease that lapsed for a moment does not stop
// them: a new owner's claim would.
func (a *actor) owner() error {
	if a.s.opt.RecordLog == nil {
		return nil
	}
	if a.own == nil || !a.s.stillOwned(a.id, a.own) {
		return fmt.Errorf("chat %s: this node does not own it: %w", a.id, ErrFenced)
	}
	return nil
}

// held is owner, and that the fence holds now: what a turn's start and a
// tool's run (which the log's fence cannot undo) ask.
func (a *actor) held() error {
	if err := a.owner(); err != nil {
		return err
	}
	if a.own != nil && !a.own.fence.Held() {
		return fmt.Errorf("chat %s: its lease does not hold now: %w", a.id, ErrFenced)
	}
	return nil
}

// heldWait bounds how long a tool call waits for a lapsed fence to hold
// again before the turn stops.
const heldWait = 10 * time.Second

// waitHeld waits, on the turn's goroutine and at most heldWait, while
// this node still owns the chat but its fence does not hold just now (a
// renewal came late). a.own is set before the actor runs and never
// changes, so reading it here is safe.
func (a *actor) waitHeld() {
	o := a.own
	if a.s.opt.RecordLog == nil || o == nil {
		return
	}
	deadline := time.Now().Add(heldWait)
	for !o.fence.Held() && a.s.stillOwned(a.id, o) && time.Now().Before(deadline) {
		select {
		case <-a.done:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// unheld stops the actor of a chat whose fence does not hold now (err
// says so): its lease lapsed, or this node was disowned. The ownership
// stays unless Disown came: a renewal that was late makes it hold again,
// and the next load reads the log's tail first.
func (a *actor) unheld(err error) {
	if a.own != nil {
		a.s.markStale(a.id, a.own)
		a.s.reloadLater(a.id, a.own)
	}
	a.disown(err)
}

// appendLog appends f to the chat's log after the actor's position and
// returns the new one. A refused append (ErrFenced: another node owns the
// chat) disowns the actor. An unconfirmed one (ErrUnavailable, or any
// other failure), or one refused while the fence holds after an
// unconfirmed one (that write landing), unloads it and marks the chat's
// tail unread, so the next load reads what landed
// before it writes, and has the chat loaded again once the store answers
// (reloadLater): its turn goes on even when nobody sends to it. Either
// way nothing of the batch was acknowledged.
func (a *actor) appendLog(f *Flush) (uint64, error) {
	if err := a.owner(); err != nil {
		a.disown(err)
		return 0, a.broken
	}
	f.Meta.LogPos = 0 // a position means nothing inside the log itself
	pos, err := a.s.opt.RecordLog.Append(context.Background(), a.id, a.logAt, f)
	switch {
	case err == nil:
		a.logAt = pos
		a.s.advance(a.id, a.own, pos)
		return pos, nil
	case errors.Is(err, ErrFenced) && (!a.own.fence.Held() || !a.s.unconfirmed(a.id, a.own)):
		a.s.dropOwned(a.id, a.own) // the store says another node owns it
		a.disown(fmt.Errorf("chat %s: nothing was accepted: %w", a.id, err))
		return 0, a.broken
	case errors.Is(err, ErrFenced):
		// An earlier write of this node's was not confirmed, and the
		// fence holds, so nobody else can have claimed the chat: the log
		// moved on by that write (landed, or still in flight at the
		// stream's leader, which counts it). Dropping the chat here left
		// it with nobody to run it while this node renewed its lease; it
		// is read again and goes on from what landed, as below. (Without
		// such a write the store's word stands, whatever the fence says:
		// it is what fences an owner paused past its lease.)
		err = fmt.Errorf("%w: an earlier write of this node's is still being stored", ErrUnavailable)
	}
	if errors.Is(err, ErrBadInput) {
		// Refused before it was sent (too large for the log): nothing
		// landed, but memory is ahead of the record now.
		a.disown(fmt.Errorf("chat %s: nothing was accepted: %w", a.id, err))
		return 0, a.broken
	}
	if !errors.Is(err, ErrUnavailable) {
		err = fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	a.s.markUnconfirmed(a.id, a.own)
	a.s.reloadLater(a.id, a.own)
	a.disown(fmt.Errorf("chat %s: nothing was accepted: %w", a.id, err))
	return 0, a.broken
}

// Reloading a chat whose write the store did not confirm: the first try
// after reloadFirst, then twice as long each time, at most reloadMax.
const (
	reloadFirst = 250 * time.Millisecond
	reloadMax   = 4 * time.Second
)

// reloadLater has o's chat loaded again, in the background, while this
// node still owns it: its actor was unloaded because a write was not
// confirmed (the store lost its quorum, a leader was being elected) or
// its fence did not hold for a moment, and its lease stays this node's,
// so neither the sweeper nor any other node would ever pick up its work.
// The load reads what landed first and then goes on as after a restart:
// pending messages start, an interrupted turn is answered once. A load
// that fails is tried again, until one succeeds or the chat is disowned.
// One such goroutine per ownership at a time.
func (s *Service) reloadLater(chat string, o *owned) {
	s.replica.mu.Lock()
	defer s.replica.mu.Unlock()
	if s.replica.m[chat] != o {
		return
	}
	if o.reloading {
		o.again = true
		return
	}
	o.reloading = true
	go s.reload(chat, o)
}

// reload is reloadLater's goroutine.
func (s *Service) reload(chat string, o *owned) {
	s.replica.mu.Lock()
	wait, failed := max(o.wait, reloadFirst), 0
	s.replica.mu.Unlock()
	for {
		select {
		case <-s.quit:
			return
		case <-time.After(wait/2 + rand.N(wait)): // jittered: a store back up is not asked by every such chat at once
		}
		s.replica.mu.Lock()
		if s.replica.m[chat] != o {
			s.replica.mu.Unlock()
			return
		}
		o.again = false
		s.replica.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), catchUpTimeout)
		err := s.do(ctx, chat, func(a *actor) error { return a.usable() })
		cancel()
		s.replica.mu.Lock()
		switch {
		case s.replica.m[chat] != o:
			s.replica.mu.Unlock()
			return
		case err == nil && !o.again:
			// Loaded: if its next write fails again, the reload after
			// waits longer (a store without quorum loads, then refuses).
			o.reloading, o.wait = false, min(2*wait, reloadMax)
			s.replica.mu.Unlock()
			return
		}
		s.replica.mu.Unlock()
		switch {
		case errors.Is(err, ErrNotFound), errors.Is(err, ErrClosed):
			s.replica.mu.Lock()
			o.reloading = false
			s.replica.mu.Unlock()
			return // deleted meanwhile, or shutting down: nothing to go on with
		case err != nil:
			wait = min(2*wait, reloadMax)
			if failed++; failed == 1 { // once: a store without quorum fails every chat's try
				s.log.Warn("chat: loading it again after a write the store did not confirm failed; it is tried again until it loads", "chat", chat, "err", err)
			}
		default:
			wait = reloadFirst
		}
	}
}

// ownedFresh is the chat's ownership and the position to append after,
// once the chat's bbolt holds everything its log does (nil when this
// node does not own the chat: it may read, not write). Under the chat's
// shard lock, so no other load of the chat reads bbolt meanwhile.
func (s *Service) ownedFresh(chat string) (*owned, uint64, error) {
	s.replica.mu.Lock()
	o := s.replica.m[chat]
	var stale bool
	var at uint64
	if o != nil {
		stale, at = o.stale, o.at
	}
	s.replica.mu.Unlock()
	if o == nil {
		return nil, 0, nil
	}
	if !stale {
		return o, at, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), catchUpTimeout)
	defer cancel()
	pos, err := s.catchUp(ctx, chat)
	if err != nil {
		return nil, 0, fmt.Errorf("chat %s: read its record: %w", chat, err)
	}
	s.replica.mu.Lock()
	defer s.replica.mu.Unlock()
	if s.replica.m[chat] != o {
		return nil, 0, nil // disowned meanwhile
	}
	if pos > o.at {
		// Written after the claim: by this node (an unconfirmed write
		// that landed) while its fence holds. While it does not hold,
		// whose write it was is not known here: the load waits (the
		// tail stays unread), and the lease decides. Once renewed, the
		// fence held all along, so nobody else can have claimed the
		// chat; once lost, the router disowns the chat. (Dropping the
		// ownership here instead left a chat whose lease this node
		// still renews, with nobody to run it.)
		if !o.fence.Held() {
			return nil, 0, fmt.Errorf("chat %s: its record moved on while this node's hold on it is being renewed; try again: %w", chat, ErrUnavailable)
		}
		o.at = pos
	}
	o.stale = false
	return o, o.at, nil
}

// catchUp applies to bbolt every flush of chat's log after the position
// bbolt holds (0 for a chat unknown here), in order, each in its own
// write together with its position, and returns the log's position.
func (s *Service) catchUp(ctx context.Context, chat string) (uint64, error) {
	var from uint64
	err := s.store.db.View(func(tx *bolt.Tx) error {
		c, _, err := loadChat(tx, chat)
		from = c.LogPos
		return err
	})
	if err != nil {
		return 0, err
	}
	applied := 0
	pos, err := s.opt.RecordLog.Read(ctx, chat, from, func(pos uint64, f *Flush) error {
		applied++
		return s.applyFlush(ctx, chat, pos, f)
	})
	if applied > 0 {
		s.indexLater(chat)
	}
	return pos, err
}

// applyFlush writes one flush of the log at position pos to bbolt, the
// same way its owner wrote it, unless bbolt has it already.
func (s *Service) applyFlush(ctx context.Context, chat string, pos uint64, f *Flush) error {
	if f.Chat != chat || f.Meta.ID != chat {
		return fmt.Errorf("%w: a flush of chat %q in %q's log", ErrBadInput, f.Chat, chat)
	}
	var applied bool
	err := s.store.Write(ctx, func(tx *bolt.Tx) (err error) {
		applied, _, _, err = s.putFlushAt(tx, chat, pos, f)
		return err
	})
	if err == nil && applied && f.Purge {
		s.removedHere(chat)
	}
	return err
}

// putFlushAt writes f, the flush at log position pos, in tx unless bbolt
// has it already (the chat's LogPos is at or past pos). It says whether
// it wrote it, whether the chat is new here, and the metadata it left.
// A purge removes whatever bbolt holds of the chat (applied: something
// was there); applied again it finds nothing and writes nothing.
func (s *Service) putFlushAt(tx *bolt.Tx, chat string, pos uint64, f *Flush) (applied, created bool, meta Chat, err error) {
	prev, found, err := loadChat(tx, chat)
	if f.Purge {
		if err == nil && found && prev.LogPos >= pos {
			return false, false, Chat{}, nil // stored again after the purge (not written so today)
		}
		// Damaged metadata goes too (removeChatTx looks for its rows).
		found = found || err != nil || tx.Bucket(bucketChats).Get([]byte(chat)) != nil
		return found, false, f.Meta, s.removeChatTx(tx, chat)
	}
	if err != nil || prev.LogPos >= pos {
		return false, false, Chat{}, err
	}
	g := *f
	g.Meta.LogPos = pos
	if err := writeFlush(tx, s.store, prev.UpdatedAt, &g, nil); err != nil {
		return false, false, Chat{}, err
	}
	return true, !found, g.Meta, nil
}

// removedHere is what follows a chat's removal from this node's bbolt
// in cluster mode, on its owner and on each follower alike: no purge of
// it is due any more here, its search documents go (the indexer sees
// it in chats_search), and so does its handoff folder in this node's
// data dir.
func (s *Service) removedHere(chat string) {
	s.cancelPurge(chat)
	s.indexLater(chat)
	_ = s.dropFiles(chat) // logged; a later prune removes what stays
}

// createLogged stores a new chat in cluster mode: its first flush (c,
// its chat.created event, its creator) is appended to the log after the
// position this node's claim on it left (Adopt first), then written to
// bbolt.
func (s *Service) createLogged(ctx context.Context, c *Chat, ev *Event, creator string) error {
	s.replica.mu.Lock()
	o := s.replica.m[c.ID]
	var at uint64
	if o != nil {
		at = o.at
	}
	s.replica.mu.Unlock()
	if o == nil || !o.fence.Held() {
		return fmt.Errorf("chat %s: this node does not own it: %w", c.ID, ErrFenced)
	}
	f := &Flush{Chat: c.ID, Events: []*Event{ev}, Meta: *c, Creator: creator}
	pos, err := s.opt.RecordLog.Append(ctx, c.ID, at, f)
	switch {
	case errors.Is(err, ErrFenced):
		s.dropOwned(c.ID, o)
		return fmt.Errorf("nothing was accepted: %w", err)
	case err != nil:
		s.markStale(c.ID, o)
		if !errors.Is(err, ErrUnavailable) {
			err = fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return fmt.Errorf("nothing was accepted: %w", err)
	}
	s.advance(c.ID, o, pos)
	c.LogPos = pos
	return s.applyFlush(ctx, c.ID, pos, f)
}

// stillOwned says o is still this node's ownership of chat.
func (s *Service) stillOwned(chat string, o *owned) bool {
	s.replica.mu.Lock()
	defer s.replica.mu.Unlock()
	return s.replica.m[chat] == o
}

// caughtUp says o is still this node's ownership of chat and its bbolt
// has read the log's tail since.
func (s *Service) caughtUp(chat string, o *owned) bool {
	s.replica.mu.Lock()
	defer s.replica.mu.Unlock()
	return s.replica.m[chat] == o && !o.stale
}

// advance records that o's chat's log is at pos, written by this node.
func (s *Service) advance(chat string, o *owned, pos uint64) {
	s.replica.mu.Lock()
	defer s.replica.mu.Unlock()
	if s.replica.m[chat] == o {
		o.at, o.wait, o.unconfirmed = pos, 0, false
	}
}

// markUnconfirmed says a write of o's chat was not confirmed: it may
// land, so the next load reads the log's tail first, and the log found
// past this node's position may be this node's own doing.
func (s *Service) markUnconfirmed(chat string, o *owned) {
	s.replica.mu.Lock()
	defer s.replica.mu.Unlock()
	if s.replica.m[chat] == o {
		o.stale, o.unconfirmed = true, true
	}
}

// unconfirmed says whether a write of o's chat was not confirmed and
// none has been since.
func (s *Service) unconfirmed(chat string, o *owned) bool {
	s.replica.mu.Lock()
	defer s.replica.mu.Unlock()
	return s.replica.m[chat] == o && o.unconfirmed
}

// markStale says a write of o's chat may have landed unconfirmed: the
// next load reads the log's tail first.
func (s *Service) markStale(chat string, o *owned) {
	s.replica.mu.Lock()
	defer s.replica.mu.Unlock()
	if s.replica.m[chat] == o {
		o.stale = true
	}
}

// dropOwned forgets o, unless the chat was adopted again since.
func (s *Service) dropOwned(chat string, o *owned) {
	s.replica.mu.Lock()
	defer s.replica.mu.Unlock()
	if s.replica.m[chat] == o {
		delete(s.replica.m, chat)
	}
}

// creatorOf is who a chat o creates is recorded as created by ("" when
// nobody: no people configured, or the gateway itself).
func creatorOf(s *Service, o Origin) string {
	if o.By == "" || s.opt.People == nil {
		return ""
	}
	return o.By
}
