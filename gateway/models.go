package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/runtime"
)

// ModelSettings lists the models' request budgets and sets their context
// limits; the runtime's Engine is one.
type ModelSettings interface {
	Models() []runtime.ModelInfo
	SetContextLimit(model, limit string) (runtime.ModelInfo, error)
}

func (s *Server) modelRoutes() {
	s.mux.Handle("GET /api/chats/{id}/replay", s.need(http.HandlerFunc(s.apiReplay)))
	s.mux.Handle("GET /api/models", s.need(http.HandlerFunc(s.apiModels)))
	s.mux.Handle("PUT /api/models/{name}/context_limit", s.need(http.HandlerFunc(s.apiSetContextLimit)))
}

func (s *Server) apiModels(w http.ResponseWriter, r *http.Request) {
	if s.opt.Models == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "no model settings here"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"models": s.opt.Models.Models()})
}

// apiSetContextLimit takes {"context_limit": "auto" | "full" | a step such
// as "200k"}: one of the model's choices.
func (s *Server) apiSetContextLimit(w http.ResponseWriter, r *http.Request) {
	if s.opt.Models == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "no model settings here"})
		return
	}
	var body struct {
		ContextLimit *string `json:"context_limit"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.ContextLimit == nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": `send {"context_limit": "auto"}, "full" or a step such as "200k"`})
		return
	}
	m, err := s.opt.Models.SetContextLimit(r.PathValue("name"), *body.ContextLimit)
	switch {
	case errors.Is(err, runtime.ErrNoSuchModel):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
	case err != nil:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"model": m})
	}
}

// apiReplay answers `mirror replay` while this gateway holds the database:
// the same text, read-only.
func (s *Server) apiReplay(w http.ResponseWriter, r *http.Request) {
	if s.opt.Replay == nil {
		http.Error(w, "no replay here", http.StatusServiceUnavailable)
		return
	}
	var b bytes.Buffer
	err := s.opt.Replay(&b, r.PathValue("id"))
	switch {
	case errors.Is(err, chats.ErrNotFound):
		http.Error(w, "no such chat", http.StatusNotFound)
	case err != nil:
		s.log.Error("replay", "chat", r.PathValue("id"), "err", err)
		http.Error(w, "could not replay the chat", http.StatusInternalServerError)
	default:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write(b.Bytes())
	}
}
