package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The Telegram bot's side of the cluster (gateway/telegram's Leader and
// Offsets): only the leader receives updates; the offset of receiving is
// one key moved by compare-and-set on its revision, so that a new leader
// resumes at exactly the next update and a former leader's late write is
// refused; webhook updates posted to another node are requests on one
// subject, answered by the leader.
const (
	// TelegramBucket holds the offset (key "offset": the next update id).
	TelegramBucket  = "mirror_telegram"
	tgOffsetKey     = "offset"
	tgUpdateSubject = "mirror.telegram.update"
	tgQueue         = "leader"
)

// Telegram is the Telegram bot's leader lease and offset on this node.
type Telegram struct {
	entryLog // the bot's state log (tgstate.go)
	n        *Node
	remove   func()

	mu      sync.Mutex
	kv      jetstream.KeyValue
	rev     uint64        // the offset key's revision this node last read or wrote (0: none)
	changed chan struct{} // closed and replaced when leadership or the stint changes
	cur     *tgStint
}

// tgStint is one stretch of leading the bot receives updates under.
type tgStint struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Telegram returns the node's side of the Telegram bot. Close it (before
// the node) when the bot stopped.
func (n *Node) Telegram() *Telegram {
	t := &Telegram{entryLog: n.tgStateLog(), n: n, changed: make(chan struct{})}
	t.remove = n.OnLeader(t.leaderChanged)
	return t
}

// Close stops following the node's leadership.
func (t *Telegram) Close() { t.remove() }

func (t *Telegram) signalLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// leaderChanged ends the stint when the lease is lost; when the node
// closes, it waits (bounded by the lease TTL) for the bot to stop
// receiving, so that the next leader never polls beside it.
func (t *Telegram) leaderChanged(leading bool) {
	t.mu.Lock()
	cur := t.cur
	t.signalLocked()
	t.mu.Unlock()
	if leading || cur == nil {
		return
	}
	cur.cancel()
	if t.n.closing.Load() {
		select {
		case <-cur.done:
		case <-time.After(t.n.o.LeaseTTL):
			t.n.log.Warn("cluster: the Telegram bot did not stop receiving within the lease TTL; giving the leader lease up anyway")
		}
	}
}

// Lead blocks until this node leads and no stint of it is still running,
// or ctx ends. The stint ends when the lease is lost, when it can no
// longer be counted on (LeaderUntil passed without a renewal), or when the
// node closes; done must be called once the bot stopped receiving.
func (t *Telegram) Lead(ctx context.Context) (context.Context, func(), error) {
	for {
		t.mu.Lock()
		ch, busy := t.changed, t.cur != nil
		if !busy && t.n.IsLeader() {
			sctx, cancel := context.WithCancel(ctx)
			s := &tgStint{cancel: cancel, done: make(chan struct{})}
			t.cur = s
			t.mu.Unlock()
			go t.expire(sctx, s)
			var once sync.Once
			return sctx, func() {
				once.Do(func() {
					cancel()
					t.mu.Lock()
					if t.cur == s {
						t.cur = nil
					}
					t.signalLocked()
					t.mu.Unlock()
					close(s.done)
				})
			}, nil
		}
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// expire ends the stint at the moment the lease stops counting as held,
// unless it was renewed by then (the lease's TTL in the store runs longer:
// Lease.Held's margin).
func (t *Telegram) expire(ctx context.Context, s *tgStint) {
	for {
		until := t.n.LeaderUntil()
		d := time.Until(until)
		if until.IsZero() || d <= 0 {
			s.cancel()
			return
		}
		tm := time.NewTimer(d)
		select {
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
			return
		}
	}
}

// bucket returns the offset's bucket, creating it on first use.
func (t *Telegram) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	t.mu.Lock()
	kv := t.kv
	t.mu.Unlock()
	if kv != nil {
		return kv, nil
	}
	if err := t.n.WaitReady(ctx); err != nil {
		return nil, err
	}
	t.n.mu.Lock()
	kv = t.n.telegram // made with the node's other buckets
	t.n.mu.Unlock()
	if kv == nil {
		return nil, fmt.Errorf("cluster: %s bucket: the node is not set up", TelegramBucket)
	}
	t.mu.Lock()
	t.kv = kv
	t.mu.Unlock()
	return kv, nil
}

// Load returns the stored offset (0 when none is) and remembers its
// revision for the next Commit.
func (t *Telegram) Load(ctx context.Context) (int, error) {
	if _, err := t.bucket(ctx); err != nil {
		return 0, err
	}
	// Read by the stream's leader (leaderLast), not kv.Get: a replica a
	// moment behind could hand a new leader an offset older than one
	// committed and confirmed, and updates would be handled twice.
	val, hdr, seq, err := t.n.leaderLast(ctx, "KV_"+TelegramBucket, "$KV."+TelegramBucket+"."+tgOffsetKey)
	if err != nil {
		return 0, fmt.Errorf("cluster: read the Telegram offset: %w", err)
	}
	if seq == 0 || hdr.Get("KV-Operation") != "" {
		t.mu.Lock()
		t.rev = 0
		t.mu.Unlock()
		return 0, nil
	}
	n, err := strconv.Atoi(string(val))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("cluster: the Telegram offset %q is not a number", val)
	}
	t.mu.Lock()
	t.rev = seq
	t.mu.Unlock()
	return n, nil
}

// Commit stores next as the offset if the key is still at the revision
// this node last read or wrote; otherwise another node moved it, and
// nothing is written.
func (t *Telegram) Commit(ctx context.Context, next int) error {
	kv, err := t.bucket(ctx)
	if err != nil {
		return err
	}
	t.mu.Lock()
	rev := t.rev
	t.mu.Unlock()
	val := []byte(strconv.Itoa(next))
	nrev, err := casWrite(ctx, func() (uint64, error) {
		if rev == 0 {
			return kv.Create(ctx, tgOffsetKey, val)
		}
		return kv.Update(ctx, tgOffsetKey, val, rev)
	})
	if errors.Is(err, jetstream.ErrKeyExists) || wrongLastSeq(err) {
		return fmt.Errorf("cluster: the Telegram offset was moved by another node (this node's copy is stale): %w", ErrLost)
	}
	if err != nil {
		return fmt.Errorf("cluster: write the Telegram offset: %w", err)
	}
	t.mu.Lock()
	t.rev = nrev
	t.mu.Unlock()
	return nil
}

// Forward asks the leader to handle a webhook update and waits for its
// answer; while no node answers (a new leader is being chosen) or the one
// that did has stopped leading, it asks again until ctx ends.
func (t *Telegram) Forward(ctx context.Context, raw []byte) error {
	wait := 20 * time.Millisecond
	for {
		m := &nats.Msg{Subject: tgUpdateSubject, Data: raw, Header: nats.Header{}}
		m.Header.Set(hdrNode, t.n.o.Name)
		reply, err := t.n.nc.RequestMsgWithContext(ctx, m)
		switch {
		case err == nil && reply.Header.Get(hdrStatus) == statusOK:
			return nil
		case err == nil && reply.Header.Get(hdrStatus) == statusError:
			return &RemoteError{Node: reply.Header.Get(hdrNode), Msg: string(reply.Data)}
		case err == nil && reply.Header.Get(hdrStatus) == statusMoved, errors.Is(err, nats.ErrNoResponders):
		case ctx.Err() != nil:
			return fmt.Errorf("cluster: no leader handled the Telegram update: %w", ctx.Err())
		case err != nil:
			return fmt.Errorf("cluster: forward the Telegram update to the leader: %w", err)
		default:
			return errors.New("cluster: unreadable answer from the Telegram leader")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: no leader handled the Telegram update: %w", ctx.Err())
		case <-time.After(wait/2 + rand.N(wait)):
		}
		wait = min(2*wait, t.n.o.LeaseTTL/4)
	}
}

// Serve answers forwarded updates with handle while stint lasts; one in a
// queue group, so that a former leader still draining and the new one
// never both get an update, and one that reaches a node whose stint ended
// is answered "moved" (asked again).
func (t *Telegram) Serve(stint context.Context, handle func(ctx context.Context, raw []byte) error) error {
	sub, err := t.n.nc.QueueSubscribe(tgUpdateSubject, tgQueue, func(m *nats.Msg) {
		reply := &nats.Msg{Header: nats.Header{}}
		reply.Header.Set(hdrNode, t.n.o.Name)
		if stint.Err() != nil {
			reply.Header.Set(hdrStatus, statusMoved)
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := handle(ctx, m.Data)
			cancel()
			if err != nil {
				reply.Header.Set(hdrStatus, statusError)
				reply.Data = []byte(err.Error())
			} else {
				reply.Header.Set(hdrStatus, statusOK)
			}
		}
		_ = m.RespondMsg(reply)
	})
	if err != nil {
		return fmt.Errorf("cluster: receive forwarded Telegram updates: %w", err)
	}
	fctx, cancel := context.WithTimeout(stint, 10*time.Second)
	defer cancel()
	if err := t.n.nc.FlushWithContext(fctx); err != nil {
		_ = sub.Unsubscribe()
		return err
	}
	go func() {
		<-stint.Done()
		_ = sub.Drain()
	}()
	return nil
}
