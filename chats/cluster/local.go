package cluster

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/mirror-gateway/mirror/chats"
)

// LocalService is the router's Local over a chats.Service: a chat this node
// claims is adopted by the Service (its record caught up from the log, its
// actor loaded after the claim's position), each routed op runs there
// (HandleOp), and a lost chat is disowned (its turn stops, no tool runs,
// nothing is written).
//
// The router is made before the Service (the Service routes through it),
// so the Service is set afterwards with Serve; until then every chat is
// refused as unavailable.
type LocalService struct {
	s atomic.Pointer[chats.Service]
}

var _ Local = (*LocalService)(nil)

// NewLocal returns a Local whose Service Serve sets.
func NewLocal() *LocalService { return &LocalService{} }

// Serve sets the Service the chats this node owns run on.
func (l *LocalService) Serve(s *chats.Service) { l.s.Store(s) }

func (l *LocalService) service(chat string) (*chats.Service, error) {
	if s := l.s.Load(); s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("%w: chat %s: this node's chats are not started yet", chats.ErrUnavailable, chat)
}

// Open implements Local: the Service adopts the chat, fenced by the
// claim, appending after position at.
func (l *LocalService) Open(ctx context.Context, c *Claim, at uint64) error {
	s, err := l.service(c.Chat())
	if err != nil {
		return err
	}
	return s.Adopt(ctx, c.Chat(), c, at)
}

// Handle implements Local: the op frame runs on the chat's actor here.
// The router allows a routed frame the time of one append; an op that
// waits behind a busy chat (a loaded machine, a Stop waiting for its turn
// to end) gets the time an asker without a deadline gets, so it is not
// refused while it is being done.
func (l *LocalService) Handle(ctx context.Context, chat string, frame []byte) ([]byte, error) {
	s, err := l.service(chat)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < opTimeout {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
		defer cancel()
	}
	return s.HandleOp(ctx, chat, frame)
}

// Close implements Local: the chat was lost, the Service lets it go.
func (l *LocalService) Close(chat string) {
	if s := l.s.Load(); s != nil {
		s.Disown(chat)
	}
}

// LetGo implements Local: the Service gives the chat up if it is idle
// there (chats.Service.LetGo).
func (l *LocalService) LetGo(chat string) bool {
	s := l.s.Load()
	return s != nil && s.LetGo(chat)
}
