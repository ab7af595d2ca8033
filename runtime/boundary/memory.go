package boundary

// Memory notes read back: the files WriteNotes wrote under data_dir/memory,
// offered to the model through recall_memory (only the notes of the person
// the chat belongs to; the chats package decides which those are) and
// listed by the gateway's /api/memory.

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/mirror-gateway/mirror/config/datadir"
	"github.com/mirror-gateway/mirror/runtime/provider"
)

// ToolRecallMemory is the name of the tool that searches the person's
// memory notes.
const ToolRecallMemory = "recall_memory"

// Bounds of recall_memory: notes per answer, and characters of one note
// and of the whole answer, so a large note cannot crowd out the view.
const (
	maxMemoryHits    = 10
	defaultMemory    = 3
	maxMemoryNote    = 4000
	maxMemoryAnswer  = 12000
	maxMemoryFiles   = 2000
	maxMemoryFileLen = 1 << 20
)

// RecallMemoryTool is the recall_memory definition: search the notes that
// reflect wrote at past boundaries of this person's chats.
var RecallMemoryTool = provider.Tool{
	Name: ToolRecallMemory,
	Description: "Search your memory: the notes saved when earlier conversations of this person's chats were " +
		"consolidated (what they taught: facts, decisions, preferences). Returns the best matching notes in full.",
	Parameters: compact(`{
		"type": "object",
		"additionalProperties": false,
		"required": ["query"],
		"properties": {
			"query": {"type": "string", "minLength": 1, "maxLength": 500, "description": "words to look for"},
			"limit": {"type": "integer", "minimum": 1, "maximum": 10, "description": "most notes to return (default 3)"}
		}
	}`),
}

// ParseRecallMemory reads recall_memory arguments; errors are
// *tools.ArgError.
func ParseRecallMemory(raw []byte) (Recall, error) {
	return parseRecall(ToolRecallMemory, raw, maxMemoryHits, defaultMemory)
}

// NoteFile is a memory note as read back from its file.
type NoteFile struct {
	Name     string
	Title    string // the first "# " heading, or the name without .md
	Text     string // the whole file
	Modified time.Time
	Size     int64
	// From the note's trailer (after its last "---" line), which
	// WriteNotes writes and the note's body cannot forge: the chat and
	// the last event the boundary archived, and the person the note
	// belongs to ("" in notes written before notes named one).
	Chat    string
	Through uint64
	Person  string
}

// ValidNoteName accepts what WriteNotes writes: ASCII letters, digits,
// '-', '_' and '.', ending in .md, not hidden, no "..", at most 255 bytes.
func ValidNoteName(name string) bool {
	if len(name) < 4 || len(name) > 255 || !strings.HasSuffix(name, ".md") || name[0] == '.' || strings.Contains(name, "..") {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// ParseNote reads a note's title and trailer from its text.
func ParseNote(name, text string) NoteFile {
	n := NoteFile{Name: name, Title: strings.TrimSuffix(name, ".md"), Text: text, Size: int64(len(text))}
	for line := range strings.Lines(text) {
		if t, ok := strings.CutPrefix(strings.TrimSpace(line), "# "); ok && strings.TrimSpace(t) != "" {
			n.Title = strings.TrimSpace(t)
			break
		}
	}
	i := strings.LastIndex(text, "\n---\n")
	if i < 0 {
		return n
	}
	for line := range strings.Lines(text[i+5:]) {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "From chat "); ok {
			var chat string
			var seq uint64
			if k, _ := fmt.Sscanf(rest, "%s the boundary at event %d,", &chat, &seq); k == 2 {
				n.Chat, n.Through = strings.TrimSuffix(chat, ","), seq
			}
		}
		if id, ok := strings.CutPrefix(line, "Person: "); ok {
			n.Person = strings.TrimSuffix(strings.TrimSpace(id), ".")
		}
	}
	return n
}

// ReadNote reads one note of dir the data dir's way (no symlink followed,
// a private regular file), at most 1 MiB of it.
func ReadNote(dir, name string) (NoteFile, error) {
	if !ValidNoteName(name) {
		return NoteFile{}, fmt.Errorf("memory note %.60q: %w", name, fs.ErrNotExist)
	}
	f, err := datadir.OpenFile(dir, name, os.O_RDONLY)
	if err != nil {
		return NoteFile{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return NoteFile{}, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxMemoryFileLen))
	if err != nil {
		return NoteFile{}, err
	}
	n := ParseNote(name, string(b))
	n.Modified, n.Size = st.ModTime().UTC(), st.Size()
	return n, nil
}

// ReadNotes reads the notes under data_dir/memory, newest first, at most
// 2000; a missing memory dir has none. Entries that are not notes, or that
// the data dir's rules refuse, are left out.
func ReadNotes(dataDir string) ([]NoteFile, error) {
	return ListNotes(dataDir, func(n NoteFile) (NoteFile, bool) { return n, true })
}

// ListNotes is ReadNotes for a caller that keeps only some notes, or less
// of each: keep turns a note into what is listed, ok false leaves it out
// (before the bound of 2000), and the note's text is not held past it.
func ListNotes[T any](dataDir string, keep func(NoteFile) (T, bool)) ([]T, error) {
	dir := filepath.Join(dataDir, MemoryDir)
	entries, err := readDataSubdir(dataDir, MemoryDir)
	if err != nil || entries == nil {
		return nil, err
	}
	type listed struct {
		name     string
		modified time.Time
		v        T
	}
	var found []listed
	for _, e := range entries {
		if !e.Type().IsRegular() || !ValidNoteName(e.Name()) {
			continue
		}
		n, err := ReadNote(dir, e.Name())
		if err != nil {
			continue // unsafe or gone meanwhile: not listed
		}
		if v, ok := keep(n); ok {
			found = append(found, listed{n.Name, n.Modified, v})
		}
	}
	sort.Slice(found, func(i, j int) bool {
		if !found[i].modified.Equal(found[j].modified) {
			return found[i].modified.After(found[j].modified)
		}
		return found[i].name > found[j].name
	})
	if len(found) > maxMemoryFiles {
		found = found[:maxMemoryFiles]
	}
	var out []T
	for _, f := range found {
		out = append(out, f.v)
	}
	return out, nil
}

// SearchNotes answers recall_memory over notes (the person's own): the
// notes that share most of the query's terms, a title match counting
// three times, best first and then newest, each in full up to 4000
// characters, 12000 in all.
func SearchNotes(r Recall, notes []NoteFile) string {
	if len(notes) == 0 {
		return "Your memory is empty: no conversation of this person's chats has been consolidated into notes yet."
	}
	terms := Terms(r.Query)
	type hit struct {
		n     *NoteFile
		score int
	}
	var hits []hit
	for i := range notes {
		n := &notes[i]
		title := map[string]bool{}
		for _, t := range Terms(n.Title) {
			title[t] = true
		}
		body := map[string]bool{}
		for _, t := range Terms(n.Text) {
			body[t] = true
		}
		score := 0
		for _, t := range terms {
			if title[t] {
				score += 3
			}
			if body[t] {
				score++
			}
		}
		if score > 0 {
			hits = append(hits, hit{n, score})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].score > hits[j].score })
	if len(hits) == 0 {
		return fmt.Sprintf("No memory note matches %q (%d notes searched).", r.Query, len(notes))
	}
	if len(hits) > r.Limit {
		hits = hits[:max(r.Limit, 1)]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d memory note(s) match %q, best first:\n", len(hits), r.Query)
	for _, h := range hits {
		text := strings.TrimSpace(h.n.Text)
		if len([]rune(text)) > maxMemoryNote {
			text = string([]rune(text)[:maxMemoryNote-1]) + "…"
		}
		entry := fmt.Sprintf("\n=== %s ===\n%s\n", h.n.Name, text)
		if b.Len()+len(entry) > maxMemoryAnswer {
			b.WriteString("\n(more notes match; ask with more precise words)\n")
			break
		}
		b.WriteString(entry)
	}
	return strings.TrimRight(b.String(), "\n")
}
