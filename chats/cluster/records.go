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

// Headers of a record message. A chat's subject holds two kinds: a flush's
// events (a JSON array, first and last seq in the headers) and the claim a
// new owner writes when it takes the chat, which moves the subject's last
// sequence so every earlier owner's next append is refused.
const (
	hdrKind  = "Mirror-Kind"
	hdrFirst = "Mirror-First"
	hdrLast  = "Mirror-Last"
	hdrNode  = "Mirror-Node"

	kindEvents = "events"
	kindClaim  = "claim"
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

// Append implements chats.RecordLog: the events go in one message on the
// chat's subject, published with the expected last sequence of that
// subject, so the store refuses it (chats.ErrFenced) when anyone wrote
// the chat since position at.
func (r Records) Append(ctx context.Context, chat string, at uint64, events []*chats.Event) (uint64, error) {
	if len(events) == 0 {
		return at, nil
	}
	subj, err := subject(chat)
	if err != nil {
		return 0, err
	}
	if _, _, _, err := r.n.buckets(); err != nil {
		return 0, fmt.Errorf("%w: %w", chats.ErrUnavailable, err)
	}
	body := make([]json.RawMessage, len(events))
	for i, e := range events {
		if e.Chat != chat {
			return 0, fmt.Errorf("%w: event %d belongs to chat %q, not %q", chats.ErrBadInput, e.Seq, e.Chat, chat)
		}
		if i > 0 && e.Seq <= events[i-1].Seq {
			return 0, fmt.Errorf("%w: event seqs not increasing (%d after %d)", chats.ErrBadInput, e.Seq, events[i-1].Seq)
		}
		body[i] = e.JSON()
	}
	data, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	m := &nats.Msg{Subject: subj, Data: data, Header: nats.Header{}}
	m.Header.Set(hdrKind, kindEvents)
	m.Header.Set(hdrFirst, strconv.FormatUint(events[0].Seq, 10))
	m.Header.Set(hdrLast, strconv.FormatUint(events[len(events)-1].Seq, 10))
	m.Header.Set(hdrNode, r.n.o.Name)
	return r.n.publish(ctx, m, at)
}

// publish stores m after position at of its subject.
func (n *Node) publish(ctx context.Context, m *nats.Msg, at uint64) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, appendTimeout)
	defer cancel()
	ack, err := n.js.PublishMsg(ctx, m, jetstream.WithExpectStream(RecordsStream), jetstream.WithExpectLastSequencePerSubject(at))
	switch {
	case err == nil:
		return ack.Sequence, nil
	case wrongLastSeq(err):
		return 0, fmt.Errorf("%w (%s was at %d)", chats.ErrFenced, m.Subject, at)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionReconnecting):
		return 0, fmt.Errorf("%w: the write was not confirmed: %w", chats.ErrUnavailable, err)
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
	m, err := records.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("cluster: the last record of %s: %w", chat, err)
	}
	return m.Sequence, nil
}

// Read implements chats.RecordLog: the chat's events from seq from on, as
// far as its subject's last message when Read started.
func (r Records) Read(ctx context.Context, chat string, from uint64, fn func(*chats.Event) error) (uint64, error) {
	subj, _ := subject(chat)
	last, err := r.Position(ctx, chat)
	if err != nil || last == 0 {
		return 0, err
	}
	records, _, _, _ := r.n.buckets()
	for seq := uint64(1); seq <= last; {
		m, err := records.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
		if err != nil {
			return 0, fmt.Errorf("cluster: read %s from %d: %w", chat, seq, err)
		}
		seq = m.Sequence + 1
		if m.Header.Get(hdrKind) != kindEvents {
			continue
		}
		if l, _ := strconv.ParseUint(m.Header.Get(hdrLast), 10, 64); l < from {
			continue
		}
		evs, err := decodeBatch(chat, m.Data)
		if err != nil {
			return 0, fmt.Errorf("cluster: record %s message %d: %w", chat, m.Sequence, err)
		}
		for _, e := range evs {
			if e.Seq < from {
				continue
			}
			if err := fn(e); err != nil {
				return 0, err
			}
		}
	}
	return last, nil
}

// decodeBatch reads one flush's message: a JSON array of chat's events,
// seqs increasing. Anything else is an error, never a partial batch.
func decodeBatch(chat string, data []byte) ([]*chats.Event, error) {
	var evs []*chats.Event
	if err := json.Unmarshal(data, &evs); err != nil {
		return nil, err
	}
	for i, e := range evs {
		switch {
		case e == nil:
			return nil, fmt.Errorf("event %d is null", i)
		case e.Chat != chat:
			return nil, fmt.Errorf("event %d belongs to chat %q", i, e.Chat)
		case i > 0 && e.Seq <= evs[i-1].Seq:
			return nil, fmt.Errorf("event seqs not increasing (%d after %d)", e.Seq, evs[i-1].Seq)
		}
	}
	return evs, nil
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
