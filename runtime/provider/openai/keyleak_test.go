package openai

import (
	"context"
	"net/http"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
)

// TestKeyNeverInErrors: whatever a server echoes of the key — in a plain
// body, an error message, FastAPI's detail, a broken stream event or a
// reply that is not a completion, at any offset, or cut by the read
// limit — no 4 characters of it reach the error.
func TestKeyNeverInErrors(t *testing.T) {
	var echo providertest.Echo
	f := newFake(t, echo.Handle)
	shapes := []providertest.Shape{
		{Name: "plain", Status: http.StatusInternalServerError, Body: func(s string) string { return s }},
		{Name: "json", Status: http.StatusBadRequest, Body: func(s string) string {
			return `{"error":{"message":` + providertest.Quote(s) + `,"type":"invalid_request_error","param":null,"code":null}}`
		}},
		{Name: "detail", Status: http.StatusUnprocessableEntity, Body: func(s string) string {
			return `{"detail":[{"loc":["body","messages"],"msg":` + providertest.Quote(s) + `}]}`
		}},
		{Name: "stream", Status: http.StatusOK, SSE: true, Body: func(s string) string {
			return "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: {\"broken\": " + s + "\n\n"
		}},
		{Name: "not a completion", Status: http.StatusOK, Body: func(s string) string { return `{"choices": ` + s }},
	}
	c := f.client(providertest.Key)
	providertest.CheckNoKeyLeak(t, &echo, shapes, func() error {
		_, err := c.Stream(context.Background(), hello(), collect(new([]string)))
		return err
	})
}
