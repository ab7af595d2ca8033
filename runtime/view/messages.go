package view

import (
	"slices"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// msgBuf is one of the arrays a memo writes its views' messages in: the
// lead, then the messages, and their reasoning alongside.
type msgBuf struct {
	req    []provider.Message // the lead, then the messages written last
	reason []string           // the reasoning of req[lead:]
	// valid is how many messages after the lead are still the ones the
	// memo's kept entries send (the rest is the turn's own context and
	// whatever the view's holder appended).
	valid int
}

// turnRoom is the room a memo's array keeps after a view: a turn appends
// its steps to the view's messages in their capacity (View.Request).
const turnRoom = 8

// message is what entry e sends, and the reasoning to replay with it.
func message(e *entry) (provider.Message, string) {
	m := provider.Message{Role: e.role(), Content: e.text, ToolCalls: e.calls(), ToolCallID: e.callID(), Tokens: e.tokens, Parts: e.parts}
	if e.row != nil && !e.head {
		m.Seq = e.row.Seq
	}
	return m, e.reasoning()
}

// viewKept is view for a build that succeeded: with a memo, its messages
// go into the memo's arrays, and a view that extends the last one copies
// only what the last two views do not share already, not the history.
// The memo keeps two arrays and writes them in turn, so the last view's
// messages stay as they were (its holder may still read them, and append
// to them in its capacity); a view's array is written again from the
// second build after it on, past what the views have alike.
func (b *build) viewKept() View {
	m := b.in.Memo
	b.nmsg = -1
	if m == nil {
		return b.view()
	}
	lead := len(b.in.Lead)
	src, dst := &m.bufs[m.cur], &m.bufs[1-m.cur]
	from, p := 0, 0 // entries already in dst (by copy), and their messages
	s := b.reuse
	if s != nil && s.nmsg >= 0 && sameMessages(m.lead, b.in.Lead) {
		from, p = len(s.entries), s.nmsg
	}
	n := p // messages of the view
	for i := from; i < len(b.entries); i++ {
		e := &b.entries[i]
		if !e.sent() {
			continue
		}
		if e.row != nil && e.row.Kind == KindTool && len(e.parts) > 0 {
			// Parts a result brought back move into a message of their
			// own (withRecovered): built apart, and kept by no memo.
			m.bufs = [2]msgBuf{}
			return b.view()
		}
		n++
	}
	if cap(dst.req) < lead+n+turnRoom || cap(dst.reason) < n {
		// Room for the turn's own steps after the view as well.
		c := lead + n + n/4 + 2*turnRoom
		dst.req, dst.reason, dst.valid = make([]provider.Message, lead, c), make([]string, 0, c), 0
		copy(dst.req, b.in.Lead)
	}
	if from == 0 || dst.valid == 0 {
		copy(dst.req[:lead], b.in.Lead)
		dst.valid = 0
	}
	// What a longer view left past this one goes, not to hold it.
	clear(dst.req[min(lead+n, len(dst.req)):])
	clear(dst.reason[min(n, len(dst.reason)):])
	dst.req, dst.reason = dst.req[:lead+n], dst.reason[:n]
	// The messages the last view's kept entries sent, as it sent them.
	if p > dst.valid {
		copy(dst.req[lead+dst.valid:lead+p], src.req[lead+dst.valid:lead+p])
		copy(dst.reason[dst.valid:p], src.reason[dst.valid:p])
	}
	v := View{Checkpoint: b.planned, Epoch: epochOf(b.active()), Size: b.size, Measured: b.sized, Warned: b.warned, Stages: b.reports}
	k := p
	kept := p // messages of the entries the memo keeps (all but this turn's context)
	for i := from; i < len(b.entries); i++ {
		e := &b.entries[i]
		if !e.sent() {
			continue
		}
		dst.req[lead+k], dst.reason[k] = message(e)
		k++
		if e.current {
			v.Context, v.ContextTokens = b.cur, e.tokens
		} else {
			kept = k
		}
	}
	if from == 0 {
		// A view built afresh: the other array holds nothing of it.
		src.valid = 0
		m.lead = slices.Clone(b.in.Lead)
	}
	dst.valid, b.nmsg, m.cur = kept, kept, 1-m.cur
	v.Messages, v.Reasoning = dst.req[lead:lead+n], dst.reason[:n:n]
	if b.in.Lead != nil {
		v.Request = dst.req[:lead+n]
	}
	return v
}

// sameMessages compares two lists of messages by value.
func sameMessages(a, b []provider.Message) bool {
	return (a == nil) == (b == nil) && slices.EqualFunc(a, b, func(x, y provider.Message) bool {
		return x.Role == y.Role && x.Content == y.Content && x.ToolCallID == y.ToolCallID && x.Tokens == y.Tokens && x.Seq == y.Seq &&
			slices.Equal(x.ToolCalls, y.ToolCalls) && slices.EqualFunc(x.Parts, y.Parts, samePart)
	})
}
