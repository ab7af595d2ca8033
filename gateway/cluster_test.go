package gateway

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestClusterRoute: GET /api/cluster answers the status as JSON, 503 with
// the reason when it cannot be read, and is for owners only.
func TestClusterRoute(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status func(context.Context) (any, error)
		code   int
		body   string
	}{
		{"status", func(context.Context) (any, error) { return map[string]any{"leader": "n2"}, nil }, 200, `{"leader":"n2"}`},
		{"unreadable", func(context.Context) (any, error) { return nil, errors.New("no quorum") }, 503, "could not be read: no quorum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := ClusterRoute(tc.status)
			if rt.Pattern != "GET /api/cluster" || !rt.Private || !rt.Owner {
				t.Fatalf("route %+v: want GET /api/cluster, private, owners only", rt)
			}
			w := httptest.NewRecorder()
			rt.Handler.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/cluster", nil))
			if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.body) || w.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("%d %q", w.Code, w.Body.String())
			}
		})
	}
}
