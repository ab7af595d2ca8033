package cluster

import (
	"context"
	"errors"
	"fmt"

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

// peopleConfig is the registry's stream: nothing of it is ever dropped.
func peopleConfig(replicas int) jetstream.StreamConfig {
	return entryLogConfig(PeopleStream, peopleSubject, "Mirror's people registry: its writes, in order", replicas, false)
}

// PeopleLog is the node's side of the people registry's log
// (people.Log).
type PeopleLog struct{ entryLog }

// People returns the node's side of the people registry's log.
func (n *Node) People() PeopleLog {
	return PeopleLog{entryLog{n: n, name: PeopleStream, subject: peopleSubject, what: "a people registry write",
		handle: func(n *Node) jetstream.Stream { return n.people }}}
}

// Append stores entry after position at (the log's last entry, 0 when
// it is empty) and returns its position. When the log is past at,
// nothing is stored and the error wraps people.ErrLogMoved.
func (p PeopleLog) Append(ctx context.Context, at uint64, entry []byte) (uint64, error) {
	pos, err := p.entryLog.Append(ctx, at, entry)
	if errors.Is(err, chats.ErrFenced) {
		err = fmt.Errorf("%w: %w", people.ErrLogMoved, err)
	}
	return pos, err
}
