package telegram

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/mirror-gateway/mirror/config"
)

// Cluster mode. Telegram lets one client poll a bot at a time, so only the
// node holding the cluster's leader lease receives updates: it polls (or,
// in webhook mode, handles the updates every node is posted and forwards
// to it), and the offset lives where every node reads it, moved by
// compare-and-set, so that a new leader resumes at exactly the next update.
// The implementations are in chats/cluster (this package imports no NATS).

// Leader is the leader lease the bot receives updates under.
type Leader interface {
	// Lead blocks until this node leads, or ctx ends. It returns the
	// stint: a context that ends when this node stops leading (or may no
	// longer count on its lease), and done, which the bot calls once it
	// stopped receiving under it; a node giving its lease up waits for
	// done, so that two nodes never poll at once.
	Lead(ctx context.Context) (stint context.Context, done func(), err error)
	// Forward hands an update posted to this node, which does not lead,
	// to the leader, and returns once the leader handled it durably (an
	// error: it was not, and Telegram must deliver it again).
	Forward(ctx context.Context, raw []byte) error
	// Serve has handle answer the updates other nodes forward, until
	// stint ends. It returns once the first forward can reach this node.
	Serve(stint context.Context, handle func(ctx context.Context, raw []byte) error) error
}

// Offsets keeps the offset of receiving outside the bot's database.
type Offsets interface {
	// Load returns the next update id to ask for (every update below it
	// was handled), 0 when none was stored yet.
	Load(ctx context.Context) (int, error)
	// Commit records that every update below next was handled. It fails,
	// changing nothing, when the offset moved since this node last loaded
	// or committed it: another node received updates meanwhile.
	Commit(ctx context.Context, next int) error
}

// forwardTimeout bounds a forward to the leader (Telegram waits for the
// webhook's answer, and delivers again after an error).
const forwardTimeout = 30 * time.Second

// offsetError is a shared offset that could not be committed: the update
// was handled here, but the stint ends and the next loads the offset again.
type offsetError struct{ err error }

func (e *offsetError) Error() string {
	return "telegram: the cluster's update offset was not committed: " + e.err.Error()
}
func (e *offsetError) Unwrap() error { return e.err }

// commitShared commits the shared offset (cluster mode; nothing otherwise,
// the bucket's offset went with the update's records).
func (b *Bot) commitShared(next int) error {
	if b.opt.Offsets == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.opt.Offsets.Commit(ctx, next); err != nil {
		return &offsetError{err}
	}
	return nil
}

// nextUpdate is the next update id to handle: the shared offset in cluster
// mode, never below the bucket's (which a node keeps from its single-node
// days: update ids only grow), else the bucket's.
func (b *Bot) nextUpdate(ctx context.Context) (int, error) {
	local := b.offset()
	if b.opt.Offsets == nil {
		return local, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := b.opt.Offsets.Load(ctx)
	if err != nil {
		return 0, fmt.Errorf("telegram: read the cluster's update offset: %w", err)
	}
	return max(n, local), nil
}

// leading says whether this node receives updates now (cluster mode).
func (b *Bot) leading() bool {
	b.mu.Lock()
	s := b.stint
	b.mu.Unlock()
	return s != nil && s.Err() == nil
}

// leadLoop receives updates while this node leads: one stint per leader
// lease held, polling from the shared offset or answering forwarded
// webhook updates; when a stint ends the loop waits to lead again.
func (b *Bot) leadLoop() {
	defer b.wg.Done()
	for b.ctx.Err() == nil {
		stint, done, err := b.opt.Leader.Lead(b.ctx)
		if err != nil {
			if b.ctx.Err() != nil {
				return
			}
			b.log.Warn("telegram: waiting to lead the cluster", "err", err)
			if b.pause(b.ctx, pollBackoff) != nil {
				return
			}
			continue
		}
		err = b.runStint(stint)
		done()
		if err != nil && b.ctx.Err() == nil {
			b.log.Warn("telegram: receiving stopped; this node tries again while it leads", "err", err)
			if b.pause(b.ctx, pollBackoff) != nil {
				return
			}
		}
	}
}

// runStint receives updates until stint ends (or an offset commit fails).
// It first catches up with the cluster's copy of the bot's bucket and
// claims it (replica.go), then goes on with the followers and albums the
// copy holds; they stop, and no write of the stint is stored, before it
// returns.
func (b *Bot) runStint(stint context.Context) error {
	claim, err := b.claimLead(stint)
	if err != nil {
		if stint.Err() != nil {
			return nil
		}
		return err
	}
	lr, err := b.beginLead(stint, claim)
	if err != nil {
		return err
	}
	defer b.endLead(lr)
	b.mu.Lock()
	b.stint = stint
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.stint = nil
		b.mu.Unlock()
	}()
	if b.cfg.Mode == config.ModeWebhook {
		b.log.Info("telegram: this node leads the cluster: it handles the webhook updates every node is posted")
		err := b.opt.Leader.Serve(stint, func(_ context.Context, raw []byte) error {
			p, err := decodeOne(raw)
			if err != nil {
				return err
			}
			return b.receive(p)
		})
		if err != nil {
			return err
		}
		<-stint.Done()
		return nil
	}
	offset, err := b.nextUpdate(stint)
	if err != nil {
		if stint.Err() != nil {
			return nil
		}
		return err
	}
	b.log.Info("telegram: this node leads the cluster: it polls for updates", "offset", offset)
	err = b.poll(stint, offset)
	if err == nil {
		b.log.Info("telegram: this node no longer leads the cluster: it stopped polling")
	}
	return err
}

// clusterSecret is the webhook secret of a cluster whose runtime.yaml
// names none: derived from the bot token, the same on every node, and not
// the token itself.
func clusterSecret(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("mirror telegram webhook v1"))
	return hex.EncodeToString(m.Sum(nil))
}
