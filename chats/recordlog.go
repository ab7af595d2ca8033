package chats

import (
	"context"
	"errors"
)

// RecordLog is where a chat's record lives when it is not in this
// process's bbolt file: the cluster's replicated log (chats/cluster). The
// actor's one flush is one Append, whole or not at all.
//
// Every Append names the position the writer last saw (its fencing
// token): the store refuses the write when the chat's log has moved past
// it, so a node that lost a chat's lease cannot add to its record, however
// late its write arrives.
type RecordLog interface {
	// Append stores events (one flush, in seq order) after position at,
	// and returns the chat's new position. It fails with an error wrapping
	// ErrFenced when the log is no longer at at (another writer took the
	// chat): nothing of events is stored. It fails with ErrUnavailable
	// when the store did not confirm the write: nothing may be
	// acknowledged, and the batch may still land whole (once) when the
	// store's servers come back, so the writer reads the log's tail
	// before it writes again.
	Append(ctx context.Context, chat string, at uint64, events []*Event) (uint64, error)
	// Read calls fn with each stored event of chat whose seq is from or
	// more, in order, and returns the chat's position after the last one
	// (0 for a chat with nothing stored).
	Read(ctx context.Context, chat string, from uint64, fn func(*Event) error) (uint64, error)
}

// Errors of a RecordLog.
var (
	// ErrFenced is an append refused because the chat's log moved on
	// since the writer last saw it: another node owns the chat now.
	ErrFenced = errors.New("the chat's record moved on: another node owns this chat now")
	// ErrUnavailable is an append the store did not confirm (too few of
	// its servers answer): not durable now, possibly stored later whole.
	ErrUnavailable = errors.New("the record store did not confirm this write: too few of its servers answer")
)
