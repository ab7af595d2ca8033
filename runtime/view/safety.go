package view

import (
	"fmt"
	"sort"
	"strings"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tokens"
)

// NetNear is the share of the room, in percent, past which SafetyNet
// prunes: only near the ceiling, since a prune rewrites the prefix.
const NetNear = 95

const netPrefix = "[Result of call "

// Net is what one SafetyNet call did.
type Net struct {
	Cleared int // tool results replaced by a pointer
	Trimmed int // whole messages of earlier turns dropped, as a last resort
}

// Fired reports whether the net changed the request.
func (n Net) Fired() bool { return n.Cleared+n.Trimmed > 0 }

// SafetyNet is the per-request prune of one oversized turn. msgs is the
// request about to be sent (with the system prompt); msgs[:sent] went to
// the provider already in an earlier request of the turn; room is the
// ceiling minus the tool definitions; count the token counter (nil:
// tokens.Count). When the request is past NetNear % of room, it frees room
// in this order until it is back under:
//
//  1. results of the running turn not sent yet, largest first, keeping
//     the most recent one (the assistant is still reasoning about it);
//  2. results already sent, of the running turn then of earlier turns,
//     oldest first (a sent prefix is rewritten only when it must be: that
//     keeps the provider's prefix cache);
//  3. as a last resort, whole earlier turns, oldest first, cut before a
//     user message.
//
// Cleared results cite their tool_call_id. It returns the request (a copy
// when it pruned; msgs is never changed) and what it did; a prune is
// recorded and sets Signals.Pruned for the next turn, which checkpoints.
func SafetyNet(msgs []provider.Message, sent, room int, count func(string) int) ([]provider.Message, Net) {
	if count == nil {
		count = tokens.Count
	}
	total := tokens.Overhead(len(msgs))
	turn, newest := 0, -1
	for i := range msgs {
		total += messageTokens(&msgs[i], count)
		switch msgs[i].Role {
		case provider.RoleUser:
			turn = i
		case provider.RoleTool:
			newest = i
		}
	}
	limit := room * NetNear / 100
	var net Net
	if total <= limit {
		// Nearly every request: nothing is made for it.
		return msgs, net
	}
	toks := make([]int, len(msgs))
	for i := range msgs {
		toks[i] = messageTokens(&msgs[i], count)
	}
	var unsent, older []int
	for i := turn + 1; i < len(msgs); i++ {
		if msgs[i].Role != provider.RoleTool || i == newest {
			continue
		}
		if i >= sent {
			unsent = append(unsent, i)
		} else {
			older = append(older, i)
		}
	}
	sort.SliceStable(unsent, func(a, b int) bool { return toks[unsent[a]] > toks[unsent[b]] })
	for i := 0; i < turn; i++ {
		if msgs[i].Role == provider.RoleTool {
			older = append(older, i)
		}
	}
	out := msgs
	own := false
	for _, i := range append(unsent, older...) {
		if total <= limit {
			break
		}
		if strings.HasPrefix(msgs[i].Content, netPrefix) {
			continue
		}
		text := fmt.Sprintf(`%s%s cleared to fit the request budget. Get it back with %s {"tool_call_id": %q}.]`,
			netPrefix, msgs[i].ToolCallID, ToolOutput, msgs[i].ToolCallID)
		n := count(text)
		if n >= toks[i] {
			continue
		}
		if !own {
			out, own = append([]provider.Message(nil), msgs...), true
		}
		out[i].Content, out[i].Tokens = text, n
		total -= toks[i] - n
		toks[i] = n
		net.Cleared++
	}
	// The last resort: drop the oldest whole turns (never the system
	// prompt, never the running turn), cutting before a user message so no
	// call is parted from its result.
	first := 0
	if len(out) > 0 && out[0].Role == provider.RoleSystem {
		first = 1
	}
	cut := first
	for total > limit {
		next := -1
		for i := cut + 1; i <= turn; i++ {
			if out[i].Role == provider.RoleUser {
				next = i
				break
			}
		}
		if next < 0 {
			break
		}
		for i := cut; i < next; i++ {
			total -= toks[i] + tokens.MessageOverhead
		}
		net.Trimmed += next - cut
		cut = next
	}
	if cut > first {
		out = append(append([]provider.Message(nil), out[:first]...), out[cut:]...)
	}
	return out, net
}

// messageTokens is m's stored count, or a count of its text and calls.
func messageTokens(m *provider.Message, count func(string) int) int {
	if m.Tokens != 0 {
		return m.Tokens
	}
	n := count(m.Content)
	for _, c := range m.ToolCalls {
		n += count(c.Name) + count(c.Arguments)
	}
	return n
}
