package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mirror-gateway/mirror/chats"
)

// entryLog is a log of opaque entries on one subject of its own stream:
// the Telegram bot's bucket (tgstate.go) and the people registry
// (people.go). A writer appends after the position it last applied, and
// the store refuses the write when the log moved past it (a write made
// on a copy that is behind); every node applies the entries in order to
// its own copy, reading them (Read) or following them (Follow).
type entryLog struct {
	n       *Node
	name    string // the stream's
	subject string
	what    string // names one entry in errors: "a people registry write"
	// handle is the node's handle of the stream (nil until it is set up);
	// called under n.mu.
	handle func(*Node) jetstream.Stream
}

// entryLogConfig is an entry log's stream: replicated like the records,
// every write synced, nothing dropped by the store itself; a single
// entry is never deleted, and purges only when purge says so.
func entryLogConfig(name, subject, description string, replicas int, purge bool) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        name,
		Description: description,
		Subjects:    []string{subject},
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		Retention:   jetstream.LimitsPolicy,
		MaxMsgs:     -1,
		MaxBytes:    -1,
		Discard:     jetstream.DiscardNew,
		DenyDelete:  true,
		DenyPurge:   !purge,
	}
}

// stream returns the log's stream, once the node is ready.
func (l entryLog) stream(ctx context.Context) (jetstream.Stream, error) {
	if err := l.n.WaitReady(ctx); err != nil {
		return nil, fmt.Errorf("%w: %w", chats.ErrUnavailable, err)
	}
	l.n.mu.Lock()
	s := l.handle(l.n)
	l.n.mu.Unlock()
	if s == nil {
		return nil, fmt.Errorf("cluster: %s stream: the node is not set up", l.name)
	}
	return s, nil
}

// entryRoom is what an entry's message keeps free for its headers within
// the connection's largest message.
const entryRoom = 4096

// MaxEntry is the largest entry Append stores: the cluster's largest
// message, less room for the headers.
func (l entryLog) MaxEntry() int {
	max := l.n.nc.MaxPayload()
	if max <= 0 {
		max = 1 << 20 // the servers' default, before the connection knows
	}
	return int(max) - entryRoom
}

// Append stores entry after position at (the log's last entry, 0 when it
// is empty) and returns its position. When the log is past at, nothing
// is stored and the error wraps chats.ErrFenced.
func (l entryLog) Append(ctx context.Context, at uint64, entry []byte) (uint64, error) {
	if _, err := l.stream(ctx); err != nil {
		return 0, err
	}
	if max := l.MaxEntry(); len(entry) > max {
		return 0, fmt.Errorf("%w: %s of %d bytes is more than the cluster's largest message (%d bytes)", chats.ErrBadInput, l.what, len(entry), max)
	}
	m := &nats.Msg{Subject: l.subject, Data: entry, Header: nats.Header{}}
	m.Header.Set(hdrNode, l.n.o.Name)
	return l.n.publishTo(ctx, l.name, m, at)
}

// Read calls fn with each entry after position after, in order, up to the
// log's last one when Read began. Entries purged are passed over: Read
// starts at the first entry still stored after after.
func (l entryLog) Read(ctx context.Context, after uint64, fn func(pos uint64, entry []byte) error) error {
	s, err := l.stream(ctx)
	if err != nil {
		return err
	}
	gctx, cancel := context.WithTimeout(ctx, appendTimeout)
	lm, err := s.GetLastMsgForSubject(gctx, l.subject)
	cancel()
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: cluster: the last entry of %s: %w", chats.ErrUnavailable, l.name, err)
	}
	return l.n.walk(ctx, s, l.subject, after+1, lm.Sequence, func(m *jetstream.RawStreamMsg) error {
		return fn(m.Sequence, m.Data)
	})
}

// Follow calls fn with each entry after position after, in order, as the
// log gets them, until ctx ends (nil) or fn or the log fails (that error;
// the caller follows again from where it got).
func (l entryLog) Follow(ctx context.Context, after uint64, fn func(pos uint64, entry []byte) error) error {
	if _, err := l.stream(ctx); err != nil {
		return err
	}
	return l.n.consume(ctx, l.name, []string{l.subject}, after, func(m jetstream.Msg, md *jetstream.MsgMetadata) error {
		return fn(md.Sequence.Stream, m.Data())
	})
}
