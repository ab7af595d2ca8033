package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mirror-gateway/mirror/chats"
)

// manageRoutes adds the routes that manage chats (docs/protocol.md,
// "Managing chats"): rename and archive, delete with undo, export, search.
// Every one needs the token; the ones that change state are also behind
// the forged-request check Handler runs before any route.
func (s *Server) manageRoutes() {
	s.mux.Handle("PATCH /api/chats/{id}", s.need(http.HandlerFunc(s.patchChat)))
	s.mux.Handle("DELETE /api/chats/{id}", s.need(http.HandlerFunc(s.deleteChat)))
	s.mux.Handle("POST /api/chats/{id}/restore", s.need(http.HandlerFunc(s.restoreChat)))
	s.mux.Handle("GET /api/chats/{id}/export", s.need(http.HandlerFunc(s.exportChat)))
	s.mux.Handle("GET /api/search", s.need(http.HandlerFunc(s.searchChats)))
}

// manageError answers err of a chats call with its status.
func (s *Server) manageError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	msg := err.Error()
	switch {
	case errors.Is(err, chats.ErrNotFound):
		status, msg = http.StatusNotFound, "no such chat"
	case errors.Is(err, chats.ErrInUse):
		status = http.StatusConflict
	case errors.Is(err, chats.ErrBadInput):
		status = http.StatusBadRequest
	case errors.Is(err, chats.ErrSearchOff):
		status = http.StatusServiceUnavailable
	case errors.Is(err, chats.ErrClosed):
		status, msg = http.StatusServiceUnavailable, "the gateway is shutting down"
	case errors.Is(err, context.DeadlineExceeded):
		status, msg = http.StatusServiceUnavailable, "the chat did not answer in time"
	default:
		s.log.Error("manage chat", "err", err)
		msg = "internal error"
	}
	writeJSON(w, status, map[string]string{"error": msg})
}

func (s *Server) patchChat(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Title    *string `json:"title"`
		Archived *bool   `json:"archived"`
		Chain    *string `json:"chain"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || (body.Title == nil && body.Archived == nil && body.Chain == nil) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": `the body is a JSON object with "title" (text), "archived" (true or false) and/or "chain" (a chain of runtime.yaml)`})
		return
	}
	id := r.PathValue("id")
	var c chats.Chat
	var err error
	if body.Chain != nil {
		// First: an unknown chain refuses the request before a title or
		// archive sent with it is applied.
		if c, err = s.scope(r).SetChain(r.Context(), id, *body.Chain); err != nil {
			s.manageError(w, err)
			return
		}
	}
	if body.Title != nil {
		if c, err = s.scope(r).Rename(r.Context(), id, *body.Title); err != nil {
			s.manageError(w, err)
			return
		}
	}
	if body.Archived != nil {
		if c, err = s.scope(r).Archive(r.Context(), id, *body.Archived); err != nil {
			s.manageError(w, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"chat": c})
}

func (s *Server) deleteChat(w http.ResponseWriter, r *http.Request) {
	c, err := s.scope(r).DeleteChat(r.Context(), r.PathValue("id"))
	if err != nil {
		s.manageError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"chat": c, "undo_until": c.DeleteAt})
}

func (s *Server) restoreChat(w http.ResponseWriter, r *http.Request) {
	c, err := s.scope(r).RestoreChat(r.Context(), r.PathValue("id"))
	if err != nil {
		s.manageError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"chat": c})
}

func (s *Server) searchChats(w http.ResponseWriter, r *http.Request) {
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 200 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "limit is a whole number from 1 to 200"})
			return
		}
		limit = n
	}
	hits, err := s.scope(r).Search(r.Context(), r.URL.Query().Get("q"), limit)
	if err != nil {
		s.manageError(w, err)
		return
	}
	if hits == nil {
		hits = []chats.SearchHit{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"hits": hits})
}

// Export is the JSON an export carries: the chat and its transcript.
type Export struct {
	Chat     chats.Chat      `json:"chat"`
	Exported time.Time       `json:"exported_at"`
	Messages []chats.Message `json:"messages"`
}

// exportChat streams a chat as a download: format=json (Export) or
// format=markdown (the default).
func (s *Server) exportChat(w http.ResponseWriter, r *http.Request) {
	format := r.URL.Query().Get("format")
	switch format {
	case "", "md", "markdown":
		format = "markdown"
	case "json":
	default:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "format is markdown or json"})
		return
	}
	id := r.PathValue("id")
	bw := bufio.NewWriterSize(w, 64<<10)
	// The header goes once the chat is known to exist: before that, an
	// error still gets its status.
	started := false
	head := func(c chats.Chat) {
		started = true
		ext, typ := "md", "text/markdown; charset=utf-8"
		if format == "json" {
			ext, typ = "json", "application/json"
		}
		w.Header().Set("Content-Type", typ)
		w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.%s"`, fileName(c.Title, c.ID), ext))
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		if format == "json" {
			fmt.Fprintf(bw, "{\"chat\":%s,\"exported_at\":%q,\"messages\":[", chats.Marshal(c), time.Now().UTC().Format(time.RFC3339))
		} else {
			fmt.Fprintf(bw, "# %s\n\n", c.Title)
		}
	}
	n := 0
	_, err := s.scope(r).Export(r.Context(), id, head, func(m chats.Message) error {
		if format == "json" {
			if n > 0 {
				bw.WriteByte(',')
			}
			bw.Write(chats.Marshal(m))
		} else {
			writeMarkdown(bw, m)
		}
		n++
		return nil
	})
	if err != nil && !started {
		s.manageError(w, err)
		return
	}
	if err != nil {
		s.log.Warn("export cut short", "chat", id, "err", err)
		return // the download ends short: its JSON does not parse
	}
	if format == "json" {
		bw.WriteString("]}\n")
	}
	_ = bw.Flush()
}

// writeMarkdown writes one message of an export as Markdown: a heading
// with who and when, then the text as it was written (it is Markdown
// already).
func writeMarkdown(w io.Writer, m chats.Message) {
	who := map[string]string{"user": "You", "assistant": "Assistant", chats.RoleBoundary: "Boundary (handoff record)"}[m.Role]
	if who == "" {
		who = m.Role
	}
	fmt.Fprintf(w, "### %s · %s\n\n", who, m.Time.UTC().Format("2006-01-02 15:04 UTC"))
	for _, a := range m.Attachments {
		fmt.Fprintf(w, "- attachment: %s (%s, %d bytes, sha256 %s)\n", a.Name, a.Type, a.Size, a.SHA256)
	}
	if len(m.Attachments) > 0 {
		fmt.Fprintln(w)
	}
	text := strings.TrimRight(m.Text, "\n")
	if m.Role == chats.RoleBoundary {
		text = "> " + strings.ReplaceAll(text, "\n", "\n> ")
	}
	fmt.Fprintf(w, "%s\n\n", text)
}

// fileName makes a download name of a title: letters, digits, - and _,
// at most 60 of them; the chat id when nothing is left.
func fileName(title, id string) string {
	var b strings.Builder
	dash := false
	for _, r := range title {
		ok := r == '-' || r == '_' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		if ok {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 60 {
			break
		}
	}
	name := strings.Trim(b.String(), "-")
	if name == "" {
		return id
	}
	return name
}
