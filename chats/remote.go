package chats

// Routing in cluster mode. Every operation on one chat is written as an op
// frame and sent, through Options.Owners, to the node that owns the chat;
// that node's HandleOp runs it on the chat's actor and writes the answer
// back. The writer and the parser of both frames sit side by side here, so
// what one node writes the other reads the same way; anything else is
// refused, never half read.
//
// Transports call the Service as on one node: each per-chat method starts
// with one line, `if s.routed(ctx, chat) { return routeOp... }`. Events
// reach a subscriber on any node through the cluster's fan-out
// (Owners.Watch), starting from the owner's snapshot; the owner publishes
// the events of the chats it runs there (Owners.Publish).

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/ids"
	bolt "go.etcd.io/bbolt"
)

// Owners reaches the owner of each chat in a cluster (chats/cluster
// implements it over its router and fan-out). Nil Options.Owners: one
// node, every chat served here.
type Owners interface {
	// Send has chat's owner run the op frame (HandleOp on its node, which
	// may be this one) and returns its answer's bytes.
	Send(ctx context.Context, chat string, frame []byte) ([]byte, error)
	// Watch calls fn with chat's stored events after seq since, in order,
	// each once, then with its events as its owner publishes them (stored
	// ones in seq order; live ones, such as reply.delta, carrying the seq
	// of the last stored one). fn must not block. stop ends it: no call of
	// fn follows its return.
	Watch(ctx context.Context, chat string, since uint64, fn func(*Event)) (stop func(), err error)
	// Publish hands an event of a chat this node runs to every node's
	// watchers: stored says it is in the chat's record (not live text).
	// It must not block; a stored event lost on the way is read from the
	// record by the watchers.
	Publish(ev *Event, stored bool)
	// Idle says chat, which this node owns, left memory with nothing to
	// do (limits.chat_idle passed with no turn, no pending message, no
	// open question and no work left): its ownership may be given up, so
	// that an idle chat costs the cluster no lease renewals. It must not
	// block; the owner asks LetGo before it lets the chat go, so a frame
	// that loaded the chat meanwhile keeps it.
	Idle(chat string)
}

// opVersion is the version of the op and reply frames; a frame of another
// version is refused.
const opVersion = 1

// Op names.
const (
	opCreate       = "create"
	opGet          = "get"
	opOpen         = "open"
	opCatchUp      = "catch_up"
	opEvents       = "events"
	opHistory      = "history"
	opSend         = "send"
	opEdit         = "edit"
	opDelete       = "delete"
	opStop         = "stop"
	opPin          = "pin"
	opRegenerate   = "regenerate"
	opCommand      = "command"
	opContinue     = "continue"
	opApprove      = "approve"
	opRecover      = "recover"
	opRevokeTool   = "revoke_tool"
	opRename       = "rename"
	opSetChain     = "set_chain"
	opArchive      = "archive"
	opDeleteChat   = "delete_chat"
	opRestoreChat  = "restore_chat"
	opHandoffs     = "handoffs"
	opMediaRefused = "media_refused"
	opExport       = "export"
	opTranscript   = "transcript"
	// opPurge and opPrune remove a chat for good on its owner, which
	// appends the removal to the chat's log (see actor.remove).
	opPurge = "purge"
	opPrune = "prune"
)

// opFields lists, for each op, the fields its frame may carry besides v
// and op: the parser refuses any other, so a frame means one thing.
var opFields = map[string][]string{
	opCreate:       {"origin", "title", "chain"},
	opGet:          nil,
	opOpen:         {"origin", "since"},
	opCatchUp:      {"origin", "after"},
	opEvents:       {"after", "max_bytes"},
	opHistory:      {"origin", "before"},
	opSend:         {"origin", "text", "client_id", "mode", "sums"},
	opEdit:         {"origin", "msg", "text", "keep"},
	opDelete:       {"origin", "msg"},
	opStop:         {"origin"},
	opPin:          {"origin", "msg", "pinned"},
	opRegenerate:   {"origin", "msg", "client_id"},
	opCommand:      {"origin", "text"},
	opContinue:     nil,
	opApprove:      {"origin", "id", "allow", "for_chat"},
	opRecover:      {"origin", "id", "action"},
	opRevokeTool:   {"origin", "tool"},
	opRename:       {"title"},
	opSetChain:     {"chain"},
	opArchive:      {"archived"},
	opDeleteChat:   nil,
	opRestoreChat:  nil,
	opHandoffs:     nil,
	opMediaRefused: {"origin", "via", "outcome", "reason"},
	opExport:       nil,
	opTranscript:   {"after"},
	opPurge:        nil,
	opPrune:        {"before"}, // the cutoff, Unix nanoseconds
}

// opOrigin is an Origin on the wire: who asked, and whether the asker
// wants its copies of the events the op causes (they come back in the
// reply, since the asker's Subscriber lives on the asking node).
type opOrigin struct {
	By    string `json:"by,omitempty"`
	Owner bool   `json:"owner,omitempty"`
	Req   string `json:"req,omitempty"`
	Sub   bool   `json:"sub,omitempty"`
	// Asker names the asking Service's subscriber (its instance and a
	// number), so an op the owner runs in the asking process itself
	// knows which subscriber asked (list watchers skip it).
	Asker string `json:"asker,omitempty"`
}

// opFrame is one op: its name and the fields opFields allows it.
type opFrame struct {
	V        int       `json:"v"`
	Op       string    `json:"op"`
	Origin   *opOrigin `json:"origin,omitempty"`
	Title    string    `json:"title,omitempty"`
	Chain    string    `json:"chain,omitempty"`
	Since    *uint64   `json:"since,omitempty"`
	After    uint64    `json:"after,omitempty"`
	Before   uint64    `json:"before,omitempty"`
	MaxBytes int       `json:"max_bytes,omitempty"`
	Text     *string   `json:"text,omitempty"`
	ClientID string    `json:"client_id,omitempty"`
	Mode     string    `json:"mode,omitempty"`
	Sums     []string  `json:"sums,omitempty"`
	Msg      string    `json:"msg,omitempty"`
	// Keep: absent keeps every attachment, [] none.
	Keep     *[]string `json:"keep,omitempty"`
	Pinned   bool      `json:"pinned,omitempty"`
	ID       string    `json:"id,omitempty"`
	Allow    bool      `json:"allow,omitempty"`
	ForChat  bool      `json:"for_chat,omitempty"`
	Action   string    `json:"action,omitempty"`
	Tool     string    `json:"tool,omitempty"`
	Archived bool      `json:"archived,omitempty"`
	Via      string    `json:"via,omitempty"`
	Outcome  string    `json:"outcome,omitempty"`
	Reason   string    `json:"reason,omitempty"`
}

// maxOpFrame bounds an op frame: a message's text and its attachments'
// sums with room to spare.
const maxOpFrame = 2*MaxTextBytes + 64<<10

// encodeOp writes f as an op frame.
func encodeOp(f *opFrame) []byte {
	f.V = opVersion
	return Marshal(f)
}

// decodeOp reads an op frame: one JSON object of this version, an op it
// knows, only the fields that op takes, each of its type; anything else is
// an ErrBadInput.
func decodeOp(frame []byte) (*opFrame, error) {
	if len(frame) > maxOpFrame {
		return nil, fmt.Errorf("%w: op frame of %d bytes (limit %d)", ErrBadInput, len(frame), maxOpFrame)
	}
	var keys map[string]json.RawMessage
	if err := strictJSON(frame, &keys); err != nil || keys == nil {
		return nil, fmt.Errorf("%w: op frame is not a JSON object: %v", ErrBadInput, err)
	}
	f := &opFrame{}
	if err := strictJSON(frame, f); err != nil {
		return nil, fmt.Errorf("%w: op frame: %v", ErrBadInput, err)
	}
	if f.V != opVersion {
		return nil, fmt.Errorf("%w: op frame version %d (this node speaks %d)", ErrBadInput, f.V, opVersion)
	}
	allowed, ok := opFields[f.Op]
	if !ok {
		return nil, fmt.Errorf("%w: unknown op %q", ErrBadInput, f.Op)
	}
	for k := range keys {
		if k == "v" || k == "op" || containsString(allowed, k) {
			continue
		}
		return nil, fmt.Errorf("%w: op %s takes no field %q", ErrBadInput, f.Op, k)
	}
	if len(f.Sums) == 0 {
		f.Sums = nil // "sums":[] is no attachments, as absent
	}
	return f, nil
}

// strictJSON decodes exactly one JSON value into v, refusing unknown
// fields and anything after the value.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON value")
	}
	return nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// opReply is the owner's answer to an op: its value (ok) or its error, and
// the asker's copies of the events it caused.
type opReply struct {
	V     int               `json:"v"`
	OK    json.RawMessage   `json:"ok,omitempty"`
	Err   *opError          `json:"err,omitempty"`
	Asker []json.RawMessage `json:"asker,omitempty"`
}

// opError is an error on the wire: its text and the kinds (sentinels) it
// is, so errors.Is answers the same on the asking node.
type opError struct {
	Kinds []string `json:"kinds,omitempty"`
	Msg   string   `json:"msg"`
	// RetryMS is a *RateLimited's RetryAfter.
	RetryMS int64 `json:"retry_ms,omitempty"`
}

// errKinds are the error kinds that keep their identity across nodes: the
// ones transports tell apart (HTTP statuses, ws error codes).
var errKinds = []struct {
	code string
	err  error
}{
	{"not_found", ErrNotFound},
	{"in_use", ErrInUse},
	{"bad_input", ErrBadInput},
	{"no_turn", ErrNoTurn},
	{"closed", ErrClosed},
	{"too_large", ErrTooLarge},
	{"unknown_attachment", ErrUnknownAttachment},
	{"search_off", ErrSearchOff},
	{"rate_limited", ErrRateLimited},
	{"fenced", ErrFenced},
	{"unavailable", ErrUnavailable},
	{"no_such_model", runtime.ErrNoSuchModel},
	{"canceled", context.Canceled},
	{"deadline", context.DeadlineExceeded},
}

// encodeError writes err with its kinds.
func encodeError(err error) *opError {
	e := &opError{Msg: err.Error()}
	for _, k := range errKinds {
		if errors.Is(err, k.err) {
			e.Kinds = append(e.Kinds, k.code)
		}
	}
	var rl *RateLimited
	if errors.As(err, &rl) {
		e.RetryMS = rl.RetryAfter.Milliseconds()
	}
	return e
}

// remoteError is an error the owner returned: its text, and its kinds for
// errors.Is (and a *RateLimited for errors.As).
type remoteError struct {
	msg   string
	kinds []error
}

func (e *remoteError) Error() string   { return e.msg }
func (e *remoteError) Unwrap() []error { return e.kinds }

// decode reads the error back; an unknown kind is an error of the frame.
func (e *opError) decode() (error, error) {
	re := &remoteError{msg: e.Msg}
	for _, code := range e.Kinds {
		found := false
		for _, k := range errKinds {
			if k.code == code {
				found = true
				if k.err == ErrRateLimited {
					re.kinds = append(re.kinds, &RateLimited{Msg: e.Msg, RetryAfter: time.Duration(e.RetryMS) * time.Millisecond})
				} else {
					re.kinds = append(re.kinds, k.err)
				}
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown error kind %q", code)
		}
	}
	return re, nil
}

// encodeReply writes the answer to an op.
func encodeReply(v any, err error, asker []*Event) []byte {
	r := opReply{V: opVersion}
	if err != nil {
		r.Err = encodeError(err)
	} else if v != nil {
		r.OK = Marshal(v)
	}
	for _, e := range asker {
		r.Asker = append(r.Asker, e.JSON())
	}
	return Marshal(&r)
}

// decodeReply reads an answer to an op: the value's bytes, the op's error,
// and the asker's events, each checked to belong to chat. err is the
// frame's own problem (an unreadable answer).
func decodeReply(chat string, b []byte) (ok json.RawMessage, opErr error, asker []*Event, err error) {
	var r opReply
	if err := strictJSON(b, &r); err != nil {
		return nil, nil, nil, fmt.Errorf("unreadable answer: %w", err)
	}
	if r.V != opVersion {
		return nil, nil, nil, fmt.Errorf("answer of version %d (this node speaks %d)", r.V, opVersion)
	}
	if r.Err != nil && r.OK != nil {
		return nil, nil, nil, errors.New("an answer with both a value and an error")
	}
	for _, raw := range r.Asker {
		e := &Event{}
		if err := json.Unmarshal(raw, e); err != nil {
			return nil, nil, nil, fmt.Errorf("answer's event: %w", err)
		}
		if e.Chat != chat || e.Type == "" {
			return nil, nil, nil, fmt.Errorf("answer's event of chat %q, type %q, for chat %q", e.Chat, e.Type, chat)
		}
		asker = append(asker, e)
	}
	if r.Err != nil {
		opErr, err = r.Err.decode()
		if err != nil {
			return nil, nil, nil, err
		}
	}
	return r.OK, opErr, asker, nil
}

// ownedKey marks a context of an op this node runs for its owned chat:
// calls for that chat made with it run here, not routed again.
type ownedKey struct{}

// routed says an op on chat goes through Owners: in cluster mode, unless
// it is already running on the chat's owner.
func (s *Service) routed(ctx context.Context, chat string) bool {
	if s.opt.Owners == nil {
		return false
	}
	v, _ := ctx.Value(ownedKey{}).(string)
	return v != chat
}

// routeOp sends op f on chat to its owner with origin o and reads the
// answer as a T. The asker's copies of the events the op caused are
// delivered to o.Sub, in order with what it receives of the chat.
func routeOp[T any](ctx context.Context, s *Service, chat string, f opFrame, o Origin) (T, error) {
	var zero T
	if _, ok := opFields[f.Op]; !ok {
		panic("chats: routeOp of unknown op " + f.Op)
	}
	var sub Subscriber
	if (o.By != "" || o.Owner || o.Req != "" || o.Sub != nil) && containsString(opFields[f.Op], "origin") {
		f.Origin = &opOrigin{By: o.By, Owner: o.Owner, Req: o.Req, Sub: o.Sub != nil}
		sub = o.Sub
	}
	ask := s.remote.ask(chat, sub)
	if ask.token != "" {
		f.Origin.Asker = ask.token
	}
	out, err := s.opt.Owners.Send(ctx, chat, encodeOp(&f))
	if err != nil {
		ask.answered(nil, "")
		return zero, err
	}
	okRaw, opErr, asker, err := decodeReply(chat, out)
	if err != nil {
		ask.answered(nil, "")
		return zero, fmt.Errorf("%w: chat %s: the owner's answer to %s: %w", ErrUnavailable, chat, f.Op, err)
	}
	ask.answered(asker, o.Req)
	if opErr != nil {
		return zero, opErr
	}
	var v T
	if len(okRaw) > 0 {
		// The value is the owner's own type, as its JSON writes it (some
		// add fields they compute): read as the type reads it.
		if err := json.Unmarshal(okRaw, &v); err != nil {
			return zero, fmt.Errorf("%w: chat %s: the owner's answer to %s: %w", ErrUnavailable, chat, f.Op, err)
		}
	}
	return v, nil
}

// routeErr is routeOp of an op that answers nothing but its error.
func routeErr(ctx context.Context, s *Service, chat string, f opFrame, o Origin) error {
	_, err := routeOp[struct{}](ctx, s, chat, f, o)
	return err
}

// HandleOp runs an op frame another node (or this one) routed to chat,
// which this node owns, and returns the answer's bytes: the op's value or
// its error (with its kind), and the asker's copies of the events it
// caused. An unreadable frame is answered with an ErrBadInput.
func (s *Service) HandleOp(ctx context.Context, chat string, frame []byte) ([]byte, error) {
	f, err := decodeOp(frame)
	if err != nil {
		return encodeReply(nil, err, nil), nil
	}
	ctx = context.WithValue(ctx, ownedKey{}, chat)
	var o Origin
	var col *collector
	if f.Origin != nil {
		o = Origin{By: f.Origin.By, Owner: f.Origin.Owner, Req: f.Origin.Req}
		if f.Origin.Sub {
			col = &collector{chat: chat}
			if f.Origin.Asker != "" {
				col.local, _ = s.remote.askers.Load(f.Origin.Asker)
			}
			o.Sub = col
		}
	}
	v, err := s.runOp(ctx, chat, f, o)
	return encodeReply(v, err, col.taken()), nil
}

// runOp runs f on chat here, through the Service's own methods (ctx says
// they are not routed again).
func (s *Service) runOp(ctx context.Context, chat string, f *opFrame, o Origin) (any, error) {
	text := ""
	if f.Text != nil {
		text = *f.Text
	}
	var keep []string
	if f.Keep != nil {
		keep = *f.Keep
		if keep == nil {
			keep = []string{}
		}
	}
	switch f.Op {
	case opCreate:
		return s.create(ctx, chat, f.Title, f.Chain, o)
	case opGet:
		return s.Get(ctx, chat)
	case opOpen:
		return doValue(ctx, s, chat, func(a *actor) (*Snapshot, error) {
			if err := a.flush(); err != nil {
				return nil, err
			}
			if f.Since != nil && *f.Since <= a.meta.Seq {
				return a.snapshot("chat.resumed", false, o.Req)
			}
			return a.snapshot("chat.snapshot", true, o.Req)
		})
	case opCatchUp:
		return doValue(ctx, s, chat, func(a *actor) (caughtUp, error) {
			if err := a.flush(); err != nil {
				return caughtUp{}, err
			}
			if f.After < a.meta.Seq {
				return caughtUp{}, nil
			}
			typ := "chat.resumed"
			if f.After > a.meta.Seq {
				typ = "chat.snapshot" // a seq this chat never had: start afresh
			}
			sn, err := a.snapshot(typ, typ == "chat.snapshot", o.Req)
			return caughtUp{Done: err == nil, Snapshot: sn}, err
		})
	case opEvents:
		frames, err := s.Events(ctx, chat, f.After, f.MaxBytes)
		out := make([]wireFrame, len(frames))
		for i, fr := range frames {
			out[i] = wireFrame{Seq: fr.Seq, Raw: fr.Raw}
		}
		return out, err
	case opHistory:
		return s.History(ctx, chat, f.Before, o.Req)
	case opSend:
		return s.SendAttached(ctx, chat, text, f.ClientID, f.Mode, f.Sums, o)
	case opEdit:
		return s.EditAttached(ctx, chat, f.Msg, f.Text, keep, o)
	case opDelete:
		return nil, s.Delete(ctx, chat, f.Msg, o)
	case opStop:
		return nil, s.Stop(ctx, chat, o)
	case opPin:
		return s.Pin(ctx, chat, f.Msg, f.Pinned, o)
	case opRegenerate:
		return s.Regenerate(ctx, chat, f.Msg, f.ClientID, o)
	case opCommand:
		return s.Command(ctx, chat, text, o)
	case opContinue:
		return s.Continue(ctx, chat)
	case opApprove:
		if c, ok := ids.ParseApproval(f.ID); !ok || c != chat {
			return nil, fmt.Errorf("approval %q: %w", f.ID, ErrNotFound)
		}
		if f.ForChat {
			return nil, s.AllowForChat(ctx, f.ID, o)
		}
		return nil, s.AnswerApproval(ctx, f.ID, f.Allow, o)
	case opRecover:
		if c, ok := ids.ParseRecovery(f.ID); !ok || c != chat {
			return nil, fmt.Errorf("recovery %q: %w", f.ID, ErrNotFound)
		}
		return s.AnswerRecovery(ctx, f.ID, f.Action, o)
	case opRevokeTool:
		return s.RevokeTool(ctx, chat, f.Tool, o)
	case opRename:
		return s.Rename(ctx, chat, f.Title)
	case opSetChain:
		return s.SetChain(ctx, chat, f.Chain)
	case opArchive:
		return s.Archive(ctx, chat, f.Archived)
	case opDeleteChat:
		return s.DeleteChat(ctx, chat)
	case opRestoreChat:
		return s.RestoreChat(ctx, chat)
	case opHandoffs:
		return s.Handoffs(ctx, chat)
	case opMediaRefused:
		s.mediaRefused(ctx, chat, f.Via, f.Outcome, f.Reason, o)
		return nil, nil
	case opExport:
		return s.exportHead(ctx, chat)
	case opTranscript:
		return s.transcriptPage(ctx, chat, f.After)
	case opPurge:
		return nil, s.purge(ctx, chat)
	case opPrune:
		return s.dropLogged(ctx, chat, time.Unix(0, int64(f.Before)))
	}
	return nil, fmt.Errorf("%w: unknown op %q", ErrBadInput, f.Op)
}

// caughtUp is the answer to a catch_up op: Done with the snapshot that
// ends the replay, or not done (more events were committed).
type caughtUp struct {
	Done     bool      `json:"done"`
	Snapshot *Snapshot `json:"snapshot,omitempty"`
}

// wireFrame is a Frame in an events answer: the event's bytes as they are.
type wireFrame struct {
	Seq uint64          `json:"seq"`
	Raw json.RawMessage `json:"raw"`
}

// exportStart is what an export reads of the chat's actor before it
// pages through the transcript.
type exportStart struct {
	Chat Chat            `json:"chat"`
	Pins map[string]bool `json:"pins,omitempty"`
}

// transcriptChunk is one page of an export's transcript.
type transcriptChunk struct {
	Messages []Message `json:"messages"`
	Last     uint64    `json:"last"`
	More     bool      `json:"more"`
}

// collector is the asker's Subscriber on the owner when the asker is on
// another node: it keeps the asker's copies for the reply. local is the
// asker itself when the op runs in the asking process.
type collector struct {
	chat  string
	local any
	mu    sync.Mutex
	evs   []*Event
}

// Deliver implements Subscriber.
func (c *collector) Deliver(d Delivery) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d.Event != nil && d.Event.Chat == c.chat {
		c.evs = append(c.evs, d.Event)
	}
}

// taken returns the events collected (nil for a nil collector); later
// deliveries are kept no more.
func (c *collector) taken() []*Event {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	evs := c.evs
	c.evs, c.chat = nil, "" // nothing more is kept
	return evs
}

// asker is the subscriber an op answers, while its op is in flight: what
// the chat's watch delivers to it meanwhile is held, so that the events
// the op caused reach it once, with its req, in order.
type asker struct {
	r     *remote
	sub   Subscriber
	rs    *remoteSub // the subscriber's watch of the chat; nil when none
	token string
}

// remote is the Service's state of routing: this node's subscribers'
// watches of chats owned anywhere, and the askers of ops in flight.
type remote struct {
	instance string
	mu       sync.Mutex
	subs     map[remoteKey]*remoteSub
	askers   sync.Map // token → Subscriber
	n        atomic.Uint64
}

type remoteKey struct {
	chat string
	sub  Subscriber
}

// ask starts an op of sub (nil: none) on chat.
func (r *remote) ask(chat string, sub Subscriber) *asker {
	a := &asker{r: r, sub: sub}
	if sub == nil {
		return a
	}
	a.token = r.instance + "." + strconv.FormatUint(r.n.Add(1), 10)
	r.askers.Store(a.token, sub)
	r.mu.Lock()
	a.rs = r.subs[remoteKey{chat, sub}]
	r.mu.Unlock()
	if a.rs != nil {
		a.rs.mu.Lock()
		a.rs.hold++
		a.rs.mu.Unlock()
	}
	return a
}

// answered delivers the asker's copies of the events its op caused (evs,
// with req) and lets what was held go on.
func (a *asker) answered(evs []*Event, req string) {
	if a.sub == nil {
		return
	}
	a.r.askers.Delete(a.token)
	rs := a.rs
	if rs == nil {
		for _, e := range evs {
			a.sub.Deliver(Delivery{Event: e, Req: req})
		}
		return
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.hold--
	if rs.closed {
		// Unsubscribed meanwhile: nothing of the watch follows, but the
		// asker gets its copies, as on one node, opened or not.
		rs.queue = nil
		for _, e := range evs {
			a.sub.Deliver(Delivery{Event: e, Req: req})
		}
		return
	}
	var extra []Delivery
	for _, e := range evs {
		held := false
		for i := range rs.queue {
			if d := &rs.queue[i]; d.Event != nil && d.Event.Seq == e.Seq && !isLive(d.Event.Type) {
				d.Req, held = req, true
				break
			}
		}
		switch {
		case held:
		case e.Seq > rs.last:
			rs.reqs[e.Seq] = req // still to come through the watch
		default:
			// A copy of an event delivered before the op (a repeated
			// client_id answers the message it created): the asker gets
			// it now, as on one node.
			extra = append(extra, Delivery{Event: e, Req: req})
		}
	}
	rs.queue = append(rs.queue, extra...)
	if rs.hold == 0 {
		q := rs.queue
		rs.queue = nil
		for _, d := range q {
			rs.sub.Deliver(d)
		}
	}
}

// remoteSub is one subscriber's watch of a chat: the snapshot it starts
// from, then the chat's events from the cluster's fan-out.
type remoteSub struct {
	sub Subscriber
	mu  sync.Mutex
	// snap is the snapshot still to deliver: after the stored events up
	// to its seq, before anything later.
	snap *Snapshot
	// turn and shown are the running reply the snapshot showed (runes):
	// live text of it is cut to what the snapshot lacks.
	turn  string
	shown int
	last  uint64            // the last stored seq delivered
	reqs  map[uint64]string // stored events to come that answer the subscriber's ops
	hold  int               // the subscriber's ops in flight
	queue []Delivery        // held while hold > 0
	stop  func()
	// closed: unsubscribed; nothing more is delivered.
	closed bool
}

// isLive says events of type t are not stored: their seq is the last
// stored event's.
func isLive(t string) bool {
	return t == EvReplyDelta || t == EvQuotaWait || t == EvToolProgress
}

// event delivers one event the watch received.
func (rs *remoteSub) event(e *Event) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.closed {
		return
	}
	live := isLive(e.Type)
	if sn := rs.snap; sn != nil {
		switch {
		case !live && e.Seq <= sn.Seq:
			rs.last = max(rs.last, e.Seq)
			rs.deliver(Delivery{Event: e})
			return
		case live && e.Seq < sn.Seq:
			return // older than the snapshot, which shows what came of it
		}
		rs.deliverSnapshot()
	}
	if !live {
		if e.Seq <= rs.last {
			return
		}
		rs.last = e.Seq
		d := Delivery{Event: e}
		if req, ok := rs.reqs[e.Seq]; ok {
			d.Req = req
			delete(rs.reqs, e.Seq)
		}
		rs.deliver(d)
		return
	}
	if e.Type == EvReplyDelta {
		if e = rs.cut(e); e == nil {
			return
		}
	}
	rs.deliver(Delivery{Event: e})
}

// cut drops the part of a reply delta the snapshot already showed.
func (rs *remoteSub) cut(e *Event) *Event {
	rd, ok := e.Payload.(*ReplyDelta)
	if !ok || rs.turn == "" || rd.Turn != rs.turn {
		return e
	}
	n := utf8.RuneCountInString(rd.Text)
	switch {
	case rd.Offset+n <= rs.shown:
		return nil
	case rd.Offset >= rs.shown:
		return e
	}
	text := rd.Text
	for range rs.shown - rd.Offset {
		_, size := utf8.DecodeRuneInString(text)
		text = text[size:]
	}
	c := NewEvent(e.Chat, e.Seq, e.Time, &ReplyDelta{Turn: rd.Turn, Offset: rs.shown, Text: text})
	c.By = e.By
	return c
}

// deliverSnapshot delivers the snapshot, once. Under rs.mu.
func (rs *remoteSub) deliverSnapshot() {
	sn := rs.snap
	rs.snap = nil
	rs.last = max(rs.last, sn.Seq)
	rs.deliver(Delivery{Snapshot: sn})
}

// deliver hands d to the subscriber, or holds it while an op of the
// subscriber is in flight. Under rs.mu.
func (rs *remoteSub) deliver(d Delivery) {
	if rs.hold > 0 {
		rs.queue = append(rs.queue, d)
		return
	}
	rs.sub.Deliver(d)
}

// watch subscribes sub to chat on this node from snapshot sn: the stored
// events after seq from (those up to sn's seq come before sn), then the
// chat's events as its owner publishes them. A watch of the same
// subscriber on the chat is replaced.
func (s *Service) watchRemote(ctx context.Context, chat string, sub Subscriber, sn *Snapshot, from uint64) error {
	rs := &remoteSub{sub: sub, snap: sn, last: from, reqs: map[uint64]string{}}
	if sn.Running != nil {
		rs.turn, rs.shown = sn.Running.Turn, utf8.RuneCountInString(sn.Running.Text)
	}
	key := remoteKey{chat, sub}
	r := &s.remote
	r.mu.Lock()
	if r.subs == nil {
		r.subs = map[remoteKey]*remoteSub{}
	}
	old := r.subs[key]
	r.subs[key] = rs
	r.mu.Unlock()
	old.close()
	stop, err := s.opt.Owners.Watch(ctx, chat, from, rs.event)
	if err != nil {
		r.mu.Lock()
		if r.subs[key] == rs {
			delete(r.subs, key)
		}
		r.mu.Unlock()
		return err
	}
	rs.mu.Lock()
	if rs.closed {
		rs.mu.Unlock()
		stop()
		return nil
	}
	rs.stop = stop
	// Every stored event up to the snapshot's seq was read from the
	// record by now (the owner stored them before it took the snapshot).
	if rs.snap != nil {
		rs.deliverSnapshot()
	}
	rs.mu.Unlock()
	return nil
}

// close ends the watch; nothing is delivered after it returns. A nil
// remoteSub is closed already.
func (rs *remoteSub) close() {
	if rs == nil {
		return
	}
	rs.mu.Lock()
	rs.closed = true
	stop := rs.stop
	rs.stop, rs.queue = nil, nil
	rs.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// unwatchRemote ends sub's watch of chat on this node.
func (s *Service) unwatchRemote(chat string, sub Subscriber) {
	r := &s.remote
	key := remoteKey{chat, sub}
	r.mu.Lock()
	rs := r.subs[key]
	delete(r.subs, key)
	r.mu.Unlock()
	rs.close()
}

// openRemote is Open in cluster mode: the snapshot from the owner, then
// the fan-out from there.
func (s *Service) openRemote(ctx context.Context, chat string, since *uint64, sub Subscriber, req string) error {
	sn, err := routeOp[*Snapshot](ctx, s, chat, opFrame{Op: opOpen, Since: since}, Origin{Req: req})
	if err != nil {
		return err
	}
	if sn == nil || sn.Chat.ID != chat {
		return fmt.Errorf("%w: chat %s: the owner answered no snapshot", ErrUnavailable, chat)
	}
	from := sn.Seq
	if since != nil && sn.Type == "chat.resumed" {
		from = min(*since, sn.Seq)
	}
	return s.watchRemote(ctx, chat, sub, sn, from)
}

// catchUpRemote is CatchUp in cluster mode.
func (s *Service) catchUpRemote(ctx context.Context, chat string, after uint64, sub Subscriber, req string) (bool, error) {
	c, err := routeOp[caughtUp](ctx, s, chat, opFrame{Op: opCatchUp, After: after}, Origin{Req: req})
	if err != nil || !c.Done {
		return false, err
	}
	if c.Snapshot == nil || c.Snapshot.Chat.ID != chat {
		return false, fmt.Errorf("%w: chat %s: the owner answered no snapshot", ErrUnavailable, chat)
	}
	return true, s.watchRemote(ctx, chat, sub, c.Snapshot, c.Snapshot.Seq)
}

// eventsRemote is Events in cluster mode: the owner's store is read.
func (s *Service) eventsRemote(ctx context.Context, chat string, after uint64, maxBytes int) ([]Frame, error) {
	wf, err := routeOp[[]wireFrame](ctx, s, chat, opFrame{Op: opEvents, After: after, MaxBytes: maxBytes}, Origin{})
	if err != nil {
		return nil, err
	}
	out := make([]Frame, len(wf))
	for i, f := range wf {
		out[i] = Frame{Seq: f.Seq, Raw: f.Raw}
	}
	return out, nil
}

// publisher hands the events of the chats this node runs to Owners: it is
// a subscriber of every chat actor loaded here (see get).
type publisher struct{ o Owners }

// Deliver implements Subscriber.
func (p publisher) Deliver(d Delivery) {
	if d.Event != nil {
		p.o.Publish(d.Event, !isLive(d.Event.Type))
	}
}

// askerOf is the subscriber that asked for o: list watchers skip it (it
// gets its own answer). On the owner of a routed op that is the asker
// itself when it lives in this process, else nobody here.
func askerOf(o Origin) any {
	if c, ok := o.Sub.(*collector); ok {
		return c.local
	}
	if o.Sub != nil {
		return o.Sub
	}
	return nil
}

// exportHead is what Export reads of the chat's actor.
func (s *Service) exportHead(ctx context.Context, id string) (exportStart, error) {
	return doValue(ctx, s, id, func(a *actor) (exportStart, error) {
		if a.meta.DeleteAt != nil {
			return exportStart{}, fmt.Errorf("chat %s was deleted: %w", id, ErrNotFound)
		}
		return exportStart{Chat: a.info(), Pins: maps.Clone(a.pins)}, nil
	})
}

// exportPage is one page of Export's transcript, read from the store.
func (s *Service) transcriptPage(ctx context.Context, id string, after uint64) (transcriptChunk, error) {
	var c transcriptChunk
	err := s.store.db.View(func(tx *bolt.Tx) (err error) {
		c.Messages, c.Last, c.More, err = transcriptForward(tx, id, after, 500)
		return err
	})
	if c.Messages == nil {
		c.Messages = []Message{}
	}
	return c, err
}

// exportRemote is Export in cluster mode: the head and each page from the
// owner.
func (s *Service) exportRemote(ctx context.Context, id string, head func(Chat), fn func(Message) error) (Chat, error) {
	h, err := routeOp[exportStart](ctx, s, id, opFrame{Op: opExport}, Origin{})
	if err != nil {
		return Chat{}, err
	}
	if head != nil {
		head(h.Chat)
	}
	after := uint64(0)
	for {
		if err := ctx.Err(); err != nil {
			return h.Chat, err
		}
		p, err := routeOp[transcriptChunk](ctx, s, id, opFrame{Op: opTranscript, After: after}, Origin{})
		if err != nil {
			return h.Chat, err
		}
		if p.More && p.Last <= after {
			return h.Chat, fmt.Errorf("%w: chat %s: the owner's export did not move on from %d", ErrUnavailable, id, after)
		}
		after = p.Last
		for _, m := range p.Messages {
			if pin, ok := h.Pins[m.ID]; ok {
				m.Pinned = pin
			}
			if err := fn(m); err != nil {
				return h.Chat, err
			}
		}
		if !p.More {
			return h.Chat, nil
		}
	}
}

// keepField is EditAttached's keep on the wire: nil (keep all) absent,
// an empty list kept as one.
func keepField(keep []string) *[]string {
	if keep == nil {
		return nil
	}
	return &keep
}

// absent refuses to create chat id when it exists already (a create op
// sent again for a chat its owner made).
func (s *Service) absent(id string) error {
	return s.store.db.View(func(tx *bolt.Tx) error {
		if _, ok, err := loadChat(tx, id); err != nil || ok {
			return cmp.Or(err, fmt.Errorf("chat %s exists already: %w", id, ErrInUse))
		}
		return nil
	})
}
