package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/quota"
)

func TestAPIQuotas(t *testing.T) {
	st := newStack(t, nil)
	get := func(url string, auth bool) (int, map[string]any) {
		req, _ := http.NewRequest("GET", url+"/api/quotas", nil)
		if auth {
			req.Header.Set("Authorization", "Bearer "+testToken)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("GET /api/quotas: %d, not JSON: %v", resp.StatusCode, err)
		}
		return resp.StatusCode, body
	}
	if code, _ := get(st.http.URL, true); code != http.StatusServiceUnavailable {
		t.Fatalf("without Quotas: %d, want 503", code)
	}

	book := quota.New(quota.Options{})
	key := quota.Key{Provider: "google", Model: "gemini-2.5-flash", Fingerprint: "0123456789ab"}
	release, err := book.Reserve(t.Context(), key, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	release(quota.Usage{Input: 120})
	srv := New(Options{Config: config.Default(), Chats: st.svc, Token: testToken, Quotas: func() any { return book.Snapshot() }})
	t.Cleanup(srv.Close)
	h := httptest.NewServer(srv.Handler())
	t.Cleanup(h.Close)
	if code, _ := get(h.URL, false); code != http.StatusUnauthorized {
		t.Fatalf("without the token: %d, want 401", code)
	}
	code, body := get(h.URL, true)
	rows, _ := body["quotas"].([]any)
	if code != 200 || len(rows) != 1 {
		t.Fatalf("GET /api/quotas: %d %v", code, body)
	}
	row, _ := rows[0].(map[string]any)
	if row["provider"] != "google" || row["model"] != "gemini-2.5-flash" || row["fingerprint"] != "0123456789ab" || row["usage"] != float64(120) {
		t.Fatalf("row %v", row)
	}
}

// TestAPIChains: every chain with its models in order and the roles that
// name it, behind the token.
func TestAPIChains(t *testing.T) {
	st := newStack(t, nil)
	cfg := config.Default()
	cfg.Chains = map[string][]string{"default": {"default"}, "fast": {"flash", "default"}}
	cfg.Roles.Reflect = "fast"
	srv := New(Options{Config: cfg, Chats: st.svc, Token: testToken})
	t.Cleanup(srv.Close)
	h := httptest.NewServer(srv.Handler())
	t.Cleanup(h.Close)
	for _, tc := range []struct {
		auth bool
		code int
	}{{false, http.StatusUnauthorized}, {true, http.StatusOK}} {
		req, _ := http.NewRequest("GET", h.URL+"/api/chains", nil)
		if tc.auth {
			req.Header.Set("Authorization", "Bearer "+testToken)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Chains []chainInfo       `json:"chains"`
			Roles  map[string]string `json:"roles"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Fatalf("auth %v: %d, want %d", tc.auth, resp.StatusCode, tc.code)
		}
		if !tc.auth {
			continue
		}
		if err != nil || len(body.Chains) != 2 || body.Chains[1].Name != "fast" ||
			strings.Join(body.Chains[1].Models, ",") != "flash,default" || strings.Join(body.Chains[1].Roles, ",") != "reflect" ||
			strings.Join(body.Chains[0].Roles, ",") != "chat" || body.Roles["chat"] != "default" {
			t.Fatalf("GET /api/chains: %v %+v", err, body)
		}
	}
}
