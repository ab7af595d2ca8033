package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	udiff "github.com/aymanbagabas/go-udiff"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// Bounds of a Proposal: past them the rest is left out and counted, so an
// approval of a 1 MiB write stays a few screens, not a megabyte per frame.
const (
	ProposalLines = 400
	ProposalBytes = 32 << 10
)

// Proposal is what a write_file or edit_file call would change if it ran
// now, computed when its approval is asked: the person judges the change,
// not the call's arguments. Only the gateway sees the workspace, so the
// browser and Telegram get it ready made.
type Proposal struct {
	Path string `json:"path"`
	// Status is created, modified or unchanged; empty when Error says the
	// call would fail.
	Status string `json:"status,omitempty"`
	// Diff is a modified file's unified diff, hunks only (no ---/+++
	// lines): each line starts with " ", "-", "+", "@@" or "\".
	Diff string `json:"diff,omitempty"`
	// Content is the head of a created file.
	Content string `json:"content,omitempty"`
	// Added and Removed count the lines the change adds and removes.
	Added   int `json:"added"`
	Removed int `json:"removed"`
	// Omitted counts the lines of Diff or Content left out past the bounds.
	Omitted int `json:"omitted,omitempty"`
	// Hidden says the path looks like it holds a secret: the counts are
	// shown, never the file's current text.
	Hidden bool `json:"hidden,omitempty"`
	// Error is why the call would fail now (its old text is not in the
	// file, say), as the model would read it.
	Error string `json:"error,omitempty"`
}

// Propose computes the change call would make, without making it. It
// returns nil for a call that changes no file (every tool but write_file
// and edit_file) and for arguments that do not fit the tool's schema
// (Check refuses those before anyone is asked).
func (r *Registry) Propose(call provider.ToolCall) *Proposal {
	if call.Name != "write_file" && call.Name != "edit_file" || r.tools[call.Name] == nil {
		return nil
	}
	raw, err := r.tools[call.Name].schema.check(call.Name, call.Arguments)
	if err != nil {
		return nil
	}
	var a editArgs // write_file's path and content read as path and new
	var w writeArgs
	if call.Name == "write_file" {
		if json.Unmarshal(raw, &w) != nil {
			return nil
		}
		a.Path = w.Path
	} else if json.Unmarshal(raw, &a) != nil {
		return nil
	}
	p := &Proposal{Path: a.Path}
	prior, existed, err := r.current(a.Path)
	if err != nil {
		p.Error = err.Error()
		return p
	}
	var next string
	if call.Name == "write_file" {
		next = w.Content
	} else {
		if !existed {
			p.Error = fmt.Sprintf("%s does not exist; use write_file to create it", quote(a.Path))
			return p
		}
		if next, _, err = applyEdit(string(prior), a); err != nil {
			p.Error = err.Error()
			return p
		}
	}
	p.Hidden = looksSecret(a.Path)
	switch {
	case !existed:
		p.Status = StatusCreated
		p.Added = lineCount(next)
		if !p.Hidden {
			p.Content, p.Omitted = bound(next)
		}
	case string(prior) == next:
		p.Status = "unchanged"
	default:
		p.Status = StatusModified
		p.Diff, p.Added, p.Removed = diff(a.Path, string(prior), next)
		if p.Hidden {
			p.Diff = ""
		} else {
			p.Diff, p.Omitted = bound(p.Diff)
		}
	}
	return p
}

// current reads the file p names as a change would: its bytes and whether
// it exists; an error says why a change could not be made.
func (r *Registry) current(p string) ([]byte, bool, error) {
	rel, root, err := r.ws.open(p)
	if err != nil {
		return nil, false, err
	}
	defer root.Close()
	if rel == "." {
		return nil, false, fmt.Errorf("%s is the workspace folder itself; name a file in it", quote(p))
	}
	switch _, err := root.Lstat(rel); {
	case errors.Is(err, fs.ErrNotExist):
		return nil, false, nil
	case err != nil:
		return nil, false, opError(p, err)
	}
	data, err := readRegular(root, rel, p, maxSnapshot, "files over 8 MiB are not changed by the file tools, so /rewind can always restore them")
	return data, err == nil, err
}

// diff is the unified diff of before and after (hunks with three lines of
// context) and the lines it adds and removes.
func diff(name, before, after string) (text string, added, removed int) {
	u, err := udiff.ToUnifiedDiff(name, name, before, udiff.Lines(before, after), udiff.DefaultContextLines)
	if err != nil { // the library's own edits are consistent; say so rather than panic
		return "", 0, 0
	}
	for _, h := range u.Hunks {
		for _, l := range h.Lines {
			switch l.Kind {
			case udiff.Insert:
				added++
			case udiff.Delete:
				removed++
			}
		}
	}
	text = u.String()
	// Drop the ---/+++ lines: the proposal names its path once.
	for range 2 {
		if _, rest, ok := strings.Cut(text, "\n"); ok {
			text = rest
		}
	}
	return text, added, removed
}

// bound keeps the head of s within ProposalLines and ProposalBytes, cut at
// a line end, and counts the lines left out.
func bound(s string) (string, int) {
	cut, lines := 0, 0
	for cut < len(s) && lines < ProposalLines {
		i := strings.IndexByte(s[cut:], '\n')
		end := len(s)
		if i >= 0 {
			end = cut + i + 1
		}
		if end > ProposalBytes {
			break
		}
		cut, lines = end, lines+1
	}
	if cut == len(s) {
		return s, 0
	}
	return s[:cut], lineCount(s[cut:])
}

// lineCount counts the lines of s, a last line without "\n" included.
func lineCount(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// applyEdit replaces the one occurrence of a.Old in text with a.New, and
// returns the result and the line where it was; an error says why not.
func applyEdit(text string, a editArgs) (string, int, error) {
	switch n := strings.Count(text, a.Old); n {
	case 1:
	case 0:
		return "", 0, fmt.Errorf(`"old" was not found in %s; it must match exactly, whitespace and line breaks included (read_file shows the current text)`, quote(shownPath(a.Path)))
	default:
		return "", 0, fmt.Errorf(`"old" matches %d times in %s; it must match exactly once: include surrounding lines to make it unique`, n, quote(shownPath(a.Path)))
	}
	i := strings.Index(text, a.Old)
	return text[:i] + a.New + text[i+len(a.Old):], strings.Count(text[:i], "\n") + 1, nil
}
