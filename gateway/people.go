package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/chats/people"
	"github.com/mirror-gateway/mirror/gateway/ws"
	"github.com/mirror-gateway/mirror/monitor"
)

// personKey keys the person a request speaks for in its context.
type personKey struct{}

// withPerson gives r's handlers the person its token speaks for.
func withPerson(r *http.Request, p people.Person) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), personKey{}, p))
}

// personOf is who r speaks for; need put them there. A request need did
// not see speaks for nobody, who reaches no chat.
func personOf(r *http.Request) people.Person {
	p, _ := r.Context().Value(personKey{}).(people.Person)
	return p
}

// scope is the chats as r's person may use them: every route that names a
// chat goes through it, so a chat they cannot see answers 404.
func (s *Server) scope(r *http.Request) chats.Scope { return s.opt.Chats.As(personOf(r)) }

// who is what a socket's token speaks for.
func (c checker) who(t string) (ws.Who, bool) {
	p, ok := c.person(t)
	if !ok {
		return ws.Who{}, false
	}
	return ws.Who{Person: p, Principal: principalOf(p, t)}, true
}

// ownerOnly answers 403 to anyone but an owner (inside need, which put the
// person in the request).
func (s *Server) ownerOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !personOf(r).IsOwner() {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "forbidden: only an owner may do this"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) peopleRoutes() {
	s.mux.Handle("GET /api/me", s.need(http.HandlerFunc(s.apiMe)))
	s.mux.Handle("GET /api/people", s.need(s.ownerOnly(http.HandlerFunc(s.apiPeople))))
	s.mux.Handle("POST /api/people", s.need(s.ownerOnly(http.HandlerFunc(s.apiPersonAdd))))
	s.mux.Handle("POST /api/people/{name}/link", s.need(s.ownerOnly(http.HandlerFunc(s.apiPersonLink))))
	s.mux.Handle("POST /api/people/{name}/revoke", s.need(s.ownerOnly(http.HandlerFunc(s.apiPersonRevoke))))
	s.mux.Handle("GET /api/people/usage", s.need(s.ownerOnly(http.HandlerFunc(s.apiUsage))))
	s.mux.Handle("GET /api/chats/{id}/grants", s.need(http.HandlerFunc(s.apiGrants)))
	s.mux.Handle("PUT /api/chats/{id}/grants/{name}", s.need(http.HandlerFunc(s.apiGrant)))
}

// registry answers 503 and returns nil on a gateway without people.
func (s *Server) registry(w http.ResponseWriter) *people.Registry {
	if s.opt.People == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "this gateway keeps no people"})
	}
	return s.opt.People
}

func (s *Server) apiMe(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"person": personOf(r)})
}

func (s *Server) apiPeople(w http.ResponseWriter, r *http.Request) {
	reg := s.registry(w)
	if reg == nil {
		return
	}
	list, err := reg.List()
	if err != nil {
		s.peopleError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"people": list})
}

// readBody decodes a small JSON body into v, refusing other fields.
func readBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body: " + err.Error()})
		return false
	}
	return true
}

func (s *Server) apiPersonAdd(w http.ResponseWriter, r *http.Request) {
	reg := s.registry(w)
	if reg == nil {
		return
	}
	var body struct {
		Name string `json:"name"`
		Role string `json:"role"`
	}
	if !readBody(w, r, &body) {
		return
	}
	p, token, err := reg.Add(body.Name, body.Role)
	if err != nil {
		s.peopleError(w, err)
		return
	}
	s.log.Info("person added", "person", p.ID, "role", p.Role, "by", personOf(r).ID)
	writeJSON(w, http.StatusCreated, map[string]any{"person": p, "token": token})
}

func (s *Server) apiPersonLink(w http.ResponseWriter, r *http.Request) {
	reg := s.registry(w)
	if reg == nil {
		return
	}
	var body struct {
		Telegram int64 `json:"telegram"`
	}
	if !readBody(w, r, &body) {
		return
	}
	p, err := reg.Link(r.PathValue("name"), body.Telegram)
	if err != nil {
		s.peopleError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"person": p})
}

func (s *Server) apiPersonRevoke(w http.ResponseWriter, r *http.Request) {
	reg := s.registry(w)
	if reg == nil {
		return
	}
	p, err := reg.Revoke(r.PathValue("name"))
	if err != nil {
		s.peopleError(w, err)
		return
	}
	// Their open sockets go now, not at their next reconnect.
	closed := s.hub.SignOut(p.ID)
	s.log.Info("person revoked", "person", p.ID, "by", personOf(r).ID, "sockets_closed", closed)
	writeJSON(w, http.StatusOK, map[string]any{"person": p})
}

// ownedChat returns the registry and the chat of the path when the asker
// owns that chat; otherwise it answers (503 without people, 404 for a chat
// not theirs, as for one that does not exist) and returns a nil registry.
func (s *Server) ownedChat(w http.ResponseWriter, r *http.Request) (*people.Registry, string) {
	reg := s.registry(w)
	if reg == nil {
		return nil, ""
	}
	id := r.PathValue("id")
	if s.scope(r).Level(id) < people.Own || !s.chatExists(r, id) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such chat"})
		return nil, ""
	}
	return reg, id
}

// apiGrants lists who a chat is shared with, for whoever owns it.
func (s *Server) apiGrants(w http.ResponseWriter, r *http.Request) {
	reg, id := s.ownedChat(w, r)
	if reg == nil {
		return
	}
	list, err := reg.Grants(id)
	if err != nil {
		s.peopleError(w, err)
		return
	}
	if list == nil {
		list = []people.Grant{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"grants": list})
}

// apiGrant shares a chat its owner owns with a named person: level read,
// write, or none to take the grant away.
func (s *Server) apiGrant(w http.ResponseWriter, r *http.Request) {
	reg, id := s.ownedChat(w, r)
	if reg == nil {
		return
	}
	var body struct {
		Level string `json:"level"`
	}
	if !readBody(w, r, &body) {
		return
	}
	lvl := people.None
	if body.Level != "none" {
		var err error
		if lvl, err = people.ParseLevel(body.Level); err != nil {
			s.peopleError(w, err)
			return
		}
	}
	g, err := reg.Share(id, r.PathValue("name"), lvl)
	if err != nil {
		s.peopleError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"grant": g})
}

// chatExists reports whether the chat exists (an owner reaches every id,
// even one never created).
func (s *Server) chatExists(r *http.Request, id string) bool {
	_, err := s.opt.Chats.Get(r.Context(), id)
	return err == nil
}

func (s *Server) peopleError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, people.ErrNotFound):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
	case errors.Is(err, people.ErrExists):
		writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
	case errors.Is(err, people.ErrBadInput):
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
	default:
		s.log.Error("people", "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "could not change people"})
	}
}

// noteVisible reports whether r's person may read a memory note: a note
// belongs to the person its trailer names, or (older notes) to the creator
// of the chat whose boundary wrote it (people.Registry.NoteOwner), and
// owners read all. A note that names no chat is the first owner's.
func (s *Server) noteVisible(r *http.Request, n MemoryNote) bool {
	p := personOf(r)
	if s.opt.People == nil || p.IsOwner() {
		return true
	}
	return p.ID != "" && s.opt.People.NoteOwner(n.Person, n.Chat) == p.ID
}

// apiUsage answers each person's tokens of a UTC day (?day=YYYY-MM-DD,
// default today), for the Monitor.
func (s *Server) apiUsage(w http.ResponseWriter, r *http.Request) {
	reg := s.registry(w)
	if reg == nil {
		return
	}
	day := r.URL.Query().Get("day")
	if day == "" {
		day = people.Day(time.Now())
	} else if _, err := time.Parse("2006-01-02", day); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "day is YYYY-MM-DD"})
		return
	}
	list, err := reg.UsageOn(day)
	if err != nil {
		s.peopleError(w, err)
		return
	}
	out, err := s.withCost(reg, day, list)
	if err != nil {
		s.log.Error("people cost", "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "could not read the cost ledger"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"day": day, "usage": out, "tokens_per_day": s.opt.Config.People.TokensPerDay})
}

// personUsage is one person's day on the Monitor: tokens counted for
// people.tokens_per_day, and what their requests cost (the cost ledger;
// absent without a monitor).
type personUsage struct {
	people.DayUsage
	Cost *monitor.Spend `json:"cost,omitempty"`
}

// withCost joins the ledger's spend per person to the day's token usage; a
// person who spent but counted no tokens is listed too.
func (s *Server) withCost(reg *people.Registry, day string, list []people.DayUsage) ([]personUsage, error) {
	out := make([]personUsage, 0, len(list))
	for _, u := range list {
		out = append(out, personUsage{DayUsage: u})
	}
	if s.opt.Monitor == nil {
		return out, nil
	}
	d, _ := time.Parse("2006-01-02", day)
	costs, err := s.opt.Monitor.PeopleCost(d)
	if err != nil {
		return nil, err
	}
	for i := range out {
		if c, ok := costs[out[i].Person]; ok {
			out[i].Cost = &c
			delete(costs, out[i].Person)
		}
	}
	ids := make([]string, 0, len(costs))
	for id := range costs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		c := costs[id]
		u := people.DayUsage{Person: id}
		if p, err := reg.Get(id); err == nil {
			u.Name, u.Role = p.Name, p.Role
		}
		out = append(out, personUsage{DayUsage: u, Cost: &c})
	}
	return out, nil
}
