package gateway

// The cost ledger's route:
//
//	GET /api/chats/{id}/cost   monitor.ChatCost as JSON: today, in all, per day and model
//
// Without Options.Monitor it answers 503 like the monitor routes.

import (
	"errors"
	"net/http"

	"github.com/mirror-gateway/mirror/chats"
)

func (s *Server) costRoutes() {
	s.mux.Handle("GET /api/chats/{id}/cost", s.need(http.HandlerFunc(s.apiChatCost)))
}

// apiChatCost serves a chat's spending for its details panel.
func (s *Server) apiChatCost(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.scope(r).Get(r.Context(), id); err != nil { // a chat this person may see
		if errors.Is(err, chats.ErrNotFound) || errors.Is(err, chats.ErrBadInput) {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such chat"})
			return
		}
		s.log.Error("chat cost", "chat", id, "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "could not read the chat"})
		return
	}
	mon := s.opt.Monitor // asked after the chat, so a stranger's chat is 404 either way
	if mon == nil {
		monitorOff(w)
		return
	}
	c, err := mon.ChatCost(id)
	if err != nil {
		s.log.Error("chat cost", "chat", id, "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "could not read the cost"})
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, c)
}
