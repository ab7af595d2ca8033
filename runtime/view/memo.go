package view

import (
	"reflect"
	"slices"
	"sync"
	"unsafe"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// Memo keeps what building one conversation's view rendered, for the next
// view of the same conversation: between checkpoints the view is the last
// one plus a few rows, and rebuilding every entry and rendering every
// runtime-context row against the one before it again each turn cost time
// and garbage that grew with the chat. A hit is decided by value (the
// rows, the sections and the flag a text was rendered from, the
// checkpoint, the roster, the provider and the counter), never by
// position or identity alone (but for rows handed Input.AppendOnly, which
// the caller says it never changes in place), so a Memo never changes a
// byte of the view: a row that changed, moved or went simply renders
// afresh, and with it everything after it. The texts it returns are the
// ones it returned before, so the same message is the same string turn
// after turn (the request encoder's cache then compares it with what it
// kept in O(1), not by its bytes). The views' messages are written in two arrays of the
// memo in turn, an extended view copying only what it adds: a view's
// messages stay as built while the next view is built, and the build
// after that may write its array again (past what the views share), so
// a caller that keeps a view longer than its turn copies its messages.
// The zero Memo is ready; one Memo serves one conversation (it is safe
// for concurrent use).
type Memo struct {
	mu  sync.Mutex
	ctx []ctxMemo // by place among the view's context entries

	// rows are the rows the last view was built from (after its clear
	// and evicted seq): the caller's own when they were handed
	// AppendOnly, else the memo's copy (own), slices cloned so a caller
	// changing its rows in place cannot make a stale entry match; a build
	// with a memo reads these, so its entries point at them.
	rows []Row
	own  bool
	// src is where the caller's rows that m.rows holds begin, when they
	// were handed AppendOnly (nil otherwise): the same place, handed
	// AppendOnly again, holds the same rows.
	src *Row
	// scan is what clearCut found in the caller's rows last time, when
	// they were handed AppendOnly, and old the pinned rows among the
	// evicted ones (pinnedOld).
	scan clearScan
	old  oldPins
	last *snapshot // what the last build left; nil when nothing is kept
	hits int       // builds that extended the last one
	// compared counts the rows sync compared by value, for tests.
	compared int

	// bufs are the arrays the views' messages are written in, in turn
	// (viewKept); bufs[cur] holds the last view's, after lead.
	bufs [2]msgBuf
	cur  int
	lead []provider.Message
}

// Extended is how many builds extended the last view rather than build
// theirs afresh: for tests and diagnostics (it changes nothing).
func (m *Memo) Extended() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hits
}

// snapshot is a finished view's entries and what they were built from:
// the next build extends them when only rows were appended since.
type snapshot struct {
	nrows int  // memo rows the entries cover
	base  *Row // &rows[0] then: the entries point into that array
	nvis  int  // rows the agent history kept of them
	// vis are those rows and visAt their indices (the arrays past nvis
	// belong to the memo), and dropped how many it dropped.
	vis     []*Row
	visAt   []int32
	dropped int
	// pinnedVis are the indices of vis's pinned rows (the array past
	// npinned belongs to the memo).
	pinnedVis []int32
	npinned   int
	cp        *Checkpoint
	pins      []Row // the evicted rows cp.Pinned names, as the head showed them
	npins     []bool
	// Key: what else an entry depends on.
	roster   []string
	provider string
	count    func(string) int // held, so its address names it while kept
	// entries are the view's entries but this turn's own context; the
	// array past them belongs to the memo (the next build writes there).
	entries []entry
	ctx     ctxState // renderContexts' state after entries
	tokens  int      // historyTokens' sum over entries (without overhead)
	sent    int      // entries sent
	nmsg    int      // the messages entries sent, in the memo's bufs[cur]; -1: none kept
}

// ctxState is where renderContexts is among the context entries.
type ctxState struct {
	prev  []Section
	first bool
	k     int // context entries seen
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

// clearScan is where clearCut found the latest clear in the first n
// rows of the array at base, reading back to floor.
type clearScan struct {
	base     *Row
	n        int
	floor    uint64
	start    int
	clearSeq uint64
}

// oldPins are the pinned rows pinnedOld found among the n evicted rows
// at base, handed AppendOnly.
type oldPins struct {
	base *Row
	n    int
	pins []*Row
}

// sync makes m.rows the rows a build reads and returns it, with how many
// leading rows were already there, equal by value. Rows handed appendOnly
// are the caller's own, not copied: the caller never changes them (nor
// what their slices hold), so they are as good as a copy, and a chat's
// history is not held twice over (the collector marks each copy on every
// cycle). Other rows are copied into the memo's own array: a row that
// differs and every one after it are copied anew. Rows handed appendOnly
// where the last rows were handed so are those rows (the caller says so),
// and are not compared. m.mu is held.
func (m *Memo) sync(rows []Row, appendOnly bool) ([]Row, int) {
	n := 0
	if len(rows) > 0 && m.src == &rows[0] && appendOnly && len(m.rows) <= len(rows) {
		n = len(m.rows)
	}
	from := n
	for n < len(rows) && n < len(m.rows) && sameRow(&m.rows[n], &rows[n]) {
		n++
	}
	m.compared += n - from
	m.src = nil
	if appendOnly && len(rows) > 0 {
		m.src = &rows[0]
	}
	kept := n
	if m.last != nil && n < m.last.nrows {
		// Rows the kept entries were built from are rewritten: whatever
		// this build does (it may fail), they no longer hold.
		m.last = nil
	}
	if appendOnly {
		// The kept entries point at the rows they were built from, equal
		// to these by value: they follow them here (rebase).
		m.rows, m.own = rows, false
		return m.rows, kept
	}
	if !m.own {
		// The rows read last are the caller's: copied, never written.
		m.rows, m.own = append(make([]Row, 0, len(rows)), m.rows[:n]...), true
	}
	// Cleared past n first: a stale copy must not keep its slices alive.
	clear(m.rows[n:])
	m.rows = m.rows[:n]
	for i := n; i < len(rows); i++ {
		m.rows = append(m.rows, cloneRow(rows[i]))
	}
	return m.rows, kept
}

func cloneRow(r Row) Row {
	r.ToolCalls = slices.Clone(r.ToolCalls)
	r.Sections = slices.Clone(r.Sections)
	r.Parts = slices.Clone(r.Parts)
	return r
}

// sameRow compares two rows field by field. Strings that share their bytes
// compare at once, so a row the caller kept costs a few words to check.
func sameRow(a, b *Row) bool {
	return a.Seq == b.Seq && a.ID == b.ID && a.Kind == b.Kind && a.Turn == b.Turn && a.Text == b.Text &&
		a.ToolCallID == b.ToolCallID && a.ToolName == b.ToolName && a.IsError == b.IsError && a.Tokens == b.Tokens &&
		a.Reasoning == b.Reasoning && a.Pinned == b.Pinned && a.Origin == b.Origin &&
		(a.ToolCalls == nil) == (b.ToolCalls == nil) && slices.Equal(a.ToolCalls, b.ToolCalls) &&
		(a.Sections == nil) == (b.Sections == nil) && slices.Equal(a.Sections, b.Sections) &&
		(a.Parts == nil) == (b.Parts == nil) && slices.EqualFunc(a.Parts, b.Parts, samePart)
}

// samePart compares two parts by value, their Source (what gives the
// bytes) included: a view passes it on to the adapter that sends them.
func samePart(a, b provider.Part) bool {
	sa, sb := a.Source, b.Source
	a.Source, b.Source = nil, nil
	return a == b && reflect.DeepEqual(sa, sb)
}

// sameFunc reports whether f and g are the same func value (the same
// closure), which is what a count func kept by its caller is turn after
// turn; two closures of equal code but other state are not the same.
func sameFunc(f, g func(string) int) bool {
	return *(*unsafe.Pointer)(unsafe.Pointer(&f)) == *(*unsafe.Pointer)(unsafe.Pointer(&g))
}

// sameCheckpoint compares two checkpoints by value, field by field
// (reflect.DeepEqual cost more than the rest of a turn's view under a
// checkpoint with many cuts). An empty list is the same as none: the
// view reads them by length.
func sameCheckpoint(a, b *Checkpoint) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Epoch == b.Epoch && a.AtSeq == b.AtSeq && a.Evicted == b.Evicted && slices.EqualFunc(a.Cards, b.Cards, sameCard) &&
		slices.Equal(a.Masked, b.Masked) && slices.Equal(a.Folded, b.Folded) && slices.Equal(a.Pinned, b.Pinned) &&
		slices.Equal(a.MaskedImages, b.MaskedImages) && a.Trigger == b.Trigger && a.Instructions == b.Instructions &&
		a.Before == b.Before && a.After == b.After && a.Target == b.Target && a.HeadTokens == b.HeadTokens && a.Reason == b.Reason
}

func sameCard(a, b Card) bool {
	return a.Epoch == b.Epoch && a.From == b.From && a.To == b.To && a.Turns == b.Turns && slices.Equal(a.Requests, b.Requests) &&
		a.OlderRequests == b.OlderRequests && slices.Equal(a.Files, b.Files) && slices.Equal(a.Commands, b.Commands) &&
		slices.Equal(a.Errors, b.Errors) && a.More == b.More && a.LastAnswer == b.LastAnswer && a.LastAnswerID == b.LastAnswerID &&
		a.Level == b.Level
}

// reusable is the last build's snapshot when this build may extend it:
// every row it covered is still there, equal, at the same address, and
// everything else an entry depends on is the same. No checkpoint is due
// (a re-plan reads every payload anyway).
func (b *build) reusable() *snapshot {
	if b.due != "" {
		return nil
	}
	s := b.keptRows()
	if s == nil || len(b.vis) < s.nvis ||
		s.provider != b.in.Provider || !sameFunc(s.count, b.count) || !slices.Equal(s.roster, b.in.Roster) ||
		!sameCheckpoint(s.cp, b.cp) || !b.samePins(s) {
		return nil
	}
	return s
}

// keptRows is the last build's snapshot when every row it was built from
// is still here (the agent history it read then stands), pointed at the
// memo's rows where they are now; nil otherwise.
func (b *build) keptRows() *snapshot {
	m := b.in.Memo
	if m == nil || m.last == nil || len(b.rows) == 0 || b.kept < m.last.nrows {
		return nil
	}
	s := m.last
	if s.base != &b.rows[0] {
		s.rebase(b.rows)
	}
	return s
}

// rebase points s's rows and entries at rows, the memo's rows after
// they moved to another array (a larger one, the caller's, a copy: their
// values are the same, sync kept them), by the indices they keep; the
// old array is then let go.
func (s *snapshot) rebase(rows []Row) {
	for i, at := range s.visAt[:s.nvis] {
		s.vis[i] = &rows[at]
	}
	for i := range s.entries {
		if e := &s.entries[i]; e.row != nil {
			e.row = &rows[e.at]
		}
	}
	s.base = &rows[0]
}

// samePins reports whether the rows the head quotes whole (the checkpoint's
// evicted pins, read from the rows the memo does not copy) are what they
// were when s was kept.
func (b *build) samePins(s *snapshot) bool {
	if s.cp == nil {
		return true
	}
	for i, seq := range s.cp.Pinned {
		r := b.rowBySeq(seq)
		if (r != nil) != s.npins[i] || r != nil && !sameRow(r, &s.pins[i]) {
			return false
		}
	}
	return true
}

// keep leaves this build's entries in the memo for the next build to
// extend: all but this turn's own context, which the next view shows as
// a stored row instead.
func (b *build) keep() {
	m := b.in.Memo
	if m == nil {
		return
	}
	old := m.last
	m.last = nil
	if len(b.rows) == 0 {
		return
	}
	es := b.entries
	if n := len(es); n > 0 && es[n-1].current {
		es = es[:n-1]
	}
	cp := b.active()
	s := &snapshot{nrows: len(b.rows), base: &b.rows[0], nvis: len(b.vis), vis: b.vis, visAt: b.visAt, dropped: b.dropped, entries: es,
		ctx: b.ctxEnd, provider: b.in.Provider, count: b.count, nmsg: b.nmsg, pinnedVis: b.pinnedVis, npinned: len(b.pinnedVis)}
	// The key's copies are made again only when it changed; a build
	// that extended the last one found it the same already.
	extended := old != nil && b.reuse == old
	if extended || old != nil && sameCheckpoint(old.cp, cp) {
		s.cp = old.cp
	} else {
		s.cp = cloneCheckpoint(cp)
	}
	if extended || old != nil && slices.Equal(old.roster, b.in.Roster) {
		s.roster = old.roster
	} else {
		s.roster = slices.Clone(b.in.Roster)
	}
	if extended {
		s.pins, s.npins = old.pins, old.npins
	} else if cp != nil && len(cp.Pinned) > 0 {
		s.pins, s.npins = make([]Row, len(cp.Pinned)), make([]bool, len(cp.Pinned))
		for i, seq := range cp.Pinned {
			if r := b.rowBySeq(seq); r != nil {
				s.pins[i], s.npins[i] = cloneRow(*r), true
			}
		}
	}
	if r := b.reuse; r != nil {
		// The kept entries are the last view's, their sums kept with them.
		n, k := sums(es[len(r.entries):])
		s.tokens, s.sent = r.tokens+n, r.sent+k
	} else {
		s.tokens, s.sent = sums(es)
	}
	m.last = s
}

// cloneCheckpoint is a copy of cp that shares no slice with it.
func cloneCheckpoint(cp *Checkpoint) *Checkpoint {
	if cp == nil {
		return nil
	}
	c := *cp
	c.Cards = slices.Clone(cp.Cards)
	for i := range c.Cards {
		k := &c.Cards[i]
		k.Requests, k.Files = slices.Clone(k.Requests), slices.Clone(k.Files)
		k.Commands, k.Errors = slices.Clone(k.Commands), slices.Clone(k.Errors)
	}
	c.Masked, c.Folded = slices.Clone(cp.Masked), slices.Clone(cp.Folded)
	c.Pinned, c.MaskedImages = slices.Clone(cp.Pinned), slices.Clone(cp.MaskedImages)
	return &c
}
