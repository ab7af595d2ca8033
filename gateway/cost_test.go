package gateway

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/monitor"
)

// TestChatCostRoute: GET /api/chats/{id}/cost answers the chat's ledger
// (only that chat's requests), 404 for a chat that does not exist, 401
// without the token.
func TestChatCostRoute(t *testing.T) {
	st := newMonitorStackWith(t, func(c *config.Config) {
		c.Models[0].Prices = config.Prices{Input: 1, CachedInput: 0.1, Output: 4}
		c.Limits.ChatDailyBudget = 2
	})
	model := config.Default().Models[0].Name
	ch, err := st.svc.Create(t.Context(), "priced", "", chats.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	st.mon.RecordCost(ch.ID, model, 1_000_000, 250_000, 500_000) // 0.5 + 0.05 + 1
	st.mon.RecordCost("another", model, 1_000_000, 0, 0)

	for _, c := range []struct {
		name, path string
		auth       bool
		status     int
	}{
		{"the chat", "/api/chats/" + ch.ID + "/cost", true, 200},
		{"no such chat", "/api/chats/c_nothere/cost", true, 404},
		{"no token", "/api/chats/" + ch.ID + "/cost", false, 401},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := bearer()
			if !c.auth {
				h = nil
			}
			a := call(t, "GET", st.http.URL+c.path, h)
			if a.status != c.status {
				t.Fatalf("status %d, want %d: %s", a.status, c.status, a.body)
			}
			if c.status != 200 {
				return
			}
			var got monitor.ChatCost
			if err := json.Unmarshal(a.body, &got); err != nil {
				t.Fatal(err)
			}
			if got.Chat != ch.ID || got.Total.Requests != 1 || got.Total.In != 1_000_000 || got.Total.Cached != 500_000 || got.Total.Out != 250_000 ||
				math.Abs(got.Total.Cost-1.55) > 1e-9 || got.Today != got.Total || len(got.Days) != 1 || got.Days[0].Model != model || got.Budget != 2 {
				t.Errorf("body %s", a.body)
			}
		})
	}
}
