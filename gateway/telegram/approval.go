package telegram

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mirror-gateway/mirror/chats"
)

// maxShown bounds the code an approval shows (a command, a diff), in
// characters: with the rest of the question it stays well inside one
// 4096-character message, and a phone shows it in a few screens.
const maxShown = 1500

// approvalMessage is an approval as Telegram shows it, compact: a shell
// command as code, a file tool's change as a diff (or a new file's head),
// anything else as its arguments. ask adds the question.
func approvalMessage(ap *chats.Approval, ask bool) (html, plain string) {
	name, args := ap.Call.Name, ap.Call.Arguments
	q := ""
	if ask {
		q = "\nAllow it?"
	}
	var a struct {
		Command string `json:"command"`
	}
	switch c := ap.Change; {
	case name == "shell" && json.Unmarshal([]byte(args), &a) == nil && a.Command != "":
		code, _ := cut(a.Command, maxShown)
		return "The assistant wants to run shell:\n<pre>" + escape(code) + "</pre>" + escape(q),
			"The assistant wants to run shell:\n" + code + q
	case c != nil && c.Error != "":
		why, _ := cut(c.Error, 300)
		line := fmt.Sprintf("The assistant wants to run %s on %s, which would fail now: %s", name, c.Path, why)
		return escape(line + q), line + q
	case c != nil:
		head := fmt.Sprintf("The assistant wants to run %s: %s %s (+%d −%d)", name, c.Path, c.Status, c.Added, c.Removed)
		code, lang := c.Diff, "diff"
		if c.Status == "created" {
			code, lang = c.Content, "text"
		}
		if c.Hidden || code == "" {
			return escape(head + q), head + q
		}
		shown, rest := cut(code, maxShown)
		more := ""
		if left := strings.Count(rest, "\n") + c.Omitted; rest != "" || c.Omitted > 0 {
			more = fmt.Sprintf("\n(%d more lines: the browser shows them all)", max(left, 1))
		}
		return escape(head) + "\n<pre><code class=\"language-" + lang + "\">" + escape(shown) + "</code></pre>" + escape(more+q),
			head + "\n" + shown + more + q
	}
	line := fmt.Sprintf("The assistant wants to run %s %s", name, truncate(args, 600))
	return escape(line + q), line + q
}

// cut keeps the head of s within n characters, at a line end when there
// is one in its second half ("…" marks a cut inside a line), and returns
// what it left out.
func cut(s string, n int) (shown, rest string) {
	r := []rune(s)
	if len(r) <= n {
		return s, ""
	}
	head := string(r[:n])
	if i := strings.LastIndexByte(head, '\n'); i > len(head)/2 {
		return head[:i+1], s[i+1:]
	}
	return head + "…", s[len(head):]
}
