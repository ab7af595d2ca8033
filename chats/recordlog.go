package chats

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mirror-gateway/mirror/runtime/tools"
)

// RecordLog is where a chat's record lives when it is not only in this
// process's bbolt file: the cluster's replicated log (chats/cluster). The
// actor's one flush is one Append, whole or not at all; each node's bbolt
// is a materialization of the log (Chat.LogPos says how far).
//
// Every Append names the position the writer last saw (its fencing
// token): the store refuses the write when the chat's log has moved past
// it, so a node that lost a chat's lease cannot add to its record, however
// late its write arrives.
type RecordLog interface {
	// Append stores f (one flush) after position at, and returns the
	// chat's new position. It fails with an error wrapping ErrFenced when
	// the log is no longer at at (another writer took the chat): nothing
	// of f is stored. It fails with ErrUnavailable when the store did not
	// confirm the write: nothing may be acknowledged, and f may still land
	// whole (once) when the store's servers come back, so the writer
	// reads the log's tail before it writes again.
	Append(ctx context.Context, chat string, at uint64, f *Flush) (uint64, error)
	// Read calls fn with each flush of chat stored after position after,
	// in order, with its position, and returns the chat's position when
	// Read started (0 for a chat with nothing stored). Positions of
	// entries that are not flushes (an owner's claim) are skipped.
	Read(ctx context.Context, chat string, after uint64, fn func(pos uint64, f *Flush) error) (uint64, error)
}

// Fence is an owner's hold on a chat (cluster.Claim implements it): while
// Held is false the actor starts no turn and runs no tool.
type Fence interface{ Held() bool }

// Errors of a RecordLog.
var (
	// ErrFenced is an append refused because the chat's log moved on
	// since the writer last saw it: another node owns the chat now.
	ErrFenced = errors.New("the chat's record moved on: another node owns this chat now")
	// ErrUnavailable is an append the store did not confirm (too few of
	// its servers answer): not durable now, possibly stored later whole.
	ErrUnavailable = errors.New("the cluster's record store did not confirm the write: too few nodes answer")
)

// What goes through the log. In cluster mode every write to bbolt that
// changes what a chat is must be a Flush its owner appends, fenced, and
// that the owner and every follower apply with the same code (putFlushAt),
// or the nodes disagree. The writes outside the actor's flush, by kind:
//
//   - chat state, through the log: creating a chat (createLogged); renames,
//     chains, archiving, deleting and restoring (manageChat: a flush of
//     the metadata, DeleteAt included); pins and marks (record rows); its
//     removal for good, a deleted chat's purge and a prune (actor.remove:
//     a flush with Purge set, which followers apply with removeChatTx, and
//     after which the log keeps only the purge, RecordForgetter).
//   - derived by each node from what it applies: the chats_* sets and the
//     list index (putMeta, deleteMeta), the search index's marks
//     (chats_search, indexLater on every apply), a followed chat's purge
//     timer (followDelete), handoff folders of removed chats (removedHere).
//   - the node's own, not chat state: its followed position, its tool
//     process journal (procs.go), held recovery answers (tools.go: held by
//     the owner that could not take them), upload records of attachments
//     (blobs.go).
//   - the file-change ledger (tools.Ledger), through the log: a file
//     tool's change is a flush of its row (host.LedgerJournal) before the
//     file changes, a rewind's forgotten changes go in its flush
//     (Flush.Ledger); each node applies them in writeFlush.
//   - people's token charges ride the flush of the turn that used them
//     (Flush.Charges), so every node counts a person's day alike.
//   - the people registry (persons, tokens, grants) has its own log
//     (chats/people Replicate); a chat's creator rides its first flush.
//
// Flush is everything one actor flush commits for one chat, as the
// cluster's log stores it: applying the flushes of a chat in order to an
// empty bbolt gives the chat as its owner had it. What is local to the
// node that ran the turn (its tool process journal, held recovery
// answers) is not in it.
type Flush struct {
	// Chat is the chat's id; every event and Meta belong to it.
	Chat string `json:"chat"`
	// Events are the new rows of the record, in seq order.
	Events []*Event `json:"events,omitempty"`
	// Meta is the chat's metadata as the flush leaves it (its LogPos is
	// not meaningful in the log: a replica sets it to the flush's
	// position).
	Meta Chat `json:"meta"`
	// PutPending are pending messages stored (new or edited); DelPending
	// the ids of pending messages gone (picked or deleted).
	PutPending []*Message `json:"put_pending,omitempty"`
	DelPending []string   `json:"del_pending,omitempty"`
	// ClientIDs are client_id → message id pairs, so a resend on any node
	// answers the message it created.
	ClientIDs [][2]string `json:"client_ids,omitempty"`
	// Outputs are tool handle → whole tool output pairs.
	Outputs [][2]string `json:"outputs,omitempty"`
	// Archive is a boundary's copy of the conversation, written with its
	// rows (opaque outside this package).
	Archive *archiveEntry `json:"archive,omitempty"`
	// Creator is the person who created the chat (its first flush only).
	Creator string `json:"creator,omitempty"`
	// Ledger are the file-change ledger's writes of the flush (a file
	// tool's change, a rewind's forgetting): every node applies them to
	// its own ledger, so /changes and /rewind work wherever the chat is
	// owned. Absent (none) in single-node mode and in older flushes.
	Ledger *tools.LedgerWrites `json:"ledger,omitempty"`
	// Purge is the chat's removal for good (a deleted chat whose undo
	// window passed, or a pruned one): applying it removes everything a
	// node holds of the chat, the same way on the owner and on every
	// follower. A purge flush carries nothing else (Meta names the chat).
	// Absent in every other flush, so their bytes stay as they were.
	Purge bool `json:"purge,omitempty"`
	// Charges are the tokens the flush's turns used, added to their
	// people's day on every node that applies it (a per-day limit holds
	// across the cluster). Absent when none, so other flushes' bytes
	// stay as they were.
	Charges []Charge `json:"charges,omitempty"`
}

// Charge is tokens one person used on one UTC day (people.Day).
type Charge struct {
	Person string `json:"person"`
	Day    string `json:"day"`
	Tokens int64  `json:"tokens"`
}

// RecordForgetter is a RecordLog that can drop what a purged chat's
// record holds before its purge (chats/cluster's Records does), so the
// chat's rows are gone from the log too and a node that follows it from
// the start reads only the purge.
type RecordForgetter interface {
	// Forget drops chat's entries stored before position before.
	Forget(ctx context.Context, chat string, before uint64) error
}

// Limits of a decoded flush: one flush is one actor commit, far below them.
const (
	maxFlushBytes  = 64 << 20
	maxFlushEvents = 1 << 16
)

// DecodeFlush reads one stored flush of chat strictly: unknown fields,
// trailing data, events or metadata of another chat, seqs not increasing
// or beyond the metadata's, and empty keys are errors (wrapping
// ErrBadInput), never a partial flush.
func DecodeFlush(chat string, data []byte) (*Flush, error) {
	if len(data) > maxFlushBytes {
		return nil, fmt.Errorf("%w: flush of %d bytes", ErrBadInput, len(data))
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	f := &Flush{}
	if err := d.Decode(f); err != nil {
		return nil, fmt.Errorf("%w: flush: %w", ErrBadInput, err)
	}
	if d.More() {
		return nil, fmt.Errorf("%w: flush: data after the flush", ErrBadInput)
	}
	if err := f.Validate(chat); err != nil {
		return nil, err
	}
	return f, nil
}

// Validate says (wrapping ErrBadInput) what makes f not a flush of chat
// that DecodeFlush would give back: a writer checks before it appends.
func (f *Flush) Validate(chat string) error {
	if err := f.check(chat); err != nil {
		return fmt.Errorf("%w: flush: %w", ErrBadInput, err)
	}
	return nil
}

func (f *Flush) check(chat string) error {
	switch {
	case chat == "" || f.Chat != chat:
		return fmt.Errorf("it belongs to chat %q, not %q", f.Chat, chat)
	case f.Meta.ID != chat:
		return fmt.Errorf("its metadata belongs to chat %q", f.Meta.ID)
	case len(f.Events) > maxFlushEvents:
		return fmt.Errorf("%d events", len(f.Events))
	}
	for i, e := range f.Events {
		switch {
		case e == nil || e.Payload == nil:
			return fmt.Errorf("event %d is empty", i)
		case e.Chat != chat:
			return fmt.Errorf("event %d belongs to chat %q", i, e.Chat)
		case e.Seq == 0:
			return fmt.Errorf("event %d has no seq", i)
		case i > 0 && e.Seq <= f.Events[i-1].Seq:
			return fmt.Errorf("event seqs not increasing (%d after %d)", e.Seq, f.Events[i-1].Seq)
		case e.Seq > f.Meta.Seq:
			return fmt.Errorf("event %d is past the chat's seq %d", e.Seq, f.Meta.Seq)
		}
	}
	for i, m := range f.PutPending {
		if m == nil || m.ID == "" {
			return fmt.Errorf("pending message %d has no id", i)
		}
	}
	for _, id := range f.DelPending {
		if id == "" {
			return errors.New("an empty pending message id")
		}
	}
	for _, p := range append(f.ClientIDs[:len(f.ClientIDs):len(f.ClientIDs)], f.Outputs...) {
		if p[0] == "" {
			return errors.New("an empty client id or tool output handle")
		}
	}
	if a := f.Archive; a != nil && (a.Boundary == 0 || a.Boundary > f.Meta.Seq) {
		return fmt.Errorf("an archive at seq %d", a.Boundary)
	}
	if f.Ledger != nil {
		if f.Ledger.Empty() {
			return errors.New("an empty ledger write") // absent instead, so flush bytes stay as before
		}
		if err := f.Ledger.Check(); err != nil {
			return err
		}
	}
	for _, c := range f.Charges {
		if _, err := time.Parse(time.DateOnly, c.Day); c.Person == "" || c.Tokens <= 0 || err != nil {
			return fmt.Errorf("a charge of %d tokens to %q on %q", c.Tokens, c.Person, c.Day)
		}
	}
	if f.Purge && (len(f.Events)+len(f.PutPending)+len(f.DelPending)+len(f.ClientIDs)+len(f.Outputs)+len(f.Charges) > 0 || f.Archive != nil || f.Creator != "" || f.Ledger != nil) {
		return errors.New("a purge that also writes the chat")
	}
	return nil
}

// First and Last are the seqs of the flush's first and last events; an
// empty flush is the empty range after the chat's seq (First = Last+1).
func (f *Flush) First() uint64 {
	if len(f.Events) == 0 {
		return f.Meta.Seq + 1
	}
	return f.Events[0].Seq
}

// Last: see First.
func (f *Flush) Last() uint64 {
	if len(f.Events) == 0 {
		return f.Meta.Seq
	}
	return f.Events[len(f.Events)-1].Seq
}

// HasWork says the chat has work left as c leaves it (pending messages,
// a running or interrupted turn): the cluster's sweeper picks up such a
// chat when its owner dies.
func (c *Chat) HasWork() bool { return hasWork(c) }
