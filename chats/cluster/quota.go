package cluster

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/quota"
)

// The quota book's names in NATS: grants are asked of the leader on
// QuotaReserveSubject.LEADER (request/reply; LEADER is the node the leader
// lease names) and ended on QuotaReleaseSubject;
// the leader journals each grant in QuotaBucket (key "grant.<id>", with a
// TTL of a window, so the bucket holds exactly what the window counts),
// and every node saves the observations its providers report there too
// (key "obs.<hex of the quota key>").
const (
	QuotaReserveSubject = "mirror.quota.reserve"
	QuotaReleaseSubject = "mirror.quota.release"
	QuotaBucket         = "mirror_quota"
	grantPrefix         = "grant."
	obsPrefix           = "obs."
)

// QuotaBook is the cluster's quota book (quota.Keeper): one window per
// key for all the nodes, kept by the leader. A node asks the leader for
// every grant; the leader reserves it in its own quota.Book, journals it
// before answering, and a new leader rebuilds its window from the journal,
// so a leader's death neither forgets what the window holds nor lets the
// nodes exceed it. Observations (429s, rate-limit headers) are learned
// where the response arrived, saved in the bucket, and learned from there
// by the leader. Retry delays stay with the node that got them.
type QuotaBook struct {
	n     *Node
	opt   quota.Options
	local *quota.Book // this node's observations and retries
	stop  context.CancelFunc
	done  chan struct{}

	mu     sync.Mutex
	kv     jetstream.KeyValue
	lead   *leaderBook // while this node leads
	closed bool
	// leaderName is the node grants are asked of (the leader lease's
	// holder when last read); "" when unknown.
	leaderName string
}

// leaderBook is the leader's side: its window and the grants it answered.
type leaderBook struct {
	book   *quota.Book
	grants map[string]*grant
	subs   []*nats.Subscription
	cancel context.CancelFunc
}

type grant struct {
	rec     grantRecord
	release func(quota.Usage)
}

// grantRecord is a grant as the journal holds it.
type grantRecord struct {
	Key      quota.Key `json:"key"`
	Tokens   int       `json:"tokens"`
	At       time.Time `json:"at"`
	Released bool      `json:"released,omitempty"`
}

// reserveRequest and reserveReply are the wire form of a grant.
type reserveRequest struct {
	ID      string    `json:"id"`
	Key     quota.Key `json:"key"`
	Tokens  int       `json:"tokens"`
	MaxWait int64     `json:"max_wait_ms"`
}

type reserveReply struct {
	Granted     bool                    `json:"granted"`
	TooLarge    *quota.TooLargeError    `json:"too_large,omitempty"`
	WaitTooLong *quota.WaitTooLongError `json:"wait_too_long,omitempty"`
	Error       string                  `json:"error,omitempty"`
	// Again says the answering node stopped leading: ask again.
	Again bool `json:"again,omitempty"`
}

type releaseMsg struct {
	ID   string      `json:"id"`
	Used quota.Usage `json:"used"`
}

// Quotas returns the node's quota book. opt is what a quota.Book takes
// (its Store is replaced by the cluster's bucket). Close it before the node.
func (n *Node) Quotas(opt quota.Options) *QuotaBook {
	if opt.MaxWait <= 0 {
		opt.MaxWait = quota.DefaultMaxWait
	}
	if opt.Clock == nil {
		opt.Clock = time.Now
	}
	q := &QuotaBook{n: n, opt: opt, done: make(chan struct{})}
	lopt := opt
	lopt.Store = obsStore{q}
	q.local = quota.New(lopt)
	ctx, cancel := context.WithCancel(context.Background())
	q.stop = cancel
	go q.keep(ctx)
	return q
}

// keep creates the bucket once the cluster is ready, then takes up or
// gives up the leader's side as the node's leader lease comes and goes.
func (q *QuotaBook) keep(ctx context.Context) {
	defer close(q.done)
	defer q.resign()
	select {
	case <-ctx.Done():
		return
	case <-q.n.Ready():
	}
	wait := 100 * time.Millisecond
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		kv, err := q.n.js.CreateOrUpdateKeyValue(cctx, jetstream.KeyValueConfig{
			Bucket: QuotaBucket, Description: "Mirror quota book: the leader's grants (TTL a window) and learned quotas",
			History: 1, Storage: jetstream.FileStorage, Replicas: q.n.o.Replicas, LimitMarkerTTL: time.Second,
		})
		cancel()
		if err == nil {
			q.mu.Lock()
			q.kv = kv
			q.mu.Unlock()
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
	t := time.NewTicker(max(q.n.o.LeaseTTL/6, 50*time.Millisecond))
	defer t.Stop()
	for {
		leads := q.n.IsLeader()
		q.mu.Lock()
		has := q.lead != nil
		q.mu.Unlock()
		switch {
		case leads && !has:
			if err := q.takeUp(ctx); err != nil && ctx.Err() == nil {
				q.n.log.Warn("cluster: the quota book could not be rebuilt from its journal; trying again", "err", err)
			}
		case !leads && has:
			q.resign()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// takeUp rebuilds the window from the journal and starts answering.
func (q *QuotaBook) takeUp(ctx context.Context) error {
	q.mu.Lock()
	kv := q.kv
	q.mu.Unlock()
	lopt := q.opt
	lopt.Store = nil
	lb := &leaderBook{book: quota.New(lopt), grants: map[string]*grant{}}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := watchAll(rctx, kv, nil, func(e jetstream.KeyValueEntry) { lb.apply(e) })
	cancel()
	if err != nil {
		return err
	}
	rebuilt := len(lb.grants) // counted before the handlers may add some
	lctx, lcancel := context.WithCancel(ctx)
	lb.cancel = lcancel
	// Observations saved later by any node reach the leader's window.
	w, err := kv.Watch(lctx, obsPrefix+">", jetstream.UpdatesOnly(), jetstream.IgnoreDeletes())
	if err != nil {
		lcancel()
		return err
	}
	go func() {
		defer w.Stop()
		for {
			select {
			case <-lctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e != nil {
					lb.apply(e)
				}
			}
		}
	}()
	for subj, h := range map[string]nats.MsgHandler{
		reserveSubject(q.n.o.Name): func(m *nats.Msg) { go q.grant(lctx, lb, m) },
		QuotaReleaseSubject:        func(m *nats.Msg) { q.release(lctx, lb, m) },
	} {
		s, err := q.n.nc.Subscribe(subj, h)
		if err != nil {
			lb.stop()
			return err
		}
		lb.subs = append(lb.subs, s)
	}
	q.mu.Lock()
	q.lead = lb
	q.mu.Unlock()
	q.n.log.Info("cluster: this node keeps the quota book", "grants in the window", rebuilt)
	return nil
}

// apply learns one journal entry: a grant or an observation.
func (lb *leaderBook) apply(e jetstream.KeyValueEntry) {
	switch k := e.Key(); {
	case strings.HasPrefix(k, grantPrefix):
		var r grantRecord
		if json.Unmarshal(e.Value(), &r) != nil {
			return
		}
		rel := lb.book.Restore(r.Key, r.At, r.Tokens, r.Released)
		if !r.Released {
			lb.grants[strings.TrimPrefix(k, grantPrefix)] = &grant{rec: r, release: rel}
		}
	case strings.HasPrefix(k, obsPrefix):
		var o struct {
			Key quota.Key         `json:"key"`
			Obs quota.Observation `json:"obs"`
		}
		if json.Unmarshal(e.Value(), &o) == nil {
			lb.book.Learn(o.Key, o.Obs)
		}
	}
}

func (lb *leaderBook) stop() {
	for _, s := range lb.subs {
		_ = s.Unsubscribe()
	}
	lb.cancel()
}

// resign stops answering: this node no longer leads (or closes).
func (q *QuotaBook) resign() {
	q.mu.Lock()
	lb := q.lead
	q.lead = nil
	q.mu.Unlock()
	if lb != nil {
		lb.stop()
	}
}

// grant answers one reservation: reserve in the leader's window, journal,
// then reply. A grant that could not be journaled is released and refused:
// a new leader must never find fewer tokens than the nodes were granted.
func (q *QuotaBook) grant(ctx context.Context, lb *leaderBook, m *nats.Msg) {
	var req reserveRequest
	if err := json.Unmarshal(m.Data, &req); err != nil || req.ID == "" || strings.ContainsAny(req.ID, ".*> ") {
		respond(m, reserveReply{Error: "bad quota request"})
		return
	}
	if !q.n.IsLeader() {
		respond(m, reserveReply{Again: true, Error: "this node no longer leads"})
		return
	}
	// The same id asked again: a grant made (by this leader, or by the
	// one before, rebuilt from the journal) whose answer the asker never
	// got, because the leader died or the answer was lost. It is the same
	// grant: answered again, not reserved twice.
	q.mu.Lock()
	_, had := lb.grants[req.ID]
	q.mu.Unlock()
	if had {
		respond(m, reserveReply{Granted: true})
		return
	}
	wait := min(time.Duration(req.MaxWait)*time.Millisecond, q.opt.MaxWait)
	rctx, cancel := context.WithTimeout(ctx, wait+time.Second)
	defer cancel()
	rel, err := lb.book.Reserve(rctx, req.Key, req.Tokens, nil)
	var tl *quota.TooLargeError
	var wl *quota.WaitTooLongError
	switch {
	case errors.As(err, &tl):
		respond(m, reserveReply{TooLarge: tl})
		return
	case errors.As(err, &wl):
		respond(m, reserveReply{WaitTooLong: wl})
		return
	case err != nil && ctx.Err() != nil:
		respond(m, reserveReply{Again: true, Error: "this node stopped leading"})
		return
	case err != nil:
		respond(m, reserveReply{Error: err.Error()})
		return
	}
	g := &grant{rec: grantRecord{Key: req.Key, Tokens: req.Tokens, At: q.opt.Clock().UTC()}, release: rel}
	if err := q.journal(ctx, req.ID, g.rec); err != nil {
		rel(quota.Usage{})
		// Its store is unanswered while it elects a leader (a node just
		// died or paused): the asker asks again, within its bound, rather
		// than fail the turn. A journal stored unconfirmed is overwritten
		// by the next grant of the same id.
		respond(m, reserveReply{Again: true, Error: "the quota book could not journal the grant: " + err.Error()})
		return
	}
	q.mu.Lock()
	lb.grants[req.ID] = g
	q.mu.Unlock()
	respond(m, reserveReply{Granted: true})
}

// release ends a grant with what the provider billed, in the window and
// in the journal.
func (q *QuotaBook) release(ctx context.Context, lb *leaderBook, m *nats.Msg) {
	var r releaseMsg
	if json.Unmarshal(m.Data, &r) != nil {
		return
	}
	q.mu.Lock()
	g := lb.grants[r.ID]
	delete(lb.grants, r.ID)
	q.mu.Unlock()
	if g == nil {
		return
	}
	if r.Used.Input >= 0 {
		g.rec.Tokens = max(r.Used.Input, r.Used.Cached, 0)
	}
	g.rec.Released = true
	// Journaled before the window lets the estimate go, so the window this
	// leader shows never holds less than a new leader would rebuild from
	// the journal (a kill -9 between the two once left them 6 % apart).
	jctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_ = q.journal(jctx, r.ID, g.rec) // lost: the estimate stays, which errs on the safe side
	g.release(r.Used)
}

// journal writes a grant with a TTL of what is left of its window.
func (q *QuotaBook) journal(ctx context.Context, id string, r grantRecord) error {
	ttl := r.At.Add(quota.Window).Sub(q.opt.Clock())
	if ttl < time.Second {
		return nil // out of the window already: nothing to rebuild
	}
	b, _ := json.Marshal(r)
	_, err := q.n.js.PublishMsg(ctx, natsMsg("$KV."+QuotaBucket+"."+grantPrefix+id, b), jetstream.WithMsgTTL(ttl.Round(time.Second)))
	return err
}

func respond(m *nats.Msg, r reserveReply) {
	b, _ := json.Marshal(r)
	_ = m.Respond(b)
}

// ErrNoQuotaBook is a grant nobody answered: no leader keeps the quota
// book now (an election is under way, or too few nodes are up).
var ErrNoQuotaBook = errors.New("cluster: no leader answers for the quota book")

// Reserve asks the leader for room for tokens under key's quota, waiting
// (up to the book's MaxWait) while no leader answers, as during an
// election. onWait is not called: the leader does the waiting.
func (q *QuotaBook) Reserve(ctx context.Context, key quota.Key, tokens int, onWait func(quota.Wait)) (func(quota.Usage), error) {
	req := reserveRequest{ID: nuid.Next(), Key: key, Tokens: tokens, MaxWait: q.opt.MaxWait.Milliseconds()}
	data, _ := json.Marshal(req)
	deadline := time.Now().Add(q.opt.MaxWait + 2*time.Second)
	pause := 50 * time.Millisecond
	for {
		rctx, cancel := context.WithDeadline(ctx, deadline)
		m, err := q.ask(rctx, data)
		cancel()
		if err == nil {
			var rep reserveReply
			if err := json.Unmarshal(m.Data, &rep); err != nil {
				return nil, fmt.Errorf("cluster: the quota book's answer: %w", err)
			}
			switch {
			case rep.Granted:
				return q.releaser(req.ID), nil
			case rep.TooLarge != nil:
				return nil, rep.TooLarge
			case rep.WaitTooLong != nil:
				return nil, rep.WaitTooLong
			case !rep.Again:
				return nil, fmt.Errorf("cluster: the quota book: %s", rep.Error)
			}
			err = fmt.Errorf("%w (%s)", nats.ErrNoResponders, rep.Error) // the leader changes: ask the next
			q.mu.Lock()
			q.leaderName = "" // read again who leads
			q.mu.Unlock()
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !errors.Is(err, nats.ErrNoResponders) || time.Now().After(deadline) {
			// A timeout may hide a grant made and journaled: it stays in
			// the window until it expires, erring on the safe side.
			return nil, fmt.Errorf("%w: %v", ErrNoQuotaBook, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// reserveSubject is where the quota book of node leader is asked.
func reserveSubject(leader string) string { return QuotaReserveSubject + "." + leader }

// errLeaderMoved is a reservation asked of a node the leader lease no
// longer names: asked again of the next.
var errLeaderMoved = fmt.Errorf("%w: the leader lease moved while a grant was asked", nats.ErrNoResponders)

// ask sends one reservation to the node the leader lease names and waits
// for its answer, bounded by ctx: ErrNoResponders (wrapped) when nobody
// leads, nobody keeps the book there (yet), or the lease moved to another
// node while the answer was awaited. The leader may wait for room before
// it answers, so the wait is not cut short while the lease still names
// it; but a leader that went silent (a paused process, whose server's
// route still carries its subscription) loses its lease, and the grant is
// then asked of the next. (Asked of everyone on one subject, such a grant
// reached only the silent ex-leader and waited the book's whole MaxWait:
// the turn did not ask its model for two minutes.)
func (q *QuotaBook) ask(ctx context.Context, data []byte) (*nats.Msg, error) {
	_, leases, _, err := q.n.buckets()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", nats.ErrNoResponders, err)
	}
	leader, err := q.leader(ctx, leases)
	if err != nil || leader == "" {
		return nil, fmt.Errorf("%w: nobody leads (%v)", nats.ErrNoResponders, err)
	}
	inbox := q.n.nc.NewRespInbox()
	sub, err := q.n.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	if err := q.n.nc.PublishMsg(&nats.Msg{Subject: reserveSubject(leader), Reply: inbox, Data: data}); err != nil {
		return nil, err
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, q.n.storeWait())
		m, err := sub.NextMsgWithContext(wctx)
		cancel()
		switch {
		case err == nil && m.Header.Get("Status") == "503", errors.Is(err, nats.ErrNoResponders):
			q.forgetLeader(leader)
			return nil, fmt.Errorf("%w: %s keeps no quota book", nats.ErrNoResponders, leader)
		case err == nil:
			return m, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case !errors.Is(err, context.DeadlineExceeded):
			return nil, err
		}
		// Still unanswered: asked again elsewhere once the lease names
		// another node (this one cannot grant validly any more).
		rctx, cancel := context.WithTimeout(ctx, q.n.storeWait())
		now, err := holderOf(rctx, leases, leaderKey)
		cancel()
		if err == nil && now != leader {
			q.forgetLeader(leader)
			return nil, errLeaderMoved
		}
	}
}

// leader is the node the leader lease names, remembered until a grant
// asked of it fails.
func (q *QuotaBook) leader(ctx context.Context, leases jetstream.KeyValue) (string, error) {
	q.mu.Lock()
	l := q.leaderName
	q.mu.Unlock()
	if l != "" {
		return l, nil
	}
	rctx, cancel := context.WithTimeout(ctx, q.n.storeWait())
	defer cancel()
	l, err := holderOf(rctx, leases, leaderKey)
	if err == nil && l != "" {
		q.mu.Lock()
		q.leaderName = l
		q.mu.Unlock()
	}
	return l, err
}

// forgetLeader drops the remembered leader, when it is still leader.
func (q *QuotaBook) forgetLeader(leader string) {
	q.mu.Lock()
	if q.leaderName == leader {
		q.leaderName = ""
	}
	q.mu.Unlock()
}

func (q *QuotaBook) releaser(id string) func(quota.Usage) {
	var once sync.Once
	return func(used quota.Usage) {
		once.Do(func() {
			b, _ := json.Marshal(releaseMsg{ID: id, Used: used})
			// Unanswered when the leader just changed: the new one finds the
			// grant in the journal and keeps its estimate, the safe side.
			_ = q.n.nc.Publish(QuotaReleaseSubject, b)
		})
	}
}

// ObserveLimits learns rate-limit headers on this node and, through the
// bucket, on the leader.
func (q *QuotaBook) ObserveLimits(key quota.Key, l *provider.RateLimits) {
	q.local.ObserveLimits(key, l)
}

// ObserveError learns a provider's refusal on this node (its retry delay
// stays here) and its quota, through the bucket, on the leader.
func (q *QuotaBook) ObserveError(key quota.Key, err error) { q.local.ObserveError(key, err) }

// Retry decides on this node, from what its own providers answered.
func (q *QuotaBook) Retry(ctx context.Context, key quota.Key, attempt int, err error) (bool, time.Duration) {
	return q.local.Retry(ctx, key, attempt, err)
}

// Snapshot is the leader's window when this node leads, and this node's
// view (its observations, no cluster usage) otherwise.
func (q *QuotaBook) Snapshot() []quota.Status {
	q.mu.Lock()
	lb := q.lead
	q.mu.Unlock()
	if lb != nil {
		return lb.book.Snapshot()
	}
	return q.local.Snapshot()
}

// Leading says whether this node keeps the quota book now.
func (q *QuotaBook) Leading() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.lead != nil
}

// Close stops answering and watching; grants in flight end unanswered.
func (q *QuotaBook) Close() {
	q.stop()
	<-q.done
}

// obsStore saves this node's observations in the bucket, where the
// leader learns them (quota.Store).
type obsStore struct{ q *QuotaBook }

func obsKey(k quota.Key) string {
	b, _ := json.Marshal(k)
	return obsPrefix + hex.EncodeToString(b)
}

func (s obsStore) bucket() (jetstream.KeyValue, error) {
	s.q.mu.Lock()
	defer s.q.mu.Unlock()
	if s.q.kv == nil {
		return nil, errors.New("cluster: the quota bucket is not ready yet")
	}
	return s.q.kv, nil
}

// LoadObservations is empty: the leader reads the bucket itself.
func (s obsStore) LoadObservations() (map[quota.Key]quota.Observation, error) { return nil, nil }

// SaveObservation puts key's observation in the bucket.
func (s obsStore) SaveObservation(key quota.Key, o quota.Observation) error {
	kv, err := s.bucket()
	if err != nil {
		return err
	}
	b, _ := json.Marshal(struct {
		Key quota.Key         `json:"key"`
		Obs quota.Observation `json:"obs"`
	}{key, o})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = kv.Put(ctx, obsKey(key), b)
	return err
}
