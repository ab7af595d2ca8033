package openai

import (
	"slices"
	"unsafe"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// What positions hold in all (the encodings, the texts they keep to
// compare, their entries) and how many conversations: a conversation's
// positions are about twice its view's text, so this is a few hundred
// long chats, or thousands of short ones, per client.
const (
	convBytes = 32 << 20
	maxConvs  = 4096
)

// positions keep, for each conversation (Request.Conversation), the
// messages of its last request and their encodings by position. A turn's
// request is the last one's messages plus a few, mostly the very same
// strings (the runtime's view extends its array between turns), so
// comparing each message with the one at its position, fields equal and
// equal strings the same bytes in memory, finds them all for the cost of
// comparing pointers: no hashing of the history, which made each turn
// O(history). Each entry is a message's wire fields and their encoding,
// checked against the request's message field by field before it is
// used, so whatever an entry holds (another request of the conversation
// may have written it meanwhile) the bytes sent are a fresh encoding's.
// Least recently used conversations go first; guarded by encCache.mu.
type positions struct {
	byName     map[string]*convState
	head, tail *convState // most and least recently used
	size       int        // of all, as convState.size
	// maxBytes and maxConvs bound them (convBytes and maxConvs; tests
	// make them smaller).
	maxBytes, maxConvs int
}

// convState is one conversation's positions.
type convState struct {
	name string
	// ents are the entries by position; an entry without an encoding (a
	// message with attachments, or none written) matches nothing. Those
	// past len(ents) are zero.
	ents       []encEntry
	size       int // cap(ents) entries and what they keep
	prev, next *convState
}

// entrySize is what an entry costs of its own.
const entrySize = int(unsafe.Sizeof(encEntry{}))

// kept is what e keeps beyond its own size.
func kept(e encEntry) int {
	if e.enc == nil {
		return 0
	}
	n := len(e.enc) + len(e.m.Role) + len(e.m.Content) + len(e.m.ToolCallID)
	for _, tc := range e.m.ToolCalls {
		n += int(unsafe.Sizeof(tc)) + len(tc.ID) + len(tc.Name) + len(tc.Arguments) + len(tc.Signature)
	}
	return n
}

// byPosition fills encs[i] for each message of msgs that is where conv's
// last request had it, and returns todo with the indexes of the others
// appended.
func (c *encCache) byPosition(conv string, msgs []provider.Message, encs [][]byte, todo []int) []int {
	var ents []encEntry
	if conv != "" {
		c.mu.Lock()
		defer c.mu.Unlock()
		if st := c.convs.byName[conv]; st != nil {
			ents = st.ents // update, which follows, makes it the most recent
		}
	}
	for i := range msgs {
		if i < len(ents) && ents[i].enc != nil && cacheable(msgs[i]) && samePosition(&ents[i].m, &msgs[i]) {
			encs[i] = ents[i].enc
			c.hits++
			c.posHits++
			continue
		}
		todo = append(todo, i)
	}
	return todo
}

// samePosition says whether a kept message and m encode alike (sameWire),
// for the cost of comparing pointers when m's strings are a's.
func samePosition(a, m *provider.Message) bool {
	if !sameString(a.Content, m.Content) || !sameString(a.Role, m.Role) || !sameString(a.ToolCallID, m.ToolCallID) || len(a.ToolCalls) != len(m.ToolCalls) {
		return false
	}
	for i := range a.ToolCalls {
		x, y := &a.ToolCalls[i], &m.ToolCalls[i]
		if !sameString(x.ID, y.ID) || !sameString(x.Name, y.Name) || !sameString(x.Arguments, y.Arguments) {
			return false
		}
	}
	return true
}

// sameString is a == b, without comparing the bytes when they are the
// same bytes.
func sameString(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

// update makes conv's positions msgs' (encs[i] their encodings, nil for a
// message not kept), writing only the entries at the indexes todo: the
// others matched when the request was looked up.
func (p *positions) update(conv string, msgs []provider.Message, todo []int, encs [][]byte) {
	st := p.byName[conv]
	if st == nil {
		st = &convState{name: conv}
		p.byName[conv] = st
		p.pushFront(st)
	} else {
		p.toFront(st)
	}
	before, n := st.size, len(msgs)
	if len(st.ents) > n {
		for _, e := range st.ents[n:] {
			st.size -= kept(e)
		}
		clear(st.ents[n:])
		st.ents = st.ents[:n]
	} else if len(st.ents) < n {
		c := cap(st.ents)
		st.ents = slices.Grow(st.ents, n-len(st.ents))[:n]
		st.size += (cap(st.ents) - c) * entrySize
	}
	for _, i := range todo {
		var e encEntry
		if encs[i] != nil && cacheable(msgs[i]) {
			e = encEntry{m: wireFields(msgs[i]), enc: encs[i]}
		}
		st.size += kept(e) - kept(st.ents[i])
		st.ents[i] = e
	}
	p.size += st.size - before
	for p.tail != nil && (p.size > p.maxBytes || len(p.byName) > p.maxConvs) {
		p.remove(p.tail)
	}
}

func (p *positions) pushFront(st *convState) {
	st.prev, st.next = nil, p.head
	if p.head != nil {
		p.head.prev = st
	} else {
		p.tail = st
	}
	p.head = st
}

func (p *positions) unlink(st *convState) {
	if st.prev != nil {
		st.prev.next = st.next
	} else {
		p.head = st.next
	}
	if st.next != nil {
		st.next.prev = st.prev
	} else {
		p.tail = st.prev
	}
	st.prev, st.next = nil, nil
}

func (p *positions) toFront(st *convState) {
	if p.head != st {
		p.unlink(st)
		p.pushFront(st)
	}
}

// remove forgets st.
func (p *positions) remove(st *convState) {
	p.unlink(st)
	delete(p.byName, st.name)
	p.size -= st.size
}
