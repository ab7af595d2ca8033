package telegram

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// escape makes text safe inside Telegram HTML, which knows only &lt; &gt;
// &amp; and &quot;.
func escape(s string) string {
	return htmlEscaper.Replace(s)
}

var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// render turns the Markdown a model writes into Telegram HTML. Only marks
// that are closed are converted, so a reply cut mid-stream still renders as
// valid HTML; everything else is escaped text.
func render(md string) string {
	var out strings.Builder
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if fence, ok := strings.CutPrefix(strings.TrimSpace(line), "```"); ok {
			// A fenced block runs to its closing fence, or to the end of
			// the text while it is still streaming.
			lang := strings.TrimSpace(fence)
			var code []string
			j := i + 1
			for ; j < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[j]), "```"); j++ {
				code = append(code, lines[j])
			}
			if lang != "" && isWord(lang) {
				out.WriteString(`<pre><code class="language-` + lang + `">`)
			} else {
				out.WriteString("<pre><code>")
			}
			out.WriteString(escape(strings.Join(code, "\n")))
			out.WriteString("</code></pre>")
			i = j
			if i < len(lines)-1 {
				out.WriteByte('\n')
			}
			continue
		}
		if h := headingText(line); h != "" {
			out.WriteString("<b>" + inline(h) + "</b>")
		} else {
			out.WriteString(inline(line))
		}
		if i < len(lines)-1 {
			out.WriteByte('\n')
		}
	}
	return out.String()
}

func isWord(s string) bool {
	for _, r := range s {
		if !(r == '-' || r == '+' || r == '#' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func headingText(line string) string {
	n := 0
	for n < len(line) && n < 6 && line[n] == '#' {
		n++
	}
	if n == 0 || n >= len(line) || line[n] != ' ' {
		return ""
	}
	return strings.TrimSpace(line[n:])
}

// inline converts the marks of one line: `code`, **bold**, *italic*,
// ~~strike~~ and [text](http…).
func inline(s string) string {
	var out strings.Builder
	for i := 0; i < len(s); {
		switch {
		case s[i] == '`':
			if j := strings.IndexByte(s[i+1:], '`'); j > 0 {
				out.WriteString("<code>" + escape(s[i+1:i+1+j]) + "</code>")
				i += j + 2
				continue
			}
		case strings.HasPrefix(s[i:], "**"):
			if j := strings.Index(s[i+2:], "**"); j > 0 {
				out.WriteString("<b>" + inline(s[i+2:i+2+j]) + "</b>")
				i += j + 4
				continue
			}
		case strings.HasPrefix(s[i:], "~~"):
			if j := strings.Index(s[i+2:], "~~"); j > 0 {
				out.WriteString("<s>" + inline(s[i+2:i+2+j]) + "</s>")
				i += j + 4
				continue
			}
		case s[i] == '*' && i+1 < len(s) && s[i+1] != ' ' && s[i+1] != '*':
			if j := strings.IndexByte(s[i+1:], '*'); j > 0 && s[i+j] != ' ' {
				out.WriteString("<i>" + inline(s[i+1:i+1+j]) + "</i>")
				i += j + 2
				continue
			}
		case s[i] == '[':
			if text, url, n, ok := link(s[i:]); ok {
				out.WriteString(`<a href="` + strings.ReplaceAll(escape(url), `"`, "&quot;") + `">` + inline(text) + "</a>")
				i += n
				continue
			}
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		out.WriteString(escape(string(r)))
		i += size
	}
	return out.String()
}

func link(s string) (text, url string, n int, ok bool) {
	close := strings.Index(s, "](")
	if close <= 1 {
		return "", "", 0, false
	}
	end := strings.IndexByte(s[close+2:], ')')
	if end <= 0 {
		return "", "", 0, false
	}
	url = s[close+2 : close+2+end]
	if !strings.HasPrefix(url, "https://") && !strings.HasPrefix(url, "http://") || strings.ContainsAny(url, " \n") {
		return "", "", 0, false
	}
	return s[1:close], url, close + 3 + end, true
}

// utf16Len is Telegram's measure of text length.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// split cuts text into parts of at most limit UTF-16 units, preferring a
// paragraph break, then a line break, then a space. A part, once the text
// has grown past it, never changes: the cut depends only on the first
// limit units.
func split(text string, limit int) []string {
	var parts []string
	for utf16Len(text) > limit {
		// Find the byte index where limit units end.
		units, end := 0, 0
		for i, r := range text {
			u := utf16.RuneLen(r)
			if units+u > limit {
				end = i
				break
			}
			units += u
		}
		window := text[:end]
		cut := strings.LastIndex(window, "\n\n")
		if cut < len(window)/2 {
			if c := strings.LastIndexByte(window, '\n'); c > cut {
				cut = c
			}
		}
		if cut < len(window)/2 {
			if c := strings.LastIndexByte(window, ' '); c > cut {
				cut = c
			}
		}
		if cut <= 0 {
			cut = end
		}
		parts = append(parts, strings.TrimRight(text[:cut], " \n"))
		text = strings.TrimLeft(text[cut:], " \n")
	}
	return append(parts, text)
}
