package boundary

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tools"
)

// Tool names.
const (
	ToolHandoffUpdate  = "handoff_update"
	ToolConsolidate    = "consolidate"
	ToolRecallHistory  = "recall_history"
	ToolHandoffHistory = "handoff_history"
)

// Bounds of what the assistant may write: the record must stay a page, and
// Objective and Next action are never dropped from the continuity message,
// so they must fit inside any sensible budget.
const (
	maxText      = 2000 // runes of Objective, Next action, a reason
	maxItem      = 1000 // runes of one list item or step
	maxItems     = 100  // items of one list
	maxQuery     = 500  // runes of a recall_history query
	maxRecall    = 50   // hits recall_history may ask for
	defaultLimit = 5
	maxArgs      = 1 << 20 // bytes of raw arguments read at all
)

// Argument errors are *tools.ArgError, so errors.Is(err,
// tools.ErrInvalidArguments) tells a bad call here as for every other tool,
// and the model gets every problem at once.

func compact(s string) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		panic("boundary: bad tool schema: " + err.Error())
	}
	return b.Bytes()
}

const listSchema = `{"type": "array", "maxItems": 100, "items": {"type": "string", "minLength": 1, "maxLength": 1000}`

// HandoffUpdateTool is the handoff_update definition: the assistant's half
// of the handoff, set in its own words. Fields given replace, omitted ones
// stay.
var HandoffUpdateTool = provider.Tool{
	Name: ToolHandoffUpdate,
	Description: "Write down where the work stands, in your own words, so the work can carry on after this " +
		"conversation is consolidated and cleared. Fields you give replace what was there; fields you " +
		"omit stay as they were; an empty list clears one. Keep it current after each step.",
	Parameters: compact(`{
		"type": "object",
		"additionalProperties": false,
		"properties": {
			"objective": {"type": "string", "maxLength": 2000, "description": "what the work is for"},
			"constraints": ` + listSchema + `, "description": "rules the work must keep"},
			"done": ` + listSchema + `, "description": "what is finished"},
			"steps": {"type": "array", "maxItems": 100, "description": "the plan, each step with where it stands",
				"items": {"type": "object", "additionalProperties": false, "required": ["state", "text"],
					"properties": {
						"state": {"type": "string", "enum": ["done", "in progress", "pending"]},
						"text": {"type": "string", "minLength": 1, "maxLength": 1000}}}},
			"remaining": ` + listSchema + `, "description": "what is left to do; empty when nothing is"},
			"blocked": ` + listSchema + `, "description": "what waits on someone else, and on whom"},
			"next_action": {"type": "string", "maxLength": 2000, "description": "the very next thing to do; empty when nothing is"}
		}
	}`),
}

// update is a parsed handoff_update: nil fields were omitted.
type update struct {
	objective, nextAction                 *string
	constraints, done, remaining, blocked *[]string
	steps                                 *[]Step
}

// ApplyUpdate applies handoff_update arguments to h: fields given replace,
// omitted (or null) fields stay, an empty list or "" clears. Bad arguments
// return a *tools.ArgError naming every problem, and change nothing. The
// caller sets h.JudgedSeq to the call's seq when it succeeds.
func ApplyUpdate(h *Handoff, args json.RawMessage) error {
	u, err := parseUpdate(args)
	if err != nil {
		return err
	}
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = strings.TrimSpace(*v)
		}
	}
	setList := func(dst *[]string, v *[]string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&h.Objective, u.objective)
	set(&h.NextAction, u.nextAction)
	setList(&h.Constraints, u.constraints)
	setList(&h.Done, u.done)
	setList(&h.Remaining, u.remaining)
	setList(&h.Blocked, u.blocked)
	if u.steps != nil {
		h.Steps = *u.steps
	}
	return nil
}

func parseUpdate(raw json.RawMessage) (*update, error) {
	p := newArgs(ToolHandoffUpdate, raw, "objective", "constraints", "done", "steps", "remaining", "blocked", "next_action")
	if p.obj != nil && len(p.obj) == 0 {
		p.problem("no fields given; give at least one of: " + strings.Join(p.known, ", "))
	}
	u := &update{
		objective:   p.text("objective", 0, maxText),
		nextAction:  p.text("next_action", 0, maxText),
		constraints: p.list("constraints"),
		done:        p.list("done"),
		remaining:   p.list("remaining"),
		blocked:     p.list("blocked"),
		steps:       p.steps("steps"),
	}
	return u, p.err()
}

// ConsolidateTool is the consolidate definition: the assistant decides a
// boundary at any size, and whether the work then continues or stops.
var ConsolidateTool = provider.Tool{
	Name: ToolConsolidate,
	Description: "End this conversation at a clean point: the handoff you wrote with handoff_update is kept, " +
		"what you learned is saved to memory, the conversation is archived (searchable with recall_history) " +
		"and cleared. With continue true the work carries on at once in the fresh conversation from the " +
		"handoff; with false the work is finished and nothing starts until the person speaks. Bring the " +
		"handoff up to date first.",
	Parameters: compact(`{
		"type": "object",
		"additionalProperties": false,
		"required": ["continue", "reason"],
		"properties": {
			"continue": {"type": "boolean", "description": "true: carry on from the handoff; false: the work is finished"},
			"reason": {"type": "string", "minLength": 1, "maxLength": 2000, "description": "why now, in a sentence"}
		}
	}`),
}

// Consolidate is a parsed consolidate call.
type Consolidate struct {
	Continue bool
	Reason   string
}

// ParseConsolidate reads consolidate arguments; errors are *tools.ArgError.
func ParseConsolidate(raw json.RawMessage) (Consolidate, error) {
	p := newArgs(ToolConsolidate, raw, "continue", "reason")
	c := p.boolean("continue", true)
	r := p.text("reason", 1, maxText)
	if err := p.err(); err != nil {
		return Consolidate{}, err
	}
	return Consolidate{Continue: *c, Reason: strings.TrimSpace(*r)}, nil
}

// RecallHistoryTool is the recall_history definition: search what past
// conversations of this chat said, archived at their boundaries.
var RecallHistoryTool = provider.Tool{
	Name: ToolRecallHistory,
	Description: "Search what earlier conversations of this chat said, archived when they were consolidated. " +
		"Returns the best matching messages with the event each came from.",
	Parameters: compact(`{
		"type": "object",
		"additionalProperties": false,
		"required": ["query"],
		"properties": {
			"query": {"type": "string", "minLength": 1, "maxLength": 500, "description": "words to look for"},
			"limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "most results to return (default 5)"}
		}
	}`),
}

// Recall is a parsed recall_history call.
type Recall struct {
	Query string
	Limit int // 1..50, default 5
}

// ParseRecall reads recall_history arguments; errors are *tools.ArgError.
func ParseRecall(raw json.RawMessage) (Recall, error) {
	return parseRecall(ToolRecallHistory, raw, maxRecall, defaultLimit)
}

// parseRecall reads the arguments recall_history and recall_memory share:
// a query with at least one word to search for, and a limit of 1..most
// (def when left out).
func parseRecall(tool string, raw []byte, most int64, def int) (Recall, error) {
	p := newArgs(tool, raw, "query", "limit")
	q := p.text("query", 1, maxQuery)
	l := p.integer("limit", 1, most)
	if err := p.err(); err != nil {
		return Recall{}, err
	}
	r := Recall{Query: strings.TrimSpace(*q), Limit: def}
	if l != nil {
		r.Limit = int(*l)
	}
	if len(Terms(r.Query)) == 0 {
		return Recall{}, &tools.ArgError{Tool: tool, Problems: []string{
			`argument "query" has no word to search for (only punctuation or common words such as "the")`}}
	}
	return r, nil
}

// HandoffHistoryTool is the handoff_history definition: list the handoffs
// past boundaries wrote, or read one back.
var HandoffHistoryTool = provider.Tool{
	Name: ToolHandoffHistory,
	Description: "Without arguments, list the handoffs written at this chat's boundaries, including the latest. " +
		`With {"boundary": n}, read handoff n back in full.`,
	Parameters: compact(`{
		"type": "object",
		"additionalProperties": false,
		"properties": {
			"boundary": {"type": "integer", "minimum": 1, "description": "the number of the boundary to read, from the list"}
		}
	}`),
}

// ParseHandoffHistory reads handoff_history arguments: 0 means list, n ≥ 1
// means read boundary n. Errors are *tools.ArgError.
func ParseHandoffHistory(raw json.RawMessage) (uint64, error) {
	p := newArgs(ToolHandoffHistory, raw, "boundary")
	n := p.integer("boundary", 1, math.MaxInt64)
	if err := p.err(); err != nil {
		return 0, err
	}
	if n == nil {
		return 0, nil
	}
	return uint64(*n), nil
}

// Tools are the definitions this package offers a turn, in a fixed order
// so the request bytes stay the same turn after turn.
func Tools() []provider.Tool {
	return []provider.Tool{HandoffUpdateTool, ConsolidateTool, RecallHistoryTool, HandoffHistoryTool, TaskListTool}
}

// ForcedAsk is the request the runtime sends once per conversation when it
// reaches hard and the assistant has not said where the work stood. Send it
// as the last message with only ForcedAskTools offered, so the only answer
// is a call: what it writes stands. When it does not answer that way, the
// boundary goes ahead with the handoff kept along the way.
const ForcedAsk = "The conversation has reached its hard limit. It will now be written down, archived and " +
	"cleared, and the work will carry on from what you write. Call `handoff_update` now with where the work " +
	"stands: the objective, what is done, the steps and where each stands, what remains, what is blocked, and " +
	"the next action. Then call `consolidate`: continue true if work remains, false if the work is finished. " +
	"Do nothing else."

// ForcedAskMessage is ForcedAsk as a user message (runtime context, not the
// person's words: the record stores it as such).
func ForcedAskMessage() provider.Message {
	return provider.Message{Role: provider.RoleUser, Content: ForcedAsk}
}

// ForcedAskTools are the only tools offered with the forced ask.
func ForcedAskTools() []provider.Tool {
	return []provider.Tool{HandoffUpdateTool, ConsolidateTool}
}

// args reads one call's JSON object, collecting every problem.
type args struct {
	tool     string
	known    []string
	obj      map[string]json.RawMessage
	problems []string
}

func newArgs(tool string, raw json.RawMessage, known ...string) *args {
	p := &args{tool: tool, known: known}
	if len(raw) > maxArgs {
		p.problem(fmt.Sprintf("the arguments are %d bytes, more than the %d allowed", len(raw), maxArgs))
		return p
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		p.problem("the arguments are not valid JSON: " + jsonProblem(err))
		return p
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		p.problem("the arguments have more after the JSON object; send one object")
		return p
	}
	if err := json.Unmarshal(v, &p.obj); err != nil || p.obj == nil {
		p.obj = nil
		p.problem("the arguments must be a JSON object, not " + kind(v))
		return p
	}
	names := make([]string, 0, len(p.obj))
	for name := range p.obj {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !contains(known, name) {
			p.problem(fmt.Sprintf("unknown argument %s (arguments: %s)", quote(name), strings.Join(known, ", ")))
		}
	}
	return p
}

func (p *args) problem(s string) { p.problems = append(p.problems, s) }

func (p *args) err() error {
	if len(p.problems) == 0 {
		return nil
	}
	return &tools.ArgError{Tool: p.tool, Problems: p.problems}
}

// value returns the raw value of name, or nil when it was omitted or null
// (null for an optional argument means "not given", as strict mode sends).
func (p *args) value(name string, required bool) json.RawMessage {
	v, ok := p.obj[name]
	if !ok || string(bytes.TrimSpace(v)) == "null" {
		if required && p.obj != nil {
			p.problem(fmt.Sprintf("argument %s is required", quote(name)))
		}
		return nil
	}
	return v
}

func (p *args) text(name string, minLen, maxLen int) *string {
	v := p.value(name, minLen > 0)
	if v == nil {
		return nil
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		p.problem(fmt.Sprintf("argument %s must be a string, not %s", quote(name), kind(v)))
		return nil
	}
	if msg := textProblem(s, minLen, maxLen); msg != "" {
		p.problem(fmt.Sprintf("argument %s %s", quote(name), msg))
		return nil
	}
	return &s
}

func textProblem(s string, minLen, maxLen int) string {
	n := utf8.RuneCountInString(s)
	switch {
	case minLen > 0 && strings.TrimSpace(s) == "":
		return "must not be empty"
	case n > maxLen:
		return fmt.Sprintf("is %d characters long, more than the %d allowed", n, maxLen)
	}
	return ""
}

func (p *args) boolean(name string, required bool) *bool {
	v := p.value(name, required)
	if v == nil {
		return nil
	}
	var b bool
	if json.Unmarshal(v, &b) != nil {
		p.problem(fmt.Sprintf("argument %s must be true or false, not %s", quote(name), kind(v)))
		return nil
	}
	return &b
}

func (p *args) integer(name string, lo, hi int64) *int64 {
	v := p.value(name, false)
	if v == nil {
		return nil
	}
	var n json.Number
	// A quoted "5" would decode into a json.Number too; it is a string.
	if kind(v) != "a number" || json.Unmarshal(v, &n) != nil {
		p.problem(fmt.Sprintf("argument %s must be a whole number, not %s", quote(name), kind(v)))
		return nil
	}
	i, ok := wholeNumber(n)
	switch {
	case !ok:
		p.problem(fmt.Sprintf("argument %s must be a whole number, not %s", quote(name), trim(n.String(), 24)))
		return nil
	case i < lo:
		p.problem(fmt.Sprintf("argument %s must be at least %d, not %d", quote(name), lo, i))
		return nil
	case i > hi:
		p.problem(fmt.Sprintf("argument %s must be at most %d, not %d", quote(name), hi, i))
		return nil
	}
	return &i
}

// list reads a list of non-empty strings; items are trimmed.
func (p *args) list(name string) *[]string {
	items, ok := p.array(name)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(items))
	bad := false
	for i, raw := range items {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			p.problem(fmt.Sprintf("argument %s item %d must be a string, not %s", quote(name), i+1, kind(raw)))
			bad = true
			continue
		}
		if msg := textProblem(s, 1, maxItem); msg != "" {
			p.problem(fmt.Sprintf("argument %s item %d %s", quote(name), i+1, msg))
			bad = true
			continue
		}
		out = append(out, strings.TrimSpace(s))
	}
	if bad {
		return nil
	}
	return &out
}

func (p *args) array(name string) ([]json.RawMessage, bool) {
	v := p.value(name, false)
	if v == nil {
		return nil, false
	}
	var items []json.RawMessage
	if json.Unmarshal(v, &items) != nil || items == nil {
		p.problem(fmt.Sprintf("argument %s must be a list, not %s", quote(name), kind(v)))
		return nil, false
	}
	if len(items) > maxItems {
		p.problem(fmt.Sprintf("argument %s has %d items, more than the %d allowed", quote(name), len(items), maxItems))
		return nil, false
	}
	return items, true
}

// steps reads the handoff's steps list. States are read leniently
// ("In_Progress" is "in progress"): the meaning is plain, and refusing it
// would only cost the model another call.
func (p *args) steps(name string) *[]Step {
	out, ok := p.stepList(name, handoffSteps)
	if !ok {
		return nil
	}
	return &out
}

// stepVocab is how one tool words a step: the key of its state, how a
// state is read (a step state, "" when it is none), and the words for
// messages. handoff_update says state done|in progress|pending;
// task_list, as coding assistants do, status completed|in_progress|pending.
type stepVocab struct {
	key, fields, allowed, example string
	state                         func(string) string
}

var handoffSteps = stepVocab{key: "state", fields: "state, text", state: stepState,
	allowed: `"done", "in progress" or "pending"`, example: `{"state": "pending", "text": "..."}`}

// stepList reads the list name of step objects worded as v: every item
// an object of text and v.key. ok is false when anything was wrong (each
// problem named on p).
func (p *args) stepList(name string, v stepVocab) (out []Step, ok bool) {
	items, ok := p.array(name)
	if !ok {
		return nil, false
	}
	out = make([]Step, 0, len(items))
	bad := false
	for i, raw := range items {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil || obj == nil {
			p.problem(fmt.Sprintf(`argument %s item %d must be an object such as %s, not %s`, quote(name), i+1, v.example, kind(raw)))
			bad = true
			continue
		}
		sub := &args{tool: p.tool, obj: obj}
		for _, k := range sortedKeys(obj) {
			if k != v.key && k != "text" {
				sub.problem(fmt.Sprintf("has unknown field %s (fields: %s)", quote(k), v.fields))
			}
		}
		var st Step
		if s := sub.text(v.key, 1, 40); s != nil {
			if st.State = v.state(*s); st.State == "" {
				sub.problem(fmt.Sprintf(`argument %s must be %s, not %s`, quote(v.key), v.allowed, quote(*s)))
			}
		}
		if s := sub.text("text", 1, maxItem); s != nil {
			st.Text = strings.TrimSpace(*s)
		}
		for _, prob := range sub.problems {
			p.problem(fmt.Sprintf("argument %s item %d: %s", quote(name), i+1, prob))
			bad = true
		}
		if len(sub.problems) == 0 {
			out = append(out, st)
		}
	}
	return out, !bad
}

func stepState(s string) string {
	s = strings.ToLower(strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return r == ' ' || r == '_' || r == '-'
	}), " "))
	switch s {
	case StepDone, StepInProgress, StepPending:
		return s
	case "inprogress":
		return StepInProgress
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// wholeNumber reads an integer as JSON Schema defines it: 3 and 3.0 are
// integers, 3.5 and 1e400 are not.
func wholeNumber(n json.Number) (int64, bool) {
	if i, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
		return i, true
	}
	f, err := strconv.ParseFloat(n.String(), 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}

// kind names the JSON type of a raw value, never the value itself.
func kind(raw json.RawMessage) string {
	s := bytes.TrimSpace(raw)
	if len(s) == 0 {
		return "nothing"
	}
	switch s[0] {
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	case '"':
		return "a string"
	case '[':
		return "a list"
	case '{':
		return "an object"
	}
	return "a number"
}

// jsonProblem is the decoder's message without Go type names.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s (at byte %d)", se.Error(), se.Offset)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "it ends too early"
	}
	return "it cannot be read"
}

// quote shows a name the model sent, bounded, as a Go-quoted string.
func quote(s string) string { return strconv.Quote(trim(s, 64)) }

// trim shortens s to at most n runes, marking the cut.
func trim(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
