package chats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/mirror-gateway/mirror/chats/people"
	"github.com/mirror-gateway/mirror/config/datadir"
	"github.com/mirror-gateway/mirror/runtime/boundary"
	"github.com/mirror-gateway/mirror/runtime/provider"
	bolt "go.etcd.io/bbolt"
)

// isTranscript reports whether a message belongs to the transcript people
// read (user and assistant messages), as opposed to tool traffic and the
// runtime's own marker rows.
func isTranscript(m Message) bool {
	return m.Role == provider.RoleUser || m.Role == provider.RoleAssistant
}

// Pin marks a message to stay whole in the assistant's view, or unmarks it.
// Only messages of the transcript can be pinned; pending ones are not in the
// view yet.
func (s *Service) Pin(ctx context.Context, chat, msg string, pinned bool, o Origin) (Message, error) {
	if s.routed(ctx, chat) {
		return routeOp[Message](ctx, s, chat, opFrame{Op: opPin, Msg: msg, Pinned: pinned}, o)
	}
	return doValue(ctx, s, chat, func(a *actor) (Message, error) { return a.pin(msg, pinned, o) })
}

func (a *actor) pin(id string, pinned bool, o Origin) (Message, error) {
	if err := a.usable(); err != nil {
		return Message{}, err
	}
	var p *Message
	for i := len(a.msgs) - 1; i >= 0; i-- {
		if a.msgs[i].ID == id {
			p = &a.msgs[i]
			break
		}
	}
	if p == nil && a.findPending(id) >= 0 {
		return Message{}, fmt.Errorf("%w: message %s is still pending; pin it once the assistant has picked it up", ErrBadInput, id)
	}
	if p == nil {
		// Older than the conversation in memory: the record has it.
		sm, err := a.storedMessage(id)
		if err != nil {
			return Message{}, err
		}
		if sm == nil || sm.State == MsgPending || sm.State == MsgDeleted {
			return Message{}, fmt.Errorf("message %s: %w", id, ErrNotFound)
		}
		p = sm
	}
	if !isTranscript(*p) {
		return Message{}, fmt.Errorf("%w: message %s is not a user or assistant message", ErrBadInput, id)
	}
	p.Pinned = pinned
	a.touch() // p may be a message of the conversation in memory
	a.pins[id] = pinned
	m := Message{ID: p.ID, Role: p.Role, Seq: p.Seq, Pinned: pinned}
	a.append(&MessagePinned{Message: &m}, o)
	return m, a.flush()
}

// A CommandSpec is one slash command of a chat. The table of them,
// Commands, is the one place a command is defined: Command dispatches from
// it, Telegram's help lists it and passes on what it does not handle
// itself, and the browser learns it from the welcome frame.
type CommandSpec struct {
	Name string `json:"name"`           // as typed, with its slash: "/compact"
	Args string `json:"args,omitempty"` // its arguments as usage shows them: "[text]", "N"
	Help string `json:"help"`           // what it does, one short line
	// run carries the command out; fields are the command as typed, split
	// on white space (fields[0] is Name), text the whole of it.
	run func(s *Service, ctx context.Context, chat string, fields []string, text string, o Origin) (string, error)
}

// Usage is the command as a usage line shows it: "/compact [text]".
func (c CommandSpec) Usage() string {
	if c.Args == "" {
		return c.Name
	}
	return c.Name + " " + c.Args
}

// commands is the table; Commands and LookupCommand hand out copies.
var commands = []CommandSpec{
	{Name: "/status", Help: "the Context line: how full the conversation is", run: (*Service).cmdStatus},
	{Name: "/compact", Args: "[text]", Help: "take a checkpoint on the next turn; the text says what to keep", run: (*Service).cmdCompact},
	{Name: "/clear", Help: "the assistant's next request starts after this point; the transcript stays", run: (*Service).cmdClear},
	{Name: "/new", Args: "[title]", Help: "start a new chat with this chat's models", run: (*Service).cmdNew},
	{Name: "/pin", Args: "ID", Help: "keep a message whole in the assistant's view", run: (*Service).cmdPin},
	{Name: "/unpin", Args: "ID", Help: "let a pinned message be checkpointed again", run: (*Service).cmdPin},
	{Name: "/prune-sessions", Args: "[days]", Help: "delete the chats inactive for more than days (default 30)", run: (*Service).cmdPrune},
	{Name: "/changes", Help: "the file changes of this chat's tools, by turn", run: (*Service).cmdChanges},
	{Name: "/rewind", Args: "N", Help: "put the workspace back to before turn N", run: (*Service).cmdRewind},
	{Name: "/mcp", Args: "[all|none|on NAME...|off NAME...]", Help: "the MCP servers this chat offers the model, or choose them", run: (*Service).cmdMCP},
	{Name: "/prompt", Args: "[SERVER NAME ARG=VALUE...]", Help: "the MCP servers' prompts, or send one as your message", run: (*Service).cmdPrompt},
	{Name: "/stop", Help: "stop the running turn", run: (*Service).cmdStop},
	{Name: "/continue", Help: "start the queued messages a Stop held", run: (*Service).cmdContinue},
}

// Commands returns the chat commands Command runs, in the order a help
// shows them.
func Commands() []CommandSpec { return append([]CommandSpec(nil), commands...) }

// LookupCommand returns the command named name ("/compact"); ok is false
// when there is none.
func LookupCommand(name string) (CommandSpec, bool) {
	for _, c := range commands {
		if c.Name == name {
			return c, true
		}
	}
	return CommandSpec{}, false
}

// usages lists the commands' usage lines, for the error an unknown command
// gets.
func usages() string {
	u := make([]string, len(commands))
	for i, c := range commands {
		u[i] = c.Usage()
	}
	return strings.Join(u, ", ")
}

// Command runs a slash command of a chat (one of Commands) and returns
// what it says.
func (s *Service) Command(ctx context.Context, chat, text string, o Origin) (out string, err error) {
	if s.routed(ctx, chat) {
		return routeOp[string](ctx, s, chat, opFrame{Op: opCommand, Text: &text}, o)
	}
	defer func() {
		if err != nil {
			s.commandFailed(ctx, chat, text, err)
		}
	}()
	fields := strings.Fields(text)
	if len(fields) == 0 || !strings.HasPrefix(fields[0], "/") {
		return "", fmt.Errorf("%w: a command starts with /, such as /changes", ErrBadInput)
	}
	c, ok := LookupCommand(fields[0])
	if !ok {
		return "", fmt.Errorf("%w: unknown command %s (known: %s)", ErrBadInput, fields[0], usages())
	}
	return c.run(s, ctx, chat, fields, text, o)
}

func (s *Service) cmdStatus(ctx context.Context, chat string, _ []string, _ string, _ Origin) (string, error) {
	return doValue(ctx, s, chat, func(a *actor) (string, error) { return a.status(), nil })
}

func (s *Service) cmdMCP(ctx context.Context, chat string, fields []string, _ string, o Origin) (string, error) {
	return s.mcpCommand(ctx, chat, fields, o)
}

func (s *Service) cmdPrompt(ctx context.Context, chat string, fields []string, _ string, o Origin) (string, error) {
	return s.promptCommand(ctx, chat, fields, o)
}

func (s *Service) cmdCompact(ctx context.Context, chat string, _ []string, text string, o Origin) (string, error) {
	instr := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(text), "/compact"))
	err := s.do(ctx, chat, func(a *actor) error {
		if err := a.usable(); err != nil {
			return err
		}
		a.compact = &instr
		a.append(&CompactRequested{Text: instr}, o)
		return a.flush()
	})
	return "A checkpoint will be taken on the next turn; a conversation already below the checkpoint target is left whole.", err
}

func (s *Service) cmdClear(ctx context.Context, chat string, _ []string, _ string, o Origin) (string, error) {
	err := s.do(ctx, chat, func(a *actor) error {
		if err := a.usable(); err != nil {
			return err
		}
		a.replay(a.append(&Cleared{}, o))
		return a.flush()
	})
	return "Cleared: the assistant's next request starts after this point. The transcript above stays, and stays searchable.", err
}

func (s *Service) cmdNew(ctx context.Context, chat string, fields []string, _ string, o Origin) (string, error) {
	from, err := s.Get(ctx, chat)
	if err != nil {
		return "", err
	}
	c, err := s.Create(ctx, strings.Join(fields[1:], " "), from.Chain, Origin{By: o.By}) // the asker's chat
	if err != nil {
		return "", err
	}
	return "New chat " + c.ID + ": " + c.Title, nil
}

// cmdPin is /pin and /unpin.
func (s *Service) cmdPin(ctx context.Context, chat string, fields []string, _ string, o Origin) (string, error) {
	if len(fields) != 2 {
		return "", fmt.Errorf("%w: usage: %s MESSAGE_ID", ErrBadInput, fields[0])
	}
	if _, err := s.Pin(ctx, chat, fields[1], fields[0] == "/pin", o); err != nil {
		return "", err
	}
	if fields[0] == "/unpin" {
		return "Unpinned " + fields[1] + ".", nil
	}
	return "Pinned " + fields[1] + ": it stays whole in the assistant's view.", nil
}

func (s *Service) cmdPrune(ctx context.Context, chat string, fields []string, _ string, _ Origin) (string, error) {
	days, err := PruneDays(fields[1:])
	if err != nil {
		return "", err
	}
	r, err := s.Prune(ctx, days, chat)
	if err != nil {
		return "", err
	}
	return r.String(), nil
}

// Marker roles in a chat's messages: rows of the runtime's own that the view
// needs in place but a transcript does not show as messages.
const (
	RoleClear    = "clear"    // a /clear topic boundary
	RoleBoundary = "boundary" // a boundary: the conversation before it was archived and cleared
	RoleContext  = "context"  // the runtime-context sections a turn's request carried
)

// status is /status: the Context line as the last turn read it.
func (a *actor) status() string {
	line := "Context: no turn has run in this conversation yet."
	if c := a.context; c != nil {
		line = c.Line
	}
	if tl := a.toolsLine(); tl != "" {
		line += "\n" + tl
	}
	return line
}

// PruneDays reads the argument of /prune-sessions: none means 30 days, one
// positive whole number sets the days. Any other form is refused, and
// nothing is deleted.
func PruneDays(args []string) (int, error) {
	switch len(args) {
	case 0:
		return 30, nil
	case 1:
		n, err := strconv.Atoi(args[0])
		if err == nil && n > 0 && n <= 36500 && strconv.Itoa(n) == args[0] {
			return n, nil
		}
	}
	return 0, fmt.Errorf("%w: usage: /prune-sessions [days], days a positive whole number (default 30); nothing was deleted", ErrBadInput)
}

// PruneReport says what Prune did, in counts by bounded category: never a
// path, a chat's content or an OS error chain (those go to the log).
type PruneReport struct {
	Days int
	// Removed counts the chats removed whole: their metadata, record,
	// pending queue, archive, tool outputs, held recovery answers,
	// file-change ledger and data_dir/workstreams/<chat> folder.
	Removed int
	// SkippedActive counts old chats kept because they are active: the one
	// asking, loaded, running or interrupted, or with pending messages.
	SkippedActive int
	// NotFound counts old chats that were gone by the time their turn came.
	NotFound int
	// PermissionDenied, Unsafe and Failed count chats not removed whole:
	// some part could not be deleted because the OS refused (permission
	// denied), because a link or foreign object stood in the way and was
	// left alone (unsafe), or for any other reason (failed). What is left
	// of a chat whose record went is removed by a later prune.
	PermissionDenied, Unsafe, Failed int
	// Leftovers counts folders under data_dir/workstreams of chats deleted
	// before (by an earlier prune that could not finish, or before
	// pruning removed them) that this prune removed.
	Leftovers int
	// LeftoversNot says why those folders could not be looked through or
	// removed ("permission denied", "unsafe", "failed"); "" when they were.
	LeftoversNot string
	// Blobs counts the attachment files no remaining row names that this
	// prune removed (see CollectBlobs); BlobsNot says why collecting them
	// failed ("" when it did not).
	Blobs    int
	BlobsNot string
}

func (r PruneReport) String() string {
	s := fmt.Sprintf("Pruned chats inactive for more than %d days: %d removed", r.Days, r.Removed)
	for _, c := range []struct {
		n    int
		what string
	}{
		{r.SkippedActive, "skipped as active"},
		{r.NotFound, "not found"},
		{r.PermissionDenied, "permission denied"},
		{r.Unsafe, "left alone as unsafe (a link or foreign file in the way)"},
		{r.Failed, "failed"},
		{r.Leftovers, "leftover handoff folders of deleted chats removed"},
		{r.Blobs, "attachment files no remaining message names removed"},
	} {
		if c.n > 0 {
			s += fmt.Sprintf(", %d %s", c.n, c.what)
		}
	}
	if r.LeftoversNot != "" {
		s += ", leftover handoff folders of deleted chats not removed (" + r.LeftoversNot + ")"
	}
	if r.BlobsNot != "" {
		s += ", attachment files not collected (" + r.BlobsNot + ")"
	}
	return s + "."
}

// category is the bounded name of a failure's kind.
func category(err error) string {
	switch {
	case errors.Is(err, datadir.ErrUnsafe):
		return "unsafe"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	case errors.Is(err, fs.ErrNotExist):
		return "not found"
	}
	return "failed"
}

// count adds one chat's outcome to the report.
func (r *PruneReport) count(err error) {
	if err == nil {
		r.Removed++
		return
	}
	r.failed(err)
}

// failed counts err under its category.
func (r *PruneReport) failed(err error) {
	switch category(err) {
	case "unsafe":
		r.Unsafe++
	case "permission denied":
		r.PermissionDenied++
	case "not found":
		r.NotFound++
	default:
		r.Failed++
	}
}

// Prune deletes the chats whose last activity is strictly older than days
// ago, with everything stored for them: metadata, record, pending queue,
// archive, tool outputs, held recovery answers and file-change ledger in
// one transaction, then the handoff folder under data_dir/workstreams, then
// the attachment files no remaining row names. It never deletes active: the chat that asked, a
// chat in memory, a chat with a running or interrupted turn, or one with
// pending messages. Memory notes (data_dir/memory) stay: they are what the
// assistant learned, read by every chat, not part of the one they came
// from. Handoff folders of chats that no longer exist are removed too, so
// what an earlier prune could not remove goes with the next one.
func (s *Service) Prune(ctx context.Context, days int, active string) (PruneReport, error) {
	r := PruneReport{Days: days}
	if days <= 0 {
		return r, fmt.Errorf("%w: days must be positive; nothing was deleted", ErrBadInput)
	}
	cutoff := s.now().Add(-time.Duration(days) * 24 * time.Hour)
	var old []Chat
	err := s.store.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketChats).ForEach(func(k, v []byte) error {
			var c Chat
			if json.Unmarshal(v, &c) == nil && c.UpdatedAt.Before(cutoff) {
				old = append(old, c)
			}
			return nil
		})
	})
	if err != nil {
		return r, err
	}
	for _, c := range old {
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
		if c.ID == active || c.Turn != "" || c.Resume || c.Pending > 0 {
			r.SkippedActive++
			continue
		}
		state, err := s.drop(ctx, c.ID, cutoff)
		switch {
		case err != nil:
			s.log.Warn("prune chat", "chat", c.ID, "err", err)
			r.count(err)
		case state == dropGone:
			r.NotFound++
		case state == dropActive:
			r.SkippedActive++
		default:
			s.indexLater(c.ID) // its search documents go too
			r.count(s.dropFiles(c.ID))
		}
	}
	if err := s.pruneLeftovers(&r); err != nil {
		s.log.Warn("prune leftover handoff folders", "err", err)
		r.LeftoversNot = category(err)
	}
	// The removed chats' attachments go with them, unless another row
	// still names them (a blob is stored once for every message).
	n, err := s.CollectBlobs(ctx)
	r.Blobs = n
	if err != nil {
		s.log.Warn("prune attachment files", "err", err)
		r.BlobsNot = category(err)
	}
	return r, nil
}

// What drop found.
const (
	dropRemoved = iota
	dropActive  // came back to life: loaded, or active again on disk
	dropGone    // no longer stored
)

// dropFiles deletes what a removed chat kept outside the database: its
// handoff folder. A folder that cannot go now is removed by a later prune
// (pruneLeftovers), since its chat no longer exists.
func (s *Service) dropFiles(id string) error {
	if s.opt.DataDir == "" {
		return nil
	}
	err := boundary.RemoveWorkstream(s.opt.DataDir, id)
	if err != nil {
		s.log.Warn("prune chat handoff folder", "chat", id, "err", err)
	}
	return err
}

// pruneLeftovers removes the handoff folders of chats that are no longer
// stored and not in memory.
func (s *Service) pruneLeftovers(r *PruneReport) error {
	if s.opt.DataDir == "" {
		return nil
	}
	ids, err := boundary.Workstreams(s.opt.DataDir)
	if err != nil || len(ids) == 0 {
		return err
	}
	for _, id := range ids {
		sh := s.shardOf(id)
		sh.mu.Lock()
		var stored bool
		err := s.store.db.View(func(tx *bolt.Tx) error {
			stored = tx.Bucket(bucketChats).Get([]byte(id)) != nil
			return nil
		})
		if err == nil && !stored && sh.m[id] == nil {
			if err = boundary.RemoveWorkstream(s.opt.DataDir, id); err == nil {
				r.Leftovers++
			}
		}
		sh.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// drop deletes one chat unless it came back to life: it holds the chat's
// shard lock, so the chat cannot be loaded while its rows go, and checks
// the stored metadata again inside the transaction.
func (s *Service) drop(ctx context.Context, id string, cutoff time.Time) (int, error) {
	if s.opt.RecordLog != nil {
		return s.dropLogged(ctx, id, cutoff)
	}
	sh := s.shardOf(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.m[id] != nil {
		return dropActive, nil
	}
	state := dropActive
	err := s.store.Write(ctx, func(tx *bolt.Tx) error {
		state = dropActive
		c, ok, err := loadChat(tx, id)
		if err == nil && !ok {
			state = dropGone
		}
		if err != nil || !ok || !c.UpdatedAt.Before(cutoff) || c.Turn != "" || c.Resume || c.Pending > 0 {
			return err
		}
		if err := s.removeChatTx(tx, id); err != nil {
			return err
		}
		state = dropRemoved
		return nil
	})
	return state, err
}

// dropLogged is drop in cluster mode: the chat's owner (this node taking
// it when nobody owns it) checks it on its goroutine and, when it is
// still old and idle, removes it through its log (actor.remove), so every
// node drops it, not only the one that ran the prune.
func (s *Service) dropLogged(ctx context.Context, id string, cutoff time.Time) (int, error) {
	if s.routed(ctx, id) {
		state, err := routeOp[int](ctx, s, id, opFrame{Op: opPrune, Before: uint64(cutoff.UnixNano())}, Origin{})
		if errors.Is(err, ErrNotFound) {
			return dropGone, nil
		}
		return state, err
	}
	state, err := doValue(ctx, s, id, func(a *actor) (int, error) {
		if a.broken != nil {
			return dropActive, a.broken
		}
		if !a.meta.UpdatedAt.Before(cutoff) || a.turn != nil || len(a.pending) > 0 || a.meta.Resume ||
			len(a.approvals) > 0 || len(a.recoveries) > 0 || !a.b.empty() {
			return dropActive, nil
		}
		if err := a.remove(ctx); err != nil {
			return dropActive, err
		}
		a.gone()
		return dropRemoved, nil
	})
	if errors.Is(err, ErrNotFound) {
		return dropGone, nil
	}
	return state, err
}

// removeChatTx deletes everything the database holds for chat id:
// metadata, record, pending queue, client ids, tool outputs, archive, held
// recovery answers and file-change ledger, in the caller's transaction.
func (s *Service) removeChatTx(tx *bolt.Tx, id string) error {
	c, ok, err := loadChat(tx, id)
	if err != nil {
		c, ok = Chat{ID: id}, true // damaged metadata goes too; its index entries are looked for
	}
	if ok {
		if err := deleteMeta(tx, &c); err != nil {
			return err
		}
	}
	// Its creator and grants go with it, in the same commit.
	if err := people.DropChatTx(tx, id); err != nil {
		return err
	}
	for _, parent := range [][]byte{bucketRecords, bucketPending, bucketClientIDs, bucketOutputs, bucketArchive} {
		p := tx.Bucket(parent)
		if p == nil || p.Bucket([]byte(id)) == nil {
			continue
		}
		if err := p.DeleteBucket([]byte(id)); err != nil {
			return err
		}
	}
	for _, h := range heldAnswers(tx, id) {
		if err := tx.Bucket(bucketHeld).Delete([]byte(h[0])); err != nil {
			return err
		}
	}
	if s.opt.Ledger != nil {
		// In the same commit: a crash cannot leave a ledger behind
		// that no chat owns.
		if err := s.opt.Ledger.DropTx(tx, id); err != nil {
			return err
		}
	}
	return nil
}
