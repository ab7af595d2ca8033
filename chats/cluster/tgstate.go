package cluster

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
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

// tgStateConfig is the state log's stream: purges are allowed, for
// dropping what a snapshot made redundant.
func tgStateConfig(replicas int) jetstream.StreamConfig {
	return entryLogConfig(TelegramStream, tgStateSubject, "Mirror's Telegram bot: its bucket's writes, in order", replicas, true)
}

// tgStateLog is the node's side of the state log.
func (n *Node) tgStateLog() entryLog {
	return entryLog{n: n, name: TelegramStream, subject: tgStateSubject, what: "a Telegram state write",
		handle: func(n *Node) jetstream.Stream { return n.tgState }}
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

// Purge drops every entry before position before (a snapshot's first
// entry, which the caller appended and the store confirmed: it holds what
// the entries before it made). Entries at or after it stay; purging below
// a position already purged does nothing.
func (t *Telegram) Purge(ctx context.Context, before uint64) error {
	s, err := t.stream(ctx)
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
