package anthropic

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
)

// Any attachment (kind, media type, name, bytes) gives valid JSON that
// carries the bytes' base64 when it sends them, or a refusal; never a
// panic, and never a body with the bytes in any other form.
func FuzzPartsRequest(f *testing.F) {
	f.Add("image", "image/png", "a.png", []byte("\x89PNG"), "hi")
	f.Add("document", "application/pdf", "r.pdf", []byte("%PDF-1.4"), "")
	f.Add("text", "text/plain", "x\"\n.txt", []byte("\xff\xfe<b>&"), "caption")
	f.Add("audio", "audio/ogg", "", []byte("OggS"), "v")
	f.Add("", "application/zip", "z", []byte("PK"), "")
	f.Fuzz(func(t *testing.T, kind, mediaType, name string, data []byte, text string) {
		p := providertest.NewPart(kind, mediaType, name, data)
		req := provider.Request{Model: "m", Messages: []provider.Message{{Role: provider.RoleUser, Content: text, Parts: []provider.Part{p}}}}
		body, err := encodeRequest(req)
		if err != nil {
			return
		}
		if !json.Valid(body) {
			t.Fatalf("invalid JSON: %s", body)
		}
		if kind == provider.PartImage || kind == provider.PartDocument {
			if b64, _ := p.Base64(); len(data) > 0 && !strings.Contains(string(body), b64) && !strings.Contains(string(body), "was not sent") {
				t.Fatalf("%s %s: neither its bytes nor a note in %s", kind, mediaType, body)
			}
		}
	})
}
