package gateway

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/runtime"
)

// uploadRoutes adds POST /api/uploads: the request body is one file, its
// Content-Type the declared media type and ?name= its file name. The body is
// streamed into the blob store (never held whole), cut off past the limit of
// its kind, and checked against the declared type; the answer is
// {"attachment": {...}}, whose sha256 message.send then names.
func (s *Server) uploadRoutes() {
	s.mux.Handle("POST /api/uploads", s.need(http.HandlerFunc(s.upload)))
}

// uploadRate is the slowest average rate an upload may arrive at: its
// body gets limits.body_timeout plus the time its kind's limit takes at
// this rate (20 MB: 5 min 20 s more), where a form gets body_timeout alone.
const uploadRate = 64 << 10

func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	if s.opt.Chats == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "unavailable", "message": "no chats service"})
		return
	}
	declared := r.Header.Get("Content-Type")
	if b := s.opt.Chats.Blobs(); b != nil {
		limit := b.Limits().For(baseType(declared))
		// A declared size past the limit is refused before a byte is read.
		if r.ContentLength > limit {
			msg := "a " + chats.KindOf(baseType(declared)) + " attachment may be at most " + strconv.FormatInt(limit, 10) + " bytes; this one is " + strconv.FormatInt(r.ContentLength, 10)
			s.uploadRefused(r, runtime.OutcomeTooLarge, msg)
			writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "too_large", "message": msg})
			return
		}
		// A file up to the limit may take longer than a form to arrive.
		if db, ok := r.Body.(*deadlineBody); ok {
			_ = db.rc.SetReadDeadline(time.Now().Add(s.limits.BodyTimeout + time.Duration(limit/uploadRate)*time.Second))
		}
	}
	a, err := s.scope(r).Upload(r.Context(), r.Body, declared, r.URL.Query().Get("name"))
	switch {
	case err == nil:
	case errors.Is(err, chats.ErrTooLarge), errors.Is(err, chats.ErrBadInput):
		s.uploadRefused(r, chats.RefusalOutcome(err), err.Error())
	case errors.Is(err, os.ErrDeadlineExceeded):
		s.uploadRefused(r, runtime.OutcomeDownload, "the file took too long to arrive")
	}
	switch {
	case err == nil:
		writeJSON(w, http.StatusCreated, map[string]any{"attachment": a})
	case errors.Is(err, chats.ErrTooLarge):
		// Close the connection: what is left of the body is not read.
		w.Header().Set("Connection", "close")
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "too_large", "message": err.Error()})
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.Header().Set("Connection", "close")
		writeJSON(w, http.StatusRequestTimeout, map[string]string{"error": "timeout", "message": "the file took too long to arrive"})
	case errors.Is(err, chats.ErrBadInput):
		w.Header().Set("Connection", "close")
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad_request", "message": err.Error()})
	case errors.Is(err, chats.ErrUnavailable):
		// In a cluster: the shared store did not take the file; nothing
		// was acknowledged, the client may try again.
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "unavailable", "message": err.Error()})
	default:
		s.log.Error("upload failed", "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "internal", "message": "the file could not be stored"})
	}
}

// uploadRefused leaves a diagnostic (kind media, named browser) of a
// refused upload in the chat the upload was meant for (?chat=, which the
// composer sends), so the record says what the person was told (issue 16
// item 7). An upload that names no chat, or one that does not exist,
// leaves none: the refusal is the answer either way.
func (s *Server) uploadRefused(r *http.Request, outcome, reason string) {
	chat := r.URL.Query().Get("chat")
	if chat == "" || len(chat) > 64 {
		return
	}
	// The request's context ends with the connection the refusal closes.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	s.opt.Chats.MediaRefused(ctx, chat, "browser", outcome, reason)
}

// baseType is a Content-Type without its parameters.
func baseType(ct string) string {
	for i := 0; i < len(ct); i++ {
		if ct[i] == ';' || ct[i] == ' ' {
			return ct[:i]
		}
	}
	return ct
}
