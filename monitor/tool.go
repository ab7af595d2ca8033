package monitor

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// toolTurn counts the failures of each call signature in a chat's running
// turn. Only counts live here; a breaker exists once a loop trips.
type toolTurn struct {
	turn     string
	failures map[string]int
}

// CallSignature names a tool call for ToolFailure: the tool's name and a
// short hash of its arguments, so the same call with the same arguments gets
// the same signature and the breaker id stays short and free of secrets.
// Callers should pass arguments in a canonical form (the model's JSON as
// sent is fine: a loop repeats it byte for byte).
func CallSignature(tool string, args []byte) string {
	h := sha256.Sum256(args)
	return tool + "#" + hex.EncodeToString(h[:6])
}

// toolID is "tool:CHAT/SIG"; the kind is spelled out in full only in the view.
func toolID(chat, sig string) string { return "tool:" + chat + "/" + sig }

// ToolFailure reports that the call with signature sig failed in turn of
// chat. When the same call has failed ToolLoopFailures times in this turn
// its breaker, id "tool:CHAT/SIG", kind tool_loop and scope CHAT, opens (or, if it is still
// open from an earlier turn, counts one more trip), and tripped is true: the
// turn must pause and tell the person. A report for another turn of the chat
// starts that turn's counts afresh, so failures never add up across turns.
func (m *Monitor) ToolFailure(chat, turn, sig string) (tripped bool) {
	m.mu.Lock()
	t := m.tools[chat]
	if t == nil || t.turn != turn {
		t = &toolTurn{turn: turn, failures: map[string]int{}}
		m.tools[chat] = t
	}
	t.failures[sig]++
	n := t.failures[sig]
	if n < m.th.ToolLoopFailures {
		m.mu.Unlock()
		return false
	}
	// Count again from zero: if the turn goes on anyway, the next trip needs
	// another full run of failures.
	delete(t.failures, sig)
	id := toolID(chat, sig)
	b := m.breakers[id]
	if b == nil {
		b = &Breaker{m: m, id: id, kind: KindToolLoop, scope: chat, state: StateClosed}
		m.breakers[id] = b
	}
	m.mu.Unlock()

	now := m.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.transition(now, StateOpen, fmt.Sprintf("the same call (%s) failed %d times in one turn", sig, n), false)
	return true
}

// ToolTurnEnded forgets the failure counts of a chat's turn; call it when the
// turn finishes, whatever its outcome.
func (m *Monitor) ToolTurnEnded(chat, turn string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.tools[chat]; t != nil && t.turn == turn {
		delete(m.tools, chat)
	}
}

// ToolResolved closes the chat's open tool-loop breakers: call it when a turn
// of that chat succeeded, which shows the person has moved past the loop.
// It reports how many it closed.
func (m *Monitor) ToolResolved(chat string) int {
	now := m.now()
	n := 0
	for _, b := range m.all() {
		if b.kind != KindToolLoop || b.scope != chat {
			continue
		}
		b.mu.Lock()
		if b.state != StateClosed {
			b.transition(now, StateClosed, "the next turn succeeded", false)
			n++
		}
		b.mu.Unlock()
	}
	return n
}
