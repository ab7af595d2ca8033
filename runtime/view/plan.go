package view

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/mirror-gateway/mirror/runtime/tokens"
)

// Planner limits.
const (
	// maskMin is what masking a tool result must save, or it stays whole.
	maskMin = 64
	// An answer is folded when longer than foldMin runes, to its first
	// foldHead and last foldTail runes.
	foldMin  = 3000
	foldHead = 1200
	foldTail = 600
	// PinMaxChars caps each message of the late "# Pinned messages" section.
	PinMaxChars = 4000
)

// Tools the pointers cite, when the roster offers them.
const (
	ToolOutput   = "tool_output"
	GlobalSearch = "global_search"
)

// plan re-plans the view from b.entries (the checkpoint in force applied):
// mask old tool results, fold long answers, and only if still above the
// target evict the oldest whole turns into a card. It starts from the
// checkpoint in force, so nothing evicted comes back. It returns nil when
// the history is already within the target.
func (b *build) plan(trigger string) (*Checkpoint, string) {
	prev := b.cp
	target := b.in.Budget.Target(b.in.Overhead)
	before := historyTokens(b.entries)
	if before <= target {
		return nil, fmt.Sprintf("%s: history %d within target %d, left whole", trigger, before, target)
	}
	cp := &Checkpoint{Epoch: epochOf(prev) + 1, Trigger: trigger, Before: before, Target: target}
	if trigger == TriggerManual {
		cp.Instructions = b.in.Signals.Instructions
	}
	if n := len(b.rows); n > 0 {
		cp.AtSeq = b.rows[n-1].Seq
	}
	pinned := map[uint64]bool{}
	for _, r := range b.vis {
		if r.Pinned {
			pinned[r.Seq] = true
		}
	}
	if prev != nil {
		cp.AtSeq = max(cp.AtSeq, prev.AtSeq)
		cp.Evicted = prev.Evicted
		cp.Cards = append([]Card(nil), prev.Cards...)
		// A pin brings a masked or folded row back whole.
		for _, c := range prev.Masked {
			if !pinned[c.Seq] {
				cp.Masked = append(cp.Masked, c)
			}
		}
		for _, c := range prev.Folded {
			if !pinned[c.Seq] {
				cp.Folded = append(cp.Folded, c)
			}
		}
		for _, s := range prev.MaskedImages {
			if !pinned[s] {
				cp.MaskedImages = append(cp.MaskedImages, s)
			}
		}
		// Evicted rows pinned now stay verbatim after the cards; unpinned
		// ones go back to being cards only.
		for _, r := range b.pinnedOld() {
			cp.Pinned = append(cp.Pinned, r.Seq)
		}
	}
	work := b.apply(cp)
	size := historyTokens(work)
	tail := b.tailStart(work)

	masked := b.maskPass(cp, work, tail, &size, target)
	images := b.imagePass(cp, work, tail, &size, target)
	folded := b.foldPass(cp, work, tail, &size, target)
	note := fmt.Sprintf("%s: history %d over target %d; masked %d, folded %d", trigger, before, target, masked, folded)
	if images > 0 {
		note += fmt.Sprintf(", images masked in %d messages", images)
	}
	if size > target {
		note += b.evict(cp, work, size, target, min(tail, activeStart(work)))
	}
	// Only rows still shown need their cut remembered, and counted.
	cp.Masked = keepAfter(cp.Masked, cp.Evicted)
	cp.Folded = keepAfter(cp.Folded, cp.Evicted)
	cp.MaskedImages = seqsAfter(cp.MaskedImages, cp.Evicted)
	b.settle(cp, work)
	sort.Slice(cp.Pinned, func(i, j int) bool { return cp.Pinned[i] < cp.Pinned[j] })
	if len(cp.Cards) > 0 || len(cp.Pinned) > 0 {
		cp.HeadTokens = b.count(b.headText(cp))
	}
	cp.Reason = note
	return cp, note
}

// maskPass masks tool results before the tail, oldest first, until size
// is within target, and records them in cp. Pinned rows stay whole.
func (b *build) maskPass(cp *Checkpoint, work []entry, tail int, size *int, target int) int {
	n := 0
	for i := 0; i < tail && *size > target; i++ {
		e := &work[i]
		if e.row == nil || e.row.Kind != KindTool || e.masked || e.row.Pinned {
			continue
		}
		m := b.mask(*e, b.estimate(len(e.row.ToolCallID)*2+len(e.row.ToolName)+len(e.row.MessageID())))
		if e.tokens-m.tokens < maskMin {
			continue
		}
		*size -= e.tokens - m.tokens
		cp.Masked = append(cp.Masked, Cut{Seq: e.row.Seq}) // counted in settle, if it stays in view
		*e = m
		n++
	}
	return n
}

// foldPass folds long answers (assistant text without tool calls) before
// the tail, oldest first, until size is within target.
func (b *build) foldPass(cp *Checkpoint, work []entry, tail int, size *int, target int) int {
	n := 0
	for i := 0; i < tail && *size > target; i++ {
		e := &work[i]
		if e.row == nil || e.row.Kind != KindAssistant || len(e.row.ToolCalls) > 0 || e.folded || e.masked || e.row.Pinned ||
			len(e.text) <= foldMin || len([]rune(e.text)) <= foldMin {
			continue
		}
		f := b.fold(*e, 0) // folds are few: counted now
		if f.tokens >= e.tokens {
			continue
		}
		*size -= e.tokens - f.tokens
		cp.Folded = append(cp.Folded, Cut{Seq: e.row.Seq, Tokens: f.tokens})
		*e = f
		n++
	}
	return n
}

// estimate is what a pointer is likely to cost before it is counted, on
// the high side: most masks of a long history are evicted right after, so
// counting each would be wasted. vars is the bytes of its variable parts
// (ids, tool name), counted again on top of the template's own.
func (b *build) estimate(vars int) int {
	if b.ptrTokens == 0 {
		// Every pointer has the same shape; one count gives its size.
		b.ptrTokens = b.count(fmt.Sprintf("[Tool result m1000 cleared from this view at a checkpoint: shell call call_1000, 1000 tokens. "+
			`Get it back with %s {"tool_call_id": "call_1000"}.]`, ToolOutput))
	}
	return b.ptrTokens + vars/2
}

// settle counts the pointers the plan keeps in view, for their
// Cut.Tokens: the estimate chose them; the count sizes them.
func (b *build) settle(cp *Checkpoint, work []entry) {
	if len(cp.Masked) == 0 && len(cp.Folded) == 0 {
		return
	}
	at := make(map[uint64]*entry, len(work))
	for i := range work {
		if work[i].row != nil && work[i].row.Seq > cp.Evicted {
			at[work[i].row.Seq] = &work[i]
		}
	}
	for _, cuts := range [][]Cut{cp.Masked, cp.Folded} {
		for i := range cuts {
			if cuts[i].Tokens != 0 {
				continue
			}
			if e := at[cuts[i].Seq]; e != nil {
				cuts[i].Tokens = b.count(e.text)
				e.tokens = cuts[i].Tokens
			}
		}
	}
}

func keepAfter(cs []Cut, evicted uint64) []Cut {
	out := cs[:0:0]
	for _, c := range cs {
		if c.Seq > evicted {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

// evict moves the cut forward to the first user row where enough is
// evicted to reach the target (allowing for the card), or to the last row it
// may cut at: never inside the protected tail or the active turn, and never
// between a tool call and its result.
func (b *build) evict(cp *Checkpoint, work []entry, size, target, limit int) string {
	start := 0
	if len(work) > 0 && work[0].head {
		start = 1
	}
	owner := map[string]int{}
	for i := start; i < len(work); i++ {
		for _, c := range work[i].calls() {
			owner[c.ID] = i
		}
	}
	valid := make([]bool, len(work)+1)
	minRef := len(work)
	for i := len(work) - 1; i > start; i-- {
		e := &work[i]
		if e.kind() == KindTool {
			if o, ok := owner[e.callID()]; ok && o < minRef {
				minRef = o
			}
		}
		valid[i] = i <= limit && e.row != nil && e.row.Kind == KindUser && minRef >= i
	}
	need := size - target + b.in.Budget.CardBudget(b.in.Overhead)
	cut, last, gain := 0, 0, 0
	for c := start + 1; c <= limit && c < len(work); c++ {
		e := &work[c-1]
		if e.sent() {
			gain += e.tokens + tokens.MessageOverhead
		}
		if e.row != nil && e.row.Pinned {
			gain -= e.tokens + 10 // kept verbatim after the cards, under a heading
		}
		if valid[c] {
			last = c
			if gain >= need {
				cut = c
				break
			}
		}
	}
	if cut == 0 {
		cut = last
	}
	if cut == 0 {
		return "; nothing evictable"
	}
	var rows []*Row
	for i := start; i < cut; i++ {
		if r := work[i].row; r != nil {
			rows = append(rows, r)
			cp.Evicted = max(cp.Evicted, r.Seq)
			if r.Pinned {
				cp.Pinned = append(cp.Pinned, r.Seq)
			}
		}
	}
	card := b.card(rows, cp.Epoch)
	cp.Cards = append(cp.Cards, card)
	b.degrade(cp.Cards, b.in.Budget.CardBudget(b.in.Overhead))
	return fmt.Sprintf("; evicted m%d–m%d into card %d", card.From, card.To, cp.Epoch)
}

// tailStart is the index where the protected tail begins: up to
// TailMessages recent messages within the budget's tail tokens.
func (b *build) tailStart(es []entry) int {
	n, t, i := 0, 0, len(es)
	for ; i > 0; i-- {
		e := &es[i-1]
		if e.head {
			break
		}
		if !e.sent() {
			continue
		}
		if n == 8 || t+e.tokens > b.in.Budget.TailTokens {
			break
		}
		n++
		t += e.tokens
	}
	return i
}

// mask shows a tool result as a pointer to its tool_call_id.
func (b *build) mask(e entry, toks int) entry {
	r := e.row
	name := r.ToolName
	if name == "" {
		name = "tool"
	}
	text := fmt.Sprintf("[Tool result %s cleared from this view at a checkpoint: %s call %s, %d tokens.",
		r.MessageID(), name, r.ToolCallID, e.tokens)
	if b.tools[ToolOutput] {
		text += fmt.Sprintf(` Get it back with %s {"tool_call_id": %q}.`, ToolOutput, r.ToolCallID)
	}
	text += "]"
	if toks == 0 {
		toks = b.count(text)
	}
	e.parts = nil // an image a result brought back goes with it
	if toks == 0 {
		toks = b.count(text)
	}
	e.text, e.tokens, e.masked = text, toks, true
	return e
}

// fold keeps an answer's head and tail and points at the whole of it.
func (b *build) fold(e entry, toks int) entry {
	rs := []rune(e.text)
	if len(rs) <= foldHead+foldTail {
		return e
	}
	ptr := "[… the middle of answer " + e.row.MessageID() + " is folded at a checkpoint"
	if b.tools[GlobalSearch] {
		ptr += fmt.Sprintf("; %s(around_message_id=%q) shows it whole", GlobalSearch, e.row.MessageID())
	}
	text := string(rs[:foldHead]) + "\n\n" + ptr + " …]\n\n" + string(rs[len(rs)-foldTail:])
	if toks == 0 {
		toks = b.count(text)
	}
	e.text, e.tokens, e.folded = text, toks, true
	return e
}

// pinnedOld returns the pinned rows among those evicted, back to the
// latest clear. The same evicted rows handed AppendOnly to a memo give
// the rows it found last time (not to be changed): a chat's turns under
// one checkpoint do not read its evicted rows each time.
func (b *build) pinnedOld() []*Row {
	m := b.in.Memo
	cache := m != nil && b.in.AppendOnly && len(b.old) > 0
	if cache && m.old.base == &b.old[0] && m.old.n == len(b.old) {
		return m.old.pins
	}
	var out []*Row
	for i := len(b.old) - 1; i >= 0; i-- {
		r := &b.old[i]
		if r.Kind == KindClear {
			break
		}
		if r.Pinned {
			out = append(out, r)
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	if cache {
		m.old = oldPins{base: &b.old[0], n: len(b.old), pins: out}
	}
	return out
}

// latePins returns the pinned rows cp shows only in part (masked, folded)
// or not at all (evicted, and not among its verbatim pins).
func (b *build) latePins(cp *Checkpoint) []*Row {
	if cp == nil {
		return nil
	}
	kept := map[uint64]bool{}
	for _, s := range cp.Pinned {
		kept[s] = true
	}
	var out []*Row
	for _, r := range b.pinnedOld() {
		if !kept[r.Seq] {
			out = append(out, r)
		}
	}
	if len(b.pinnedVis) == 0 || len(cp.Masked)+len(cp.Folded) == 0 {
		return out
	}
	cut := func(seq uint64) bool {
		at := func(c Cut) bool { return c.Seq == seq }
		return slices.ContainsFunc(cp.Masked, at) || slices.ContainsFunc(cp.Folded, at)
	}
	if len(b.pinnedVis) > 8 {
		// Many pins: the cuts are looked up, not read for each.
		m := cutMap(cp.Masked)
		for _, c := range cp.Folded {
			m[c.Seq] = c
		}
		cut = func(seq uint64) bool { _, ok := m[seq]; return ok }
	}
	for _, i := range b.pinnedVis {
		if r := b.vis[i]; cut(r.Seq) {
			out = append(out, r)
		}
	}
	return out
}

func (b *build) pinsSection(rows []*Row) string {
	var s strings.Builder
	s.WriteString("# Pinned messages\nThe person pinned these messages; the checkpoint in force shows them only in part or not at all. " +
		"Each is clipped to 4000 characters; attachments and tool output are not replayed.")
	for _, r := range rows {
		s.WriteString("\n\n" + pinHeading(r) + "\n" + clipMiddle(rowText(r), PinMaxChars))
	}
	return s.String()
}

func pinHeading(r *Row) string {
	switch r.Kind {
	case KindTool:
		return fmt.Sprintf("## %s · result of %s call %s", r.MessageID(), r.ToolName, r.ToolCallID)
	case KindAssistant:
		return "## " + r.MessageID() + " · assistant"
	}
	return "## " + r.MessageID() + " · " + string(r.Kind)
}

// rowText is a row's text, with its tool calls spelled out when it has any.
func rowText(r *Row) string {
	t := r.Text
	for _, c := range r.ToolCalls {
		if t != "" {
			t += "\n"
		}
		t += "→ " + c.Name + " " + c.Arguments
	}
	return t
}

// clipMiddle keeps at most n characters of s, its head and tail, saying
// how much of the middle it cut.
func clipMiddle(s string, n int) string {
	rs := []rune(s)
	if len(rs) <= n {
		return s
	}
	mark := fmt.Sprintf("\n[… %d characters cut …]\n", len(rs)-n)
	keep := max(n-len([]rune(mark)), 2)
	return string(rs[:keep/2]) + mark + string(rs[len(rs)-(keep-keep/2):])
}

// rowBySeq finds a row the view may cite: evicted rows first, then shown.
func (b *build) rowBySeq(seq uint64) *Row {
	if i := sort.Search(len(b.old), func(i int) bool { return b.old[i].Seq >= seq }); i < len(b.old) && b.old[i].Seq == seq {
		return &b.old[i]
	}
	if i := sort.Search(len(b.rows), func(i int) bool { return b.rows[i].Seq >= seq }); i < len(b.rows) && b.rows[i].Seq == seq {
		return &b.rows[i]
	}
	return nil
}

// headEntry is the message that opens a checkpointed view: the epoch cards,
// then the evicted pinned messages verbatim.
func (b *build) headEntry(cp *Checkpoint) entry {
	text := b.headText(cp)
	toks := cp.HeadTokens
	if toks == 0 {
		toks = b.count(text)
	}
	return entry{text: text, tokens: toks, head: true}
}

func (b *build) headText(cp *Checkpoint) string {
	var s strings.Builder
	fmt.Fprintf(&s, "# Earlier turns checkpointed\nTurns up to m%d are no longer in this view. The cards below list facts from them "+
		"(files, commands, errors, requests, the last answer), not the reasons behind decisions.", cp.Evicted)
	if b.tools[GlobalSearch] {
		fmt.Fprintf(&s, " %s(around_message_id=\"m%d\") shows the messages around any id cited here.", GlobalSearch, cp.Evicted)
	}
	for _, c := range cp.Cards {
		s.WriteString("\n\n" + c.render())
	}
	if len(cp.Pinned) > 0 {
		s.WriteString("\n\n# Pinned messages (kept whole)")
		for _, seq := range cp.Pinned {
			if r := b.rowBySeq(seq); r != nil {
				s.WriteString("\n\n" + pinHeading(r) + "\n" + rowText(r))
			} else {
				fmt.Fprintf(&s, "\n\n## m%d\n(not available)", seq)
			}
		}
	}
	return s.String()
}
