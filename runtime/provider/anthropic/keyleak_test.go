package anthropic

import (
	"context"
	"net/http"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
)

// TestKeyNeverInErrors: whatever a server echoes of the key — in a plain
// body, an error message or a broken stream event, at any offset, or cut
// by the read limit — no 4 characters of it reach the error.
func TestKeyNeverInErrors(t *testing.T) {
	var echo providertest.Echo
	f := newFake(t, echo.Handle)
	shapes := []providertest.Shape{
		{Name: "plain", Status: http.StatusInternalServerError, Body: func(s string) string { return s }},
		{Name: "json", Status: http.StatusBadRequest, Body: func(s string) string {
			return `{"type":"error","error":{"type":"invalid_request_error","message":` + providertest.Quote(s) + `},"request_id":"req_1"}`
		}},
		{Name: "stream", Status: http.StatusOK, SSE: true, Body: func(s string) string {
			return "event: message_start\ndata: " + messageStart + "\n\nevent: content_block_delta\ndata: {\"type\": " + s + "\n\n"
		}},
	}
	c := f.client(providertest.Key)
	providertest.CheckNoKeyLeak(t, &echo, shapes, func() error {
		_, err := c.Stream(context.Background(), hello(), collect(new([]string)))
		return err
	})
}
