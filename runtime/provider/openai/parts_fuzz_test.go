package openai

import (
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
)

// The flag is whether the request goes to OpenAI's own API (PDFs as file
// parts) or to a compatible server (a note instead).
func FuzzPartsRequest(f *testing.F) { providertest.FuzzPartsRequest(f, encodeRequest) }
