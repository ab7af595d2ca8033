package boundary

import (
	"fmt"
	"strings"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// Note is one thing a conversation taught, as reflect wrote it.
type Note struct {
	Title string
	Body  string
}

// reflectSystem asks for what was learned, not where the work stands: the
// handoff holds that, and reflect is independent of it.
const reflectSystem = `You read a conversation between a person and an assistant that is about to be archived and cleared. Write down what it taught that is worth remembering in later conversations: facts about the person, their projects and preferences, decisions and their reasons, how things turned out to work, mistakes to avoid. Do not write where the work stands or what is left to do; a separate record keeps that.

Answer in markdown, one note per "## " heading: a short title on the heading line, then the note in a few plain sentences or a short list. Each note must make sense on its own, read months later. Leave out secrets such as keys, passwords and tokens.

If nothing is worth remembering, answer exactly: NOTHING`

// nothing is the answer that means no notes.
const nothing = "NOTHING"

// ReflectPrompt is the request of the separate model turn (role reflect)
// that reads the conversation and writes what it taught as notes: a system
// message saying what to write and one user message holding the transcript,
// each row headed by its event (its seq in the chat's record) and role. A
// Doc with no seq (text that is no one row, such as the cards of evicted
// turns) is headed by its role alone: never a made-up "event 0".
func ReflectPrompt(transcript []Doc) []provider.Message {
	var b strings.Builder
	b.WriteString("The conversation, oldest first:\n")
	for _, d := range transcript {
		if d.Seq == 0 {
			fmt.Fprintf(&b, "\n[%s]\n%s\n", d.Role, strings.TrimSpace(d.Text))
			continue
		}
		fmt.Fprintf(&b, "\n[event %d, %s]\n%s\n", d.Seq, d.Role, strings.TrimSpace(d.Text))
	}
	b.WriteString("\nWrite the notes now.")
	return []provider.Message{
		{Role: provider.RoleSystem, Content: reflectSystem},
		{Role: provider.RoleUser, Content: b.String()},
	}
}

// ParseNotes splits reflect's answer into notes, one per "## " heading. It
// is tolerant of what models do: a whole answer in a code fence is
// unwrapped; a "# " title line above the notes and a one-line introduction
// ("Here is what I learned:") are dropped, while a longer text before the
// first heading is kept as a note of its own; an answer without headings is
// one note titled by its first line. NOTHING, or an empty answer, is no
// notes. Notes with neither title nor body are skipped.
func ParseNotes(text string) []Note {
	text = unfence(strings.TrimSpace(strings.ReplaceAll(text, "\r\n", "\n")))
	if text == "" || strings.EqualFold(strings.Trim(text, " .*`"), nothing) {
		return nil
	}
	var notes []Note
	var pre []string
	var cur *Note
	var body []string
	flush := func() {
		if cur != nil {
			cur.Body = strings.TrimSpace(strings.Join(body, "\n"))
			if cur.Title != "" || cur.Body != "" {
				if cur.Title == "" {
					cur.Title = firstLine(cur.Body)
				}
				notes = append(notes, *cur)
			}
		}
		body = nil
	}
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
		}
		if !inFence && strings.HasPrefix(line, "## ") {
			flush()
			cur = &Note{Title: strings.TrimSpace(strings.Trim(strings.TrimSpace(line[3:]), "#"))}
			continue
		}
		if cur == nil {
			pre = append(pre, line)
		} else {
			body = append(body, line)
		}
	}
	flush()
	preamble := strings.TrimSpace(strings.Join(pre, "\n"))
	if strings.HasPrefix(preamble, "# ") && !strings.Contains(preamble, "\n") && len(notes) > 0 {
		preamble = "" // a title above the notes
	}
	if preamble != "" && (len(notes) == 0 || strings.Contains(preamble, "\n")) {
		// A plain answer, or a real text before the headings: keep it.
		title := strings.TrimSpace(strings.TrimLeft(firstLine(preamble), "# "))
		notes = append([]Note{{Title: title, Body: preamble}}, notes...)
	}
	return notes
}

// unfence unwraps an answer that is wholly one ``` block.
func unfence(s string) string {
	if !strings.HasPrefix(s, "```") || !strings.HasSuffix(s, "```") || len(s) < 6 {
		return s
	}
	inner := s[3 : len(s)-3]
	if i := strings.IndexByte(inner, '\n'); i >= 0 {
		inner = inner[i+1:] // the info string: ```markdown
	} else {
		return s
	}
	if strings.Contains(inner, "```") {
		return s // more than one block
	}
	return strings.TrimSpace(inner)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return oneLine(strings.TrimSpace(s), 80)
}
