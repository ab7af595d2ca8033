package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mirror-gateway/mirror/chats"
)

// Fan-out names. The owner publishes each event of a chat on its live
// subject, once; a header says whether the event is stored (its seq is
// the record's) or only live (reply.delta, quota.wait, tool.progress,
// whose seq is the latest stored event's).
const (
	livePrefix = "mirror.live."
	hdrStored  = "Mirror-Stored"
)

// fillTimeout bounds one read of the record that fills a gap.
const fillTimeout = 10 * time.Second

// catchUpEvery is how often a chat's feed looks at the record's last
// stored seq. An event its watchers still lack one look after the record
// held it was lost on the way (the last one: no later event shows the
// gap), and is read from the record: a lost event reaches the watchers
// within two periods even when nothing follows it.
const catchUpEvery = 2 * time.Second

// The delivery rule. Stored events reach each watcher once, in seq order,
// a gap filled from the record first. Live text carries the seq of the
// last stored event before it, and is delivered after the stored events
// up to that seq: a gap that a live message shows is filled up to its
// seq, no further, so stored events the owner published after the text
// still arrive after it. Live messages that arrive while a fill reads
// the record wait in the subscription's queue and are delivered after
// it. Live text is dropped only when the watcher already has a later
// stored event (it was superseded: the reply it belongs to is stored),
// which happens when a watcher starts from the record or catches up
// after a lost last event.

// Fanout publishes the events of the chats this node owns and delivers
// every chat's events to this node's watchers: one subscription per chat
// however many watchers (sockets) show it, and each watcher gets the
// chat's stored events in seq order, none missing, none twice, a missed
// one read from the record.
type Fanout struct {
	n *Node
	r *Router // orders a new subscription after the owner (nil: not)

	mu    sync.Mutex
	feeds map[string]*feed

	// drop, set by tests, loses a live message before it is read, as a
	// slow subscriber would.
	drop func(*chats.Event) bool
	// beforeFill, set by tests, runs before a gap fill reads the record
	// from seq from, so a test can let the owner store more meanwhile.
	beforeFill func(from uint64)
	// every is catchUpEvery unless a test shortens it.
	every time.Duration
}

// feed is one chat's subscription and the watchers it delivers to.
type feed struct {
	f        *Fanout
	chat     string
	sub      *nats.Subscription
	refs     int // watchers, counted under Fanout.mu
	mu       sync.Mutex
	watchers map[*Watcher]struct{}
	stop     chan struct{} // closed when the subscription ends
}

// Watcher is one local watcher of a chat: fn receives the chat's events.
type Watcher struct {
	fd   *feed
	fn   func(*chats.Event)
	last uint64 // the last stored seq fn received; under feed.mu
	gone bool
}

// NewFanout returns the node's fan-out. r, when not nil, is the node's
// router: a new subscription asks the chat's owner once, so no event
// published while its interest was on its way is missed until the next
// one arrives.
func (n *Node) NewFanout(r *Router) *Fanout {
	return &Fanout{n: n, r: r, feeds: map[string]*feed{}, every: catchUpEvery}
}

func liveSubject(chat string) (string, error) {
	if _, err := subject(chat); err != nil {
		return "", err
	}
	return livePrefix + chat, nil
}

// Stored publishes events of chat the owner has just appended to its
// record (after the append was acknowledged), in seq order. A message
// lost on the way is read from the record by the watchers, so an error
// here loses nothing.
func (f *Fanout) Stored(chat string, events ...*chats.Event) error {
	return f.publish(chat, true, events)
}

// Live publishes a chat's events that are not stored (reply.delta,
// quota.wait, tool.progress): their seq is the latest stored event's.
func (f *Fanout) Live(chat string, events ...*chats.Event) error {
	return f.publish(chat, false, events)
}

func (f *Fanout) publish(chat string, stored bool, events []*chats.Event) error {
	subj, err := liveSubject(chat)
	if err != nil {
		return err
	}
	flag := "0"
	if stored {
		flag = "1"
	}
	for _, e := range events {
		if e.Chat != chat {
			return fmt.Errorf("%w: event %d belongs to chat %q, not %q", chats.ErrBadInput, e.Seq, e.Chat, chat)
		}
		m := &nats.Msg{Subject: subj, Data: e.JSON(), Header: nats.Header{hdrStored: {flag}}}
		if err := f.n.nc.PublishMsg(m); err != nil {
			return fmt.Errorf("cluster: publish chat %s event %d: %w", chat, e.Seq, err)
		}
	}
	return nil
}

// Watch delivers chat's stored events after seq since, then its events as
// the owner publishes them, to fn: stored events in seq order, each once;
// live ones whose seq is the last stored event fn received. fn runs on the
// chat's delivery goroutine and must not block. The first watcher of a
// chat on this node subscribes to it; the last one's Close ends that.
func (f *Fanout) Watch(ctx context.Context, chat string, since uint64, fn func(*chats.Event)) (*Watcher, error) {
	subj, err := liveSubject(chat)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	fd := f.feeds[chat]
	if fd == nil {
		fd = &feed{f: f, chat: chat, watchers: map[*Watcher]struct{}{}, stop: make(chan struct{})}
		fd.sub, err = f.n.nc.Subscribe(subj, fd.receive)
		if err == nil {
			err = f.n.nc.FlushWithContext(ctx)
		}
		if err != nil {
			if fd.sub != nil {
				_ = fd.sub.Unsubscribe()
			}
			f.mu.Unlock()
			return nil, fmt.Errorf("%w: cluster: watch chat %s: %w", chats.ErrUnavailable, chat, err)
		}
		f.feeds[chat] = fd
		go fd.catchUp(f.every)
	}
	fd.refs++
	f.mu.Unlock()

	w := &Watcher{fd: fd, fn: fn, last: since}
	if f.r != nil {
		if err := f.r.Sync(ctx, chat); err != nil {
			// Only ordering is lost: the next event fills any gap.
			f.n.log.Debug("cluster: sync a new watcher with the chat's owner", "chat", chat, "err", err)
		}
	}
	// The subscription is up: what the record does not hold yet arrives
	// live, and what it holds is read now (live copies are then dropped).
	fd.mu.Lock()
	err = fd.fill(ctx, []*Watcher{w}, math.MaxUint64)
	if err == nil {
		fd.watchers[w] = struct{}{}
	}
	fd.mu.Unlock()
	if err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// Close stops delivering to the watcher; the chat's subscription ends
// with its last watcher on this node.
func (w *Watcher) Close() {
	fd := w.fd
	fd.mu.Lock()
	if w.gone {
		fd.mu.Unlock()
		return
	}
	w.gone = true
	delete(fd.watchers, w)
	fd.mu.Unlock()
	f := fd.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if fd.refs--; fd.refs == 0 {
		delete(f.feeds, fd.chat)
		_ = fd.sub.Unsubscribe()
		close(fd.stop)
	}
}

// Last is the seq of the last stored event the watcher received.
func (w *Watcher) Last() uint64 {
	w.fd.mu.Lock()
	defer w.fd.mu.Unlock()
	return w.last
}

// Watched says how many chats this node subscribes to, and how many
// watchers they have.
func (f *Fanout) Watched() (chats, watchers int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fd := range f.feeds {
		watchers += fd.refs
	}
	return len(f.feeds), watchers
}

// receive delivers one live message to the feed's watchers, filling from
// the record any stored events a watcher has not received before it.
func (fd *feed) receive(m *nats.Msg) {
	var e chats.Event
	if err := json.Unmarshal(m.Data, &e); err != nil || e.Chat != fd.chat {
		fd.f.n.log.Warn("cluster: an unreadable event on a chat's live subject", "chat", fd.chat, "err", err)
		return
	}
	if fd.f.drop != nil && fd.f.drop(&e) {
		return
	}
	stored := m.Header.Get(hdrStored) == "1"
	fd.mu.Lock()
	defer fd.mu.Unlock()
	// A stored event past the next one, or a live one past the last
	// received, means stored events were missed: read them first, up to
	// the event before this stored one or up to this live one's seq and
	// no further, so what the owner published after this message is
	// still delivered after it (see the delivery rule above).
	upto := e.Seq
	if stored && e.Seq > 0 {
		upto = e.Seq - 1
	}
	var behind []*Watcher
	for w := range fd.watchers {
		if w.last < upto {
			behind = append(behind, w)
		}
	}
	if len(behind) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), fillTimeout)
		err := fd.fill(ctx, behind, upto)
		cancel()
		if err != nil {
			fd.f.n.log.Warn("cluster: missed events of a chat could not be read from its record; the next event tries again", "chat", fd.chat, "err", err)
		}
	}
	for w := range fd.watchers {
		switch {
		case stored && e.Seq == w.last+1:
			w.last = e.Seq
			w.fn(&e)
		case !stored && e.Seq == w.last:
			w.fn(&e)
		}
		// Otherwise: a stored event already received (or, when the
		// record could not be read, one that would leave a gap), or live
		// text older than stored events already received.
	}
}

// errFilled ends a fill's read of the record at its bound.
var errFilled = errors.New("filled")

// fill delivers to each of ws the stored events after its last from the
// record, in order, up to seq upto. Under fd.mu.
func (fd *feed) fill(ctx context.Context, ws []*Watcher, upto uint64) error {
	from := ws[0].last
	for _, w := range ws {
		from = min(from, w.last)
	}
	if fd.f.beforeFill != nil {
		fd.f.beforeFill(from + 1)
	}
	_, err := fd.f.n.Records().ReadEvents(ctx, fd.chat, from+1, func(e *chats.Event) error {
		if e.Seq > upto {
			return errFilled
		}
		for _, w := range ws {
			if e.Seq > w.last {
				w.last = e.Seq
				w.fn(e)
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errFilled) {
		return fmt.Errorf("%w: cluster: read chat %s from %d: %w", chats.ErrUnavailable, fd.chat, from+1, err)
	}
	return nil
}

// catchUp looks at the record's last stored seq every period until the
// subscription (or the node) ends, and fills the watchers that still lack what the
// record held one look earlier: that event was lost on the way and, when
// it is the chat's last, nothing else would show the gap. Waiting one
// period first leaves the owner's message time to arrive live.
func (fd *feed) catchUp(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	var seen, pos, head uint64 // the last look's head; the position head was read at
	for {
		select {
		case <-fd.stop:
			return
		case <-fd.f.n.done: // the node closed
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), fillTimeout)
		p, h, err := fd.head(ctx, pos, head)
		if err != nil {
			cancel()
			fd.f.n.log.Debug("cluster: the last stored seq of a watched chat", "chat", fd.chat, "err", err)
			continue
		}
		pos, head = p, h
		target := seen
		seen = head
		fd.mu.Lock()
		var behind []*Watcher
		for w := range fd.watchers {
			if w.last < target {
				behind = append(behind, w)
			}
		}
		if len(behind) > 0 {
			if err := fd.fill(ctx, behind, target); err != nil {
				fd.f.n.log.Warn("cluster: a watched chat's lost last events could not be read from its record; the next look tries again", "chat", fd.chat, "err", err)
			}
		}
		fd.mu.Unlock()
		cancel()
	}
}

// head is the seq of the chat's last stored event and the record
// position it was read at. The last message's header gives it, unless
// that message is an owner's claim: then the record is read once per
// position (prevPos, prevHead: the last answer).
func (fd *feed) head(ctx context.Context, prevPos, prevHead uint64) (pos, head uint64, err error) {
	subj, err := subject(fd.chat)
	if err != nil {
		return 0, 0, err
	}
	records, _, _, err := fd.f.n.buckets()
	if err != nil {
		return 0, 0, err
	}
	m, err := records.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	if m.Sequence == prevPos {
		return prevPos, prevHead, nil
	}
	if m.Header.Get(hdrKind) == kindFlush {
		head, err = strconv.ParseUint(m.Header.Get(hdrLast), 10, 64)
		return m.Sequence, head, err
	}
	_, err = fd.f.n.Records().ReadEvents(ctx, fd.chat, prevHead+1, func(e *chats.Event) error {
		head = max(head, e.Seq)
		return nil
	})
	return m.Sequence, max(head, prevHead), err
}
