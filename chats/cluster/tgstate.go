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
//
// The log is compacted by its writer: the bot's leader appends a snapshot
// of the whole bucket (fenced like any write) and then purges every
// message below it (Purge). Purging stays safe although any client could
// ask for it: the bot purges only below a snapshot the store confirmed,
// and a snapshot holds everything the messages below it made, so no
// reader needs them; a reader whose position is in the purged range reads
// on from the first message still there, the snapshot (walk and consume
// both start at the first message at or after a position).
const (
	// TelegramStream holds the Telegram bot's state log: one subject,
	// one message per write of the bot's bucket (or a new leader's claim).
	TelegramStream = "MIRROR_TELEGRAM"
	tgStateSubject = "mirror.tgstate"
)

// tgStateConfig is the state log's stream: replicated like the records,
// every write synced, nothing dropped but what a snapshot made redundant
// (purges are allowed for that; single deletes are not).
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
		DenyPurge:   false,
	}
}

// makeTgState makes or updates the state log's stream. A stream made by
// an earlier Mirror denies purges, which the server will not undo: it is
// kept as it is, and its log is not compacted (Purge says so) until it is
// made again.
func makeTgState(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.Stream, error) {
	cfg := tgStateConfig(replicas)
	s, err := js.CreateOrUpdateStream(ctx, cfg)
	if err == nil {
		return s, nil
	}
	old, gerr := js.Stream(ctx, TelegramStream)
	if gerr != nil || !old.CachedInfo().Config.DenyPurge {
		return nil, err
	}
	cfg.DenyPurge = true
	return js.CreateOrUpdateStream(ctx, cfg)
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
	if max := t.MaxEntry(); len(entry) > max {
		return 0, fmt.Errorf("%w: a Telegram state write of %d bytes is more than the cluster's largest message (%d bytes)", chats.ErrBadInput, len(entry), max)
	}
	m := &nats.Msg{Subject: tgStateSubject, Data: entry, Header: nats.Header{}}
	m.Header.Set(hdrNode, t.n.o.Name)
	return t.n.publishTo(ctx, TelegramStream, m, at)
}

// entryRoom is what a state log message keeps free for its headers
// within the connection's largest message.
const entryRoom = 4096

// MaxEntry is the largest entry Append stores: the cluster's largest
// message, less room for the headers.
func (t *Telegram) MaxEntry() int {
	max := t.n.nc.MaxPayload()
	if max <= 0 {
		max = 1 << 20 // the servers' default, before the connection knows
	}
	return int(max) - entryRoom
}

// Purge drops every entry before position before (a snapshot's first
// entry, which the caller appended and the store confirmed: it holds what
// the entries before it made). Entries at or after it stay; purging below
// a position already purged does nothing.
func (t *Telegram) Purge(ctx context.Context, before uint64) error {
	s, err := t.stateStream(ctx)
	if err != nil {
		return err
	}
	if s.CachedInfo().Config.DenyPurge {
		return fmt.Errorf("cluster: the %s stream was made by an earlier Mirror, which denied purging it: its log is not compacted until the stream is made again", TelegramStream)
	}
	if before <= 1 {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, appendTimeout)
	defer cancel()
	if err := s.Purge(pctx, jetstream.WithPurgeSequence(before)); err != nil {
		return fmt.Errorf("cluster: purge %s before %d: %w", TelegramStream, before, unavailable(err))
	}
	return nil
}

// Read calls fn with each entry after position after, in order, up to the
// log's last one when Read began. Entries purged (below a snapshot) are
// passed over: Read starts at the first entry still stored after after.
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
