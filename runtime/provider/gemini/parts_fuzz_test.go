package gemini

import (
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
)

func FuzzPartsRequest(f *testing.F) {
	providertest.FuzzPartsRequest(f, func(req provider.Request, _ bool) ([]byte, error) { return encodeRequest(req) })
}
