package view

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Card limits: a card lists facts, boundedly.
const (
	cardRequests = 10  // newest requests kept
	cardFiles    = 40  // files listed
	cardCommands = 20  // commands listed
	cardErrors   = 10  // errors listed
	clipRequest  = 300 // characters of a quoted request
	clipCommand  = 200 // characters of a command
	clipError    = 160 // characters of an error's first line
	clipAnswer   = 600 // characters of the last answer
)

// Card is a deterministic summary of the turns one checkpoint evicted. It
// lists facts, not the reasons behind decisions.
type Card struct {
	Epoch uint64 `json:"epoch"`
	From  uint64 `json:"from"` // first evicted seq
	To    uint64 `json:"to"`   // last evicted seq
	Turns int    `json:"turns"`
	// Requests are the person's requests, newest kept; OlderRequests counts
	// those left out.
	Requests      []Request `json:"requests,omitempty"`
	OlderRequests int       `json:"older_requests,omitempty"`
	Files         []string  `json:"files,omitempty"`    // paths from tool call arguments
	Commands      []string  `json:"commands,omitempty"` // shell commands run
	Errors        []string  `json:"errors,omitempty"`   // failed tool results, first line
	More          [3]int    `json:"more,omitempty"`     // files, commands, errors left out
	LastAnswer    string    `json:"last_answer,omitempty"`
	LastAnswerID  string    `json:"last_answer_id,omitempty"`
	// Level is how far the card degraded: 0 whole, 1 counts only, 2 a
	// one-line stub. Cards degrade oldest first when all of them exceed
	// 12 % of the target.
	Level int `json:"level,omitempty"`
}

// Request is one request a card quotes.
type Request struct {
	ID    string `json:"id"`
	Text  string `json:"text"`
	Label string `json:"label,omitempty"` // "assignment update" for a trusted amendment
}

// card summarizes rows (one eviction) as epoch's card.
func (b *build) card(rows []*Row, epoch uint64) Card {
	c := Card{Epoch: epoch, From: rows[0].Seq, To: rows[len(rows)-1].Seq}
	turns, users := map[string]bool{}, 0
	files, cmds := map[string]bool{}, map[string]bool{}
	var reqs []Request
	for _, r := range rows {
		if r.Turn != "" {
			turns[r.Turn] = true
		}
		switch r.Kind {
		case KindUser:
			users++
			switch r.Origin {
			case OriginWake: // ordinary runtime wakes are not requests
			case OriginAmendment:
				reqs = append(reqs, Request{ID: r.MessageID(), Text: oneLine(r.Text, clipRequest), Label: "assignment update"})
			default:
				reqs = append(reqs, Request{ID: r.MessageID(), Text: oneLine(r.Text, clipRequest)})
			}
		case KindAssistant:
			for _, call := range r.ToolCalls {
				p, cmd := callFacts(call.Arguments)
				for _, f := range p {
					if !files[f] {
						files[f] = true
						c.Files, c.More[0] = appendCapped(c.Files, f, cardFiles, c.More[0])
					}
				}
				if cmd != "" && !cmds[cmd] {
					cmds[cmd] = true
					c.Commands, c.More[1] = appendCapped(c.Commands, oneLine(cmd, clipCommand), cardCommands, c.More[1])
				}
			}
			if r.Text != "" {
				c.LastAnswer, c.LastAnswerID = clipMiddle(r.Text, clipAnswer), r.MessageID()
			}
		case KindTool:
			if r.IsError {
				e := fmt.Sprintf("%s %s: %s", r.MessageID(), r.ToolName, oneLine(r.Text, clipError))
				c.Errors, c.More[2] = appendCapped(c.Errors, e, cardErrors, c.More[2])
			}
		}
	}
	c.Turns = len(turns)
	if c.Turns == 0 {
		c.Turns = users
	}
	c.Requests, c.OlderRequests = shrinkRequests(reqs, cardRequests)
	return c
}

// shrinkRequests keeps at most n requests: every assignment update (a
// trusted change of the task), then the newest ordinary requests, in their
// order. It returns how many it left out.
func shrinkRequests(reqs []Request, n int) ([]Request, int) {
	if len(reqs) <= n {
		return reqs, 0
	}
	keep := make([]bool, len(reqs))
	room := n
	for i := len(reqs) - 1; i >= 0 && room > 0; i-- {
		if reqs[i].Label != "" {
			keep[i] = true
			room--
		}
	}
	for i := len(reqs) - 1; i >= 0 && room > 0; i-- {
		if !keep[i] {
			keep[i] = true
			room--
		}
	}
	var out []Request
	for i, r := range reqs {
		if keep[i] {
			out = append(out, r)
		}
	}
	return out, len(reqs) - len(out)
}

func appendCapped(list []string, s string, n, more int) ([]string, int) {
	if len(list) >= n {
		return list, more + 1
	}
	return append(list, s), more
}

// callFacts reads the paths and the shell command out of a tool call's
// JSON arguments, by the names tools commonly give them.
func callFacts(args string) (paths []string, command string) {
	var m map[string]any
	if json.Unmarshal([]byte(args), &m) != nil {
		return nil, ""
	}
	for _, k := range []string{"path", "file", "file_path", "filepath", "filename", "target_file", "paths", "files"} {
		paths = append(paths, strs(m[k])...)
	}
	for _, k := range []string{"command", "cmd", "script"} {
		if s := strs(m[k]); len(s) > 0 {
			return paths, strings.Join(s, " ")
		}
	}
	return paths, ""
}

func strs(v any) []string {
	switch v := v.(type) {
	case string:
		if v != "" {
			return []string{v}
		}
	case []any:
		var out []string
		for _, x := range v {
			if s, ok := x.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// oneLine is s's first line, clipped to n characters.
func oneLine(s string, n int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i]) + " …"
	}
	if rs := []rune(s); len(rs) > n {
		s = string(rs[:n-1]) + "…"
	}
	return s
}

// render is the card as the model reads it, at its level.
func (c *Card) render() string {
	var s strings.Builder
	fmt.Fprintf(&s, "## Epoch %d · m%d–m%d · %d turns", c.Epoch, c.From, c.To, c.Turns)
	switch c.Level {
	case 0:
	case 1:
		fmt.Fprintf(&s, "\n%d requests, %d files, %d commands, %d errors", len(c.Requests)+c.OlderRequests,
			len(c.Files)+c.More[0], len(c.Commands)+c.More[1], len(c.Errors)+c.More[2])
		if c.LastAnswerID != "" {
			s.WriteString("; last answer " + c.LastAnswerID)
		}
		s.WriteString(".")
		return s.String()
	default:
		s.WriteString(" (details dropped)")
		return s.String()
	}
	if len(c.Requests) > 0 {
		s.WriteString("\nRequests")
		if c.OlderRequests > 0 {
			fmt.Fprintf(&s, " (the newest %d; %d older not listed)", len(c.Requests), c.OlderRequests)
		}
		s.WriteString(":")
		for _, r := range c.Requests {
			if r.Label != "" {
				fmt.Fprintf(&s, "\n- %s (%s): %s", r.ID, r.Label, r.Text)
			} else {
				fmt.Fprintf(&s, "\n- %s: %s", r.ID, r.Text)
			}
		}
	}
	list := func(name string, items []string, more int, sep string) {
		if len(items) == 0 {
			return
		}
		s.WriteString("\n" + name + ":")
		if sep == ", " {
			s.WriteString(" " + strings.Join(items, sep))
		} else {
			for _, it := range items {
				s.WriteString("\n- " + it)
			}
		}
		if more > 0 {
			fmt.Fprintf(&s, " (+%d more)", more)
		}
	}
	list("Files", c.Files, c.More[0], ", ")
	list("Commands", c.Commands, c.More[1], "\n")
	list("Errors", c.Errors, c.More[2], "\n")
	if c.LastAnswerID != "" {
		fmt.Fprintf(&s, "\nLast answer (%s): %s", c.LastAnswerID, c.LastAnswer)
	}
	return s.String()
}

// degrade lowers cards, oldest first, until all of them fit limit tokens
// or all are stubs.
func (b *build) degrade(cards []Card, limit int) {
	total := 0
	for i := range cards {
		total += b.count(cards[i].render())
	}
	for i := 0; total > limit && i < len(cards); {
		if cards[i].Level >= 2 {
			i++
			continue
		}
		was := b.count(cards[i].render())
		cards[i].Level++
		total += b.count(cards[i].render()) - was
	}
}
