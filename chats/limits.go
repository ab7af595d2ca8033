package chats

import (
	"errors"
	"fmt"
)

// DefaultMaxPending is how many messages may wait in one chat's queue when
// Options.MaxPending is 0.
const DefaultMaxPending = 100

// ErrTooLarge refuses what would make a chat hold more than its limits allow
// (a queue past Options.MaxPending); nothing is stored. Protocol code too_large.
var ErrTooLarge = errors.New("too large")

// queueRoom refuses a new pending message when waiting already fill the
// chat's queue: a client cannot grow one chat's queue (and the turn that
// picks it all up) without bound. A repeated client_id is answered before
// this check, so a resend after a lost answer still gets its message.
func (s *Service) queueRoom(waiting int) error {
	limit := s.opt.MaxPending
	if limit <= 0 {
		limit = DefaultMaxPending
	}
	if waiting >= limit {
		return fmt.Errorf("%w: %d messages already wait in this chat, the most it holds; send again once the assistant has picked them up, or delete some", ErrTooLarge, waiting)
	}
	return nil
}
