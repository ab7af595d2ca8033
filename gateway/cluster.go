package gateway

import (
	"context"
	"net/http"
	"time"
)

// ClusterRoute is GET /api/cluster for a gateway running as a cluster
// node: the cluster's nodes, its leader and the chats each node owns, as
// status returns them (chats/cluster.Status). Owners only: it names the
// machines of the deployment. `mirror cluster status` reads it.
func ClusterRoute(status func(context.Context) (any, error)) Route {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		st, err := status(ctx)
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "the cluster's state could not be read: " + err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, st)
	})
	return Route{Pattern: "GET /api/cluster", Handler: h, Private: true, Owner: true}
}
