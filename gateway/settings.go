package gateway

import (
	"net/http"
	"sort"
)

// chainInfo is one chain of GET /api/chains: its models in the order they
// are tried, and the roles that use it.
type chainInfo struct {
	Name   string   `json:"name"`
	Models []string `json:"models"`
	Roles  []string `json:"roles"`
}

func (s *Server) settingsRoutes() {
	s.mux.Handle("GET /api/chains", s.need(http.HandlerFunc(s.apiChains)))
}

// apiChains answers GET /api/chains, what the browser's Settings → Chains
// lists beside /api/models and /api/quotas: every chain of runtime.yaml,
// sorted by name, and the chain each role names.
func (s *Server) apiChains(w http.ResponseWriter, r *http.Request) {
	cfg := s.opt.Config
	if cfg == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "no configuration here"})
		return
	}
	roles := map[string]string{"chat": cfg.Roles.Chat, "reflect": cfg.Roles.Reflect}
	out := make([]chainInfo, 0, len(cfg.Chains))
	for name, models := range cfg.Chains {
		c := chainInfo{Name: name, Models: append([]string{}, models...), Roles: []string{}}
		for role, chain := range roles {
			if chain == name {
				c.Roles = append(c.Roles, role)
			}
		}
		sort.Strings(c.Roles)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	writeJSON(w, http.StatusOK, map[string]any{"chains": out, "roles": roles})
}
