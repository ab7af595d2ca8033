package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mirror-gateway/mirror/chats"
)

// The Telegram bot's own state (its bbolt bucket: each Telegram chat's
// current chat, the replies being edited into Telegram, pairings) is
// replicated the way chats are: every write of the leader's bot is one
// message of one subject, appended with the subject's expected last
// sequence, so a write made on a stale copy (a former leader's, or a node
// that has not caught up) is refused by the store itself. Every node
// applies the messages in order to its own bucket (gateway/telegram's
// Replica); the messages are opaque here.
const (
	// TelegramStream holds the Telegram bot's state log: one subject,
	// one message per write of the bot's bucket (or a new leader's claim).
	TelegramStream = "MIRROR_TELEGRAM"
	tgStateSubject = "mirror.tgstate"
)

// tgStateConfig is the state log's stream: replicated like the records,
// every write synced, nothing ever dropped.
func tgStateConfig(replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        TelegramStream,
		Description: "Mirror's Telegram bot: its bucket's writes, in order",
		Subjects:    []string{tgStateSubject},
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

// Name is the node's name (the bot writes it into its claims).
func (t *Telegram) Name() string { return t.n.o.Name }

// stateStream returns the state log's stream, once the node is ready.
func (t *Telegram) stateStream(ctx context.Context) (jetstream.Stream, error) {
	if err := t.n.WaitReady(ctx); err != nil {
		return nil, fmt.Errorf("%w: %w", chats.ErrUnavailable, err)
	}
	t.n.mu.Lock()
	s := t.n.tgState
	t.n.mu.Unlock()
	if s == nil {
		return nil, fmt.Errorf("cluster: %s stream: the node is not set up", TelegramStream)
	}
	return s, nil
}

// Append stores entry after position at (the log's last message, 0 when
// it is empty) and returns its position. When the log is past at, nothing
// is stored and the error wraps chats.ErrFenced.
func (t *Telegram) Append(ctx context.Context, at uint64, entry []byte) (uint64, error) {
	if _, err := t.stateStream(ctx); err != nil {
		return 0, err
	}
	if max := t.n.nc.MaxPayload(); max > 0 && int64(len(entry)) > max-4096 {
		return 0, fmt.Errorf("%w: a Telegram state write of %d bytes is more than the cluster's largest message (%d bytes)", chats.ErrBadInput, len(entry), max)
	}
	m := &nats.Msg{Subject: tgStateSubject, Data: entry, Header: nats.Header{}}
	m.Header.Set(hdrNode, t.n.o.Name)
	return t.n.publishTo(ctx, TelegramStream, m, at)
}

// Read calls fn with each entry after position after, in order, up to the
// log's last one when Read began.
func (t *Telegram) Read(ctx context.Context, after uint64, fn func(pos uint64, entry []byte) error) error {
	s, err := t.stateStream(ctx)
	if err != nil {
		return err
	}
	gctx, cancel := context.WithTimeout(ctx, appendTimeout)
	lm, err := s.GetLastMsgForSubject(gctx, tgStateSubject)
	cancel()
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: cluster: the Telegram state log's last write: %w", chats.ErrUnavailable, err)
	}
	return t.n.walk(ctx, s, tgStateSubject, after+1, lm.Sequence, func(m *jetstream.RawStreamMsg) error {
		return fn(m.Sequence, m.Data)
	})
}

// Follow calls fn with each entry after position after, in order, as the
// log gets them, until ctx ends (nil) or fn or the log fails (that error;
// the caller follows again from where it got).
func (t *Telegram) Follow(ctx context.Context, after uint64, fn func(pos uint64, entry []byte) error) error {
	if _, err := t.stateStream(ctx); err != nil {
		return err
	}
	return t.n.consume(ctx, TelegramStream, []string{tgStateSubject}, after, func(m jetstream.Msg, md *jetstream.MsgMetadata) error {
		return fn(md.Sequence.Stream, m.Data())
	})
}
