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
	SetCompaction(model string, soft, hard float64) (runtime.ModelInfo, error)
}

func (s *Server) modelRoutes() {
	s.mux.Handle("GET /api/chats/{id}/replay", s.need(http.HandlerFunc(s.apiReplay)))
	s.mux.Handle("GET /api/models", s.need(http.HandlerFunc(s.apiModels)))
	s.mux.Handle("PUT /api/models/{name}/context_limit", s.need(s.ownerOnly(http.HandlerFunc(s.apiSetContextLimit))))
	s.mux.Handle("PUT /api/models/{name}/compaction", s.need(s.ownerOnly(http.HandlerFunc(s.apiSetCompaction))))
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
	s.answerModel(w, func() (runtime.ModelInfo, error) {
		return s.opt.Models.SetContextLimit(r.PathValue("name"), *body.ContextLimit)
	})
}

// apiSetCompaction takes {"soft_ratio": 0.2, "hard_ratio": 0.25}: the
// conversation's limits as shares of the window, soft below hard.
func (s *Server) apiSetCompaction(w http.ResponseWriter, r *http.Request) {
	if s.opt.Models == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "no model settings here"})
		return
	}
	var body struct {
		Soft *float64 `json:"soft_ratio"`
		Hard *float64 `json:"hard_ratio"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.Soft == nil || body.Hard == nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": `send {"soft_ratio": 0.2, "hard_ratio": 0.25}: shares of the window, soft below hard`})
		return
	}
	s.answerModel(w, func() (runtime.ModelInfo, error) {
		return s.opt.Models.SetCompaction(r.PathValue("name"), *body.Soft, *body.Hard)
	})
}

// answerModel answers a model setting: the model as it now stands, 404
// for an unknown model, 400 for a value it refuses.
func (s *Server) answerModel(w http.ResponseWriter, set func() (runtime.ModelInfo, error)) {
	m, err := set()
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
	err := s.scope(r).Replay(r.PathValue("id"), &b, s.opt.Replay)
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
