package chats

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tools/pgroup"
	bolt "go.etcd.io/bbolt"
)

// bucketProcs journals the process group of each running tool command:
// chat id → bucket: call id → procEntry. A row is written before the
// command starts and deleted in the commit that stores the call's result,
// so a row left at start names a command that may have outlived a crash.
var bucketProcs = []byte("tool_procs")

// procEntry is one journaled command.
type procEntry struct {
	Group pgroup.Group `json:"group"`
	// Owner is the Service that started it: a chat reloaded by the same
	// process (after a failed commit) leaves its own commands to the turn
	// that runs them.
	Owner string `json:"owner"`
}

// Process outcomes a recovery reports (Recovery.Process).
const (
	// ProcStopped: the call's process was still running when the gateway
	// came back, and was stopped then.
	ProcStopped = string(pgroup.Stopped)
	// ProcEnded: the call's process was no longer running.
	ProcEnded = string(pgroup.Ended)
)

// ProcessNote says, in a sentence for the person, what became of the process
// of an interrupted call; "" when the call ran no process (or the system
// cannot tell).
func (r *Recovery) ProcessNote() string {
	switch r.Process {
	case ProcStopped:
		return "Its process was still running when the gateway came back; it was stopped, so a repeat does not run beside it."
	case ProcEnded:
		return "Its process was no longer running when the gateway came back."
	}
	return ""
}

// CallProcess journals the process group a call's command runs in, before
// the command starts (runtime.ProcessJournal).
func (h *host) CallProcess(call provider.ToolCall, g pgroup.Group) error {
	v, err := json.Marshal(procEntry{Group: g, Owner: h.a.s.instance})
	if err != nil {
		return err
	}
	return h.a.s.store.Write(context.Background(), func(tx *bolt.Tx) error {
		b, err := subBucket(tx, bucketProcs, h.a.id, true)
		if err != nil {
			return err
		}
		return b.Put([]byte(call.ID), v)
	})
}

// journaledProcs reads the chat's journaled commands, by call id.
func journaledProcs(tx *bolt.Tx, chat string) (map[string]procEntry, error) {
	b, _ := subBucket(tx, bucketProcs, chat, false)
	if b == nil {
		return nil, nil
	}
	out := map[string]procEntry{}
	err := b.ForEach(func(k, v []byte) error {
		var e procEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return fmt.Errorf("chat %s: corrupt process journal row %s: %w", chat, k, err)
		}
		out[string(k)] = e
		return nil
	})
	return out, err
}

// reapProcs stops every journaled command of a previous process that still
// runs (pgroup.Reap checks that it really is the journaled one) and returns
// what it found, by call id. The rows are dropped at the actor's first
// commit; the commands of this process are left to their turns.
func (a *actor) reapProcs(procs map[string]procEntry) map[string]string {
	found := map[string]string{}
	for call, e := range procs {
		if e.Owner == a.s.instance {
			continue
		}
		out := pgroup.Reap(e.Group)
		if out == pgroup.Stopped {
			a.s.log.Warn("stopped a tool command that outlived the previous gateway", "chat", a.id, "call", call, "pgid", e.Group.PGID)
		}
		found[call] = string(out)
		a.dropProcs = append(a.dropProcs, call)
		a.b.dirty = true
	}
	return found
}

// deleteProcs removes the journal rows of calls: those whose result the
// batch stores, and those reaped at load.
func deleteProcs(tx *bolt.Tx, chat string, events []*Event, dropped []string) error {
	b, _ := subBucket(tx, bucketProcs, chat, false)
	if b == nil {
		return nil
	}
	for _, ev := range events {
		if p, ok := ev.Payload.(*ToolResult); ok && p.Result != nil {
			if err := b.Delete([]byte(p.Result.CallID)); err != nil {
				return err
			}
		}
	}
	for _, call := range dropped {
		if err := b.Delete([]byte(call)); err != nil {
			return err
		}
	}
	if k, _ := b.Cursor().First(); k == nil {
		// No command of the chat left: its bucket goes too, so what
		// Resume walks at start is only the chats with commands running.
		return tx.Bucket(bucketProcs).DeleteBucket([]byte(chat))
	}
	return nil
}
