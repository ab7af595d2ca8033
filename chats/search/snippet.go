package search

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// oneLine turns every run of white space into one space: a snippet is a
// line of a result list.
func oneLine(s string) string {
	var b strings.Builder
	space := false
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if unicode.IsSpace(r) {
			space = true
			i += n
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteString(s[i : i+n]) // the bytes as they are, valid or not
		i += n
	}
	if space {
		b.WriteByte(' ')
	}
	return b.String()
}

// Snippet cuts about width bytes of text around the first of spans (byte
// offsets [start, end) of the matched words) and returns it as parts, the
// matched words marked. Offsets outside text or off a character boundary
// are ignored; "…" marks text cut off at either end.
func Snippet(text string, spans [][2]int, width int) []Part {
	var ok [][2]int
	for _, s := range spans {
		if s[0] >= 0 && s[0] < s[1] && s[1] <= len(text) && utf8.RuneStart(text[s[0]]) && (s[1] == len(text) || utf8.RuneStart(text[s[1]])) {
			ok = append(ok, s)
		}
	}
	slices.SortFunc(ok, func(a, b [2]int) int { return a[0] - b[0] })
	start, end := 0, len(text)
	if len(text) > width {
		first := 0
		if len(ok) > 0 {
			first = ok[0][0]
		}
		start = max(0, first-width/3)
		for start > 0 && !utf8.RuneStart(text[start]) {
			start--
		}
		end = min(len(text), start+width)
		for end < len(text) && !utf8.RuneStart(text[end]) {
			end++
		}
	}
	var out []Part
	add := func(s string, hit bool) {
		if s == "" {
			return
		}
		out = append(out, Part{Text: oneLine(s), Hit: hit})
	}
	if start > 0 {
		out = append(out, Part{Text: "…"})
	}
	at := start
	for _, s := range ok {
		if s[0] < at || s[1] > end {
			continue // overlaps one already marked, or past the window
		}
		add(text[at:s[0]], false)
		add(text[s[0]:s[1]], true)
		at = s[1]
	}
	add(text[at:end], false)
	if end < len(text) {
		out = append(out, Part{Text: "…"})
	}
	return out
}
