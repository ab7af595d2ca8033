package gateway

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config/datadir"
	"github.com/mirror-gateway/mirror/runtime/boundary"
)

// The long-conversation routes: what past boundaries wrote down and what
// they taught. All of them need the token.
//
//	GET /api/chats/{id}/handoffs  {"handoffs": [HandoffEntry...]}, oldest first
//	GET /api/memory               {"notes": [{name, title, modified, size}...]}, newest first
//	GET /api/memory/{name}        the note itself, text/markdown
//
// Memory notes are the markdown files boundaries write in
// <data_dir>/memory. A note is named by its plain file name only; a name
// with a path separator, without .md, hidden, or naming anything but a
// private regular file (a symlink is never followed) is not found.

// maxNoteBytes bounds one note read (boundary.ListNotes bounds the
// listing).
const maxNoteBytes = 4 << 20

// MemoryNote is one entry of GET /api/memory.
type MemoryNote struct {
	Name     string    `json:"name"`
	Title    string    `json:"title"`
	Modified time.Time `json:"modified"`
	Size     int64     `json:"size"`
	// Chat and Through say which boundary wrote the note: its chat and the
	// last event it archived, read from the note's closing line ("From
	// chat C, the boundary at event N, DATE.").
	Chat    string `json:"chat,omitempty"`
	Through uint64 `json:"through,omitempty"`
	// Person is the id of the person the note belongs to, as its trailer
	// names them; notes written before notes named one leave it out (they
	// belong to their chat's creator).
	Person string `json:"person,omitempty"`
}

func (s *Server) contextRoutes() {
	s.mux.Handle("GET /api/chats/{id}/handoffs", s.need(http.HandlerFunc(s.apiHandoffs)))
	s.mux.Handle("GET /api/memory", s.need(http.HandlerFunc(s.apiMemory)))
	s.mux.Handle("GET /api/memory/{name}", s.need(http.HandlerFunc(s.apiMemoryNote)))
}

func (s *Server) apiHandoffs(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	list, err := s.scope(r).Handoffs(r.Context(), id)
	switch {
	case errors.Is(err, chats.ErrNotFound) || errors.Is(err, chats.ErrBadInput):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such chat"})
		return
	case err != nil:
		s.log.Error("list handoffs", "chat", id, "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "could not list the handoffs"})
		return
	}
	if list == nil {
		list = []chats.HandoffEntry{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"handoffs": list})
}

// memoryDir is <data_dir>/memory, or "" when the server has no data dir.
func (s *Server) memoryDir() string {
	if s.opt.DataDir == "" {
		return ""
	}
	return filepath.Join(s.opt.DataDir, boundary.MemoryDir)
}

// validNoteName accepts what WriteNotes writes (boundary.ValidNoteName).
func validNoteName(name string) bool { return boundary.ValidNoteName(name) }

// memoryDirUsable checks the data dir and its memory dir with the data
// dir's rules (real directories of this user, private); a missing memory
// dir is "no notes yet".
func (s *Server) memoryDirUsable() (string, error) {
	dir := s.memoryDir()
	if dir == "" {
		return "", fs.ErrNotExist
	}
	if err := datadir.CheckDir(s.opt.DataDir); err != nil {
		return "", err
	}
	if err := datadir.CheckDir(dir); err != nil {
		return "", err
	}
	return dir, nil
}

func (s *Server) apiMemory(w http.ResponseWriter, r *http.Request) {
	notes := []MemoryNote{}
	if s.opt.DataDir == "" {
		writeJSON(w, http.StatusOK, map[string]any{"notes": notes})
		return
	}
	// Entries that are not notes, unsafe or gone meanwhile are not
	// listed; nor is another person's note.
	listed, err := boundary.ListNotes(s.opt.DataDir, func(n boundary.NoteFile) (MemoryNote, bool) {
		m := memoryNote(n)
		return m, s.noteVisible(r, m)
	})
	if err != nil {
		s.log.Error("memory dir", "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "could not read the memory notes"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"notes": append(notes, listed...)})
}

// readNoteHead opens a note the data dir's way (O_NOFOLLOW, a private
// regular file) and reads its title and trailer (boundary.ReadNote).
func readNoteHead(dir, name string) (MemoryNote, error) {
	n, err := boundary.ReadNote(dir, name)
	if err != nil {
		return MemoryNote{}, err
	}
	return memoryNote(n), nil
}

// memoryNote is what /api/memory shows of a note: its head, not its text.
func memoryNote(n boundary.NoteFile) MemoryNote {
	return MemoryNote{Name: n.Name, Title: n.Title, Modified: n.Modified, Size: n.Size, Chat: n.Chat, Through: n.Through, Person: n.Person}
}

func (s *Server) apiMemoryNote(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	notFound := func() {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such memory note"})
	}
	if !validNoteName(name) {
		notFound()
		return
	}
	dir, err := s.memoryDirUsable()
	if errors.Is(err, fs.ErrNotExist) {
		notFound()
		return
	}
	if err != nil {
		s.log.Error("memory dir", "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "could not read the memory notes"})
		return
	}
	f, err := datadir.OpenFile(dir, name, os.O_RDONLY)
	if err != nil {
		// Missing, a symlink, a directory or someone else's file: all
		// are "no such note" to a client.
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, datadir.ErrUnsafe) {
			s.log.Warn("memory note", "name", name, "err", err)
		}
		notFound()
		return
	}
	defer f.Close()
	if n, err := readNoteHead(dir, name); err != nil || !s.noteVisible(r, n) {
		notFound() // another person's note is no note to them
		return
	}
	b, err := io.ReadAll(io.LimitReader(f, maxNoteBytes))
	if err != nil {
		s.log.Error("memory note", "name", name, "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "could not read the memory note"})
		return
	}
	w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}
