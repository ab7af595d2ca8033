package view

import (
	"slices"
	"sync"
)

// Memo keeps what building one conversation's view rendered, for the next
// view of the same conversation: between checkpoints the view is the last
// one plus a few rows, and rendering every runtime-context row against the
// one before it again each turn cost time and garbage that grew with the
// chat. A hit is decided by value (the sections and the flag a text was
// rendered from), never by position or identity alone, so a Memo never
// changes a byte of the view: a row that changed, moved or went simply
// renders afresh. The texts it returns are the ones it returned before,
// so the same message is the same string turn after turn (the request
// encoder's cache then compares it with what it kept in O(1), not by its
// bytes). The zero Memo is ready; one Memo serves one conversation (it is
// safe for concurrent use).
type Memo struct {
	mu  sync.Mutex
	ctx []ctxMemo // by place among the view's context entries
}

// ctxMemo is one context entry as rendered: from copies of the sections
// (a caller changing its slices later cannot make a stale text match).
type ctxMemo struct {
	prev, cur []Section
	first     bool
	text      string
}

// render is renderContext(prev, cur, first) for the k-th context entry of
// a view, from m when the k-th entry rendered last had the same inputs.
// m.mu is held.
func (m *Memo) render(k int, prev, cur []Section, first bool) string {
	if k < len(m.ctx) {
		c := &m.ctx[k]
		if c.first == first && slices.Equal(c.prev, prev) && slices.Equal(c.cur, cur) {
			return c.text
		}
	}
	text := renderContext(prev, cur, first)
	c := ctxMemo{prev: slices.Clone(prev), cur: slices.Clone(cur), first: first, text: text}
	if k < len(m.ctx) {
		m.ctx[k] = c
	} else {
		// Entries past k are of another view shape now; they are
		// overwritten as the build goes on.
		m.ctx = append(m.ctx[:k], c)
	}
	return text
}
