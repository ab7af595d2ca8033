package view

import (
	"fmt"
	"strings"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tokens"
)

// NetNear is the share of the room, in percent, past which SafetyNet
// prunes: only near the ceiling, since a prune rewrites the prefix.
const NetNear = 95

const netPrefix = "[Result of call "

// SafetyNet is the per-request prune of a running turn. msgs is the request
// about to be sent (with the system prompt), room the ceiling minus the
// tool definitions, count the token counter (nil: tokens.Count). When the
// request is past NetNear % of room, it clears tool results, the older ones
// of the running turn first (oldest first), then those of earlier turns,
// always keeping the most recent one, until it is back under. Cleared
// results cite their tool_call_id. It returns the request (a copy when it
// pruned; msgs is never changed) and how many results it cleared; a prune
// should set Signals.Pruned for the next turn, which then checkpoints.
func SafetyNet(msgs []provider.Message, room int, count func(string) int) ([]provider.Message, int) {
	if count == nil {
		count = tokens.Count
	}
	toks := make([]int, len(msgs))
	total := tokens.Overhead(len(msgs))
	turn, newest := 0, -1
	for i, m := range msgs {
		toks[i] = m.Tokens
		if toks[i] == 0 {
			toks[i] = count(m.Content)
			for _, c := range m.ToolCalls {
				toks[i] += count(c.Name) + count(c.Arguments)
			}
		}
		total += toks[i]
		switch m.Role {
		case provider.RoleUser:
			turn = i
		case provider.RoleTool:
			newest = i
		}
	}
	limit := room * NetNear / 100
	if total <= limit {
		return msgs, 0
	}
	var order []int
	for i := turn + 1; i < len(msgs); i++ {
		if msgs[i].Role == provider.RoleTool && i != newest {
			order = append(order, i)
		}
	}
	for i := 0; i < turn; i++ {
		if msgs[i].Role == provider.RoleTool {
			order = append(order, i)
		}
	}
	var out []provider.Message
	pruned := 0
	for _, i := range order {
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
		if out == nil {
			out = append([]provider.Message(nil), msgs...)
		}
		out[i].Content, out[i].Tokens = text, n
		total -= toks[i] - n
		pruned++
	}
	if out == nil {
		return msgs, 0
	}
	return out, pruned
}
