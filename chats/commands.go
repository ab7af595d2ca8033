package chats

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

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
	var m Message
	err := s.do(ctx, chat, func(a *actor) (err error) { m, err = a.pin(msg, pinned, o); return })
	return m, err
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
	if p == nil {
		if a.findPending(id) >= 0 {
			return Message{}, fmt.Errorf("%w: message %s is still pending; pin it once the assistant has picked it up", ErrBadInput, id)
		}
		return Message{}, fmt.Errorf("message %s: %w", id, ErrNotFound)
	}
	if !isTranscript(*p) {
		return Message{}, fmt.Errorf("%w: message %s is not a user or assistant message", ErrBadInput, id)
	}
	p.Pinned = pinned
	m := Message{ID: p.ID, Role: p.Role, Seq: p.Seq, Pinned: pinned}
	a.append(&Event{Type: EvMessagePinned, Message: &m}, o)
	return m, a.flush()
}

// Commands lists the chat commands Command knows, for its error message.
const Commands = "/status, /compact [text], /clear, /new [title], /pin ID, /unpin ID, /prune-sessions [days], /changes, /rewind N, /stop"

// command runs the commands of long conversations; ok is false for a
// command it does not know.
func (s *Service) command(ctx context.Context, chat string, fields []string, text string, o Origin) (out string, ok bool, err error) {
	switch fields[0] {
	case "/status":
		err = s.do(ctx, chat, func(a *actor) error { out = a.status(); return nil })
	case "/compact":
		instr := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(text), "/compact"))
		err = s.do(ctx, chat, func(a *actor) error {
			if err := a.usable(); err != nil {
				return err
			}
			a.compact = &instr
			a.append(&Event{Type: EvCompact, Text: instr}, o)
			return a.flush()
		})
		out = "A checkpoint will be taken on the next turn; a conversation already below the checkpoint target is left whole."
	case "/clear":
		err = s.do(ctx, chat, func(a *actor) error {
			if err := a.usable(); err != nil {
				return err
			}
			a.replay(a.append(&Event{Type: EvClear}, o))
			return a.flush()
		})
		out = "Cleared: the assistant's next request starts after this point. The transcript above stays, and stays searchable."
	case "/new":
		var from Chat
		if err = s.do(ctx, chat, func(a *actor) error { from = a.info(); return nil }); err != nil {
			return "", true, err
		}
		var c Chat
		if c, err = s.Create(ctx, strings.Join(fields[1:], " "), from.Chain, Origin{}); err == nil {
			out = "New chat " + c.ID + ": " + c.Title
		}
	case "/pin", "/unpin":
		if len(fields) != 2 {
			return "", true, fmt.Errorf("%w: usage: %s MESSAGE_ID", ErrBadInput, fields[0])
		}
		if _, err = s.Pin(ctx, chat, fields[1], fields[0] == "/pin", o); err == nil {
			out = "Pinned " + fields[1] + ": it stays whole in the assistant's view."
			if fields[0] == "/unpin" {
				out = "Unpinned " + fields[1] + "."
			}
		}
	case "/prune-sessions":
		days, perr := PruneDays(fields[1:])
		if perr != nil {
			return "", true, perr
		}
		var r PruneReport
		if r, err = s.Prune(ctx, days, chat); err == nil {
			out = r.String()
		}
	default:
		return "", false, nil
	}
	return out, true, err
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
	c := a.context
	if c == nil {
		return "Context: no turn has run in this conversation yet."
	}
	return c.Line
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

// PruneReport says what Prune did, in counts only.
type PruneReport struct {
	Days          int
	Deleted       int
	SkippedActive int // chats older than the cutoff that were running, waiting, loaded or the one asking
	Failed        int
}

func (r PruneReport) String() string {
	s := fmt.Sprintf("Pruned chats inactive for more than %d days: %d deleted", r.Days, r.Deleted)
	if r.SkippedActive > 0 {
		s += fmt.Sprintf(", %d skipped as active", r.SkippedActive)
	}
	if r.Failed > 0 {
		s += fmt.Sprintf(", %d failed", r.Failed)
	}
	return s + "."
}

// Prune deletes the chats whose last activity is strictly older than days
// ago, with everything stored for them (record, pending, archive, tool
// outputs, file-change ledger). It never deletes active: the chat that asked,
// a chat in memory, a chat with a running or interrupted turn, or one with
// pending messages.
func (s *Service) Prune(ctx context.Context, days int, active string) (PruneReport, error) {
	r := PruneReport{Days: days}
	if days <= 0 {
		return r, fmt.Errorf("%w: days must be positive; nothing was deleted", ErrBadInput)
	}
	cutoff := time.Now().Add(-time.Duration(days) * 24 * time.Hour)
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
		deleted, err := s.drop(ctx, c.ID, cutoff)
		switch {
		case err != nil:
			r.Failed++
			s.log.Warn("prune chat", "chat", c.ID, "err", err)
		case deleted:
			r.Deleted++
			if s.opt.Ledger != nil {
				if err := s.opt.Ledger.Drop(c.ID); err != nil {
					s.log.Warn("prune chat ledger", "chat", c.ID, "err", err)
				}
			}
		default:
			r.SkippedActive++
		}
	}
	return r, nil
}

// drop deletes one chat unless it came back to life: it holds the chat's
// shard lock, so the chat cannot be loaded while its rows go, and checks
// the stored metadata again inside the transaction.
func (s *Service) drop(ctx context.Context, id string, cutoff time.Time) (bool, error) {
	sh := s.shardOf(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.m[id] != nil {
		return false, nil
	}
	deleted := false
	err := s.store.Write(ctx, func(tx *bolt.Tx) error {
		deleted = false
		c, ok, err := loadChat(tx, id)
		if err != nil || !ok || !c.UpdatedAt.Before(cutoff) || c.Turn != "" || c.Resume || c.Pending > 0 {
			return err
		}
		if err := tx.Bucket(bucketChats).Delete([]byte(id)); err != nil {
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
		deleted = true
		return nil
	})
	return deleted, err
}
