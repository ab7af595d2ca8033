package cluster

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The sweeper is one of the leader's singletons: a chat whose last flush
// left work (the work index, WorkLeft) and whose lease nobody holds has
// lost its owner (the node died, or let it go mid-turn); nothing else
// would ever open it again until someone writes to it. The leader takes
// such chats (claims and opens them: the owner adopts the chat, and its
// interrupted turn is recovered as after a restart), a bounded number
// per sweep.
const (
	// SweepEvery is how often the leader sweeps.
	SweepEvery = 2 * time.Second
	// SweepMax bounds the chats one sweep takes; the rest wait for the
	// next sweep, so a node's death does not stall the leader.
	SweepMax = 64
	// sweepParallel is how many chats a sweep opens at once.
	sweepParallel = 4
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
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !s.r.n.IsLeader() {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, max(s.every*5, 10*time.Second))
		taken, err := s.once(sctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			s.r.n.log.Warn("cluster: the sweep for chats left without an owner failed; the next tries again", "err", err)
		}
		if len(taken) > 0 {
			s.r.n.log.Info("cluster: the sweeper took chats with work left and no owner", "chats", len(taken), "first", taken[0])
		}
	}
}

// once is one sweep: the chats of the work index whose lease nobody
// holds are taken here, at most s.max of them, while this node leads.
// It returns the chats it took.
func (s *Sweeper) once(ctx context.Context) ([]string, error) {
	work, err := s.r.n.WorkLeft(ctx)
	if err != nil || len(work) == 0 {
		return nil, err
	}
	held, err := s.r.n.heldChats(ctx)
	if err != nil {
		return nil, err
	}
	var orphans []string
	for _, chat := range work {
		if !held[chat] && len(orphans) < s.max {
			orphans = append(orphans, chat)
		}
	}
	var (
		mu    sync.Mutex
		taken []string
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
			_, err := s.r.take(ctx, chat)
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
	return taken, errors.Join(errs...)
}

// heldChats is the set of chats whose lease someone holds now: one
// listing of the leases bucket (expired and released leases are gone
// from it), however many chats there are.
func (n *Node) heldChats(ctx context.Context) (map[string]bool, error) {
	_, leases, _, err := n.buckets()
	if err != nil {
		return nil, err
	}
	lister, err := leases.ListKeys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer lister.Stop()
	held := map[string]bool{}
	for k := range lister.Keys() {
		if chat, ok := strings.CutPrefix(k, chatKeyPrefix); ok {
			held[chat] = true
		}
	}
	return held, nil
}
