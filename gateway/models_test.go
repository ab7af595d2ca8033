package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/runtime"
)

func TestModelRoutes(t *testing.T) {
	st, _ := newLongStack(t)
	eng := st.srv.opt.Models
	if eng == nil {
		t.Fatal("the stack has no model settings")
	}
	do := func(method, path, body, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, st.http.URL+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	code, body := do("GET", "/api/models", "", testToken)
	var got struct{ Models []runtime.ModelInfo }
	if code != 200 || json.Unmarshal([]byte(body), &got) != nil || len(got.Models) != 1 || got.Models[0].Window != 3000 || got.Models[0].Budget.Ceiling == 0 {
		t.Fatalf("GET /api/models: %d %s", code, body)
	}
	for _, c := range []struct {
		method, path, body, token string
		code                      int
	}{
		{"GET", "/api/models", "", "", 401},
		{"PUT", "/api/models/default/context_limit", `{"context_limit":"auto"}`, "", 401},
		{"PUT", "/api/models/nope/context_limit", `{"context_limit":"auto"}`, testToken, 404},
		{"PUT", "/api/models/default/context_limit", `{"limit":"auto"}`, testToken, 400},
		{"PUT", "/api/models/default/context_limit", `not json`, testToken, 400},
		// A 3000-token window has nothing to set: Auto is all of it.
		{"PUT", "/api/models/default/context_limit", `{"context_limit":"full"}`, testToken, 400},
		{"PUT", "/api/models/default/compaction", `{"soft_ratio":0.3,"hard_ratio":0.2}`, testToken, 400},
		{"PUT", "/api/models/default/compaction", `{"soft_ratio":0.3}`, testToken, 400},
		{"PUT", "/api/models/nope/compaction", `{"soft_ratio":0.1,"hard_ratio":0.2}`, testToken, 404},
		{"PUT", "/api/models/default/compaction", `{"soft_ratio":0.1,"hard_ratio":0.2}`, "", 401},
		{"PUT", "/api/models/default/compaction", `{"soft_ratio":0.1,"hard_ratio":0.2}`, testToken, 200},
	} {
		if code, body := do(c.method, c.path, c.body, c.token); code != c.code {
			t.Errorf("%s %s %s: %d %s, want %d", c.method, c.path, c.body, code, body, c.code)
		}
	}
}
