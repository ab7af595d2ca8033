package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
	key     string
	holder  string
	ttl     time.Duration
	subject string

	// op orders a renewal and a release: a release made while a renewal
	// is on its way would name the revision before it, be refused, and
	// leave the lease for its TTL.
	op      sync.Mutex
	mu      sync.Mutex
	rev     uint64
	expires time.Time // local clock: when the lease ends unless renewed
	lost    bool
}

// acquire creates the lease key for this node, or fails with ErrHeld.
func (n *Node) acquire(ctx context.Context, key string) (*Lease, error) {
	_, leases, _, err := n.buckets()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	rev, err := leases.Create(ctx, key, []byte(n.o.Name), jetstream.KeyTTL(n.o.LeaseTTL))
	if errors.Is(err, jetstream.ErrKeyExists) || wrongLastSeq(err) {
		// A replicated bucket answers a create that lost the race with
		// "wrong last sequence" rather than "key exists".
		return nil, fmt.Errorf("%w (%s)", ErrHeld, key)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: take lease %s: %w", key, err)
	}
	return &Lease{kv: leases, js: n.js, key: key, holder: n.o.Name, ttl: n.o.LeaseTTL,
		subject: "$KV." + LeasesBucket + "." + key, rev: rev, expires: start.Add(n.leaseSafe())}, nil
}

// leaseSafe is how long after a renewal was sent this node still counts
// the lease as its own: less than the TTL, so that clock drift and the
// store's TTL granularity never let two nodes both believe they hold it.
func (n *Node) leaseSafe() time.Duration { return n.o.LeaseTTL * 2 / 3 }

// Renew extends the lease by its TTL, if this node still holds it (the
// revision it last wrote is the key's last). ErrLost when it does not.
func (l *Lease) Renew(ctx context.Context) error {
	l.op.Lock()
	defer l.op.Unlock()
	l.mu.Lock()
	rev, lost := l.rev, l.lost
	l.mu.Unlock()
	if lost {
		return ErrLost
	}
	start := time.Now()
	m := &nats.Msg{Subject: l.subject, Data: []byte(l.holder)}
	ack, err := l.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(l.ttl))
	if err != nil {
		if wrongLastSeq(err) {
			l.markLost()
			return fmt.Errorf("%w (%s)", ErrLost, l.key)
		}
		return fmt.Errorf("cluster: renew lease %s: %w", l.key, err)
	}
	l.mu.Lock()
	l.rev = ack.Sequence
	l.expires = start.Add(l.ttl * 2 / 3)
	l.mu.Unlock()
	return nil
}

// Held says whether this node may still act on the lease: not lost, and
// renewed recently enough that it cannot have expired in the store.
func (l *Lease) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.lost && time.Now().Before(l.expires)
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
	return l.kv.Delete(ctx, l.key, jetstream.LastRevision(rev))
}

// wrongLastSeq says whether err is the store refusing a write whose
// expected last sequence was not the subject's last (a CAS conflict).
// Replicated streams answer 10164 where a single replica answers 10071.
func wrongLastSeq(err error) bool {
	var api *jetstream.APIError
	if !errors.As(err, &api) {
		return false
	}
	return api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
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
