// Package chats owns the chats: one actor goroutine per live chat, the
// registry that loads chats on demand and evicts idle ones, the pending queue
// of each chat, and the record (bbolt) every chat event is written to before
// anyone sees it.
//
// A chat's state changes only on its actor's goroutine, so whether a message
// was picked up or deleted is decided in one place, in order.
package chats

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/mirror-gateway/mirror/chats/people"
	"github.com/mirror-gateway/mirror/chats/search"
	"github.com/mirror-gateway/mirror/monitor"
	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/ids"
	"github.com/mirror-gateway/mirror/runtime/tokens"
	"github.com/mirror-gateway/mirror/runtime/tools"
	bolt "go.etcd.io/bbolt"
)

// DefaultTitle names a chat created without a title, until its first message
// names it.
const DefaultTitle = "New chat"

// Limits on what a client may store.
const (
	MaxTextBytes  = 256 << 10 // one message
	MaxTitleRunes = 200
	MaxClientID   = 128
)

// Turner runs one turn; *runtime.Engine implements it.
type Turner interface {
	// Run's result says how the turn ended (End, and Class when it
	// failed); the chat records that, and guesses nothing from the reply.
	Run(ctx context.Context, in runtime.TurnInput, onDelta func(text string) error) (runtime.TurnResult, error)
	HasChain(name string) bool
	ChatChain() string
	// Prepare takes a turn's starting reading on the chat's goroutine.
	Prepare(in *runtime.TurnInput)
	// Counter is the token counter of a chain's model family.
	Counter(chain string) *tokens.Counter
}

// Options configure a Service.
type Options struct {
	Store  *Store
	Turner Turner
	// Idle is how long a chat with nothing to do stays in memory.
	Idle time.Duration
	// TurnTimeout bounds one turn.
	TurnTimeout time.Duration
	// PickupDelay is how long the start of a turn may wait to be committed
	// together with its first text, or, for a turn a message started at
	// once, with its end (that message is acknowledged after the commit).
	// Zero uses 20ms.
	PickupDelay time.Duration
	// Ledger serves /changes and /rewind of the files in Workspace; nil
	// when no file tools run. It keeps its buckets in the Store's
	// database: a pruned chat's ledger goes in the commit that removes
	// the chat.
	Ledger    *tools.Ledger
	Workspace string
	// DataDir is where each chat's handoff record is kept current
	// (workstreams/<chat>/handoff.md); "" keeps none. ConfigDir is the
	// folder whose handoff.md overrides the built-in template.
	DataDir, ConfigDir string
	// Metrics counts turns and queue depth; nil counts nothing.
	Metrics *monitor.Metrics
	Log     *slog.Logger
	// MaxPending caps the messages waiting in one chat's queue (0:
	// DefaultMaxPending); a send past it fails with ErrTooLarge.
	MaxPending int
	// Blobs stores attachments; nil refuses them.
	Blobs *Blobs
	// RecordLog, when set, is the cluster's record log (cluster mode): a
	// chat's flushes are appended to it, fenced, before bbolt, and only
	// the node that Adopted a chat writes it (replica.go). nil:
	// single-node mode, bbolt alone. (Options.Log is the logger.)
	RecordLog RecordLog
	// Search is the full-text index the chats are fed into (see
	// manage.go); nil turns search off.
	Search *search.Index
	// UndoDelete is how long a deleted chat can be restored before it
	// goes for good (0: DefaultUndoDelete).
	UndoDelete time.Duration
	// MCPServers are the configured MCP servers' names, which /mcp offers
	// or leaves out per chat.
	MCPServers []string
	// Prompts are the MCP servers' prompts /prompt sends; nil has none.
	Prompts Prompts
	// People decides who sees which chat (see Scope); nil: one person,
	// who sees everything.
	People *people.Registry
	// RolePolicies overlay the tool policies per role (people.policies):
	// a turn runs under the role of the person whose message it answers.
	RolePolicies map[string]map[string]string
	// TokensPerDay caps each person's tokens a UTC day (people.tokens_per_day;
	// 0: no cap): past it their messages are refused with a *RateLimited.
	TokensPerDay int64
	// Now is the clock of per-person days and of Prune's cutoff (nil:
	// time.Now).
	Now func() time.Time
	// Owners routes every operation on a chat to the chat's owner in a
	// cluster (see remote.go); nil: one node, every chat served here.
	Owners Owners
}

// Service is the registry of chats and the API transports use.
type Service struct {
	opt    Options
	store  *Store
	log    *slog.Logger
	seed   maphash.Seed
	shards [64]shard

	quit    chan struct{} // closed when shutdown begins: no new turns
	abort   chan struct{} // closed when running turns must be cut short
	actors  sync.WaitGroup
	closeMu sync.Once

	watchMu  sync.RWMutex
	watchers map[ListWatcher]struct{}

	queued atomic.Int64 // pending messages of the chats in memory

	// instance tells this Service's journaled tool processes from those a
	// previous process left.
	instance string

	manage manage // deferred deletes and the search indexer (manage.go)

	replica replicas // cluster mode: the chats this node owns (replica.go)

	remote remote // routing in cluster mode (remote.go)
}

type shard struct {
	mu sync.Mutex
	m  map[string]*actor
}

// New creates the service. Call Resume once to restart the work a previous
// process left (pending messages, interrupted turns).
func New(opt Options) *Service {
	if opt.Idle <= 0 {
		opt.Idle = 2 * time.Minute
	}
	if opt.TurnTimeout <= 0 {
		opt.TurnTimeout = 10 * time.Minute
	}
	if opt.PickupDelay <= 0 {
		opt.PickupDelay = 20 * time.Millisecond
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	s := &Service{opt: opt, store: opt.Store, log: opt.Log, seed: maphash.MakeSeed(),
		quit: make(chan struct{}), abort: make(chan struct{}), watchers: map[ListWatcher]struct{}{}, instance: randomID()}
	for i := range s.shards {
		s.shards[i].m = map[string]*actor{}
	}
	s.remote.instance = s.instance
	s.startManage()
	return s
}

// Resume loads every chat that has work left from a previous run (pending
// messages or a turn that was running), so that work goes on without anyone
// opening the chat. It reads the work index (bucketWork) and the process
// journal, never every chat: start costs the same however many are stored.
// In cluster mode (Options.Owners) it loads none: a chat runs only on the
// node that owns it, and the leader's sweeper has each chat with work left
// taken by a node.
func (s *Service) Resume(ctx context.Context) (int, error) {
	var ids []string
	err := s.store.db.View(func(tx *bolt.Tx) error {
		seen := map[string]bool{}
		add := func(k []byte) error {
			if !seen[string(k)] {
				seen[string(k)] = true
				ids = append(ids, string(k))
			}
			return nil
		}
		if err := tx.Bucket(bucketWork).ForEach(func(k, _ []byte) error { return add(k) }); err != nil {
			return err
		}
		// A chat with a journaled tool process is loaded too, whatever its
		// metadata says: loading it stops a command that outlived a crash.
		if pb := tx.Bucket(bucketProcs); pb != nil {
			return pb.ForEachBucket(func(k []byte) error {
				if tx.Bucket(bucketChats).Get(k) == nil {
					return nil
				}
				return add(k)
			})
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	s.resumeDeletes()
	if s.opt.Owners != nil {
		return 0, nil // cluster mode: the leader's sweeper has each taken by a node
	}
	for _, id := range ids {
		if err := s.do(ctx, id, func(a *actor) error { return nil }); err != nil {
			s.log.Warn("resume chat", "chat", id, "err", err)
		}
	}
	return len(ids), nil
}

// Close stops the service: no new turns start; running turns get until ctx
// is done to finish, then they are cut short and journaled as interrupted, to
// resume at the next start. Everything is flushed before Close returns.
func (s *Service) Close(ctx context.Context) {
	s.closeMu.Do(func() { close(s.quit) })
	// get checks quit and counts a new actor under its shard's lock: once
	// every lock has been taken after quit, no actor can be added.
	for i := range s.shards {
		s.shards[i].mu.Lock()
		s.shards[i].mu.Unlock()
	}
	done := make(chan struct{})
	go func() { s.actors.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		close(s.abort)
		<-done
	}
	s.stopManage()
}

// Watch registers w for chat list changes until the returned func is called.
func (s *Service) Watch(w ListWatcher) (cancel func()) {
	s.watchMu.Lock()
	s.watchers[w] = struct{}{}
	s.watchMu.Unlock()
	return func() {
		s.watchMu.Lock()
		delete(s.watchers, w)
		s.watchMu.Unlock()
	}
}

// notifyList tells every watcher but except (the one that asked, which
// gets its own answer) that c changed.
func (s *Service) notifyList(c Chat, created bool, except any) {
	s.watchMu.RLock()
	for w := range s.watchers {
		if sw, ok := w.(*scopedWatcher); ok && any(sw.inner()) == except {
			continue
		}
		if any(w) != except {
			w.ChatChanged(c, created)
		}
	}
	s.watchMu.RUnlock()
}

// List returns every chat, most recently updated first. It reads them all:
// a client that shows a list pages through it with ListPage instead.
func (s *Service) List(ctx context.Context) ([]Chat, error) {
	p, err := s.ListPage(ctx, "", -1)
	return p.Chats, err
}

// ListPage returns up to limit chats (0: DefaultListPage; at most
// MaxListPage, except that a negative limit means all of them), most
// recently updated first, starting after cursor after (a previous page's
// Next; "" for the newest). It reads the page from the index by last
// update, so its cost does not grow with the chats stored.
func (s *Service) ListPage(ctx context.Context, after string, limit int) (ChatPage, error) {
	return s.listPage(after, limit, nil)
}

// listPage is ListPage of the chats keep accepts (nil: all).
func (s *Service) listPage(after string, limit int, keep func(*Chat) bool) (ChatPage, error) {
	switch {
	case limit < 0:
		limit = int(^uint(0) >> 1)
	case limit == 0:
		limit = DefaultListPage
	case limit > MaxListPage:
		limit = MaxListPage
	}
	var p ChatPage
	err := s.store.db.View(func(tx *bolt.Tx) (err error) {
		p, err = listPage(tx, after, limit, keep)
		return err
	})
	return p, err
}

// Create makes a new chat. An empty chain means the chat role's chain.
func (s *Service) Create(ctx context.Context, title, chain string, o Origin) (Chat, error) {
	id := ids.NewChat()
	if !s.routed(ctx, id) {
		return s.create(ctx, id, title, chain, o) // it checks the arguments
	}
	// Checked here as well, so that a bad request claims no chat.
	title, chain, err := s.createArgs(title, chain)
	if err != nil {
		return Chat{}, err
	}
	return routeOp[Chat](ctx, s, id, opFrame{Op: opCreate, Title: title, Chain: chain}, o) // this node takes it
}

// createArgs checks a new chat's title and chain, and fills the defaults.
func (s *Service) createArgs(title, chain string) (string, string, error) {
	title = strings.TrimSpace(title)
	if title == "" {
		title = DefaultTitle
	}
	if utf8.RuneCountInString(title) > MaxTitleRunes {
		return "", "", fmt.Errorf("%w: title longer than %d characters", ErrBadInput, MaxTitleRunes)
	}
	if chain == "" {
		chain = s.opt.Turner.ChatChain()
	} else if !s.opt.Turner.HasChain(chain) {
		return "", "", fmt.Errorf("%w: no chain %q in runtime.yaml", ErrBadInput, chain)
	}
	return title, chain, nil
}

// create makes chat id (here, or on its owner for a routed create).
func (s *Service) create(ctx context.Context, id, title, chain string, o Origin) (Chat, error) {
	title, chain, err := s.createArgs(title, chain)
	if err != nil {
		return Chat{}, err
	}
	select {
	case <-s.quit:
		return Chat{}, ErrClosed
	default:
	}
	now := time.Now().UTC()
	c := Chat{ID: id, Title: title, Chain: chain, State: StateIdle, CreatedAt: now, UpdatedAt: now, Seq: 1}
	ev := NewEvent(c.ID, 1, now, &ChatCreated{Title: title})
	if s.opt.RecordLog != nil {
		if err = s.absent(id); err == nil {
			err = s.createLogged(ctx, &c, ev, creatorOf(s, o))
		}
	} else {
		err = s.store.Write(ctx, func(tx *bolt.Tx) error {
			meta, _ := json.Marshal(c)
			if err := putMeta(tx, time.Time{}, &c, meta); err != nil {
				return err
			}
			if o.By != "" && s.opt.People != nil {
				// Who created it, in the same commit: the chat is never
				// visible without its creator.
				if err := people.SetCreatorTx(tx, c.ID, o.By); err != nil {
					return err
				}
			}
			b, err := subBucket(tx, bucketRecords, c.ID, true)
			if err != nil {
				return err
			}
			return b.Put(seqKey(1), ev.JSON())
		})
	}
	if err != nil {
		return Chat{}, fmt.Errorf("create chat: %w", err)
	}
	if s.opt.Owners != nil {
		// Loaded, so that it leaves memory idle like any chat, and this
		// node's ownership of it goes then (Owners.Idle); never loaded, a
		// chat created and left alone kept its lease for good.
		if err := s.do(ctx, id, func(*actor) error { return nil }); err != nil {
			s.log.Warn("load a new chat", "chat", id, "err", err)
		}
	}
	s.notifyList(c, true, askerOf(o))
	return c, nil
}

// Origin identifies who asked: their copy of the resulting event carries Req,
// and is delivered in order with the chat's other events even when the asker
// has not opened the chat.
type Origin struct {
	Sub Subscriber
	Req string
	// By is the id of the person who asked (see Scope); the events the
	// request causes record it as "by". Empty: the gateway itself.
	By string
	// Owner says the person is an owner, who may answer any approval.
	Owner bool
}

// Open subscribes sub to the chat. With since nil it delivers a chat.snapshot;
// otherwise the stored events after since, then chat.resumed. Live events
// follow in order until Unsubscribe.
func (s *Service) Open(ctx context.Context, chat string, since *uint64, sub Subscriber, req string) error {
	if s.routed(ctx, chat) {
		return s.openRemote(ctx, chat, since, sub, req)
	}
	return s.do(ctx, chat, func(a *actor) error { return a.open(ctx, since, sub, req) })
}

// CatchUp is the end of a replay paced by its reader, who reads the missed
// events page by page with Events (as fast as it can send them) and asks
// CatchUp with the last seq it sent. When that is the chat's latest, CatchUp
// sends chat.resumed and subscribes sub, both on the chat's goroutine, so
// the first live event sub gets follows after: nothing is lost or repeated
// at the switch. false means more events were committed meanwhile: read on.
// An after beyond the chat's latest seq gets a chat.snapshot instead.
func (s *Service) CatchUp(ctx context.Context, chat string, after uint64, sub Subscriber, req string) (bool, error) {
	if s.routed(ctx, chat) {
		return s.catchUpRemote(ctx, chat, after, sub, req)
	}
	return doValue(ctx, s, chat, func(a *actor) (bool, error) { return a.catchUp(after, sub, req) })
}

// Events reads a page of chat's stored events after seq after, oldest
// first, as their wire bytes, until they add up to maxBytes (at least one
// event). It reads only the store, never the chat's memory; an empty page
// means no event after after is committed yet.
func (s *Service) Events(ctx context.Context, chat string, after uint64, maxBytes int) ([]Frame, error) {
	if s.routed(ctx, chat) {
		return s.eventsRemote(ctx, chat, after, maxBytes)
	}
	var out []Frame
	err := s.store.db.View(func(tx *bolt.Tx) error {
		if _, ok, err := loadChat(tx, chat); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("chat %s: %w", chat, ErrNotFound)
		}
		var err error
		out, _, err = readFrames(tx, chat, after, maxBytes)
		return err
	})
	return out, err
}

// History returns the page of chat's transcript before seq before (a
// snapshot's or the previous page's Before), within PageBytes.
func (s *Service) History(ctx context.Context, chat string, before uint64, req string) (*History, error) {
	if s.routed(ctx, chat) {
		return routeOp[*History](ctx, s, chat, opFrame{Op: opHistory, Before: before}, Origin{Req: req})
	}
	return doValue(ctx, s, chat, func(a *actor) (*History, error) { return a.history(before, req) })
}

// Unsubscribe stops live events of chat to sub. Whatever was delivered
// before it returns came first.
func (s *Service) Unsubscribe(ctx context.Context, chat string, sub Subscriber) error {
	if s.routed(ctx, chat) {
		s.unwatchRemote(chat, sub)
		return nil
	}
	return s.do(ctx, chat, func(a *actor) error { delete(a.subs, sub); return nil })
}

// Send stores a message from a person. A clientID the chat has seen before
// answers the message it created and stores nothing.
func (s *Service) Send(ctx context.Context, chat, text, clientID, mode string, o Origin) (Message, error) {
	return s.SendAttached(ctx, chat, text, clientID, mode, nil, o)
}

// SendAttached is Send with attachments: the sha256s of uploads (see
// Upload). Unknown ones are refused with ErrUnknownAttachment and nothing
// is stored. With attachments the text may be empty.
func (s *Service) SendAttached(ctx context.Context, chat, text, clientID, mode string, sums []string, o Origin) (Message, error) {
	if s.routed(ctx, chat) {
		return routeOp[Message](ctx, s, chat, opFrame{Op: opSend, Text: &text, ClientID: clientID, Mode: mode, Sums: sums}, o)
	}
	if len(sums) == 0 || text != "" {
		if err := checkText(text); err != nil {
			return Message{}, err
		}
	}
	atts, err := s.attachments(ctx, sums)
	if err != nil {
		return Message{}, err
	}
	if clientID == "" || len(clientID) > MaxClientID {
		return Message{}, fmt.Errorf("%w: client_id must be 1 to %d bytes", ErrBadInput, MaxClientID)
	}
	switch mode {
	case "":
		mode = ModeQueue
	case ModeQueue, ModeRedirect:
	default:
		return Message{}, fmt.Errorf("%w: mode must be queue or redirect", ErrBadInput)
	}
	toks := tokens.Count(text) // counted once, off the chat's goroutine (o200k_base, unless the chat's model differs)
	return doValue(ctx, s, chat, func(a *actor) (Message, error) {
		return a.send(ctx, text, clientID, mode, atts, o, a.recount(text, toks), "")
	})
}

// Edit changes a pending message's text; once picked up it fails with ErrInUse.
func (s *Service) Edit(ctx context.Context, chat, msg, text string, o Origin) (Message, error) {
	return s.EditAttached(ctx, chat, msg, &text, nil, o)
}

// EditAttached changes a pending message: its text (nil keeps it) and
// which of its attachments it keeps (nil keeps them all; a sha256 the
// message does not carry is refused). A message left with neither text nor
// attachments is refused. Once picked up it fails with ErrInUse.
func (s *Service) EditAttached(ctx context.Context, chat, msg string, text *string, keep []string, o Origin) (Message, error) {
	if s.routed(ctx, chat) {
		return routeOp[Message](ctx, s, chat, opFrame{Op: opEdit, Msg: msg, Text: text, Keep: keepField(keep)}, o)
	}
	if text != nil && (*text != "" || keep == nil) {
		if err := checkText(*text); err != nil {
			return Message{}, err
		}
	}
	toks := -1
	if text != nil {
		toks = tokens.Count(*text)
	}
	return doValue(ctx, s, chat, func(a *actor) (Message, error) {
		return a.edit(ctx, msg, text, keep, o, toks)
	})
}

// Delete removes a pending message; once picked up it fails with ErrInUse.
func (s *Service) Delete(ctx context.Context, chat, msg string, o Origin) error {
	if s.routed(ctx, chat) {
		return routeErr(ctx, s, chat, opFrame{Op: opDelete, Msg: msg}, o)
	}
	return s.do(ctx, chat, func(a *actor) error { return a.delete(ctx, msg, o) })
}

// Stop ends the running turn; its partial reply is kept, marked stopped.
// It returns when the turn has finished; ErrNoTurn when none runs.
func (s *Service) Stop(ctx context.Context, chat string, o Origin) error {
	if s.routed(ctx, chat) {
		return routeErr(ctx, s, chat, opFrame{Op: opStop}, o)
	}
	wait, err := doValue(ctx, s, chat, func(a *actor) (chan struct{}, error) { return a.stop(o) })
	if err != nil {
		return err
	}
	select {
	case <-wait:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Get returns a chat's list entry.
func (s *Service) Get(ctx context.Context, chat string) (Chat, error) {
	if s.routed(ctx, chat) {
		return routeOp[Chat](ctx, s, chat, opFrame{Op: opGet}, Origin{})
	}
	return doValue(ctx, s, chat, func(a *actor) (Chat, error) { return a.info(), nil })
}

func checkText(text string) error {
	switch {
	case strings.TrimSpace(text) == "":
		return fmt.Errorf("%w: text is empty", ErrBadInput)
	case len(text) > MaxTextBytes:
		return fmt.Errorf("%w: text is %d bytes; the limit is %d", ErrBadInput, len(text), MaxTextBytes)
	case !utf8.ValidString(text):
		return fmt.Errorf("%w: text is not valid UTF-8", ErrBadInput)
	}
	return nil
}

// do runs f on the chat's actor goroutine and returns its error. The chat is
// loaded when it is not in memory.
func (s *Service) do(ctx context.Context, id string, f func(a *actor) error) error {
	_, err := doValue(ctx, s, id, func(a *actor) (struct{}, error) { return struct{}{}, f(a) })
	return err
}

// doValue is do for a task that answers a value. The value travels with
// the error over the reply channel, so a caller whose ctx ended first gets
// the zero value and never reads one the actor is still writing: tasks
// must not hand results out through captured variables.
func doValue[T any](ctx context.Context, s *Service, id string, f func(a *actor) (T, error)) (T, error) {
	type reply struct {
		v   T
		err error
	}
	var zero T
	for {
		a, err := s.get(id)
		if err != nil {
			return zero, err
		}
		res := make(chan reply, 1)
		select {
		case a.inbox <- func() {
			v, err := f(a)
			if err == errAnswerAtCommit {
				// Answered by the flush that commits what f wrote.
				a.b.acks = append(a.b.acks, func(err error) {
					if err != nil {
						res <- reply{zero, err}
						return
					}
					res <- reply{v, nil}
				})
				return
			}
			res <- reply{v, err}
		}:
		case <-a.done:
			continue // evicted meanwhile: load it again
		case <-ctx.Done():
			return zero, ctx.Err()
		}
		select {
		case r := <-res:
			return r.v, r.err
		case <-ctx.Done():
			return zero, ctx.Err()
		}
	}
}

func (s *Service) shardOf(id string) *shard {
	return &s.shards[maphash.String(s.seed, id)%uint64(len(s.shards))]
}

// get returns the live actor of chat id, loading it when needed.
func (s *Service) get(id string) (*actor, error) {
	if id == "" || len(id) > 64 {
		return nil, fmt.Errorf("chat %q: %w", id, ErrNotFound)
	}
	sh := s.shardOf(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if a := sh.m[id]; a != nil {
		return a, nil
	}
	select {
	case <-s.quit:
		return nil, ErrClosed
	default:
	}
	a, err := loadActor(s, id)
	if err != nil {
		return nil, err
	}
	if s.opt.Owners != nil {
		a.subs[publisher{s.opt.Owners}] = struct{}{} // its events reach every node's watchers
		s.busy(a)
	}
	sh.m[id] = a
	s.actors.Add(1)
	go a.run()
	return a, nil
}

// evict removes a from the registry; false when a was already replaced.
func (s *Service) evict(a *actor) {
	sh := s.shardOf(a.id)
	sh.mu.Lock()
	if sh.m[a.id] == a {
		delete(sh.m, a.id)
	}
	sh.mu.Unlock()
}

// Shed unloads every chat in memory that is idle (nothing runs, waits or is
// uncommitted, nobody watches it) and has done nothing for at least quiet,
// without waiting for limits.chat_idle, and returns how many left. The
// memory watcher calls it once the gateway has gone quiet, so the memory a
// load's chats held can go back to the system; a chat shed is loaded again
// from the store at its next use. A chat busy at that moment is left.
func (s *Service) Shed(quiet time.Duration) int {
	var live []*actor
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for _, a := range sh.m {
			live = append(live, a)
		}
		sh.mu.Unlock()
	}
	n := 0
	for _, a := range live {
		leaves := make(chan bool, 1)
		select {
		case a.inbox <- func() {
			a.shed = a.idle() && a.broken == nil && !a.quitting && time.Since(a.active) >= quiet
			leaves <- a.shed
		}:
		default:
			continue // busy with something else just now, or gone
		}
		if <-leaves {
			<-a.done // it exits right after this func
			n++
		}
	}
	return n
}

// Live returns how many chats are in memory.
func (s *Service) Live() int {
	n := 0
	for i := range s.shards {
		s.shards[i].mu.Lock()
		n += len(s.shards[i].m)
		s.shards[i].mu.Unlock()
	}
	return n
}

func randomID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b[:])
}

// Working returns the chats with work left as stored (messages waiting, a
// turn running or interrupted), read from the work index: as many reads as
// such chats, however many are stored.
func (s *Service) Working(ctx context.Context) ([]Chat, error) {
	var out []Chat
	err := s.store.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketWork).ForEach(func(k, _ []byte) error {
			c, ok, err := loadChat(tx, string(k))
			if err != nil || !ok {
				return err
			}
			listState(&c)
			out = append(out, c)
			return nil
		})
	})
	return out, err
}
