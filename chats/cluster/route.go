package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/runtime/ids"
)

// Routing names. A frame for a chat is a request on the chat's route
// subject for the node its lease names, mirror.chat.CHAT.NODE, to which
// only that node subscribes while it serves the chat (in a queue group, so
// that even a restarted process of the same name never doubles a frame).
const (
	routePrefix = "mirror.chat."
	routeQueue  = "owner"

	hdrStatus = "Mirror-Status"
	hdrOp     = "Mirror-Op"

	statusOK    = "ok"
	statusMoved = "moved" // not the owner: nothing was done, ask again
	statusError = "error"

	opSync = "sync" // no frame: the reply only orders the asker after the owner
)

// Local is what a node does with a chat it owns; the gateway implements it
// (this package does not import the gateway).
type Local interface {
	// Open loads chat, which this node has just claimed, from the record:
	// the owner appends after position at, through the claim (Claim.Held
	// says whether it still may act).
	Open(ctx context.Context, c *Claim, at uint64) error
	// Handle handles one frame for chat, which this node owns, and returns
	// the answer's bytes. Calls for one chat come one at a time, in the
	// order the owner received them; Handle must not wait for a turn.
	Handle(ctx context.Context, chat string, frame []byte) ([]byte, error)
	// Close tells the owner it no longer owns chat (its lease was lost or
	// given up): it stops the chat's turn and runs no tool.
	Close(chat string)
	// LetGo gives chat up if it is idle here (nothing runs, waits or is
	// unfinished, nothing loaded): true when it did, and the owner then
	// acts for it no more, as after Close; false keeps it. The router
	// calls it under the chat's lock: no Handle of the chat runs
	// meanwhile (see ReleaseIdle).
	LetGo(chat string) bool
}

// RemoteError is an error the owner's Local.Handle returned, passed back
// to the node that asked.
type RemoteError struct {
	Node, Msg string
}

func (e *RemoteError) Error() string { return e.Node + ": " + e.Msg }

// Router sends each frame for a chat to the chat's owner, taking the chat
// when nobody owns it, and serves the chats this node owns.
type Router struct {
	n     *Node
	local Local

	mu     sync.Mutex
	owned  map[string]*ownedChat
	taking map[string]chan struct{} // chats this node is claiming now
	owners map[string]string        // chat → the owner its lease named when last read

	downMu              sync.Mutex
	downSince, downLast time.Time // a run of takes the store did not answer (storeDown)

	stop chan struct{}
	done chan struct{}

	// idleSlots bounds the idle chats given up at once (ReleaseIdle):
	// thousands of chats going idle together cost a few deletes at a
	// time, not thousands of goroutines.
	idleSlots chan struct{}
	// letting, set by tests, runs in ReleaseIdle before it takes the
	// chat's lock (locked false) and under it (true), so a test can race
	// frames with the release.
	letting func(chat string, locked bool)
}

// ownedChat is a chat this node serves: its claim, and the subscription
// that answers its frames.
type ownedChat struct {
	claim *Claim
	sub   *nats.Subscription // set and read under Router.mu
	idle  bool               // under Router.mu: unsubscribed while its lease lapsed
	mu    sync.Mutex         // one Handle at a time, from NATS or from this node
}

// NewRouter starts serving frames for the chats this node comes to own.
// The node's Options.OnLost must call the router's Lost (the router also
// checks its leases itself, every sixth of the lease TTL). Close stops it.
func (n *Node) NewRouter(local Local) *Router {
	r := &Router{n: n, local: local, owned: map[string]*ownedChat{}, taking: map[string]chan struct{}{},
		owners: map[string]string{}, stop: make(chan struct{}), done: make(chan struct{}), idleSlots: make(chan struct{}, renewWorkers)}
	go r.watchLeases()
	return r
}

// routeSubject is chat's route subject, or ErrBadInput.
func routeSubject(chat string) (string, error) {
	if _, err := subject(chat); err != nil {
		return "", err
	}
	return routePrefix + chat, nil
}

// ChatOf is the chat an approval or recovery id names, so that an answer
// is routed to the chat that owns the call.
func ChatOf(id string) (string, error) {
	if chat, ok := ids.ParseApproval(id); ok {
		return chat, nil
	}
	if chat, ok := ids.ParseRecovery(id); ok {
		return chat, nil
	}
	return "", fmt.Errorf("%w: %q is not an approval or recovery id", chats.ErrBadInput, id)
}

// Answer routes an approval's or recovery's answer to the owner of the
// chat its id names.
func (r *Router) Answer(ctx context.Context, id string, frame []byte) ([]byte, error) {
	chat, err := ChatOf(id)
	if err != nil {
		return nil, err
	}
	return r.Send(ctx, chat, frame)
}

// Send has chat's owner handle frame and returns its answer. This node
// handles it itself when it owns the chat; otherwise the frame is a
// request on the chat's subject for the node its lease names. When nobody
// holds the lease, this node takes it, opens the chat and handles the
// frame. When the node the lease names does not handle the frame (nobody
// answers there, it says it no longer owns the chat, or it does not
// answer within half the lease's TTL: a paused process), the store decides:
// this node tries to take the lease, which the store grants only once the
// holder's has ended (never two owners: a replica's copy of the lease may
// lag, the store's leader does not). While the lease stands, Send asks
// again until ctx ends; when the store does not answer (too few nodes)
// for as long as an append may wait (5 s), Send fails with
// chats.ErrUnavailable. A frame is sent again
// only when no node handled it: nobody answered, the node said it no
// longer owns the chat, or the lease moved to another node while the
// answer was awaited (the former owner can no longer act: it checks its
// lease first, and the store fences its writes).
func (r *Router) Send(ctx context.Context, chat string, frame []byte) ([]byte, error) {
	if _, err := routeSubject(chat); err != nil {
		return nil, err
	}
	wait := 10 * time.Millisecond
	// failed reports a take the store did not answer: given up (the
	// error returned) once the store has not answered this node's takes
	// for as long as an append may wait, so that a leader's election is
	// waited for, and a store without quorum refuses at once the frames
	// that follow the first.
	failed := func(err error) error {
		if ctx.Err() != nil || !errors.Is(err, chats.ErrUnavailable) || r.storeDown(time.Now()) {
			return err
		}
		return nil
	}
	for {
		if oc := r.mine(chat); oc != nil {
			if out, err, handled := r.handle(ctx, oc, frame); handled {
				return out, err
			}
		}
		owner, err := r.ownerOf(ctx, chat)
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("cluster: chat %s: %w", chat, ctx.Err())
		case err != nil, owner == "":
			// Nobody holds it, or who does could not be read here: the
			// store's leader decides, by granting the lease or not.
			if taken, err := r.tryTake(ctx, chat); taken {
				continue // served here now
			} else if err = failed(err); err != nil {
				return nil, err
			}
		case owner == r.n.o.Name:
			// Being taken here now, or a lease of this node's name
			// that this process does not hold (an earlier run's), or
			// this node's own lease lapsed for a moment: wait for the
			// one, the end of the other, or the next renewal.
			r.mu.Lock()
			ch := r.taking[chat]
			r.mu.Unlock()
			if ch != nil {
				select {
				case <-ch:
					continue
				case <-ctx.Done():
				}
			} else if taken, err := r.tryTake(ctx, chat); taken {
				continue
			} else if err = failed(err); err != nil {
				return nil, err
			}
		default:
			out, err, done := r.ask(ctx, chat, owner, frame)
			if done {
				return out, err
			}
			r.forget(chat, owner)
			// Nobody handled it there: the owner died, is opening the
			// chat, or let it go. Taken here if its lease has ended.
			if taken, err := r.tryTake(ctx, chat); taken {
				continue
			} else if err = failed(err); err != nil {
				return nil, err
			}
		}
		// Jittered so that the askers of one chat do not move in step.
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("cluster: chat %s: its owner does not answer and its lease has not expired: %w", chat, ctx.Err())
		case <-time.After(wait/2 + rand.N(wait)):
		}
		wait = min(2*wait, r.n.o.LeaseTTL/4)
	}
}

// tryTake takes chat for this node if the store grants its lease: taken
// when this node serves the chat now; neither taken nor an error when
// another holds the lease (ask again later); an error when the store did
// not answer (chats.ErrUnavailable) or ctx ended.
func (r *Router) tryTake(ctx context.Context, chat string) (taken bool, err error) {
	oc, err := r.take(ctx, chat)
	switch {
	case oc != nil:
		r.storeUp()
		return true, nil
	case ctx.Err() != nil:
		return false, fmt.Errorf("cluster: chat %s: %w", chat, ctx.Err())
	case err == nil, errors.Is(err, ErrHeld):
		r.storeUp()
		return false, nil
	}
	return false, err
}

// storeDown notes a take the store did not answer, at now, and says
// whether it has not answered for an append's bound (appendTimeout):
// since the first of a run of such takes, each less than that bound
// after the one before.
func (r *Router) storeDown(now time.Time) bool {
	r.downMu.Lock()
	defer r.downMu.Unlock()
	if r.downSince.IsZero() || now.Sub(r.downLast) > appendTimeout {
		r.downSince = now
	}
	r.downLast = now
	return now.Sub(r.downSince) >= appendTimeout
}

// storeUp notes the store answered a take.
func (r *Router) storeUp() {
	r.downMu.Lock()
	r.downSince = time.Time{}
	r.downMu.Unlock()
}

// ask sends frame to owner, the node chat's lease names, and waits for
// its answer. done is false when the frame may be sent again because no
// node handled it.
func (r *Router) ask(ctx context.Context, chat, owner string, frame []byte) (out []byte, err error, done bool) {
	subj, _ := routeSubject(chat)
	inbox := r.n.nc.NewRespInbox()
	sub, err := r.n.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, unavailable(err), true
	}
	defer sub.Unsubscribe()
	m := &nats.Msg{Subject: subj + "." + owner, Reply: inbox, Data: frame, Header: nats.Header{}}
	m.Header.Set(hdrNode, r.n.o.Name)
	if err := r.n.nc.PublishMsg(m); err != nil {
		return nil, unavailable(err), true
	}
	for {
		// Bounded by half the lease TTL (storeWait): past it, an owner
		// that has not answered may have lost the chat (a paused
		// process, whose server's route still carries the request), so
		// the store is asked whether its lease still stands.
		actx, cancel := context.WithTimeout(ctx, r.n.storeWait())
		reply, err := sub.NextMsgWithContext(actx)
		cancel()
		switch {
		case errors.Is(err, nats.ErrNoResponders), err == nil && reply.Header.Get("Status") == "503":
			return nil, nil, false // nobody serves it there (yet)
		case err == nil:
			switch reply.Header.Get(hdrStatus) {
			case statusOK:
				return reply.Data, nil, true
			case statusError:
				return nil, &RemoteError{Node: reply.Header.Get(hdrNode), Msg: string(reply.Data)}, true
			case statusMoved:
				return nil, nil, false
			}
			return nil, fmt.Errorf("cluster: chat %s: unreadable answer from %s", chat, reply.Header.Get(hdrNode)), true
		case ctx.Err() != nil:
			return nil, fmt.Errorf("cluster: chat %s: no answer from its owner %s: %w", chat, owner, ctx.Err()), true
		case errors.Is(err, context.DeadlineExceeded):
			// The store's leader decides: the lease ended (this node
			// takes the chat, and the silent owner's writes are fenced
			// from now on), or moved to a third node; otherwise the
			// answer is awaited again (a frame delivered is never sent
			// twice while it may run). A store that has not answered
			// for an append's bound refuses the frame, as an owner's
			// own unconfirmed append does (it may still land).
			taken, err := r.tryTake(ctx, chat)
			if taken {
				return nil, nil, false
			}
			if errors.Is(err, chats.ErrUnavailable) && ctx.Err() == nil && r.storeDown(time.Now()) {
				return nil, fmt.Errorf("cluster: chat %s: its owner %s did not answer: %w", chat, owner, err), true
			}
			now, err := r.readOwner(ctx, chat)
			if err == nil && now != owner {
				return nil, nil, false // the lease moved: owner cannot act on it
			}
		default:
			return nil, unavailable(err), true
		}
	}
}

// readOwner is Node.OwnerOf bounded by storeWait.
func (r *Router) readOwner(ctx context.Context, chat string) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, r.n.storeWait())
	defer cancel()
	return r.n.OwnerOf(rctx, chat)
}

// Sync returns once any event chat's owner publishes after now will reach
// a subscription this node made before the call: the request travels
// after the subscription's interest to the owner's server. Nil at once
// when nobody owns the chat, or this node does. Bounded by half the lease
// TTL (storeWait), as an ask is: an owner that does not answer (a paused
// process, whose server's route still carries its subscription) would
// otherwise hold the caller, a client opening the chat, for its whole
// deadline, when only ordering is at stake.
func (r *Router) Sync(ctx context.Context, chat string) error {
	subj, err := routeSubject(chat)
	if err != nil {
		return err
	}
	if r.mine(chat) != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.n.storeWait())
	defer cancel()
	owner, err := r.n.OwnerOf(ctx, chat)
	if err != nil || owner == "" || owner == r.n.o.Name {
		return err
	}
	m := &nats.Msg{Subject: subj + "." + owner, Header: nats.Header{}}
	m.Header.Set(hdrOp, opSync)
	m.Header.Set(hdrNode, r.n.o.Name)
	_, err = r.n.nc.RequestMsgWithContext(ctx, m)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil
	}
	return err
}

// maxOwners bounds the owners remembered; past it they are read again.
const maxOwners = 1 << 16

// ownerOf is the node chat's lease names: remembered, so that a frame
// costs no read of the lease until its owner stops answering.
func (r *Router) ownerOf(ctx context.Context, chat string) (string, error) {
	r.mu.Lock()
	owner := r.owners[chat]
	r.mu.Unlock()
	if owner != "" {
		return owner, nil
	}
	owner, err := r.readOwner(ctx, chat)
	if err == nil && owner != "" && owner != r.n.o.Name {
		r.mu.Lock()
		if len(r.owners) >= maxOwners {
			clear(r.owners)
		}
		r.owners[chat] = owner
		r.mu.Unlock()
	}
	return owner, err
}

// forget drops the remembered owner of chat, when it is still owner.
func (r *Router) forget(chat, owner string) {
	r.mu.Lock()
	if r.owners[chat] == owner {
		delete(r.owners, chat)
	}
	r.mu.Unlock()
}

// mine returns the chat if this node serves it and still holds its lease.
func (r *Router) mine(chat string) *ownedChat {
	r.mu.Lock()
	oc := r.owned[chat]
	r.mu.Unlock()
	if oc == nil || !oc.claim.Held() {
		return nil
	}
	return oc
}

// handle runs Local.Handle for an owned chat; handled is false when the
// lease was found lost first (nothing was done).
func (r *Router) handle(ctx context.Context, oc *ownedChat, frame []byte) (out []byte, err error, handled bool) {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	r.mu.Lock()
	listed := r.owned[oc.claim.Chat()] == oc
	r.mu.Unlock()
	if !listed || oc.claim.lease.Gone() {
		r.drop(oc) // a no-op once dropped
		return nil, nil, false
	}
	if !oc.claim.Held() {
		// Lapsed (renewals late), not lost: nothing is done now, and
		// the chat stays this node's for the next renewal to restore.
		return nil, nil, false
	}
	out, err = r.local.Handle(ctx, oc.claim.Chat(), frame)
	return out, err, true
}

// serve answers one request on an owned chat's subject.
func (r *Router) serve(oc *ownedChat, m *nats.Msg) {
	reply := &nats.Msg{Header: nats.Header{}}
	reply.Header.Set(hdrNode, r.n.o.Name)
	if m.Header.Get(hdrOp) == opSync {
		reply.Header.Set(hdrStatus, statusOK)
		_ = m.RespondMsg(reply)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), appendTimeout)
	defer cancel()
	out, err, handled := r.handle(ctx, oc, m.Data)
	switch {
	case !handled:
		reply.Header.Set(hdrStatus, statusMoved)
	case err != nil:
		reply.Header.Set(hdrStatus, statusError)
		reply.Data = []byte(err.Error())
	default:
		reply.Header.Set(hdrStatus, statusOK)
		reply.Data = out
	}
	if err := m.RespondMsg(reply); err != nil {
		r.n.log.Warn("cluster: answer a routed frame", "chat", oc.claim.Chat(), "err", err)
	}
}

// take claims chat for this node, opens it and starts serving it. One
// claim per chat at a time on this node: the other senders wait for it.
// ErrHeld when another node holds the lease.
func (r *Router) take(ctx context.Context, chat string) (*ownedChat, error) {
	r.mu.Lock()
	if oc := r.owned[chat]; oc != nil {
		r.mu.Unlock()
		switch {
		case oc.claim.Held():
			return oc, nil
		case !oc.claim.lease.Gone():
			// This node's lease lapsed for a moment: still its own (a
			// claim now would fence its own live chat), so wait.
			return nil, fmt.Errorf("%w (%s: this node's own, renewal late)", ErrHeld, chat)
		}
		r.drop(oc)
		r.mu.Lock()
	}
	if ch := r.taking[chat]; ch != nil {
		r.mu.Unlock()
		select {
		case <-ch:
			return r.mine(chat), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	ch := make(chan struct{})
	r.taking[chat] = ch
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.taking, chat)
		r.mu.Unlock()
		close(ch)
	}()

	c, at, err := r.n.ClaimChat(ctx, chat)
	if err != nil {
		return nil, err
	}
	oc := &ownedChat{claim: c}
	fail := func(err error) (*ownedChat, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = c.Release(rctx)
		return nil, err
	}
	if err := r.local.Open(ctx, c, at); err != nil {
		return fail(fmt.Errorf("cluster: open chat %s: %w", chat, err))
	}
	subj, _ := routeSubject(chat)
	subj += "." + r.n.o.Name
	// Listed before it serves, so that a lease lost from here on is seen.
	r.mu.Lock()
	r.owned[chat] = oc
	r.mu.Unlock()
	sub, err := r.n.nc.QueueSubscribe(subj, routeQueue, func(m *nats.Msg) { r.serve(oc, m) })
	if err == nil {
		err = r.n.nc.FlushWithContext(ctx)
	}
	r.mu.Lock()
	kept := r.owned[chat] == oc
	if kept && err == nil {
		oc.sub = sub
	}
	r.mu.Unlock()
	if err != nil || !kept {
		if sub != nil {
			_ = sub.Unsubscribe()
		}
		r.drop(oc)
		if err == nil {
			err = ErrLost
		}
		return fail(fmt.Errorf("%w: cluster: serve chat %s: %w", chats.ErrUnavailable, chat, err))
	}
	return oc, nil
}

// Lost stops serving chat, whose lease this node lost: Options.OnLost
// calls it.
func (r *Router) Lost(chat string) {
	r.mu.Lock()
	oc := r.owned[chat]
	r.mu.Unlock()
	if oc != nil {
		r.drop(oc)
	}
}

// Release stops serving chat and gives its lease up, so that the next
// frame for it opens it wherever it is sent.
func (r *Router) Release(chat string) {
	r.mu.Lock()
	oc := r.owned[chat]
	r.mu.Unlock()
	if oc != nil {
		r.drop(oc)
	}
}

// ReleaseIdle gives chat's lease up if it is idle on this node, so that
// an idle chat costs no renewals (one replicated write every third of the
// TTL, for as long as the node lives): the owner's Service calls it
// (through Owners.Idle) once the chat's actor left memory after
// limits.chat_idle with nothing to do. The chat is kept when the work
// index holds it as this node last wrote it, or when Local.LetGo says it
// is busy. Under the chat's lock, so a frame is either handled before
// (the chat is loaded again, and kept) or after: then the chat is no
// longer listed, the frame is answered "moved" (or finds nobody serving
// the chat), and its asker takes the chat as when nobody owns it, on
// this node or another. The next frame, wherever it is sent, takes the
// chat as today; its watchers, on the chat's live subject, see no change.
func (r *Router) ReleaseIdle(chat string) {
	r.mu.Lock()
	oc := r.owned[chat]
	r.mu.Unlock()
	if oc == nil || r.n.workKnown(chat) {
		return
	}
	if r.letting != nil {
		r.letting(chat, false)
	}
	oc.mu.Lock()
	defer oc.mu.Unlock()
	if r.letting != nil {
		r.letting(chat, true)
	}
	r.mu.Lock()
	listed := r.owned[chat] == oc
	r.mu.Unlock()
	if !listed || !r.local.LetGo(chat) {
		return
	}
	// The work index holds no chat given up: one it held as this node
	// does not know (a write of it failed, or none since the claim) would
	// have the sweeper take the chat, only for it to go idle again. While
	// the lease is still this node's, nobody else writes the entry.
	wctx, cancel := context.WithTimeout(context.Background(), r.n.storeWait())
	r.n.markWork(wctx, chat, false)
	cancel()
	r.n.log.Debug("cluster: an idle chat's lease is given up", "chat", chat)
	r.drop(oc)
}

// releaseIdle is ReleaseIdle on its own goroutine, a few at a time; none
// once the router is closing (Close gives every chat up anyway).
func (r *Router) releaseIdle(chat string) {
	go func() {
		select {
		case r.idleSlots <- struct{}{}:
		case <-r.stop:
			return
		}
		defer func() { <-r.idleSlots }()
		select {
		case <-r.stop:
			return
		default:
		}
		r.ReleaseIdle(chat)
	}()
}

// drop stops serving an owned chat: no more requests reach this node for
// it (the subscription ends before anything else), then the owner is told.
func (r *Router) drop(oc *ownedChat) {
	chat := oc.claim.Chat()
	r.mu.Lock()
	mine := r.owned[chat] == oc
	if mine {
		delete(r.owned, chat)
	}
	sub := oc.sub
	r.mu.Unlock()
	if !mine {
		return
	}
	if sub != nil {
		// Drained, not dropped: a request already delivered is answered
		// ("moved", since the lease is no longer held or the chat no
		// longer listed), so its asker never waits on it.
		_ = sub.Drain()
	}
	r.local.Close(chat)
	// Given up, so that nobody waits for it to expire (a no-op when it
	// was lost already; refused when another node holds it now).
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = oc.claim.Release(ctx)
}

// Owned lists the chats this node serves now.
func (r *Router) Owned() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.owned))
	for c := range r.owned {
		out = append(out, c)
	}
	return out
}

// watchLeases drops each owned chat whose lease is gone (see Lease.Gone),
// checking every sixth of the TTL. A lease that is only lapsed (not
// renewed within two thirds of the TTL, so not Held) keeps its chat
// listed but idle: handle answers nothing there and the chat's actor
// starts no turn and runs no tool, so nothing is done after the store
// could let another node take it; dropping it instead would fence this
// node's own live chat when its renewal lands late.
func (r *Router) watchLeases() {
	defer close(r.done)
	t := time.NewTicker(r.n.o.LeaseTTL / 6)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		r.mu.Lock()
		var gone, wake []*ownedChat
		var idle []*nats.Subscription
		for _, oc := range r.owned {
			switch {
			case oc.claim.lease.Gone():
				gone = append(gone, oc)
			case !oc.claim.Held() && oc.sub != nil:
				// Lapsed: its route stops here before the store could
				// let another node take the lease.
				idle = append(idle, oc.sub)
				oc.sub, oc.idle = nil, true
			case oc.claim.Held() && oc.idle:
				wake = append(wake, oc)
			}
		}
		r.mu.Unlock()
		for _, sub := range idle {
			_ = sub.Drain()
		}
		for _, oc := range gone {
			r.drop(oc)
		}
		for _, oc := range wake {
			r.resume(oc)
		}
	}
}

// resume serves again an owned chat whose lease was renewed after it
// lapsed.
func (r *Router) resume(oc *ownedChat) {
	subj, _ := routeSubject(oc.claim.Chat())
	sub, err := r.n.nc.QueueSubscribe(subj+"."+r.n.o.Name, routeQueue, func(m *nats.Msg) { r.serve(oc, m) })
	if err != nil {
		r.n.log.Warn("cluster: serve a chat again after its lease was renewed", "chat", oc.claim.Chat(), "err", err)
		return // tried again at the next check
	}
	r.mu.Lock()
	kept := r.owned[oc.claim.Chat()] == oc && oc.idle
	if kept {
		oc.sub, oc.idle = sub, false
	}
	r.mu.Unlock()
	if !kept {
		_ = sub.Unsubscribe()
	}
}

// Close stops serving every chat and gives their leases up.
func (r *Router) Close() error {
	close(r.stop)
	<-r.done
	for _, chat := range r.Owned() {
		r.Release(chat)
	}
	return nil
}
