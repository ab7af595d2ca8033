package gemini

import (
	"context"
	"net/http"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
)

// TestKeyNeverInErrors: whatever a server echoes of the key — in a plain
// body, an error message (bare or in the array the non-SSE endpoint
// sends) or a broken stream chunk, at any offset, or cut by the read
// limit — no 4 characters of it reach the error.
func TestKeyNeverInErrors(t *testing.T) {
	var echo providertest.Echo
	f := newFake(t, echo.Handle)
	googleError := func(s string) string {
		return `{"error":{"code":400,"message":` + providertest.Quote(s) + `,"status":"INVALID_ARGUMENT"}}`
	}
	shapes := []providertest.Shape{
		{Name: "plain", Status: http.StatusInternalServerError, Body: func(s string) string { return s }},
		{Name: "json", Status: http.StatusBadRequest, Body: googleError},
		{Name: "array", Status: http.StatusBadRequest, Body: func(s string) string { return "[" + googleError(s) + "]" }},
		{Name: "stream", Status: http.StatusOK, SSE: true, Body: func(s string) string {
			return "data: {\"candidates\": " + s + "\n\n"
		}},
	}
	c := f.client(providertest.Key)
	providertest.CheckNoKeyLeak(t, &echo, shapes, func() error {
		_, err := c.Stream(context.Background(), hello(), collect(new([]string)))
		return err
	})
}
