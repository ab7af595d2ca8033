package view

import "strings"

// Diff returns the sections of cur that prev lacks or holds with other text,
// in cur's order, then one empty-text section per key prev had and cur has
// not (a removal), in prev's order. Sections with empty text are absent.
func Diff(prev, cur []Section) []Section {
	old := make(map[string]string, len(prev))
	for _, s := range prev {
		if s.Text != "" {
			old[s.Key] = s.Text
		}
	}
	now := make(map[string]bool, len(cur))
	var out []Section
	for _, s := range cur {
		if s.Text == "" || now[s.Key] {
			continue
		}
		now[s.Key] = true
		if t, ok := old[s.Key]; !ok || t != s.Text {
			out = append(out, s)
		}
	}
	for _, s := range prev {
		if s.Text != "" && !now[s.Key] {
			now[s.Key] = true // a key listed twice is removed once
			out = append(out, Section{Key: s.Key})
		}
	}
	return out
}

// renderContext is the message a context row sends: all of cur when the
// view shows no earlier context (first is true), else only what changed
// since prev. Empty means nothing to send.
func renderContext(prev, cur []Section, first bool) string {
	var secs []Section
	open := "<runtime-context>\n"
	if first {
		for _, s := range cur {
			if s.Text != "" {
				secs = append(secs, s)
			}
		}
	} else {
		open = "<runtime-context update>\n"
		for _, s := range Diff(prev, cur) {
			// The warning is said once; its going away is not news.
			if s.Text == "" && s.Key == WarningKey {
				continue
			}
			secs = append(secs, s)
		}
	}
	if len(secs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(open)
	for i, s := range secs {
		if i > 0 {
			b.WriteString("\n\n")
		}
		switch {
		case s.Text == "":
			b.WriteString("## " + s.Key + "\n(removed)")
		case strings.HasPrefix(s.Text, "#"):
			b.WriteString(s.Text) // carries its own heading
		default:
			b.WriteString("## " + s.Key + "\n" + s.Text)
		}
	}
	b.WriteString("\n</runtime-context>")
	return b.String()
}
