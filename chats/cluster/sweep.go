package cluster

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The sweeper is one of the leader's singletons: a chat whose last flush
// left work (the work index, WorkLeft) and whose lease nobody holds has
// lost its owner (the node died, or let it go mid-turn); nothing else
// would ever open it again until someone writes to it. The leader takes
// such chats (claims and opens them: the owner adopts the chat, and its
// interrupted turn is recovered as after a restart), a bounded number
// per sweep.
//
// A dead node's chats are the ones that must move quickly. Their leases
// end when their TTL runs out (nothing earlier: a node merely paused or
// cut off still acts until its own lease stops counting as held, so only
// the store's expiry makes taking a chat safe), so the sweeper wakes when
// the first lease of a chat with work left would end unless renewed, as
// the lease's stored message says (time and TTL), rather than on a fixed
// tick. Its readings are direct gets, which any replica answers: no
// consumer (whose creation needs the JetStream meta leader) and no stream
// leader, either of which the dead node may have been.
const (
	// SweepEvery is the longest the leader waits between sweeps.
	SweepEvery = 2 * time.Second
	// sweepSoonest is the shortest: a lease read as past its end but
	// still stored (its stream electing a leader, or the store's expiry
	// a moment behind) is looked at again no sooner than this.
	sweepSoonest = 250 * time.Millisecond
	// SweepMax bounds the chats one sweep takes; the rest wait for the
	// next sweep, so that a sweep's end (and a lost leadership seen
	// between sweeps) comes within seconds.
	SweepMax = 512
	// sweepParallel is how many chats a sweep opens at once: a take is
	// mostly waiting for replicated, synced writes (the lease, the claim),
	// so a dead node's hundred chats move in two rounds rather than in
	// twenty-five (the store batches concurrent writes into fewer syncs:
	// in three runs each on a loaded machine, 100 chats took 0.6–7.9 s
	// from the first take to the last with 16 at a time, 0.4–6.1 s with
	// 64, the slowest waiting for the records stream's new leader).
	sweepParallel = 64
	// takeTimeout bounds one take of a sweep.
	takeTimeout = 10 * time.Second
)

// Sweeper takes orphaned chats with work left, on the leader.
type Sweeper struct {
	r     *Router
	every time.Duration
	max   int
	stop  context.CancelFunc
	done  chan struct{}
}

// Sweep starts the sweeper of r's node (it sweeps only while the node
// leads). Close stops it; close it before the router.
func (r *Router) Sweep() *Sweeper { return r.sweep(SweepEvery, SweepMax) }

func (r *Router) sweep(every time.Duration, most int) *Sweeper {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sweeper{r: r, every: every, max: most, stop: cancel, done: make(chan struct{})}
	go s.run(ctx)
	return s
}

// Close stops the sweeper and waits for a sweep under way.
func (s *Sweeper) Close() {
	s.stop()
	<-s.done
}

func (s *Sweeper) run(ctx context.Context) {
	defer close(s.done)
	select {
	case <-ctx.Done():
		return
	case <-s.r.n.Ready():
	}
	soonest := min(sweepSoonest, s.every)
	t := time.NewTimer(soonest)
	defer t.Stop()
	failed := 0 // sweeps failed in a row
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !s.r.n.IsLeader() {
			// Looked at often (a local read): a node that has just
			// become leader, its predecessor dead, sweeps at once.
			t.Reset(soonest)
			continue
		}
		start := time.Now()
		taken, next, err := s.once(ctx)
		if len(taken) > 0 {
			s.r.n.log.Info("cluster: the sweeper took chats with work left and no owner", "chats", len(taken), "first", taken[0],
				"took", time.Since(start).Round(time.Millisecond))
		}
		if err == nil {
			failed = 0
			t.Reset(sweepWait(next, time.Now(), soonest, s.every))
			continue
		}
		if ctx.Err() == nil {
			s.r.n.log.Warn("cluster: the sweep for chats left without an owner failed; the next tries again", "err", err)
		}
		// Soon (a node's death can fail one sweep), then less and less
		// often while the store does not answer.
		t.Reset(min(soonest<<min(failed, 8), s.every))
		failed++
	}
}

// sweepWait is how long after now to sweep again: until next (when the
// first lease of a chat with work left ends unless renewed; zero when
// none is held), within [soonest, every].
func sweepWait(next, now time.Time, soonest, every time.Duration) time.Duration {
	if next.IsZero() {
		return every
	}
	return min(max(next.Sub(now), soonest), every)
}

// once is one sweep: the chats of the work index whose lease nobody
// holds are taken here, at most s.max of them, while this node leads.
// It returns the chats it took, and when to look again: when the first
// lease of a chat with work left that some node holds ends unless
// renewed (zero when none does), or now when more orphans wait than one
// sweep takes.
func (s *Sweeper) once(ctx context.Context) (taken []string, next time.Time, err error) {
	lctx, cancel := context.WithTimeout(ctx, takeTimeout)
	work, err := s.r.n.workLeft(lctx)
	var held map[string]time.Time
	if err == nil && len(work) > 0 {
		held, err = s.r.n.leasesOf(lctx, work)
	}
	cancel()
	if err != nil || len(work) == 0 {
		return nil, time.Time{}, err
	}
	var orphans []string
	for _, chat := range work {
		end, ok := held[chat]
		switch {
		case !ok:
			if len(orphans) < s.max {
				orphans = append(orphans, chat)
			} else {
				next = time.Now()
			}
		case !end.IsZero() && (next.IsZero() || end.Before(next)):
			next = end
		}
	}
	var (
		mu    sync.Mutex
		errs  []error
		wg    sync.WaitGroup
		slots = make(chan struct{}, sweepParallel)
	)
	for _, chat := range orphans {
		if ctx.Err() != nil || !s.r.n.IsLeader() {
			break
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			tctx, cancel := context.WithTimeout(ctx, takeTimeout)
			defer cancel()
			_, err := s.r.take(tctx, chat)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				taken = append(taken, chat)
			case errors.Is(err, ErrHeld):
				// Someone sent to it meanwhile and took it: served.
			default:
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	return taken, next, errors.Join(errs...)
}

// workLeft lists the work index's chats by direct get; past one batch
// (more than 1024 chats with work left) by WorkLeft's listing.
func (n *Node) workLeft(ctx context.Context) ([]string, error) {
	if _, _, _, err := n.buckets(); err != nil {
		return nil, err
	}
	prefix := "$KV." + WorkBucket + "."
	var out []string
	err := n.lastMsgs(ctx, "KV_"+WorkBucket, []string{prefix + ">"}, func(m *nats.Msg) {
		if k, ok := strings.CutPrefix(m.Header.Get(jetstream.SubjectHeader), prefix); ok && live(m) {
			out = append(out, k)
		}
	})
	if errors.Is(err, errTooMany) {
		return n.WorkLeft(ctx)
	}
	return out, err
}

// leasesBatch is how many chats' leases one direct get asks for.
const leasesBatch = 256

// leasesOf reads which of chats have a lease someone holds now, and when
// each ends unless renewed (the time its last renewal was stored plus its
// TTL, as the store's clock says).
func (n *Node) leasesOf(ctx context.Context, chats []string) (map[string]time.Time, error) {
	prefix := "$KV." + LeasesBucket + "." + chatKeyPrefix
	held := map[string]time.Time{}
	for b := range slices.Chunk(chats, leasesBatch) {
		filters := make([]string, len(b))
		for i, chat := range b {
			filters[i] = prefix + chat
		}
		err := n.lastMsgs(ctx, "KV_"+LeasesBucket, filters, func(m *nats.Msg) {
			chat, ok := strings.CutPrefix(m.Header.Get(jetstream.SubjectHeader), prefix)
			if !ok || !live(m) {
				return
			}
			held[chat] = leaseEnd(m, n.o.LeaseTTL)
		})
		if err != nil {
			return nil, err
		}
	}
	return held, nil
}

// leaseEnd is when the lease message m stores ends unless renewed: its
// time plus its TTL (ttl when it names none); zero when its time is
// unreadable (the sweeper then waits its longest).
func leaseEnd(m *nats.Msg, ttl time.Duration) time.Time {
	at, err := time.Parse(time.RFC3339Nano, m.Header.Get(jetstream.TimeStampHeaer))
	if err != nil {
		return time.Time{}
	}
	if v := m.Header.Get(jetstream.MsgTTLHeader); v != "" {
		// The store counts TTLs in whole seconds.
		if d, err := time.ParseDuration(v); err == nil {
			ttl = d.Truncate(time.Second)
		} else if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
			ttl = time.Duration(secs) * time.Second
		}
	}
	return at.Add(ttl)
}
