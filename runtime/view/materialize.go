package view

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tokens"
)

// Stages are the materialize stages, in the order they run. A test pins
// this list against pipeline and against the specification's table.
var Stages = []string{"clear-cut", "agent-history", "turn-context", "media", "checkpoint", "preflight", "admission"}

// pipeline registers each stage's function; its order is the run order.
var pipeline = []struct {
	name string
	run  func(*build) error
}{
	{"clear-cut", clearCut},
	{"agent-history", agentHistory},
	{"turn-context", turnContext},
	{"media", media},
	{"checkpoint", checkpoint},
	{"preflight", preflight},
	{"admission", admission},
}

// Checkpoint triggers.
const (
	TriggerManual    = "manual"     // /compact
	TriggerAuto      = "auto"       // a measured request at or past the mark
	TriggerSafetyNet = "safety-net" // the in-run safety net pruned last time
	TriggerOverflow  = "overflow"   // the provider overflowed or answered empty
	TriggerAdmission = "admission"  // the built view did not fit the ceiling
)

// build is the state the stages hand along. Stages read rows and write
// entries; no stage changes a Row.
type build struct {
	in    Input // by value: one allocation with the build
	count func(string) int
	tools map[string]bool // of the tools the view's pointers name, those offered (toolSets: never written)

	cp      *Checkpoint // in force (nil after a clear that it predates)
	planned *Checkpoint // planned this turn

	old  []Row  // rows at or before cp.Evicted: only pins are read from them
	rows []Row  // rows after it
	vis  []*Row // rows the agent history keeps
	// visAt are their indices in rows, with a memo: its kept entries and
	// history are pointed at its rows again by index when its rows move.
	visAt []int32
	// pinnedVis are the indices in vis of its pinned rows, in order: a
	// turn's late pins look at them, not at the whole history.
	pinnedVis []int32

	due    string    // the trigger of a checkpoint due this turn
	cur    []Section // this turn's runtime context (nil: none this turn)
	warned bool

	base    []entry // rows as payloads, before any checkpoint (from vis[baseFrom])
	entries []entry // the view
	size    int
	sized   bool // size rests on a measurement

	reports   []StageReport
	ptrTokens int // estimated tokens of one pointer

	// With a memo: how many leading rows of b.rows the memo had already,
	// the last build's snapshot when this build extends it (base then
	// starts at vis[baseFrom]), and renderContexts' state before this
	// turn's own context, for the next build.
	kept     int
	dropped  int // rows agent-history dropped
	reuse    *snapshot
	baseFrom int
	ctxEnd   ctxState
	nmsg     int // messages of the kept entries, in the memo's array; -1: not kept
}

// entry is one message of the view under construction.
//
// A memo keeps a chat's entries from turn to turn, so an entry holds only
// what its row does not: the row's kind, calls, call id, sections and
// reasoning are read from the row (the collector marks every pointer an
// entry keeps, on every cycle, for every chat in memory).
type entry struct {
	row    *Row   // nil for the head and for this turn's context
	text   string // the row's text, or what the view shows instead
	parts  []provider.Part
	tokens int // text, calls and parts, without the per-message overhead
	// at is row's index in build.rows with a memo (it fits where the
	// flags leave room).
	at       int32
	head     bool // the cards and pins message
	current  bool // this turn's runtime context (its sections: build.cur)
	masked   bool
	folded   bool
	noReason bool // the row's reasoning is not replayed (a rewritten prefix)
}

// kind is the kind of the entry's row; the head is a user message.
func (e *entry) kind() Kind {
	switch {
	case e.row != nil:
		return e.row.Kind
	case e.current:
		return KindContext
	}
	return KindUser
}

// role is the role the entry's message is sent with: runtime context goes
// to the model as a system message (the runtime speaks, not the person;
// adapters with one instruction turn it into text in place).
func (e *entry) role() string {
	switch e.kind() {
	case KindUser:
		return provider.RoleUser
	case KindAssistant:
		return provider.RoleAssistant
	case KindTool:
		return provider.RoleTool
	case KindContext:
		return provider.RoleSystem
	}
	return ""
}

// calls are an assistant row's tool calls.
func (e *entry) calls() []provider.ToolCall {
	if e.row != nil && e.row.Kind == KindAssistant {
		return e.row.ToolCalls
	}
	return nil
}

// callID is the call a tool row answers.
func (e *entry) callID() string {
	if e.row != nil && e.row.Kind == KindTool {
		return e.row.ToolCallID
	}
	return ""
}

// reasoning is the row's reasoning to replay with its message.
func (e *entry) reasoning() string {
	if e.row == nil || e.noReason || e.row.Kind == KindContext {
		return ""
	}
	return e.row.Reasoning
}

// sections are a context entry's sections: its row's, or this turn's.
func (b *build) sections(e *entry) []Section {
	if e.row != nil {
		return e.row.Sections
	}
	if e.current {
		return b.cur
	}
	return nil
}

// sent reports whether the entry becomes a message: a context row with
// nothing new sends nothing.
func (e *entry) sent() bool { return e.text != "" || len(e.calls()) > 0 || len(e.parts) > 0 }

// historyTokens is the view's size without the fixed overhead.
func historyTokens(es []entry) int {
	n, k := sums(es)
	return n + tokens.Overhead(k)
}

// entriesTokens is historyTokens(b.entries), counting only the entries
// past the last view's when b.entries extends it (the memo kept their sum).
func (b *build) entriesTokens() int {
	s := b.reuse
	if s == nil {
		return historyTokens(b.entries)
	}
	n, k := sums(b.entries[len(s.entries):])
	return s.tokens + n + tokens.Overhead(s.sent+k)
}

// sums is the tokens of the entries sent, and how many are sent.
func sums(es []entry) (n, k int) {
	for i := range es {
		if es[i].sent() {
			n += es[i].tokens
			k++
		}
	}
	return n, k
}

// toolSets are the sets of the tools the view's pointers name (ToolOutput,
// GlobalSearch) a roster can offer, shared and never written: a build
// reads only those two, and needs no map of its own.
var toolSets = [4]map[string]bool{{}, {ToolOutput: true}, {GlobalSearch: true}, {ToolOutput: true, GlobalSearch: true}}

// offered is the set of toolSets roster offers.
func offered(roster []string) map[string]bool {
	k := 0
	for _, t := range roster {
		switch t {
		case ToolOutput:
			k |= 1
		case GlobalSearch:
			k |= 2
		}
	}
	return toolSets[k]
}

// Materialize builds this turn's view from the stored rows and the
// checkpoint in force, planning a new checkpoint when one is due. It fails
// only with a *BudgetError, when no checkpoint can make the request fit.
// When admission refuses, the View is still the one built (over the
// ceiling): a one-off request of a boundary may trim it further with
// SafetyNet, and is refused when that does not fit it either.
func Materialize(in Input) (View, error) {
	b := &build{in: in, count: in.Count, cp: in.Checkpoint, reports: make([]StageReport, 0, len(pipeline))} // one report a stage
	if b.count == nil {
		b.count = tokens.Count
	}
	b.tools = offered(in.Roster)
	if m := in.Memo; m != nil {
		// One build at a time: a build reads and extends the memo's rows
		// and entries.
		m.mu.Lock()
		defer m.mu.Unlock()
	}
	for _, s := range pipeline {
		if err := s.run(b); err != nil {
			if s.name == "admission" {
				return b.view(), err
			}
			return View{Stages: b.reports}, err
		}
	}
	v := b.viewKept()
	b.keep()
	return v, nil
}

// report records what a stage did. note is written with the note helpers
// below rather than fmt: a view is built every turn and its seven notes,
// each boxing its numbers for fmt, were a tenth of a build's allocations.
func (b *build) report(stage string, rows, toks int, note string) {
	b.reports = append(b.reports, StageReport{Stage: stage, Rows: rows, Tokens: toks, Note: note})
}

// active is the checkpoint the view is built with.
func (b *build) active() *Checkpoint {
	if b.planned != nil {
		return b.planned
	}
	return b.cp
}

func epochOf(cp *Checkpoint) uint64 {
	if cp == nil {
		return 0
	}
	return cp.Epoch
}

// measured reports whether the last measurement speaks for this view: it was
// billed for the same epoch, model, system prompt and tools.
func (b *build) measured() bool {
	m := b.in.Measured
	return m.Tokens > 0 && m.Epoch == epochOf(b.cp) && m.Basis == b.in.Basis && b.planned == nil
}

// corrected is a local estimate as the provider is expected to bill it.
func (b *build) corrected(n int) int {
	if b.in.Correct == nil {
		return n
	}
	return b.in.Correct.Correct(b.in.Basis.Model, n)
}

// clearCut drops the latest /clear and everything before it, and splits
// off the rows the checkpoint in force evicted.
func clearCut(b *build) error {
	rows := b.in.Rows
	var floor uint64
	if b.cp != nil {
		floor = b.cp.Evicted
	}
	start, clearSeq := b.scanClear(floor)
	note := "no clear"
	if clearSeq > 0 {
		note = fmt.Sprintf("cut at clear m%d", clearSeq)
		if b.cp != nil && b.cp.AtSeq < clearSeq {
			b.cp, floor = nil, 0
			note += "; the checkpoint in force predates it and is dropped"
		}
	}
	rest := rows[start:]
	k := sort.Search(len(rest), func(i int) bool { return rest[i].Seq > floor })
	b.old, b.rows = rest[:k], rest[k:]
	if m := b.in.Memo; m != nil {
		// The memo's rows from here on (the caller's, handed AppendOnly,
		// or its copies): equal by value to what it read last time, which
		// the entries it keeps point at.
		b.rows, b.kept = m.sync(b.rows, b.in.AppendOnly)
	}
	b.report("clear-cut", len(b.rows), -1, clearCutNote(note, len(b.old), floor))
	return nil
}

// scanClear finds the latest /clear among the rows after floor: where
// the rows after it start, and its seq (0, 0: none). Rows at or before
// the evicted seq were cut by the checkpoint already (it was planned
// after any clear among them), so the scan stops there and a turn costs
// only what came after it. Rows handed AppendOnly where the memo's last
// scan read are read only past it.
func (b *build) scanClear(floor uint64) (int, uint64) {
	rows, m := b.in.Rows, b.in.Memo
	var last *clearScan
	if m != nil {
		last = &m.scan
		if !b.in.AppendOnly || len(rows) == 0 {
			*last = clearScan{}
			last = nil
		}
	}
	stop := 0
	if last != nil && last.base == &rows[0] && last.n <= len(rows) && last.floor == floor {
		stop = last.n
	}
	start, clearSeq, i := 0, uint64(0), len(rows)-1
	for ; i >= stop && rows[i].Seq > floor; i-- {
		if rows[i].Kind == KindClear {
			start, clearSeq = i+1, rows[i].Seq
			break
		}
	}
	if clearSeq == 0 && i < stop && stop > 0 {
		// Every row past the last scan was read: what it found stands.
		start, clearSeq = last.start, last.clearSeq
	}
	if last != nil {
		*last = clearScan{base: &rows[0], n: len(rows), floor: floor, start: start, clearSeq: clearSeq}
	}
	return start, clearSeq
}

// agentHistory keeps the rows that carry something for the model: it drops
// empty silent rows and tool results whose call is not in the view (a
// provider refuses an orphan result).
func agentHistory(b *build) error {
	var calls map[string]bool
	from, dropped := 0, 0
	if k := b.keptRows(); k != nil {
		// The rows the last build kept are all here: its history stands,
		// and goes on in the memo's array.
		b.vis, b.visAt, from, dropped = k.vis[:k.nvis], k.visAt[:k.nvis], k.nrows, k.dropped
		b.pinnedVis = k.pinnedVis[:k.npinned]
	} else {
		calls = map[string]bool{}
		n := b.room(len(b.rows))
		b.vis = make([]*Row, 0, n)
		if b.in.Memo != nil {
			b.visAt = make([]int32, 0, n)
		}
	}
	for i := from; i < len(b.rows); i++ {
		r := &b.rows[i]
		switch r.Kind {
		case KindAssistant:
			if r.Text == "" && len(r.ToolCalls) == 0 {
				dropped++
				continue
			}
			if calls != nil {
				for _, c := range r.ToolCalls {
					calls[c.ID] = true
				}
			}
		case KindTool:
			if !b.called(calls, r.ToolCallID) {
				dropped++
				continue
			}
		case KindUser:
			if r.Text == "" && len(r.Parts) == 0 { // a photo without caption is a message
				dropped++
				continue
			}
		case KindContext:
		default:
			dropped++
			continue
		}
		if r.Pinned {
			b.pinnedVis = append(b.pinnedVis, int32(len(b.vis)))
		}
		b.vis = append(b.vis, r)
		if b.in.Memo != nil {
			b.visAt = append(b.visAt, int32(i))
		}
	}
	b.dropped = dropped
	b.report("agent-history", len(b.vis), -1, droppedNote(dropped))
	return nil
}

// called reports whether an assistant row before the ones kept so far
// asked for call id: from calls when the history was read from its start,
// else by looking back through it (a result follows its call closely).
func (b *build) called(calls map[string]bool, id string) bool {
	if calls != nil {
		return calls[id]
	}
	for i := len(b.vis) - 1; i >= 0; i-- {
		if r := b.vis[i]; r.Kind == KindAssistant {
			for _, c := range r.ToolCalls {
				if c.ID == id {
					return true
				}
			}
		}
	}
	return false
}

// turnContext decides this turn's runtime context: the caller's sections,
// the one-time checkpoint warning, and the late pins. The stored context
// rows of past turns stay where they are among the rows.
func turnContext(b *build) error {
	b.due = b.dueTrigger()
	if len(b.in.Context) == 0 {
		b.report("turn-context", len(b.vis), -1, noContextNote(b.due))
		return nil
	}
	cur := append([]Section(nil), b.in.Context...)
	m, bud := b.in.Measured, b.in.Budget
	if b.due == "" && b.measured() && m.Tokens >= bud.Warn && m.Tokens < bud.Mark && !b.warnedThisEpoch() {
		cur = append(cur, Section{Key: WarningKey, Text: warningText(m.Tokens, bud.Ceiling)})
		b.warned = true
	}
	if pins := b.latePins(b.cp); len(pins) > 0 {
		cur = append(cur, Section{Key: PinsKey, Text: b.pinsSection(pins)})
	}
	b.cur = cur
	b.report("turn-context", len(b.vis), -1, contextNote(len(cur), b.warned, b.due))
	return nil
}

// dueTrigger says why a checkpoint is due this turn, "" when none is. A
// checkpoint is scheduled from signals and provider measurements only; an
// estimate alone triggers one only in admission.
func (b *build) dueTrigger() string {
	s := b.in.Signals
	switch {
	case s.Compact:
		return TriggerManual
	case s.Overflow:
		return TriggerOverflow
	case s.Pruned:
		return TriggerSafetyNet
	case b.measured() && b.in.Measured.Tokens >= b.in.Budget.Mark:
		return TriggerAuto
	}
	return ""
}

// warnedThisEpoch reports whether a context row stored since the checkpoint
// in force already carries the warning.
func (b *build) warnedThisEpoch() bool {
	var since uint64
	if b.cp != nil {
		since = b.cp.AtSeq
	}
	for i := len(b.vis) - 1; i >= 0 && b.vis[i].Seq > since; i-- {
		if b.vis[i].Kind != KindContext {
			continue
		}
		for _, s := range b.vis[i].Sections {
			if s.Key == WarningKey && s.Text != "" {
				return true
			}
		}
	}
	return false
}

func warningText(measured, ceiling int) string {
	return fmt.Sprintf("# Context checkpoint ahead\n"+
		"The last request was %d tokens, %d%% of the %d-token request ceiling. At 85%% a checkpoint reshapes this view without a model: "+
		"old tool results become pointers to their tool_call_id, long answers keep their head and tail, and the oldest turns become short cards "+
		"that list files, commands, errors, requests and the last answer, not the reasons behind decisions. Pinned messages stay whole. "+
		"Save now what you will need with its reasons (memory, or ask the person to pin a message).",
		measured, measured*100/max(ceiling, 1), ceiling)
}

// media turns rows into model payloads. It is the seam where steer notes,
// invocation text, media rehydration and image downscaling belong; rows
// here are text, tool calls and a user row's attachments (passed on by
// reference: their bytes are read only when an adapter encodes them), so it
// maps them one to one.
func media(b *build) error {
	// When the last view's entries still hold (only rows were appended
	// since, under the same checkpoint), only the new rows are turned.
	if b.reuse = b.reusable(); b.reuse != nil {
		b.baseFrom = b.reuse.nvis
		b.in.Memo.hits++
	}
	b.payloads()
	b.report("media", b.baseFrom+len(b.base), -1, "")
	return nil
}

// room is the capacity for n entries of a view a memo keeps: the next
// views extend it in its array, which then grows only now and then.
func (b *build) room(n int) int {
	if b.in.Memo == nil {
		return n
	}
	return n + n/4 + 16
}

// payloads makes base: the rows of vis from baseFrom on, then this turn's
// runtime context.
func (b *build) payloads() {
	n := len(b.vis) - b.baseFrom + 1
	if b.baseFrom == 0 {
		n = b.room(n) // the view without a checkpoint is base itself
	}
	b.base = make([]entry, 0, n)
	for j, r := range b.vis[b.baseFrom:] {
		e := b.entryOf(r)
		if b.visAt != nil {
			e.at = b.visAt[b.baseFrom+j]
		}
		b.base = append(b.base, e)
	}
	if b.cur != nil {
		b.base = append(b.base, entry{current: true})
	}
}

// fullBase makes base whole again after media turned only the new rows:
// a re-plan reads every payload. b.entries stays as it is (it is whole),
// but is no longer the extension of the memo's.
func (b *build) fullBase() {
	if b.reuse == nil {
		return
	}
	b.reuse, b.baseFrom = nil, 0
	b.payloads()
}

func (b *build) entryOf(r *Row) entry {
	e := entry{row: r, text: r.Text, tokens: r.Tokens}
	switch r.Kind {
	case KindUser:
		e.parts = r.Parts
	case KindTool:
		// Parts a result brought back go right after the step's results
		// (withRecovered).
		e.parts = r.Parts
	case KindContext:
		// Its text depends on the context shown before it
		// (renderContexts).
		e.text = ""
		return e
	}
	if e.tokens == 0 {
		e.tokens = b.count(r.Text)
		for _, c := range r.ToolCalls {
			e.tokens += b.count(c.Name) + b.count(c.Arguments)
		}
	}
	// Attachments join the message's count, so the request's estimate
	// (which the per-model calibration corrects with the bill) carries
	// them, sized by the rule of the provider the view is for.
	e.tokens += provider.PartsTokens(b.in.Provider, e.parts)
	return e
}

// checkpoint applies the checkpoint in force and, when one is due, plans a
// new one and rebuilds the view with it.
func checkpoint(b *build) error {
	switch {
	case b.reuse != nil:
		// The last view's entries, then the new rows' after them, in the
		// memo's array past the kept ones (no view shows those slots).
		s := b.reuse
		b.entries = b.applyRows(s.entries, b.base, b.cp)
		b.ctxEnd = b.renderContexts(b.entries, len(s.entries), s.ctx, b.cp)
	case b.cp == nil:
		// Without a checkpoint the view is the payloads as they are: render
		// the context entries in place rather than copy every entry (a
		// replan copies from base, and renders every context entry again).
		b.ctxEnd = b.renderContexts(b.base, 0, ctxState{first: true}, nil)
		b.entries = b.base
	default:
		b.entries = b.apply(b.cp)
	}
	before := b.entriesTokens()
	after, note := before, ""
	if b.due != "" {
		note = b.replan(b.due)
		after = b.entriesTokens()
	} else {
		note = notDueNote(epochOf(b.cp))
	}
	b.report("checkpoint", len(b.entries), after, checkpointNote(before, note))
	return nil
}

// replan plans a checkpoint and, when it planned one, rebuilds the view.
func (b *build) replan(trigger string) string {
	b.fullBase() // a plan reads every payload
	cp, note := b.plan(trigger)
	if cp == nil {
		return note
	}
	b.planned = cp
	// The new checkpoint keeps every pin whole and makes the warning moot.
	if b.cur != nil {
		cur := b.cur[:0:0]
		for _, s := range b.cur {
			if s.Key != WarningKey && s.Key != PinsKey {
				cur = append(cur, s)
			}
		}
		b.cur, b.warned = cur, false // the current entry's sections
	}
	b.entries = b.apply(cp)
	cp.After = historyTokens(b.entries)
	return note
}

// preflight refuses a turn that no checkpoint could fit: the fixed
// overhead, the cards and pins, and the active turn alone exceed the ceiling.
func preflight(b *build) error {
	a := activeStart(b.entries)
	// The head (the cards and pins) can only open the view; the rest is
	// the active turn, so a long history is not walked for it.
	n, k := sums(b.entries[a:])
	if a > 0 && b.entries[0].head && b.entries[0].sent() {
		n += b.entries[0].tokens
		k++
	}
	least := b.corrected(b.in.Overhead + n + tokens.Overhead(k))
	ceil := b.in.Budget.Ceiling
	b.report("preflight", len(b.entries)-a, least, preflightNote(least, ceil))
	if least > ceil {
		return &BudgetError{Stage: "preflight", Size: least, Limit: ceil,
			Hint: "the current turn alone, with the system prompt and tools, cannot fit and no checkpoint can shrink it; " +
				"send a shorter message or split it, start a /new chat, or choose a larger context limit"}
	}
	return nil
}

// admission sizes the request, measured-or-estimated, against the ceiling;
// a view that does not fit and took no checkpoint takes one now.
func admission(b *build) error {
	ceil := b.in.Budget.Ceiling
	b.size, b.sized = b.sizeNow()
	note := ""
	if b.size > ceil && b.planned == nil {
		note = "over the ceiling: " + b.replan(TriggerAdmission) + "; "
		b.size, b.sized = b.sizeNow()
	}
	b.report("admission", len(b.entries), b.size, admissionNote(note, b.size, b.sized, ceil))
	if b.size > ceil {
		return &BudgetError{Stage: "admission", Size: b.size, Limit: ceil,
			Hint: "a checkpoint could not bring the view under it; send /compact, start a /new chat, unpin large messages, or choose a larger context limit"}
	}
	return nil
}

// sizeNow is the request's size: the last measurement plus the messages
// after it when the measurement speaks for this view, else the estimate.
func (b *build) sizeNow() (int, bool) {
	if !b.measured() {
		return b.corrected(b.in.Overhead + b.entriesTokens()), false
	}
	m := b.in.Measured
	n, k := 0, 0
	for i := len(b.entries) - 1; i >= 0; i-- {
		e := &b.entries[i]
		if e.head || (e.row != nil && e.row.Seq <= m.Seq) {
			break
		}
		if e.sent() {
			n += e.tokens
			k++
		}
	}
	return m.Tokens + b.corrected(n+k*tokens.MessageOverhead), true
}

func (b *build) view() View {
	v := View{Checkpoint: b.planned, Epoch: epochOf(b.active()), Size: b.size, Measured: b.sized, Warned: b.warned, Stages: b.reports}
	// The lead and the messages in one array: the request is then the
	// view as it is, not a copy of it behind the system prompt.
	lead := len(b.in.Lead)
	req := append(make([]provider.Message, 0, lead+len(b.entries)), b.in.Lead...)
	v.Messages = req[lead:]
	v.Reasoning = make([]string, 0, len(b.entries))
	for i := range b.entries {
		e := &b.entries[i]
		if !e.sent() {
			continue
		}
		m, reasoning := message(e)
		v.Messages = append(v.Messages, m)
		v.Reasoning = append(v.Reasoning, reasoning)
		if e.current {
			v.Context, v.ContextTokens = b.cur, e.tokens
		}
	}
	n := len(v.Messages)
	v.Messages, v.Reasoning = withRecovered(b.in.Provider, v.Messages, v.Reasoning)
	if b.in.Lead != nil {
		if len(v.Messages) == n { // still in req's array, right after the lead
			v.Request = req[:lead+n]
		} else {
			v.Request = append(req[:lead:lead], v.Messages...)
			v.Messages = v.Request[lead:]
		}
	}
	return v
}

// apply builds the view from the payloads and a checkpoint: the cards and
// pins first, then the rows after the evicted seq with the masked and folded
// ones shortened, then the runtime context rendered against what is shown.
func (b *build) apply(cp *Checkpoint) []entry {
	out := make([]entry, 0, b.room(len(b.base)+1))
	if cp != nil && (len(cp.Cards) > 0 || len(cp.Pinned) > 0) {
		out = append(out, b.headEntry(cp))
	}
	out = b.applyRows(out, b.base, cp)
	b.ctxEnd = b.renderContexts(out, 0, ctxState{first: true}, cp)
	return out
}

// applyRows appends the payloads es to out as cp shows them: evicted rows
// left out, the masked and folded ones shortened, older reasoning dropped.
func (b *build) applyRows(out, es []entry, cp *Checkpoint) []entry {
	if cp == nil {
		return append(out, es...)
	}
	// Only a row at or before the newest cut can be cut; the maps are made
	// when one is met (a turn's new rows come after every cut).
	var last uint64
	for _, cs := range [][]Cut{cp.Masked, cp.Folded} {
		for _, c := range cs {
			last = max(last, c.Seq)
		}
	}
	for _, s := range cp.MaskedImages {
		last = max(last, s)
	}
	var masked, folded map[uint64]Cut
	var images map[uint64]bool
	for _, e := range es {
		if e.row != nil {
			if e.row.Seq <= cp.Evicted {
				continue
			}
			if e.row.Seq <= last {
				if masked == nil {
					masked, folded, images = cutMap(cp.Masked), cutMap(cp.Folded), seqSet(cp.MaskedImages)
				}
				if c, ok := masked[e.row.Seq]; ok {
					e = b.mask(e, c.Tokens)
				} else if c, ok := folded[e.row.Seq]; ok {
					e = b.fold(e, c.Tokens)
				} else if images[e.row.Seq] {
					e = b.maskImages(e)
				}
			}
			if e.row.Seq <= cp.AtSeq {
				e.noReason = true // a rewritten prefix invalidates signed reasoning
			}
		}
		out = append(out, e)
	}
	return out
}

func cutMap(cs []Cut) map[uint64]Cut {
	m := make(map[uint64]Cut, len(cs))
	for _, c := range cs {
		m[c.Seq] = c
	}
	return m
}

// renderContexts renders each context entry of es[from:] against the
// context shown before it: the first shown in whole, the others as
// updates. st is where es[:from] left off; it returns where the entries
// before this turn's own context leave off.
func (b *build) renderContexts(es []entry, from int, st ctxState, cp *Checkpoint) ctxState {
	prev, first, k := st.prev, st.first, st.k
	end := ctxState{}
	ended := false
	m := b.in.Memo // its lock is held by Materialize
	for i := from; i < len(es); i++ {
		e := &es[i]
		if e.current && !ended {
			end, ended = ctxState{prev: prev, first: first, k: k}, true
		}
		if e.kind() != KindContext {
			continue
		}
		sections := b.sections(e)
		if m != nil {
			e.text = m.render(k, prev, sections, first)
		} else {
			e.text = renderContext(prev, sections, first)
		}
		k++
		// A stored count is of the text rendered when the row was stored;
		// the first context after an eviction renders whole instead.
		rebased := first && cp != nil && cp.Evicted > 0
		switch {
		case e.text == "":
			e.tokens = 0
		case e.row != nil && e.row.Tokens > 0 && !rebased:
			e.tokens = e.row.Tokens
		default:
			e.tokens = b.count(e.text)
		}
		prev, first = sections, false
	}
	if !ended {
		end = ctxState{prev: prev, first: first, k: k}
	}
	return end
}

// activeStart is the index of the active turn's first user row: the last
// user row, moved back to the first user row of the same Turn when rows
// name their turn (a steer mid-turn is a user row of the same turn).
func activeStart(es []entry) int {
	last := -1
	for i := len(es) - 1; i >= 0; i-- {
		if es[i].row != nil && es[i].row.Kind == KindUser {
			last = i
			break
		}
	}
	if last < 0 {
		return len(es)
	}
	turn := es[last].row.Turn
	if turn == "" {
		return last
	}
	for i := last - 1; i >= 0; i-- {
		r := es[i].row
		if r == nil || (r.Turn != turn && r.Kind != KindContext) {
			break
		}
		if r.Kind == KindUser {
			last = i
		}
	}
	return last
}

// The notes of the stages, as fmt wrote them (the replay's goldens hold
// them): "%s; %d rows at or before evicted m%d" and the like, with %q as
// strconv.Quote and %v of a bool as strconv.FormatBool.

func clearCutNote(note string, old int, floor uint64) string {
	return note + "; " + strconv.Itoa(old) + " rows at or before evicted m" + strconv.FormatUint(floor, 10)
}

func contextNote(sections int, warned bool, due string) string {
	return strconv.Itoa(sections) + " sections; warned " + strconv.FormatBool(warned) + "; due " + strconv.Quote(due)
}

func checkpointNote(before int, note string) string {
	return "history " + strconv.Itoa(before) + " before; " + note
}

func preflightNote(least, ceil int) string {
	return "least possible request " + strconv.Itoa(least) + " of ceiling " + strconv.Itoa(ceil)
}

func admissionNote(note string, size int, measured bool, ceil int) string {
	return note + "size " + strconv.Itoa(size) + " (measured " + strconv.FormatBool(measured) + ") of ceiling " + strconv.Itoa(ceil)
}

func droppedNote(dropped int) string { return strconv.Itoa(dropped) + " rows dropped" }

func noContextNote(due string) string {
	return "no runtime context this turn; due " + strconv.Quote(due)
}

func notDueNote(epoch uint64) string {
	return "epoch " + strconv.FormatUint(epoch, 10) + "; no checkpoint due"
}
