package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/chats/people"
)

var _ people.Log = PeopleLog{}

// The people registry (chats/people: persons, their token hashes and
// Telegram links, grants) is replicated as the Telegram bot's bucket is:
// every write of it is one message of one subject, appended with the
// subject's expected last sequence, so a write computed on a copy that is
// behind is refused by the store itself and made again after catching up.
// Any node writes (the admin API, `mirror person` through it, a pairing
// approved anywhere); every node applies the messages in order to its own
// bbolt (people.Registry.Replicate). The messages are opaque here.
const (
	// PeopleStream holds the people registry's writes, in order.
	PeopleStream  = "MIRROR_PEOPLE"
	peopleSubject = "mirror.people"
)

// peopleConfig is the registry's stream: replicated like the records,
// every write synced, nothing ever dropped.
func peopleConfig(replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        PeopleStream,
		Description: "Mirror's people registry: its writes, in order",
		Subjects:    []string{peopleSubject},
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		Retention:   jetstream.LimitsPolicy,
		MaxMsgs:     -1,
		MaxBytes:    -1,
		Discard:     jetstream.DiscardNew,
		DenyDelete:  true,
		DenyPurge:   true,
	}
}

// PeopleLog is the node's side of the people registry's log
// (people.Log).
type PeopleLog struct{ n *Node }

// People returns the node's side of the people registry's log.
func (n *Node) People() PeopleLog { return PeopleLog{n: n} }

// stream returns the registry's stream, once the node is ready.
func (p PeopleLog) stream(ctx context.Context) (jetstream.Stream, error) {
	if err := p.n.WaitReady(ctx); err != nil {
		return nil, fmt.Errorf("%w: %w", chats.ErrUnavailable, err)
	}
	p.n.mu.Lock()
	s := p.n.people
	p.n.mu.Unlock()
	if s == nil {
		return nil, fmt.Errorf("cluster: %s stream: the node is not set up", PeopleStream)
	}
	return s, nil
}

// MaxEntry is the largest entry Append stores: the cluster's largest
// message, less room for headers.
func (p PeopleLog) MaxEntry() int {
	if max := p.n.nc.MaxPayload(); max > 4096 {
		return int(max - 4096)
	}
	return 0
}

// Append stores entry after position at (the log's last entry, 0 when
// it is empty) and returns its position. When the log is past at,
// nothing is stored and the error wraps chats.ErrFenced.
func (p PeopleLog) Append(ctx context.Context, at uint64, entry []byte) (uint64, error) {
	if _, err := p.stream(ctx); err != nil {
		return 0, err
	}
	if max := p.MaxEntry(); max > 0 && len(entry) > max {
		return 0, fmt.Errorf("%w: a people registry write of %d bytes is more than the cluster's largest message (%d bytes)", chats.ErrBadInput, len(entry), max)
	}
	m := &nats.Msg{Subject: peopleSubject, Data: entry, Header: nats.Header{}}
	m.Header.Set(hdrNode, p.n.o.Name)
	pos, err := p.n.publishTo(ctx, PeopleStream, m, at)
	if errors.Is(err, chats.ErrFenced) {
		err = fmt.Errorf("%w: %w", people.ErrLogMoved, err)
	}
	return pos, err
}

// Read calls fn with each entry after position after, in order, up to
// the log's last one when Read began.
func (p PeopleLog) Read(ctx context.Context, after uint64, fn func(pos uint64, entry []byte) error) error {
	s, err := p.stream(ctx)
	if err != nil {
		return err
	}
	gctx, cancel := context.WithTimeout(ctx, appendTimeout)
	lm, err := s.GetLastMsgForSubject(gctx, peopleSubject)
	cancel()
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: cluster: the people log's last write: %w", chats.ErrUnavailable, err)
	}
	return p.n.walk(ctx, s, peopleSubject, after+1, lm.Sequence, func(m *jetstream.RawStreamMsg) error {
		return fn(m.Sequence, m.Data)
	})
}

// Follow calls fn with each entry after position after, in order, as the
// log gets them, until ctx ends (nil) or fn or the log fails (that error;
// the caller follows again from where it got).
func (p PeopleLog) Follow(ctx context.Context, after uint64, fn func(pos uint64, entry []byte) error) error {
	if _, err := p.stream(ctx); err != nil {
		return err
	}
	return p.n.consume(ctx, PeopleStream, []string{peopleSubject}, after, func(m jetstream.Msg, md *jetstream.MsgMetadata) error {
		return fn(md.Sequence.Stream, m.Data())
	})
}
