package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mirror-gateway/mirror/chats"
)

// Headers of a record message. A chat's subject holds two kinds: a flush
// (a chats.Flush in JSON; the seqs of its first and last events in the
// headers, so a reader finds an event's flush without decoding others)
// and the claim a new owner writes when it takes the chat, which moves
// the subject's last sequence so every earlier owner's next append is
// refused.
const (
	hdrKind  = "Mirror-Kind"
	hdrFirst = "Mirror-First"
	hdrLast  = "Mirror-Last"
	hdrNode  = "Mirror-Node"

	kindFlush = "flush"
	kindClaim = "claim"
)

// appendTimeout bounds one append: past it, too few servers answer.
const appendTimeout = 5 * time.Second

// Records is the JetStream implementation of chats.RecordLog over a
// node's records stream.
type Records struct{ n *Node }

var _ chats.RecordLog = Records{}

// Records returns the node's chats.RecordLog.
func (n *Node) Records() Records { return Records{n} }

// subject is the chat's subject in the records stream, or an error for a
// chat id that is not one subject token.
func subject(chat string) (string, error) {
	if chat == "" || strings.ContainsAny(chat, ".*> \t\r\n") || len(chat) > 128 {
		return "", fmt.Errorf("%w: chat id %q cannot name a record subject", chats.ErrBadInput, chat)
	}
	return recordsPrefix + chat, nil
}

// Append implements chats.RecordLog: the flush goes in one message on the
// chat's subject, published with the expected last sequence of that
// subject, so the store refuses it (chats.ErrFenced) when anyone wrote
// the chat since position at. Once stored, the chat's entry in the work
// index follows its metadata when that changed (see WorkLeft).
func (r Records) Append(ctx context.Context, chat string, at uint64, f *chats.Flush) (uint64, error) {
	subj, err := subject(chat)
	if err != nil {
		return 0, err
	}
	if f == nil {
		return 0, fmt.Errorf("%w: no flush", chats.ErrBadInput)
	}
	// The reader's checks, before anything is stored: a flush the log
	// would refuse to give back is refused here.
	if err := f.Validate(chat); err != nil {
		return 0, err
	}
	data, err := json.Marshal(f)
	if err != nil {
		return 0, err
	}
	if max := r.n.nc.MaxPayload(); max > 0 && int64(len(data)) > max-4096 { // room for the headers
		return 0, fmt.Errorf("%w: chat %s: a flush of %d bytes is more than the cluster's largest message (%d bytes)", chats.ErrBadInput, chat, len(data), max)
	}
	if _, _, _, err := r.n.buckets(); err != nil {
		return 0, fmt.Errorf("%w: %w", chats.ErrUnavailable, err)
	}
	m := &nats.Msg{Subject: subj, Data: data, Header: nats.Header{}}
	m.Header.Set(hdrKind, kindFlush)
	m.Header.Set(hdrFirst, strconv.FormatUint(f.First(), 10))
	m.Header.Set(hdrLast, strconv.FormatUint(f.Last(), 10))
	m.Header.Set(hdrNode, r.n.o.Name)
	pos, err := r.n.publish(ctx, m, at)
	if err != nil {
		return 0, err
	}
	r.n.markWork(ctx, chat, f.Meta.HasWork())
	return pos, nil
}

// publish stores m after position at of its subject.
func (n *Node) publish(ctx context.Context, m *nats.Msg, at uint64) (uint64, error) {
	return n.publishTo(ctx, RecordsStream, m, at)
}

// publishTo stores m in stream after position at of its subject.
func (n *Node) publishTo(ctx context.Context, stream string, m *nats.Msg, at uint64) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, appendTimeout)
	defer cancel()
	ack, err := casWrite(ctx, func() (*jetstream.PubAck, error) {
		return n.js.PublishMsg(ctx, m, jetstream.WithExpectStream(stream), jetstream.WithExpectLastSequencePerSubject(at))
	})
	switch {
	case err == nil:
		return ack.Sequence, nil
	case wrongLastSeq(err):
		return 0, fmt.Errorf("%w (%s was at %d)", chats.ErrFenced, m.Subject, at)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionReconnecting):
		return 0, unavailable(err) // not a deadline of the asker's
	}
	var api *jetstream.APIError
	if errors.As(err, &api) && api.Code == 503 {
		return 0, fmt.Errorf("%w: %w", chats.ErrUnavailable, err)
	}
	return 0, fmt.Errorf("cluster: append to %s: %w", m.Subject, err)
}

// Position is the last sequence of the chat's subject (0: nothing
// stored): the position an owner appends after.
func (r Records) Position(ctx context.Context, chat string) (uint64, error) {
	subj, err := subject(chat)
	if err != nil {
		return 0, err
	}
	records, _, _, err := r.n.buckets()
	if err != nil {
		return 0, fmt.Errorf("%w: %w", chats.ErrUnavailable, err)
	}
	// Bounded as an append is: a store that does not answer is
	// unavailable, not the asker's deadline.
	gctx, cancel := context.WithTimeout(ctx, appendTimeout)
	defer cancel()
	m, err := records.GetLastMsgForSubject(gctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil && ctx.Err() == nil {
		return 0, fmt.Errorf("cluster: the last record of %s: %w", chat, unavailable(err))
	}
	if err != nil {
		return 0, fmt.Errorf("%w: cluster: the last record of %s: %w", chats.ErrUnavailable, chat, err)
	}
	return m.Sequence, nil
}

// Read implements chats.RecordLog: the chat's flushes after position
// after, as far as its subject's last message when Read started. Each
// get asks for the chat's next message at or after a position (the
// stream's subject index finds it), so a read costs what it returns, not
// the chat's length.
func (r Records) Read(ctx context.Context, chat string, after uint64, fn func(pos uint64, f *chats.Flush) error) (uint64, error) {
	return r.read(ctx, chat, after+1, nil, fn)
}

// read is Read from position from; last, when not nil, is the chat's
// position already known.
func (r Records) read(ctx context.Context, chat string, from uint64, last *uint64, fn func(pos uint64, f *chats.Flush) error) (uint64, error) {
	subj, err := subject(chat)
	if err != nil {
		return 0, err
	}
	var end uint64
	if last != nil {
		end = *last
	} else if end, err = r.Position(ctx, chat); err != nil {
		return 0, err
	}
	records, _, _, _ := r.n.buckets()
	err = r.n.walk(ctx, records, subj, from, end, func(m *jetstream.RawStreamMsg) error {
		switch m.Header.Get(hdrKind) {
		case kindClaim:
			return nil
		case kindFlush:
		default:
			return fmt.Errorf("cluster: record %s message %d: unknown kind %q", chat, m.Sequence, m.Header.Get(hdrKind))
		}
		f, err := chats.DecodeFlush(chat, m.Data)
		if err != nil {
			return fmt.Errorf("cluster: record %s message %d: %w", chat, m.Sequence, err)
		}
		return fn(m.Sequence, f)
	})
	if err != nil {
		return 0, err
	}
	return end, nil
}

var _ chats.RecordForgetter = Records{}

// Forget implements chats.RecordForgetter: the chat's subject is purged
// of every message before position before (its purge flush), so what a
// purged chat held is gone from the stream and a node following it from
// the start reads only the purge.
func (r Records) Forget(ctx context.Context, chat string, before uint64) error {
	subj, err := subject(chat)
	if err != nil {
		return err
	}
	records, _, _, err := r.n.buckets()
	if err != nil {
		return fmt.Errorf("%w: %w", chats.ErrUnavailable, err)
	}
	ctx, cancel := context.WithTimeout(ctx, appendTimeout)
	defer cancel()
	if err := records.Purge(ctx, jetstream.WithPurgeSubject(subj), jetstream.WithPurgeSequence(before)); err != nil {
		return fmt.Errorf("cluster: purge %s's records before %d: %w", chat, before, err)
	}
	return nil
}

// ReadEvents calls fn with the chat's stored events from seq from on, in
// order, as far as the chat's last flush when it started, and returns the
// chat's position. The first flush holding seq from is found by a binary
// search over positions (a few gets), never by reading from the start.
func (r Records) ReadEvents(ctx context.Context, chat string, from uint64, fn func(*chats.Event) error) (uint64, error) {
	subj, err := subject(chat)
	if err != nil {
		return 0, err
	}
	records, _, _, err := r.n.buckets()
	if err != nil {
		return 0, fmt.Errorf("%w: %w", chats.ErrUnavailable, err)
	}
	lm, err := records.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%w: cluster: the last record of %s: %w", chats.ErrUnavailable, chat, err)
	}
	last, start := lm.Sequence, lm.Sequence
	// Most reads want the newest events: the last flush alone, when it
	// starts at from or before.
	if first, err := strconv.ParseUint(lm.Header.Get(hdrFirst), 10, 64); lm.Header.Get(hdrKind) != kindFlush || err != nil || first > from {
		if start, err = r.seek(ctx, chat, from, last); err != nil {
			return 0, err
		}
	}
	return r.read(ctx, chat, start, &last, func(_ uint64, f *chats.Flush) error {
		for _, e := range f.Events {
			if e.Seq < from {
				continue
			}
			if err := fn(e); err != nil {
				return err
			}
		}
		return nil
	})
}

// seek is the first position (at most last+1) whose next flush holds an
// event of seq from or later. A flush's last seq grows with its position,
// so "the first flush at or after p ends at from or later" is false, then
// true, as p grows: binary search finds where it turns.
func (r Records) seek(ctx context.Context, chat string, from, last uint64) (uint64, error) {
	subj, _ := subject(chat)
	records, _, _, _ := r.n.buckets()
	// after reports whether the first flush at or after p ends at from or
	// later (true when none does: nothing to skip there).
	after := func(p uint64) (bool, error) {
		for p <= last {
			m, err := r.n.getMsg(ctx, records, p, jetstream.WithGetMsgSubject(subj))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				return true, nil
			}
			if err != nil {
				return false, fmt.Errorf("%w: cluster: read %s at %d: %w", chats.ErrUnavailable, chat, p, err)
			}
			if m.Sequence > last {
				return true, nil
			}
			if m.Header.Get(hdrKind) != kindFlush {
				p = m.Sequence + 1 // a claim: the next flush decides
				continue
			}
			l, err := strconv.ParseUint(m.Header.Get(hdrLast), 10, 64)
			if err != nil {
				return false, fmt.Errorf("cluster: record %s message %d: no last seq", chat, m.Sequence)
			}
			return l >= from, nil
		}
		return true, nil
	}
	lo, hi := uint64(1), last+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		ok, err := after(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}

// Claim is this node's ownership of one chat: its lease, renewed by the
// node, and the record position the claim left. Appends made through a
// Claim are refused once another node has claimed the chat.
type Claim struct {
	n     *Node
	chat  string
	lease *Lease
}

// ClaimChat takes the chat's owner lease (ErrHeld when another node has
// it) and then fences the chat: a claim message on its subject, written
// after the subject's last message, so a stale owner's append (made
// after the position it knew) is refused by the store. It returns the
// position to append after.
func (n *Node) ClaimChat(ctx context.Context, chat string) (*Claim, uint64, error) {
	subj, err := subject(chat)
	if err != nil {
		return nil, 0, err
	}
	l, err := n.acquire(ctx, chatKeyPrefix+chat)
	if err != nil {
		return nil, 0, err
	}
	c := &Claim{n: n, chat: chat, lease: l}
	var last error
	for range 8 {
		at, err := n.Records().Position(ctx, chat)
		if last = err; err != nil {
			break
		}
		m := &nats.Msg{Subject: subj, Header: nats.Header{}}
		m.Header.Set(hdrKind, kindClaim)
		m.Header.Set(hdrNode, n.o.Name)
		m.Header.Set("Mirror-Lease", strconv.FormatUint(l.Revision(), 10))
		pos, err := n.publish(ctx, m, at)
		if last = err; errors.Is(err, chats.ErrFenced) {
			continue // the old owner wrote just now: fence after it
		}
		if err != nil {
			break
		}
		n.mu.Lock()
		n.claims[chat] = c
		// Other owners wrote the chat's work state since this node last
		// did: its next flush writes it whatever this node remembers.
		delete(n.hasWork, chat)
		n.mu.Unlock()
		return c, pos, nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = l.Release(rctx)
	if !errors.Is(last, chats.ErrUnavailable) {
		last = fmt.Errorf("%w: %w", chats.ErrUnavailable, last)
	}
	return nil, 0, fmt.Errorf("cluster: claim chat %s: the record could not be fenced: %w", chat, last)
}

// Chat is the claimed chat's id.
func (c *Claim) Chat() string { return c.chat }

// Held says whether this node may still act for the chat: run a tool,
// answer a frame. False once the lease was lost or could not be renewed in
// time.
func (c *Claim) Held() bool { return c.lease.Held() }

// Release gives the chat up (its lease ends now, not at its TTL).
func (c *Claim) Release(ctx context.Context) error {
	c.n.mu.Lock()
	if c.n.claims[c.chat] == c {
		delete(c.n.claims, c.chat)
	}
	c.n.mu.Unlock()
	return c.lease.Release(ctx)
}

// OwnerOf is the node holding chat's lease ("" when nobody does).
func (n *Node) OwnerOf(ctx context.Context, chat string) (string, error) {
	_, leases, _, err := n.buckets()
	if err != nil {
		return "", err
	}
	return holderOf(ctx, leases, chatKeyPrefix+chat)
}
