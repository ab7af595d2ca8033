// Package ws speaks Mirror's WebSocket protocol (docs/protocol.md): it parses
// client frames, turns them into calls on the chats service, and writes each
// socket's events in order through a bounded, coalescing send queue, so a slow
// client can never hold up a chat.
package ws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/chats/people"
	"github.com/mirror-gateway/mirror/gateway/limit"
	"github.com/mirror-gateway/mirror/runtime/ids"
)

// Protocol limits and close codes.
const (
	MaxFrame          = 1 << 20
	MaxWelcomeChats   = 500 // chats a welcome lists, newest first
	CloseUnauthorized = 4401
	CloseTooSlow      = websocket.CloseTryAgainLater // 1013

	// DefaultAuthTimeout is how long a socket may stay unauthenticated when
	// Options.AuthTimeout is 0.
	DefaultAuthTimeout = 10 * time.Second

	writeWait  = 10 * time.Second
	pingPeriod = 30 * time.Second
	pongWait   = 75 * time.Second

	// ReplayPage bounds the stored events one step of a replay reads
	// (at least one event): a replay holds at most one page in memory.
	ReplayPage = 256 << 10
	// DefaultQueueBytes bounds the bytes waiting for one socket.
	DefaultQueueBytes = 8 << 20
)

// Options configure the WebSocket endpoint.
type Options struct {
	Chats *chats.Service
	// Authenticate reports whether the upgrade request carries a valid
	// token (Bearer header or cookie), and the principal it speaks for; a
	// request with a wrong one never gets here.
	Authenticate func(r *http.Request) (who Who, ok bool)
	// CheckHello checks a token sent in a hello frame, with its principal.
	CheckHello func(token string) (who Who, ok bool)
	// CheckOrigin decides whether a browser Origin may open a socket.
	CheckOrigin func(r *http.Request) bool
	// Buffer is how many frames may wait for one socket.
	Buffer int
	// AuthTimeout is how long a socket may stay open without having
	// authenticated before it is closed with 4401 (0: DefaultAuthTimeout).
	AuthTimeout time.Duration
	// MaxUnauthenticated caps the sockets open at once that have not
	// authenticated; an upgrade past it is refused with 503 (0: no cap).
	MaxUnauthenticated int
	// MessagesPerMinute caps message.send per principal, answered with
	// error rate_limited past it (0: no cap).
	MessagesPerMinute int
	// Sends, when set, is the limit message.send spends from (keyed by
	// Who.Principal), shared with other transports; nil makes one of
	// MessagesPerMinute.
	Sends *limit.Keyed[string]
	// QueueBytes is how many bytes of frames may wait for one socket
	// (0: DefaultQueueBytes). Past either limit the socket is closed with
	// 1013 and the client resumes with since.
	QueueBytes int
	// Now is the clock of the message rate; nil is time.Now.
	Now func() time.Time
	Log *slog.Logger
}

// Who is the person a socket's token speaks for, and the key of their
// per-person limits.
type Who struct {
	Person    people.Person
	Principal string
}

// Hub accepts sockets and closes them all at shutdown.
type Hub struct {
	opt      Options
	upgrader websocket.Upgrader
	mu       sync.Mutex
	conns    map[*conn]struct{}
	wg       sync.WaitGroup
	closed   bool
	// unauthed counts the sockets that have not authenticated yet.
	unauthed atomic.Int64
	// sends is the message rate per principal; nil when uncapped.
	sends *limit.Keyed[string]
}

// New creates a Hub.
func New(opt Options) *Hub {
	if opt.Buffer <= 0 {
		opt.Buffer = 1024
	}
	if opt.QueueBytes <= 0 {
		opt.QueueBytes = DefaultQueueBytes
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	if opt.AuthTimeout <= 0 {
		opt.AuthTimeout = DefaultAuthTimeout
	}
	h := &Hub{opt: opt, conns: map[*conn]struct{}{}}
	h.sends = opt.Sends
	if h.sends == nil {
		if h.sends = limit.Messages(opt.MessagesPerMinute); h.sends != nil {
			h.sends.Now = opt.Now
		}
	}
	h.upgrader = websocket.Upgrader{
		ReadBufferSize: 4096, WriteBufferSize: 4096,
		CheckOrigin: opt.CheckOrigin,
		Error: func(w http.ResponseWriter, r *http.Request, status int, reason error) {
			http.Error(w, reason.Error(), status)
		},
	}
	return h
}

// ServeHTTP upgrades the request and runs the socket until it closes.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.opt.CheckOrigin(r) {
		http.Error(w, "websocket: origin not allowed", http.StatusForbidden)
		return
	}
	who, authed := h.opt.Authenticate(r)
	if !authed && !h.admitUnauthenticated() {
		w.Header().Set("Retry-After", "10")
		http.Error(w, "too many connections waiting to authenticate; try again shortly", http.StatusServiceUnavailable)
		return
	}
	cw := &corkingWriter{ResponseWriter: w}
	wc, err := h.upgrader.Upgrade(cw, r, nil)
	if err != nil {
		if !authed {
			h.unauthed.Add(-1)
		}
		return // the upgrader has answered
	}
	c := &conn{hub: h, ws: wc, cork: cw.conn, principal: who.Principal, scope: h.opt.Chats.As(who.Person), wake: make(chan struct{}, 1),
		stop: make(chan struct{}), session: ids.NewSession(), opened: map[string]bool{},
		chatQs: map[string]*chatQueue{}, slots: make(chan struct{}, MaxQueuedRequests)}
	if authed {
		c.auth.Store(authOK)
		c.person.Store(&who.Person.ID)
	} else {
		// Closed with 4401 unless hello brings the token in time.
		c.authTimer = time.AfterFunc(h.opt.AuthTimeout, c.authExpired)
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		c.settleAuth()
		wc.Close()
		return
	}
	h.conns[c] = struct{}{}
	h.wg.Add(2)
	h.mu.Unlock()
	go c.writeLoop()
	c.readLoop()
}

// admitUnauthenticated counts in a socket that has not authenticated, or
// refuses it when MaxUnauthenticated are open: without the cap, upgrades
// that never say hello would each hold a descriptor and a buffer.
func (h *Hub) admitUnauthenticated() bool {
	if n := h.unauthed.Add(1); h.opt.MaxUnauthenticated > 0 && n > int64(h.opt.MaxUnauthenticated) {
		h.unauthed.Add(-1)
		return false
	}
	return true
}

// Unauthenticated returns how many open sockets have not authenticated.
func (h *Hub) Unauthenticated() int { return int(h.unauthed.Load()) }

// Close closes every socket with 1001 (going away) and waits for them.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	for c := range h.conns {
		c.shut(websocket.CloseGoingAway, "server shutting down")
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// CloseSignedOut is the close message of a socket whose person's access
// was revoked (code CloseUnauthorized, which browsers take as signed out).
const CloseSignedOut = "signed out: your access was revoked"

// SignOut closes every socket that speaks for the person with id, with
// CloseUnauthorized and CloseSignedOut, at once: a revoked person keeps no
// open socket, and a frame of theirs that is read meanwhile is not
// answered. It returns how many sockets it closed.
func (h *Hub) SignOut(id string) int {
	if id == "" {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for c := range h.conns {
		if p := c.person.Load(); p != nil && *p == id {
			c.signedOut.Store(true)
			c.mu.Lock()
			clear(c.q) // what waits is not sent to someone no longer let in
			c.q, c.queued = c.q[:0], 0
			c.mu.Unlock()
			c.shut(CloseUnauthorized, CloseSignedOut)
			n++
		}
	}
	return n
}

// Broadcast sends a frame to every socket that watches the chat list (the
// breaker events of the Monitor, say). It never blocks.
func (h *Hub) Broadcast(frame map[string]any) {
	b, err := json.Marshal(frame)
	if err != nil {
		h.opt.Log.Error("encode broadcast", "err", err)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.conns {
		if c.watching.Load() {
			c.push(item{raw: b})
		}
	}
}

func (h *Hub) queueBytes() int {
	if h.opt.QueueBytes <= 0 {
		return DefaultQueueBytes
	}
	return h.opt.QueueBytes
}

// Count returns the number of open sockets.
func (h *Hub) Count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}

// conn is one socket. The read loop handles requests in order; the write
// loop drains the queue.
type conn struct {
	hub      *Hub
	ws       *websocket.Conn
	cork     *corkConn // under ws: merges a batch of frames into one write
	session  string
	started  bool // the first frame was handled
	unwatch  func()
	watching atomic.Bool     // set with unwatch: receives list and breaker frames
	opened   map[string]bool // chats this socket receives live events of
	ops      sync.WaitGroup  // requests that outlive the read (turn.stop, perChat)

	// The per-chat queues of requests that wait for their chat (perChat):
	// qmu guards chatQs; slots bounds the requests queued on the socket.
	qmu    sync.Mutex
	chatQs map[string]*chatQueue
	slots  chan struct{}

	// auth is authPending until the socket authenticates (authOK) or its
	// time runs out (authTimedOut); the first to move it wins.
	auth      atomic.Int32
	authTimer *time.Timer // nil when authenticated at the upgrade
	principal string      // who the token speaks for (the read loop's)
	scope     chats.Scope // the chats as that person may use them (the read loop's)
	settled   bool        // the unauthenticated count no longer has this socket
	// person is the id of who the socket speaks for once it is
	// authenticated, for SignOut (read from other goroutines).
	person atomic.Pointer[string]
	// signedOut: the person's access was revoked; no frame is answered
	// any more and the socket is closing.
	signedOut atomic.Bool

	mu        sync.Mutex
	q         []item
	queued    int       // bytes in q
	replays   []*replay // chats whose missed events the writer is sending, in turn
	closeCode int       // set: the writer sends this close frame and ends
	closeMsg  string
	wake      chan struct{}
	stop      chan struct{} // closed when the socket ends
	stopOnce  sync.Once

	// High-water marks, for tests: the most bytes q held, and the largest
	// replay page read.
	maxQueued, maxPage int
}

// replay is a chat.open with since in progress: the writer reads the
// chat's stored events page by page after after, sends each page as the
// socket takes it, and switches to live events when it has caught up
// (chats.Service.CatchUp). Nothing of the chat is queued meanwhile.
type replay struct {
	chat  string
	after uint64 // the last seq sent
	req   string // of the chat.open; chat.resumed carries it
	// reqs are answers to this socket's own requests on the chat that
	// arrived while it replayed: the replay sends those events with req.
	reqs map[uint64]string
	// cancelled: chat.close, another chat.open or the socket's end took
	// it away before it caught up.
	cancelled bool
}

// item is one queued frame; a reply.delta stays an event so the next delta
// of the same turn can be merged into it.
type item struct {
	raw   []byte
	delta *chats.Event
	rd    *chats.ReplyDelta // delta's payload
	// text holds the merged text once a later delta of the same turn was
	// merged in: appended in place, so merging n deltas copies the text
	// once rather than n times (rd.Text is its String, which shares it).
	text  *strings.Builder
	runes int // runes of rd.Text, for the next delta's offset
}

// size is what an item counts against QueueBytes.
func (it item) size() int {
	if it.delta != nil {
		return len(it.rd.Text) + 128
	}
	return len(it.raw)
}

// frame returns the item's bytes as sent.
func (it item) frame() []byte {
	if it.delta != nil {
		return it.delta.JSON() // unmerged, shared by every socket and encoded once
	}
	return it.raw
}

// Deliver implements chats.Subscriber. It never blocks.
func (c *conn) Deliver(d chats.Delivery) {
	if d.Event != nil && c.heldByReplay(d) {
		return
	}
	if d.Snapshot != nil {
		// chat.resumed ends the chat's replay: the chat delivers it on its
		// own goroutine just before subscribing this socket, so every
		// event after it is live.
		c.mu.Lock()
		for i, r := range c.replays {
			if r.chat == d.Snapshot.Chat.ID {
				c.replays = append(c.replays[:i], c.replays[i+1:]...)
				break
			}
		}
		c.mu.Unlock()
	}
	switch {
	case d.Event != nil && d.Event.Type == chats.EvReplyDelta:
		rd, ok := d.Event.Payload.(*chats.ReplyDelta)
		if !ok {
			return // a delta without its payload: nothing to show
		}
		c.push(item{delta: d.Event, rd: rd, runes: utf8.RuneCountInString(rd.Text)})
	case d.Event != nil:
		c.push(item{raw: d.Event.WithReq(d.Req)})
	case d.Snapshot != nil:
		c.push(item{raw: chats.Marshal(d.Snapshot)})
	case d.Closed != "":
		c.send(map[string]any{"type": "chat.closed", "chat": d.Closed})
	}
}

// ChatChanged implements chats.ListWatcher.
func (c *conn) ChatChanged(ch chats.Chat, created bool) {
	typ := "chat.updated"
	if created {
		typ = "chat.created"
	}
	c.send(map[string]any{"type": typ, "chat": ch})
}

// send queues a small frame; nil values (an absent req, say) are left out.
func (c *conn) send(m map[string]any) {
	for k, v := range m {
		if v == nil {
			delete(m, k)
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		c.hub.opt.Log.Error("encode frame", "err", err)
		return
	}
	c.push(item{raw: b})
}

func (c *conn) push(it item) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closeCode != 0 {
		return
	}
	if it.delta != nil && len(c.q) > 0 {
		if q := &c.q[len(c.q)-1]; q.delta != nil && q.delta.Chat == it.delta.Chat && q.rd.Turn == it.rd.Turn &&
			it.rd.Offset == q.rd.Offset+q.runes {
			if q.text == nil {
				q.text = new(strings.Builder)
				q.text.Grow(2 * (len(q.rd.Text) + len(it.rd.Text)))
				q.text.WriteString(q.rd.Text)
			}
			q.text.WriteString(it.rd.Text)
			d := it.delta
			q.rd = &chats.ReplyDelta{Turn: it.rd.Turn, Offset: q.rd.Offset, Text: q.text.String()}
			q.delta = chats.NewEvent(d.Chat, d.Seq, d.Time, q.rd)
			q.runes += it.runes
			c.queued += len(it.rd.Text)
			c.maxQueued = max(c.maxQueued, c.queued)
			return
		}
	}
	if len(c.q) >= c.hub.opt.Buffer || (len(c.q) > 0 && c.queued+it.size() > c.hub.queueBytes()) {
		// Too far behind: drop the socket rather than an event. The client
		// resumes with since and loses nothing.
		c.closeCode, c.closeMsg = CloseTooSlow, "client too slow; reconnect and resume with since"
		c.q, c.queued = nil, 0
	} else {
		c.q = append(c.q, it)
		c.queued += it.size()
		c.maxQueued = max(c.maxQueued, c.queued)
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// shut makes the writer send a close frame and end the socket.
func (c *conn) shut(code int, msg string) {
	c.mu.Lock()
	if c.closeCode == 0 {
		c.closeCode, c.closeMsg = code, msg
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *conn) writeLoop() {
	defer c.hub.wg.Done()
	defer c.end()
	ping := time.NewTicker(pingPeriod)
	defer ping.Stop()
	var batch []item
	for {
		select {
		case <-c.wake:
		case <-ping.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait)); err != nil {
				return
			}
			continue
		case <-c.stop:
			return
		}
		for {
			c.mu.Lock()
			batch, c.q = c.q, batch[:0]
			c.queued = 0
			code, msg := c.closeCode, c.closeMsg
			replaying := len(c.replays) > 0
			c.mu.Unlock()
			if !c.writeBatch(batch) {
				return
			}
			clear(batch)
			if code != 0 {
				_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, msg), time.Now().Add(writeWait))
				return
			}
			if !replaying {
				break
			}
			// One page of a replay, then the queue again: live frames of
			// other chats are not held up behind a long replay, and each
			// page is read only once the socket took the one before.
			if !c.replayStep() {
				return
			}
			select {
			case <-ping.C:
				if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait)); err != nil {
					return
				}
			case <-c.stop:
				return
			default:
			}
		}
	}
}

// writeBatch sends the frames that queued up while the writer was busy, in
// order, each its own text frame; several go out in one write to the
// socket (corkConn). false when the socket failed.
func (c *conn) writeBatch(batch []item) bool {
	if len(batch) > 1 && c.cork != nil {
		c.cork.cork()
	}
	for _, it := range batch {
		if !c.write(it.frame()) {
			return false
		}
	}
	if len(batch) > 1 && c.cork != nil {
		return c.cork.uncork() == nil
	}
	return true
}

// write sends one text frame; false when the socket failed.
func (c *conn) write(b []byte) bool {
	_ = c.ws.SetWriteDeadline(time.Now().Add(writeWait))
	return c.ws.WriteMessage(websocket.TextMessage, b) == nil
}

// replayStep sends the next page of the first replay (which then goes last,
// so several chats replay in turn), or, when nothing is left to read,
// switches that chat to live events. false when the socket failed.
func (c *conn) replayStep() bool {
	c.mu.Lock()
	if len(c.replays) == 0 {
		c.mu.Unlock()
		return true
	}
	r := c.replays[0]
	after := r.after
	c.mu.Unlock()
	svc := c.hub.opt.Chats
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	frames, err := svc.Events(ctx, r.chat, after, ReplayPage)
	if err == nil && len(frames) == 0 {
		// Read to the end: switch to live events, unless more were
		// committed meanwhile (then read on).
		var done bool
		if done, err = svc.CatchUp(ctx, r.chat, after, c, r.req); err == nil && done {
			c.mu.Lock()
			cancelled := r.cancelled
			c.mu.Unlock()
			if cancelled {
				// chat.close, another chat.open or the socket's end came
				// meanwhile, and may have unsubscribed before this subscribed.
				_ = svc.Unsubscribe(ctx, r.chat, c)
			}
			return true
		}
	}
	if err != nil {
		if c.dropReplay(r) {
			c.failErr(r.req, r.chat, err)
		}
		return true
	}
	size := 0
	c.mu.Lock()
	if len(c.replays) > 0 && c.replays[0] == r {
		c.replays = append(c.replays[1:], r)
	}
	reqs := make([]string, len(frames))
	for i, f := range frames {
		size += len(f.Raw)
		reqs[i] = r.reqs[f.Seq]
		delete(r.reqs, f.Seq)
	}
	if len(frames) > 0 {
		r.after = frames[len(frames)-1].Seq
	}
	c.maxPage = max(c.maxPage, size)
	c.mu.Unlock()
	for i, f := range frames {
		if !c.write(withReq(f.Raw, reqs[i])) {
			return false
		}
	}
	return true
}

// dropReplay removes r from the replays; false when it was gone already.
func (c *conn) dropReplay(r *replay) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.replays {
		if x == r {
			c.replays = append(c.replays[:i], c.replays[i+1:]...)
			return true
		}
	}
	return false
}

// stopReplay ends chat's replay, if one runs; true when it did.
func (c *conn) stopReplay(chat string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.replays {
		if x.chat == chat {
			x.cancelled = true
			c.replays = append(c.replays[:i], c.replays[i+1:]...)
			return true
		}
	}
	return false
}

// heldByReplay keeps the events of a chat being replayed out of the queue:
// they are committed, so the replay reads them in their place; the answer
// to one of this socket's requests leaves its req for the replay to add.
// Events the replay has sent already pass, as the echo of a request.
func (c *conn) heldByReplay(d chats.Delivery) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.replays {
		if r.chat != d.Event.Chat {
			continue
		}
		if d.Event.Type == chats.EvReplyDelta || d.Event.Type == chats.EvQuotaWait || d.Event.Type == chats.EvToolProgress {
			return true // chat.resumed carries the running reply
		}
		if d.Event.Seq <= r.after {
			return false
		}
		if d.Req != "" && len(r.reqs) < 1024 {
			if r.reqs == nil {
				r.reqs = map[uint64]string{}
			}
			r.reqs[d.Event.Seq] = d.Req
		}
		return true
	}
	return false
}

// withReq adds "req" to an event's wire bytes.
func withReq(raw []byte, req string) []byte {
	if req == "" {
		return raw
	}
	q, _ := json.Marshal(req)
	out := make([]byte, 0, len(raw)+len(q)+8)
	out = append(out, raw[:len(raw)-1]...)
	out = append(out, `,"req":`...)
	out = append(out, q...)
	return append(out, '}')
}

// end tears the socket down once; both loops call it.
func (c *conn) end() {
	c.stopOnce.Do(func() {
		close(c.stop)
		c.ws.Close()
	})
}

// Authentication states of a socket.
const (
	authPending int32 = iota
	authOK
	authTimedOut
)

// authExpired closes a socket that has not authenticated in time.
func (c *conn) authExpired() {
	if c.auth.CompareAndSwap(authPending, authTimedOut) {
		c.shut(CloseUnauthorized, "unauthorized: no hello with the token in time")
	}
}

// authenticate marks the socket authenticated by hello; false when its
// time had already run out.
func (c *conn) authenticate(who Who) bool {
	if !c.auth.CompareAndSwap(authPending, authOK) {
		return c.auth.Load() == authOK
	}
	c.principal, c.scope = who.Principal, c.hub.opt.Chats.As(who.Person)
	c.person.Store(&who.Person.ID)
	c.settleAuth()
	return true
}

// settleAuth takes a socket that was counted unauthenticated out of the
// count and stops its timer, once.
func (c *conn) settleAuth() {
	if c.authTimer == nil || c.settled {
		return
	}
	c.settled = true
	c.authTimer.Stop()
	c.hub.unauthed.Add(-1)
}

func (c *conn) readLoop() {
	defer c.hub.wg.Done()
	defer func() {
		c.settleAuth()
		c.end()
		c.mu.Lock()
		for _, r := range c.replays {
			r.cancelled = true // the writer unsubscribes what it subscribes meanwhile
		}
		c.replays = nil
		c.mu.Unlock()
		c.ops.Wait()
		if c.unwatch != nil {
			c.unwatch()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		for chat := range c.opened {
			_ = c.hub.opt.Chats.Unsubscribe(ctx, chat, c)
		}
		cancel()
		c.hub.mu.Lock()
		delete(c.hub.conns, c)
		c.hub.mu.Unlock()
	}()
	c.ws.SetReadLimit(MaxFrame) // gorilla closes with 1009 past it
	_ = c.ws.SetReadDeadline(time.Now().Add(pongWait))
	c.ws.SetPongHandler(func(string) error { return c.ws.SetReadDeadline(time.Now().Add(pongWait)) })
	for {
		typ, data, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		_ = c.ws.SetReadDeadline(time.Now().Add(pongWait))
		if typ != websocket.TextMessage {
			c.fail("", "", "bad_frame", "frames are JSON text")
			continue
		}
		if !c.handle(data) {
			// Let the writer send the close frame before the socket goes.
			select {
			case <-c.stop:
			case <-time.After(writeWait):
			}
			return
		}
	}
}

// frame is every field a client frame may carry.
type frame struct {
	Type   string `json:"type"`
	Req    string `json:"req"`
	Token  string `json:"token"`
	Client string `json:"client"`
	Watch  *bool  `json:"watch"`
	Title  string `json:"title"`
	Chain  string `json:"chain"`
	// Reuse on chat.create answers with the newest empty "New chat"
	// instead of making another (the browser's New chat button).
	Reuse    bool    `json:"reuse"`
	Chat     string  `json:"chat"`
	Since    *uint64 `json:"since"`
	Before   *uint64 `json:"before"`
	Text     *string `json:"text"`
	ClientID string  `json:"client_id"`
	Mode     string  `json:"mode"`
	Message  string  `json:"message"`
	Approval string  `json:"approval"`
	Allow    *bool   `json:"allow"`
	// ForChat on approval.answer also allows the tool for every later
	// call of the chat ("Allow for this chat"); Tool names the tool
	// tool.revoke takes off that list.
	ForChat  bool   `json:"for_chat"`
	Tool     string `json:"tool"`
	Recovery string `json:"recovery"`
	Action   string `json:"action"`
	Pinned   *bool  `json:"pinned"`
	// After and Limit page chat.list: a page's next, and how many (0:
	// the default page, at most chats.MaxListPage).
	After string `json:"after"`
	Limit int    `json:"limit"`
	// Attachments name uploads (their sha256) on message.send, and the
	// attachments a pending message keeps on message.edit.
	Attachments *[]string `json:"attachments"`
}

// handle answers one frame; false ends the socket.
func (c *conn) handle(data []byte) bool {
	var f frame
	if err := json.Unmarshal(data, &f); err != nil {
		var req struct {
			Req string `json:"req"`
		}
		_ = json.Unmarshal(data, &req)
		c.fail(req.Req, "", "bad_frame", "frame is not a JSON object of the protocol: "+jsonProblem(err))
		return true
	}
	if c.signedOut.Load() {
		return false // revoked: the close frame is on its way
	}
	first := !c.started
	c.started = true
	if f.Type == "hello" {
		c.waitQueued("") // answered after the requests before it
		if c.auth.Load() != authOK {
			var who Who
			ok := false
			if f.Token != "" {
				who, ok = c.hub.opt.CheckHello(f.Token)
			}
			if !ok || !c.authenticate(who) {
				c.shut(CloseUnauthorized, "unauthorized")
				return false
			}
		}
		if c.unwatch == nil && (f.Watch == nil || *f.Watch) {
			c.unwatch = c.scope.Watch(c)
			c.watching.Store(true)
		}
		// The most recently updated chats, read from the index by last
		// update; next pages the rest (chat.list).
		page, err := c.scope.ListPage(context.Background(), "", MaxWelcomeChats)
		if err != nil {
			c.fail(f.Req, "", "internal", "could not list chats")
			return true
		}
		if page.Chats == nil {
			page.Chats = []chats.Chat{}
		}
		// The slash commands come from the chats table, so the browser
		// offers exactly what chat.command runs.
		c.send(map[string]any{"type": "welcome", "session": c.session, "chats": page.Chats, "total": page.Total,
			"next": omit(page.Next), "commands": chats.Commands(), "req": omit(f.Req)})
		return true
	}
	if c.auth.Load() != authOK {
		c.shut(CloseUnauthorized, "unauthorized: send hello with the token first")
		return false
	}
	if first && c.unwatch == nil {
		c.unwatch = c.scope.Watch(c)
		c.watching.Store(true)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc := c.scope // every frame asks as the socket's person: a chat they cannot see is not_found
	o := chats.Origin{Sub: c, Req: f.Req}
	need := func(ok bool, what string) bool {
		if !ok {
			c.fail(f.Req, f.Chat, "bad_frame", f.Type+" needs "+what)
		}
		return ok
	}
	switch f.Type {
	case "message.send", "message.edit", "message.delete", "message.pin":
		// Queued per chat (perChat): the socket reads on meanwhile.
	default:
		// Anything else about a chat comes after that chat's queued
		// requests, as if they had been answered one at a time; a frame
		// naming no chat comes after all of them.
		c.waitQueued(f.Chat)
	}
	var err error
	switch f.Type {
	case "chat.create":
		var ch chats.Chat
		if f.Reuse && f.Title == "" {
			ch, _, err = svc.CreateReusing(ctx, f.Chain, o)
		} else {
			ch, err = svc.Create(ctx, f.Title, f.Chain, o)
		}
		if err == nil {
			c.send(map[string]any{"type": "chat.created", "chat": ch, "req": omit(f.Req)})
		}
	case "chat.open":
		if need(f.Chat != "", "chat") {
			err = c.open(ctx, f.Chat, f.Since, f.Req)
		}
	case "chat.history":
		if need(f.Chat != "" && f.Before != nil, "chat and before") {
			var h *chats.History
			if h, err = svc.History(ctx, f.Chat, *f.Before, f.Req); err == nil {
				c.push(item{raw: chats.Marshal(h)})
			}
		}
	case "chat.list":
		var page chats.ChatPage
		if !need(f.Limit >= 0, "a limit of 0 (the default page) or more") {
			break
		}
		if page, err = svc.ListPage(ctx, f.After, f.Limit); err == nil {
			if page.Chats == nil {
				page.Chats = []chats.Chat{}
			}
			c.send(map[string]any{"type": "chat.list", "chats": page.Chats, "total": page.Total, "next": omit(page.Next), "req": omit(f.Req)})
		}
	case "chat.close":
		if need(f.Chat != "", "chat") {
			c.stopReplay(f.Chat)
			if err = svc.Unsubscribe(ctx, f.Chat, c); err == nil {
				delete(c.opened, f.Chat)
				c.send(map[string]any{"type": "chat.closed", "chat": f.Chat, "req": omit(f.Req)})
			}
		}
	case "message.send":
		if need(f.Chat != "" && (f.Text != nil || f.Attachments != nil) && f.ClientID != "", "chat, text (or attachments) and client_id") && c.allowSend(f) {
			text, sums := "", []string(nil)
			if f.Text != nil {
				text = *f.Text
			}
			if f.Attachments != nil {
				sums = *f.Attachments
			}
			c.perChat(f.Chat, f.Req, func(ctx context.Context) error {
				_, err := svc.SendAttached(ctx, f.Chat, text, f.ClientID, f.Mode, sums, o)
				return err
			})
		}
	case "message.edit":
		if need(f.Chat != "" && f.Message != "" && (f.Text != nil || f.Attachments != nil), "chat, message and text (or attachments)") {
			var keep []string
			if f.Attachments != nil {
				keep = *f.Attachments
				if keep == nil {
					keep = []string{}
				}
			}
			c.perChat(f.Chat, f.Req, func(ctx context.Context) error {
				_, err := svc.EditAttached(ctx, f.Chat, f.Message, f.Text, keep, o)
				return err
			})
		}
	case "message.delete":
		if need(f.Chat != "" && f.Message != "", "chat and message") {
			c.perChat(f.Chat, f.Req, func(ctx context.Context) error { return svc.Delete(ctx, f.Chat, f.Message, o) })
		}
	case "turn.stop":
		if need(f.Chat != "", "chat") {
			// Stopping waits for the turn to wind down; the socket keeps reading.
			c.ops.Add(1)
			go func() {
				defer c.ops.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := svc.Stop(ctx, f.Chat, o); err != nil {
					c.failErr(f.Req, f.Chat, err)
				}
			}()
		}
	case "approval.answer":
		switch {
		case !need(f.Approval != "" && f.Allow != nil, "approval and allow"):
		case f.ForChat && !need(*f.Allow, "allow true with for_chat"):
		case f.ForChat:
			err = svc.AllowForChat(ctx, f.Approval, o)
		default:
			err = svc.AnswerApproval(ctx, f.Approval, *f.Allow, o)
		}
	case "tool.revoke":
		if need(f.Chat != "" && f.Tool != "", "chat and tool") {
			var ch chats.Chat
			if ch, err = svc.RevokeTool(ctx, f.Chat, f.Tool, o); err == nil {
				c.send(map[string]any{"type": "tool.revoked", "chat": f.Chat, "tool": f.Tool, "allowed_tools": ch.AllowedTools, "req": omit(f.Req)})
			}
		}
	case "message.regenerate":
		if need(f.Chat != "" && f.Message != "" && f.ClientID != "", "chat, message and client_id") && c.allowSend(f) {
			_, err = svc.Regenerate(ctx, f.Chat, f.Message, f.ClientID, o)
		}
	case "recovery.answer":
		if need(f.Recovery != "" && f.Action != "", "recovery and action (repeat or skip)") {
			var delivered bool
			if delivered, err = svc.AnswerRecovery(ctx, f.Recovery, f.Action, o); err == nil {
				c.send(map[string]any{"type": "recovery.answered", "recovery": f.Recovery, "delivered": delivered, "req": omit(f.Req)})
			}
		}
	case "message.pin":
		if need(f.Chat != "" && f.Message != "" && f.Pinned != nil, "chat, message and pinned") {
			c.perChat(f.Chat, f.Req, func(ctx context.Context) error {
				_, err := svc.Pin(ctx, f.Chat, f.Message, *f.Pinned, o)
				return err
			})
		}
	case "chat.command":
		if need(f.Chat != "" && f.Text != nil, "chat and text") {
			// A command may wait (for /stop); the socket keeps reading.
			c.ops.Add(1)
			go func() {
				defer c.ops.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				out, err := svc.Command(ctx, f.Chat, *f.Text, o)
				if err != nil {
					c.failErr(f.Req, f.Chat, err)
					return
				}
				c.send(map[string]any{"type": "command.result", "chat": f.Chat, "text": out, "req": omit(f.Req)})
			}()
		}
	case "":
		c.fail(f.Req, f.Chat, "bad_frame", "frame has no type")
	default:
		c.fail(f.Req, f.Chat, "unknown_type", fmt.Sprintf("unknown frame type %q", f.Type))
	}
	if err != nil {
		c.failErr(f.Req, f.Chat, err)
	}
	return true
}

// MaxQueuedRequests is how many message requests one socket may have
// waiting for their chats; past it the socket stops reading until one is
// answered, as it did before requests were queued.
const MaxQueuedRequests = 256

// chatQueue is one chat's requests on a socket, answered in order by one
// goroutine that ends when the queue is empty.
type chatQueue struct {
	ops  []func()
	idle chan struct{} // closed when the goroutine ends
}

// perChat runs op after the socket's earlier requests on chat, without
// holding up the socket's reading: a socket carrying many chats has them
// answered at once, each chat's requests still one after another, in the
// order they came. A failure is answered with req. The request waits for
// a slot first (MaxQueuedRequests), so a client cannot queue unboundedly.
func (c *conn) perChat(chat, req string, op func(ctx context.Context) error) {
	select {
	case c.slots <- struct{}{}:
	case <-c.stop:
		return
	}
	run := func() {
		defer func() { <-c.slots }()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := op(ctx); err != nil {
			c.failErr(req, chat, err)
		}
	}
	c.qmu.Lock()
	defer c.qmu.Unlock()
	q := c.chatQs[chat]
	if q == nil {
		q = &chatQueue{idle: make(chan struct{})}
		c.chatQs[chat] = q
		c.ops.Add(1)
		go c.drainQueue(chat, q)
	}
	q.ops = append(q.ops, run)
}

// drainQueue answers chat's queued requests until none is left.
func (c *conn) drainQueue(chat string, q *chatQueue) {
	defer c.ops.Done()
	for {
		c.qmu.Lock()
		if len(q.ops) == 0 {
			delete(c.chatQs, chat)
			close(q.idle)
			c.qmu.Unlock()
			return
		}
		op := q.ops[0]
		q.ops[0] = nil
		q.ops = q.ops[1:]
		c.qmu.Unlock()
		op()
	}
}

// waitQueued waits until chat's queued requests are answered, or every
// chat's when chat is "" (each request is bounded by its own timeout).
func (c *conn) waitQueued(chat string) {
	c.qmu.Lock()
	var idle []chan struct{}
	for id, q := range c.chatQs {
		if chat == "" || id == chat {
			idle = append(idle, q.idle)
		}
	}
	c.qmu.Unlock()
	for _, ch := range idle {
		select {
		case <-ch:
		case <-c.stop:
			return
		}
	}
}

// open answers chat.open. Without since it sends a snapshot. With since,
// a client that is up to date is switched to live events at once; one that
// missed events gets them from the writer, page by page as the socket takes
// them (replayStep), however many there are.
func (c *conn) open(ctx context.Context, chat string, since *uint64, req string) error {
	svc := c.scope
	if c.stopReplay(chat) || c.opened[chat] {
		// Opened again: start over, so nothing is sent twice.
		if err := svc.Unsubscribe(ctx, chat, c); err != nil {
			return err
		}
	}
	if since == nil {
		if err := svc.Open(ctx, chat, nil, c, req); err != nil {
			return err
		}
		c.opened[chat] = true
		return nil
	}
	done, err := svc.CatchUp(ctx, chat, *since, c, req)
	if err != nil {
		return err
	}
	c.opened[chat] = true
	if !done {
		c.mu.Lock()
		c.replays = append(c.replays, &replay{chat: chat, after: *since, req: req})
		c.mu.Unlock()
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

func (c *conn) failErr(req, chat string, err error) {
	code := "internal"
	msg := err.Error()
	switch {
	case errors.Is(err, chats.ErrInUse):
		code = "in_use"
	case errors.Is(err, chats.ErrNotFound), errors.Is(err, chats.ErrNoTurn):
		code = "not_found"
	case errors.Is(err, chats.ErrUnknownAttachment):
		code = "unknown_attachment"
	case errors.Is(err, chats.ErrBadInput):
		code = "bad_frame"
	case errors.Is(err, chats.ErrTooLarge):
		code = "too_large"
	case errors.Is(err, chats.ErrRateLimited):
		var rl *chats.RateLimited
		if errors.As(err, &rl) {
			c.send(map[string]any{"type": "error", "code": "rate_limited", "message": rl.Msg, "req": omit(req), "chat": omit(chat),
				"retry_after_ms": rl.RetryAfter.Milliseconds()})
			return
		}
		code = "rate_limited"
	case errors.Is(err, chats.ErrClosed):
		msg = "the gateway is shutting down"
	case errors.Is(err, context.DeadlineExceeded):
		msg = "the chat did not answer in time"
	default:
		c.hub.opt.Log.Error("request failed", "chat", chat, "err", err)
	}
	c.fail(req, chat, code, msg)
}

// allowSend spends one message of the principal's rate, or answers
// rate_limited with retry_after_ms, when the next one frees up.
func (c *conn) allowSend(f frame) bool {
	if c.hub.sends == nil {
		return true
	}
	retry, ok := c.hub.sends.Take(c.principal)
	if !ok {
		c.send(map[string]any{"type": "error", "code": "rate_limited", "req": omit(f.Req), "chat": omit(f.Chat),
			"retry_after_ms": retry.Milliseconds(),
			"message":        fmt.Sprintf("too many messages: at most %d a minute; send again in %.1f s", c.hub.opt.MessagesPerMinute, retry.Seconds())})
	}
	return ok
}

func (c *conn) fail(req, chat, code, msg string) {
	c.send(map[string]any{"type": "error", "code": code, "message": msg, "req": omit(req), "chat": omit(chat)})
}
