package cluster

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mirror-gateway/mirror/chats"
)

// Following: every node reads the whole records stream in order and hands
// each chat's flushes to its chats.Service (Service.Follow), which applies
// those of the chats it does not own to its bbolt. So every node's file is
// a replica of every chat, and the chat list, search and list watchers,
// which read the local file, show the whole cluster's chats on each node.

// Follower is the target of a Follow: chats.Service implements it.
type Follower interface {
	Follow(ctx context.Context, chat string, pos uint64, f *chats.Flush) error
	Followed() (uint64, error)
	SetFollowed(ctx context.Context, pos uint64) error
}

var _ Follower = (*chats.Service)(nil)

const (
	// followBatch bounds the messages a follower asks the stream for at
	// once (and how many it applies between two saves of its position).
	followBatch = 256
	// followRetry is how soon a follower tries again after its consumer
	// or an apply failed (the store closing, the stream not ready).
	followRetry = 500 * time.Millisecond
	// followSave is at most how long a followed position stays unsaved.
	followSave = time.Second
)

// Following runs one node's follower until Close.
type Following struct {
	stop context.CancelFunc
	done chan struct{}
}

// Follow starts following the records stream into f, from the position f
// saved (a restart re-reads nothing it saved as followed; what it re-reads
// past it is skipped by f, which is idempotent). Close stops it.
func (n *Node) Follow(f Follower) *Following {
	ctx, cancel := context.WithCancel(context.Background())
	fl := &Following{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(fl.done)
		for ctx.Err() == nil {
			err := n.follow(ctx, f)
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, chats.ErrClosed) {
				<-ctx.Done() // the Service shut down first: nothing left to apply to
				return
			}
			n.log.Warn("cluster: following the records stream stopped; trying again", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(followRetry):
			}
		}
	}()
	return fl
}

// Close stops the follower and waits for it.
func (fl *Following) Close() {
	fl.stop()
	<-fl.done
}

// follow reads the stream with an ordered consumer (in order, no gaps, the
// client recreates it after a disconnect) from the saved position on, and
// returns on the first failure: the caller starts again from the saved
// position.
func (n *Node) follow(ctx context.Context, f Follower) error {
	select {
	case <-n.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	if _, _, _, err := n.buckets(); err != nil {
		return err
	}
	from, err := f.Followed()
	if err != nil {
		return err
	}
	var (
		last, saved uint64 = from, from
		since       int
		savedAt     = time.Now()
	)
	save := func() error {
		if last == saved {
			return nil
		}
		if err := f.SetFollowed(context.WithoutCancel(ctx), last); err != nil {
			return err
		}
		saved, since, savedAt = last, 0, time.Now()
		return nil
	}
	defer func() { _ = save() }()
	err = n.consume(ctx, RecordsStream, []string{recordsPrefix + ">"}, from, func(m jetstream.Msg, md *jetstream.MsgMetadata) error {
		if err := n.followOne(ctx, f, m, md.Sequence.Stream); err != nil {
			return err
		}
		last = md.Sequence.Stream
		since++
		if md.NumPending == 0 || since >= followBatch || time.Since(savedAt) >= followSave {
			return save()
		}
		return nil
	})
	if err == nil {
		err = ctx.Err() // consume ends without an error only when ctx does
	}
	return err
}

// followOne hands one message of the stream to f: a flush is applied, a
// claim skipped. A flush the reader refuses (it could not be decoded) is
// logged and skipped: its chat's catch-up reports it when it is adopted.
func (n *Node) followOne(ctx context.Context, f Follower, m jetstream.Msg, seq uint64) error {
	if m.Headers().Get(hdrKind) != kindFlush {
		return nil
	}
	chat, ok := strings.CutPrefix(m.Subject(), recordsPrefix)
	if !ok {
		return nil
	}
	fl, err := chats.DecodeFlush(chat, m.Data())
	if err == nil {
		err = f.Follow(ctx, chat, seq, fl)
	}
	if errors.Is(err, chats.ErrBadInput) {
		n.log.Warn("cluster: a record this node cannot apply is skipped", "chat", chat, "seq", seq, "err", err)
		return nil
	}
	return err
}
