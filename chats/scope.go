package chats

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/mirror-gateway/mirror/chats/people"
	"github.com/mirror-gateway/mirror/runtime/ids"
)

// Scope is the Service as one person may use it: every call first asks the
// people registry how far the person reaches into the chat, and a chat
// they cannot see is ErrNotFound, the same answer as a chat that does not
// exist (no hint that it does). Transports call a Scope, never the Service,
// for anything a person asks; they filter nothing themselves.
//
// A Service without a people registry (Options.People nil) has one person,
// who sees everything: every Scope then reaches every chat.
type Scope struct {
	s *Service
	p people.Person
}

// As returns the Service as p may use it.
func (s *Service) As(p people.Person) Scope { return Scope{s: s, p: p} }

// People returns the people registry (nil when the Service has none).
func (s *Service) People() *people.Registry { return s.opt.People }

// Person returns who the scope speaks for.
func (sc Scope) Person() people.Person { return sc.p }

// Service returns the whole Service, for what no person asks (following a
// chat the person already opened, reading the pages of a checked replay).
func (sc Scope) Service() *Service { return sc.s }

// Level returns how far the person reaches into chat.
func (sc Scope) Level(chat string) people.Level {
	if sc.s.opt.People == nil {
		return people.Own
	}
	return sc.s.opt.People.Access(sc.p, chat)
}

// need fails with ErrNotFound unless the person reaches chat at least at
// level; a chat they may read but not change is ErrNotFound for a change
// too, so nothing distinguishes "shared read-only" from "absent" to a
// frame that would write.
func (sc Scope) need(chat string, level people.Level) error {
	if sc.Level(chat) < level {
		return fmt.Errorf("chat %s: %w", chat, ErrNotFound)
	}
	return nil
}

// origin stamps o with the person, so the events it causes record who.
func (sc Scope) origin(o Origin) Origin {
	o.By, o.Owner = sc.p.ID, sc.p.IsOwner() || sc.s.opt.People == nil
	return o
}

// List returns the chats the person may see, most recently updated first.
func (sc Scope) List(ctx context.Context) ([]Chat, error) {
	list, err := sc.s.List(ctx)
	return sc.visible(list), err
}

// visible keeps the chats of list the person may see, in place.
func (sc Scope) visible(list []Chat) []Chat {
	if sc.s.opt.People == nil || sc.p.IsOwner() {
		return list
	}
	out := list[:0]
	for _, c := range list {
		if sc.Level(c.ID) >= people.Read {
			out = append(out, c)
		}
	}
	return out
}

// ListPage is Service.ListPage of the chats the person may see. For a
// member the page is read from the same index, skipping what they cannot
// see, and Total counts only what they can (at least what was listed;
// the index keeps no count per person).
func (sc Scope) ListPage(ctx context.Context, after string, limit int) (ChatPage, error) {
	if sc.s.opt.People == nil || sc.p.IsOwner() {
		return sc.s.ListPage(ctx, after, limit)
	}
	p, err := sc.s.listPage(after, limit, func(c *Chat) bool { return sc.Level(c.ID) >= people.Read })
	p.Total = len(p.Chats)
	if p.Next != "" {
		p.Total++ // more follow
	}
	return p, err
}

// Working is Service.Working of the chats the person may see.
func (sc Scope) Working(ctx context.Context) ([]Chat, error) {
	list, err := sc.s.Working(ctx)
	return sc.visible(list), err
}

// Create makes a chat the person created (and so owns).
func (sc Scope) Create(ctx context.Context, title, chain string, o Origin) (Chat, error) {
	return sc.s.Create(ctx, title, chain, sc.origin(o))
}

// Get returns a chat's list entry.
func (sc Scope) Get(ctx context.Context, chat string) (Chat, error) {
	if err := sc.need(chat, people.Read); err != nil {
		return Chat{}, err
	}
	return sc.s.Get(ctx, chat)
}

// Open subscribes sub to a chat the person may read.
func (sc Scope) Open(ctx context.Context, chat string, since *uint64, sub Subscriber, req string) error {
	if err := sc.need(chat, people.Read); err != nil {
		return err
	}
	return sc.s.Open(ctx, chat, since, sub, req)
}

// CatchUp is Service.CatchUp on a chat the person may read.
func (sc Scope) CatchUp(ctx context.Context, chat string, after uint64, sub Subscriber, req string) (bool, error) {
	if err := sc.need(chat, people.Read); err != nil {
		return false, err
	}
	return sc.s.CatchUp(ctx, chat, after, sub, req)
}

// Events is Service.Events on a chat the person may read.
func (sc Scope) Events(ctx context.Context, chat string, after uint64, maxBytes int) ([]Frame, error) {
	if err := sc.need(chat, people.Read); err != nil {
		return nil, err
	}
	return sc.s.Events(ctx, chat, after, maxBytes)
}

// History is Service.History on a chat the person may read.
func (sc Scope) History(ctx context.Context, chat string, before uint64, req string) (*History, error) {
	if err := sc.need(chat, people.Read); err != nil {
		return nil, err
	}
	return sc.s.History(ctx, chat, before, req)
}

// Unsubscribe is Service.Unsubscribe on a chat the person may read.
func (sc Scope) Unsubscribe(ctx context.Context, chat string, sub Subscriber) error {
	if err := sc.need(chat, people.Read); err != nil {
		return err
	}
	return sc.s.Unsubscribe(ctx, chat, sub)
}

// Handoffs is Service.Handoffs on a chat the person may read.
func (sc Scope) Handoffs(ctx context.Context, chat string) ([]HandoffEntry, error) {
	if err := sc.need(chat, people.Read); err != nil {
		return nil, err
	}
	return sc.s.Handoffs(ctx, chat)
}

// Replay runs f (what `mirror replay` prints) for a chat the person may read.
func (sc Scope) Replay(chat string, w io.Writer, f func(io.Writer, string) error) error {
	if err := sc.need(chat, people.Read); err != nil {
		return err
	}
	return f(w, chat)
}

// SendAttached stores the person's message in a chat they may write to.
func (sc Scope) SendAttached(ctx context.Context, chat, text, clientID, mode string, sums []string, o Origin) (Message, error) {
	if err := sc.need(chat, people.Write); err != nil {
		return Message{}, err
	}
	if err := sc.overDay(); err != nil {
		return Message{}, err
	}
	return sc.s.SendAttached(ctx, chat, text, clientID, mode, sums, sc.origin(o))
}

// Regenerate asks a message again, in a chat the person may write to.
func (sc Scope) Regenerate(ctx context.Context, chat, msg, clientID string, o Origin) (Message, error) {
	if err := sc.need(chat, people.Write); err != nil {
		return Message{}, err
	}
	if err := sc.overDay(); err != nil {
		return Message{}, err
	}
	return sc.s.Regenerate(ctx, chat, msg, clientID, sc.origin(o))
}

// EditAttached edits a pending message of a chat the person may write to.
func (sc Scope) EditAttached(ctx context.Context, chat, msg string, text *string, keep []string, o Origin) (Message, error) {
	if err := sc.need(chat, people.Write); err != nil {
		return Message{}, err
	}
	return sc.s.EditAttached(ctx, chat, msg, text, keep, sc.origin(o))
}

// Delete deletes a pending message of a chat the person may write to.
func (sc Scope) Delete(ctx context.Context, chat, msg string, o Origin) error {
	if err := sc.need(chat, people.Write); err != nil {
		return err
	}
	return sc.s.Delete(ctx, chat, msg, sc.origin(o))
}

// Stop stops the running turn of a chat the person may write to.
func (sc Scope) Stop(ctx context.Context, chat string, o Origin) error {
	if err := sc.need(chat, people.Write); err != nil {
		return err
	}
	return sc.s.Stop(ctx, chat, sc.origin(o))
}

// Pin pins a message of a chat the person may write to.
func (sc Scope) Pin(ctx context.Context, chat, msg string, pinned bool, o Origin) (Message, error) {
	if err := sc.need(chat, people.Write); err != nil {
		return Message{}, err
	}
	return sc.s.Pin(ctx, chat, msg, pinned, sc.origin(o))
}

// Command runs a slash command in a chat the person may write to. /new
// creates the new chat as the person's.
func (sc Scope) Command(ctx context.Context, chat, text string, o Origin) (string, error) {
	if err := sc.need(chat, people.Write); err != nil {
		return "", err
	}
	return sc.s.Command(ctx, chat, text, sc.origin(o))
}

// AnswerApproval answers an approval of a chat the person may write to.
// Only an owner, or the person whose message started the turn that asks,
// may answer it; anyone else gets ErrNotFound.
func (sc Scope) AnswerApproval(ctx context.Context, id string, allow bool, o Origin) error {
	chat, ok := ids.ParseApproval(id)
	if !ok {
		return fmt.Errorf("approval %q: %w", id, ErrNotFound)
	}
	if err := sc.need(chat, people.Write); err != nil {
		return fmt.Errorf("approval %s: %w", id, err)
	}
	return sc.s.AnswerApproval(ctx, id, allow, sc.origin(o))
}

// AllowForChat is AnswerApproval allowing, and "Allow for this chat": the
// same people may answer it.
func (sc Scope) AllowForChat(ctx context.Context, id string, o Origin) error {
	chat, ok := ids.ParseApproval(id)
	if !ok {
		return fmt.Errorf("approval %q: %w", id, ErrNotFound)
	}
	if err := sc.need(chat, people.Write); err != nil {
		return fmt.Errorf("approval %s: %w", id, err)
	}
	return sc.s.AllowForChat(ctx, id, sc.origin(o))
}

// RevokeTool revokes a tool the chat allowed, in a chat the person may
// write to.
func (sc Scope) RevokeTool(ctx context.Context, chat, tool string, o Origin) (Chat, error) {
	if err := sc.need(chat, people.Write); err != nil {
		return Chat{}, err
	}
	return sc.s.RevokeTool(ctx, chat, tool, sc.origin(o))
}

// AnswerRecovery answers a recovery of a chat the person may write to.
// Only an owner, or a person whose message the interrupted turn had picked
// up, may answer it; anyone else gets ErrNotFound.
func (sc Scope) AnswerRecovery(ctx context.Context, id, action string, o Origin) (bool, error) {
	chat, ok := ids.ParseRecovery(id)
	if !ok {
		return false, fmt.Errorf("recovery %q: %w", id, ErrNotFound)
	}
	if err := sc.need(chat, people.Write); err != nil {
		return false, fmt.Errorf("recovery %s: %w", id, err)
	}
	return sc.s.AnswerRecovery(ctx, id, action, sc.origin(o))
}

// Watch registers w for changes of the chats the person may see.
func (sc Scope) Watch(w ListWatcher) (cancel func()) {
	if sc.s.opt.People == nil || sc.p.IsOwner() {
		return sc.s.Watch(w)
	}
	return sc.s.Watch(&scopedWatcher{w: w, sc: sc}) // a pointer: a Person is no map key
}

// scopedWatcher passes on only the changes of chats its person may see.
type scopedWatcher struct {
	w  ListWatcher
	sc Scope
}

// ChatChanged implements ListWatcher.
func (f *scopedWatcher) ChatChanged(c Chat, created bool) {
	if f.sc.Level(c.ID) >= people.Read {
		f.w.ChatChanged(c, created)
	}
}

// inner is the watcher it filters for (notifyList skips the asker).
func (f *scopedWatcher) inner() ListWatcher { return f.w }

// BlobRefs is Service.BlobRefs over the chats the person may read (and
// live uploads): a file only another person's chat names is not found.
func (sc Scope) BlobRefs(ctx context.Context, sum, want string) (BlobRef, bool, error) {
	if sc.s.opt.People == nil || sc.p.IsOwner() {
		return sc.s.BlobRefs(ctx, sum, want)
	}
	return sc.s.blobRefs(ctx, sum, want, func(chat string) bool { return sc.Level(chat) >= people.Read }, sc.p.ID)
}

// MediaRefused is Service.MediaRefused for a file the person sent, in a
// chat they may write to: the diagnostic row says who (by). A chat they
// cannot write to keeps none.
func (sc Scope) MediaRefused(ctx context.Context, chat, via, outcome, reason string) {
	if sc.need(chat, people.Write) != nil {
		return
	}
	sc.s.mediaRefused(ctx, chat, via, outcome, reason, sc.origin(Origin{}))
}

// Upload is Service.Upload by the person: until a message names it, only
// they may fetch it.
func (sc Scope) Upload(ctx context.Context, r io.Reader, mediaType, name string) (Attachment, error) {
	return sc.s.upload(ctx, r, mediaType, name, sc.p.ID)
}

// turnPolicies are the tool policies of a turn answering askers in chat:
// a member's policies when any of them is a member (the strictest role
// present decides), an owner's when all are owners. A turn whose askers
// are unknown (resumed after a restart) runs under the chat creator's
// role, so a restart never lifts a member's limits.
func (s *Service) turnPolicies(chat string, askers []string) map[string]string {
	reg := s.opt.People
	if reg == nil || len(s.opt.RolePolicies) == 0 {
		return nil
	}
	if len(askers) == 0 {
		askers = []string{reg.Creator(chat)}
	}
	role := people.RoleOwner
	for _, id := range askers {
		if p, err := reg.Get(id); err != nil || !p.IsOwner() {
			role = people.RoleMember // unknown or revoked counts as the least
		}
	}
	return s.opt.RolePolicies[role]
}

// ownerPolicies are the chat's owner (its creator) and the tool policies
// of their role: the tools those deny are not offered in the chat at all.
// "" and nil without people.
func (s *Service) ownerPolicies(chat string) (string, map[string]string) {
	reg := s.opt.People
	if reg == nil {
		return "", nil
	}
	id := reg.Creator(chat)
	role := people.RoleMember // unknown or revoked counts as the least
	if p, err := reg.Get(id); err == nil && p.IsOwner() {
		role = people.RoleOwner
	}
	return id, s.opt.RolePolicies[role]
}

// payer is who a turn answering askers in chat is billed to: the first
// asker, or the chat's creator for a turn resumed after a restart.
func (s *Service) payer(chat string, askers []string) string {
	reg := s.opt.People
	switch {
	case reg == nil:
		return ""
	case len(askers) > 0:
		return askers[0]
	}
	return reg.Creator(chat)
}

// charge bills a turn's tokens to the person who asked (the first asker;
// the chat's creator when the turn was resumed after a restart), in the
// commit that records the turn's end.
func (a *actor) charge(t *turn, tokens int64) {
	reg := a.s.opt.People
	if reg == nil || tokens <= 0 {
		return
	}
	who := a.s.payer(a.id, t.askers)
	a.b.charges = append(a.b.charges, charge{person: who, tokens: tokens})
}

// ErrRateLimited is a request refused by a per-person limit; errors.As
// a *RateLimited for when it frees up.
var ErrRateLimited = errors.New("rate limited")

// RateLimited says which limit refused a request and when it frees up.
type RateLimited struct {
	Msg        string
	RetryAfter time.Duration
}

// Error says what was refused and when to try again.
func (e *RateLimited) Error() string { return e.Msg }

// Is makes errors.Is(err, ErrRateLimited) true.
func (e *RateLimited) Is(target error) bool { return target == ErrRateLimited }

// overDay refuses a person who used people.tokens_per_day today, until the
// UTC day turns.
func (sc Scope) overDay() error {
	reg, limit := sc.s.opt.People, sc.s.opt.TokensPerDay
	if reg == nil || limit <= 0 || sc.p.ID == "" {
		return nil
	}
	now := sc.s.now().UTC()
	used := reg.Usage(sc.p.ID, people.Day(now))
	if used < limit {
		return nil
	}
	next := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	wait := next.Sub(now)
	return &RateLimited{RetryAfter: wait, Msg: fmt.Sprintf("today's tokens are spent: %d of %d (people.tokens_per_day); it frees up at %s UTC, in %s",
		used, limit, next.Format("2006-01-02 15:04"), wait.Round(time.Minute))}
}

// now is the clock of per-person days.
func (s *Service) now() time.Time {
	if s.opt.Now != nil {
		return s.opt.Now()
	}
	return time.Now()
}

// CreateReusing is Service.CreateReusing reusing only the person's own
// empty chat.
func (sc Scope) CreateReusing(ctx context.Context, chain string, o Origin) (Chat, bool, error) {
	o = sc.origin(o)
	if sc.s.opt.People == nil {
		return sc.s.CreateReusing(ctx, chain, o)
	}
	return sc.s.createReusing(ctx, chain, o, func(id string) bool { return sc.s.opt.People.Creator(id) == sc.p.ID })
}

// Rename renames a chat the person may write to.
func (sc Scope) Rename(ctx context.Context, id, title string) (Chat, error) {
	if err := sc.need(id, people.Write); err != nil {
		return Chat{}, err
	}
	return sc.s.Rename(ctx, id, title)
}

// SetChain sets the chain of a chat the person may write to.
func (sc Scope) SetChain(ctx context.Context, id, chain string) (Chat, error) {
	if err := sc.need(id, people.Write); err != nil {
		return Chat{}, err
	}
	return sc.s.SetChain(ctx, id, chain)
}

// Archive archives or unarchives a chat the person may write to.
func (sc Scope) Archive(ctx context.Context, id string, archived bool) (Chat, error) {
	if err := sc.need(id, people.Write); err != nil {
		return Chat{}, err
	}
	return sc.s.Archive(ctx, id, archived)
}

// DeleteChat deletes a chat the person owns (its creator, or an owner).
func (sc Scope) DeleteChat(ctx context.Context, id string) (Chat, error) {
	if err := sc.need(id, people.Own); err != nil {
		return Chat{}, err
	}
	return sc.s.DeleteChat(ctx, id)
}

// RestoreChat restores a deleted chat the person owns.
func (sc Scope) RestoreChat(ctx context.Context, id string) (Chat, error) {
	if err := sc.need(id, people.Own); err != nil {
		return Chat{}, err
	}
	return sc.s.RestoreChat(ctx, id)
}

// Export is Service.Export of a chat the person may read.
func (sc Scope) Export(ctx context.Context, id string, head func(Chat), fn func(Message) error) (Chat, error) {
	if err := sc.need(id, people.Read); err != nil {
		return Chat{}, err
	}
	return sc.s.Export(ctx, id, head, fn)
}

// Search is Service.Search over the chats the person may read.
func (sc Scope) Search(ctx context.Context, query string, limit int) ([]SearchHit, error) {
	if sc.s.opt.People == nil || sc.p.IsOwner() {
		return sc.s.Search(ctx, query, limit)
	}
	return sc.s.searchIn(ctx, query, limit, func(id string) bool { return sc.Level(id) >= people.Read })
}
