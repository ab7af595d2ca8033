package cluster

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mirror-gateway/mirror/chats"
)

// Errors of leases.
var (
	// ErrHeld is a lease another node holds now.
	ErrHeld = errors.New("cluster: another node holds this lease")
	// ErrLost is a lease this node no longer holds: it expired, or another
	// node took it.
	ErrLost = errors.New("cluster: this node lost the lease")
)

// Lease is a key in the leases bucket that one node holds: the key's
// value is the node's name, the key's message carries a TTL, and the
// holder renews it by compare-and-set on its revision before it expires.
// Whoever finds the key gone (expired, released) may create it.
type Lease struct {
	kv      jetstream.KeyValue
	js      jetstream.JetStream
	nc      *nats.Conn
	key     string
	holder  string
	ttl     time.Duration
	subject string
	// token marks this lease's renewals (header hdrLeaseID), so that a
	// renewal whose answer was lost but which was stored is known as this
	// lease's own write, not another holder's.
	token string

	// op orders a renewal and a release, one at a time: a release made
	// while a renewal is on its way would name the revision before it, be
	// refused, and leave the lease for its TTL; two renewals would race on
	// one revision, and the loser would take the lease for lost.
	op      sync.Mutex
	mu      sync.Mutex
	rev     uint64
	expires time.Time // local clock: when the lease ends unless renewed
	lost    bool
}

// hdrLeaseID names the lease instance that wrote a renewal.
const hdrLeaseID = "Mirror-Lease-Id"

// acquire creates the lease key for this node, or fails with ErrHeld.
func (n *Node) acquire(ctx context.Context, key string) (*Lease, error) {
	_, leases, _, err := n.buckets()
	if errors.Is(err, errNotReady) {
		return nil, unavailable(err) // too few servers yet
	}
	if err != nil {
		return nil, err
	}
	start := time.Now()
	// Bounded apart from ctx: a store that does not answer within it is
	// a store without quorum, which the caller is told quickly
	// (chats.ErrUnavailable) rather than when its own deadline ends.
	cctx, cancel := context.WithTimeout(ctx, n.storeWait())
	defer cancel()
	rev, err := casWrite(cctx, func() (uint64, error) {
		return leases.Create(cctx, key, []byte(n.o.Name), jetstream.KeyTTL(n.o.LeaseTTL))
	})
	if errors.Is(err, jetstream.ErrKeyExists) || wrongLastSeq(err) {
		// A replicated bucket answers a create that lost the race with
		// "wrong last sequence" rather than "key exists".
		return nil, fmt.Errorf("%w (%s)", ErrHeld, key)
	}
	if err != nil {
		if ctx.Err() == nil && storeDown(err) {
			return nil, fmt.Errorf("cluster: take lease %s: %w", key, unavailable(err))
		}
		return nil, fmt.Errorf("cluster: take lease %s: %w", key, err)
	}
	return &Lease{kv: leases, js: n.js, nc: n.nc, key: key, holder: n.o.Name, ttl: n.o.LeaseTTL, token: rand.Text(),
		subject: "$KV." + LeasesBucket + "." + key, rev: rev, expires: start.Add(n.leaseSafe())}, nil
}

// storeWait bounds one lease operation (a take, a read of who holds a
// lease): half the lease TTL, at least half a second, at most an
// append's bound.
func (n *Node) storeWait() time.Duration {
	return min(max(n.o.LeaseTTL/2, 500*time.Millisecond), appendTimeout)
}

// storeDown says whether err is the store not answering: no quorum, no
// leader, or no server reachable.
func storeDown(err error) bool {
	var api *jetstream.APIError
	if errors.As(err, &api) && api.Code == 503 {
		return true
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.Is(err, jetstream.ErrNoHeartbeat)
}

// unavailable is chats.ErrUnavailable with err's text but not its kind:
// a store that timed out is unavailable, not an asker's deadline (which
// the gateway reports as "did not answer in time").
func unavailable(err error) error {
	return fmt.Errorf("%w: %s", chats.ErrUnavailable, err.Error())
}

// leaseSafe is how long after a renewal was sent this node still counts
// the lease as its own: less than the TTL, so that clock drift and the
// store's TTL granularity never let two nodes both believe they hold it.
func (n *Node) leaseSafe() time.Duration { return n.o.LeaseTTL * 2 / 3 }

// Renew extends the lease by its TTL, if this node still holds it (the
// revision it last wrote is the key's last). ErrLost when it does not.
//
// One renewal at a time: a renewal asked for while another is in flight
// returns at once (the two would race on one revision, and the loser
// would take the lease for lost). A renewal whose answer was lost may
// still have been stored; the next one, refused for its revision, then
// finds the key's last write is this lease's own (its token) and goes on
// from it, so a node under load never loses a lease nobody else took.
func (l *Lease) Renew(ctx context.Context) error {
	if !l.op.TryLock() {
		return nil // a renewal (or the release) is on its way
	}
	defer l.op.Unlock()
	l.mu.Lock()
	rev, lost := l.rev, l.lost
	l.mu.Unlock()
	if lost {
		return ErrLost
	}
	for range 2 {
		start := time.Now()
		m := &nats.Msg{Subject: l.subject, Data: []byte(l.holder), Header: nats.Header{}}
		if l.token != "" {
			m.Header.Set(hdrLeaseID, l.token)
		}
		ack, err := casWrite(ctx, func() (*jetstream.PubAck, error) {
			return l.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(l.ttl))
		})
		if err == nil {
			l.mu.Lock()
			l.rev = ack.Sequence
			l.expires = start.Add(l.ttl * 2 / 3)
			l.mu.Unlock()
			return nil
		}
		if !wrongLastSeq(err) {
			return fmt.Errorf("cluster: renew lease %s: %w", l.key, err)
		}
		seq, own, rerr := l.lastWrite(ctx)
		if rerr != nil {
			return fmt.Errorf("cluster: renew lease %s: refused at revision %d, and its last write is unknown: %w", l.key, rev, rerr)
		}
		if !own || seq <= rev {
			break
		}
		// An earlier renewal of this lease landed unconfirmed: its
		// revision is the one to renew.
		rev = seq
		l.mu.Lock()
		l.rev = seq
		l.mu.Unlock()
	}
	l.markLost()
	return fmt.Errorf("%w (%s)", ErrLost, l.key)
}

// lastWrite reads the lease key's last message from the bucket's stream
// leader (never a replica's copy, which may lag): its sequence, and
// whether this lease instance wrote it.
func (l *Lease) lastWrite(ctx context.Context) (uint64, bool, error) {
	if l.nc == nil || l.token == "" {
		return 0, false, errors.New("no lease token")
	}
	js, err := l.nc.JetStream(nats.Context(ctx))
	if err != nil {
		return 0, false, err
	}
	m, err := js.GetLastMsg("KV_"+LeasesBucket, l.subject, nats.Context(ctx))
	if errors.Is(err, nats.ErrMsgNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return m.Sequence, m.Header.Get(hdrLeaseID) == l.token, nil
}

// Held says whether this node may still act on the lease: not lost, and
// renewed recently enough that it cannot have expired in the store.
func (l *Lease) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.lost && time.Now().Before(l.expires)
}

// Gone says whether the lease may be another node's by now: lost (the
// store refused a renewal), or not renewed for a whole TTL, past which
// the store may have let it expire. Between Held and Gone the lease is
// lapsed: this node may not act, but nobody else can hold it yet, and
// the next renewal may restore it.
func (l *Lease) Gone() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost || !time.Now().Before(l.expires.Add(l.ttl/3))
}

// Revision is the lease key's revision this node last wrote.
func (l *Lease) Revision() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev
}

func (l *Lease) markLost() {
	l.mu.Lock()
	l.lost = true
	l.mu.Unlock()
}

// Release deletes the lease key if this node still holds it, so another
// node can take it at once rather than after the TTL.
func (l *Lease) Release(ctx context.Context) error {
	l.op.Lock()
	defer l.op.Unlock()
	l.mu.Lock()
	rev, lost := l.rev, l.lost
	l.lost = true
	l.mu.Unlock()
	if lost {
		return nil
	}
	_, err := casWrite(ctx, func() (struct{}, error) {
		return struct{}{}, l.kv.Delete(ctx, l.key, jetstream.LastRevision(rev))
	})
	return err
}

// renewWorkers bounds the chat-lease renewals in flight at once.
const renewWorkers = 16

// renewClaims renews the chat leases without holding up the keeper: a
// few at a time, each bounded by how long its lease still counts as held
// rather than by one tick for all (a node with many chats on a loaded
// machine renewed them one after another within a third of the TTL, and
// the last ones ran out of time). A renewal that fails drops the chat only
// once the lease is Gone: refused by the store (another node holds it),
// or not renewed for a whole TTL. A lease merely lapsed (renewals late)
// stays this node's: the chat is not run meanwhile (Held is false), and
// the next renewal restores it.
func (n *Node) renewClaims(ctx context.Context, claims []*Claim) {
	if len(claims) == 0 {
		return
	}
	work := make(chan *Claim, len(claims))
	for _, c := range claims {
		work <- c
	}
	close(work)
	for range min(renewWorkers, len(claims)) {
		go func() {
			for c := range work {
				if ctx.Err() != nil {
					return
				}
				rctx, cancel := context.WithTimeout(ctx, n.leaseSafe())
				n.renewals.Add(1)
				err := c.lease.Renew(rctx)
				cancel()
				if err != nil && c.lease.Gone() {
					n.lose(c, err)
				}
			}
		}()
	}
}

// wrongLastSeq says whether err is the store refusing a write whose
// expected last sequence was not the subject's last (a CAS conflict):
// 10071, or a replicated stream's 10164 for a write on the subject still
// in flight (casWrite asks again while that lasts).
func wrongLastSeq(err error) bool {
	var api *jetstream.APIError
	if !errors.As(err, &api) {
		return false
	}
	return api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// inFlight says whether err is a replicated stream refusing a
// compare-and-set write because another write on the same subject is
// still being applied (10164, "wrong last sequence" without a sequence).
// That other write may be the writer's own: the stream's leader sends a
// write's acknowledgement before it forgets the write was in flight, so
// a write that follows its own acknowledged one at once can land in that
// window. A rival's write, once applied, turns the answer into 10071.
func inFlight(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// casWaits are the pauses before asking again while a compare-and-set
// write is refused as in flight: about a quarter of a second in all,
// far more than the microseconds the store's window lasts, which a
// loaded machine stretches to milliseconds.
var casWaits = [...]time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond,
	16 * time.Millisecond, 32 * time.Millisecond, 64 * time.Millisecond, 128 * time.Millisecond}

// casWrite runs a compare-and-set write, and runs it again (a bounded
// number of times, while ctx lasts) while the store refuses it only
// because another write on its subject is in flight. A refused write was
// never proposed, so asking again cannot store it twice; a true conflict
// ends as the store's own refusal (10071), or as the last 10164 when
// the rival's write stays in flight past every wait.
func casWrite[T any](ctx context.Context, write func() (T, error)) (T, error) {
	for _, wait := range casWaits {
		v, err := write()
		if !inFlight(err) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(wait):
		}
	}
	return write()
}

// holderOf reads who holds the lease key ("" when nobody does).
func holderOf(ctx context.Context, kv jetstream.KeyValue, key string) (string, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return string(e.Value()), nil
}

func natsMsg(subject string, data []byte) *nats.Msg { return &nats.Msg{Subject: subject, Data: data} }
