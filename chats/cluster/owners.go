package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mirror-gateway/mirror/chats"
)

// Owners is chats.Owners over this node's router and fan-out: a
// Service's op on a chat goes to the chat's owner (this node takes the
// chat when nobody owns it), its subscribers watch the chat's live
// subject, and the events of the chats this node runs are published
// there.
type Owners struct {
	r *Router
	f *Fanout
}

var _ chats.Owners = (*Owners)(nil)

// NewOwners returns the chats.Owners of a node's router and fan-out.
func NewOwners(r *Router, f *Fanout) *Owners { return &Owners{r: r, f: f} }

// opTimeout bounds an op (or the start of a watch) whose caller set no
// deadline (Telegram's updates, a resumed chat): NATS needs one, and an
// owner that never answers must not hold the caller for ever.
const opTimeout = time.Minute

// bounded is ctx with opTimeout when it has no deadline.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, opTimeout)
}

// Send implements chats.Owners. A chat id no subject can carry is a chat
// that does not exist, as on one node; an owner that failed to run the op
// at all (its chats not started) is unavailable.
func (o *Owners) Send(ctx context.Context, chat string, frame []byte) ([]byte, error) {
	if _, err := subject(chat); err != nil {
		return nil, fmt.Errorf("chat %q: %w", chat, chats.ErrNotFound)
	}
	ctx, cancel := bounded(ctx)
	defer cancel()
	out, err := o.r.Send(ctx, chat, frame)
	var re *RemoteError
	if errors.As(err, &re) {
		return nil, fmt.Errorf("%w: chat %s: %w", chats.ErrUnavailable, chat, err)
	}
	return out, err
}

// Watch implements chats.Owners.
func (o *Owners) Watch(ctx context.Context, chat string, since uint64, fn func(*chats.Event)) (func(), error) {
	if _, err := subject(chat); err != nil {
		return nil, fmt.Errorf("chat %q: %w", chat, chats.ErrNotFound)
	}
	ctx, cancel := bounded(ctx)
	defer cancel()
	w, err := o.f.Watch(ctx, chat, since, fn)
	if err != nil {
		return nil, err
	}
	return w.Close, nil
}

// Publish implements chats.Owners. A stored event lost on the way is read
// from the record by the watchers, and live text is superseded by the
// stored reply: a failure is only logged.
func (o *Owners) Publish(ev *chats.Event, stored bool) {
	var err error
	if stored {
		err = o.f.Stored(ev.Chat, ev)
	} else {
		err = o.f.Live(ev.Chat, ev)
	}
	if err != nil {
		o.f.n.log.Debug("cluster: publish a chat's event", "chat", ev.Chat, "seq", ev.Seq, "err", err)
	}
}

// Idle implements chats.Owners: the router gives the chat's lease up in
// the background if it is still idle then (Router.ReleaseIdle).
func (o *Owners) Idle(chat string) { o.r.releaseIdle(chat) }
