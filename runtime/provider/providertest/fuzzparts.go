package providertest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// FuzzPartsRequest is every adapter's fuzz test of attachments: any part
// (kind, media type, name, bytes) gives valid JSON that carries the bytes'
// base64 when it sends them, or a note that it did not; never a panic.
// encode builds the adapter's request body; flag is the adapter's one
// variant (OpenAI's own API or a compatible server), ignored by others.
func FuzzPartsRequest(f *testing.F, encode func(req provider.Request, flag bool) ([]byte, error)) {
	f.Add("image", "image/png", "a.png", []byte("\x89PNG"), "hi", true)
	f.Add("document", "application/pdf", "r.pdf", []byte("%PDF-1.4"), "", true)
	f.Add("text", "text/plain", "x\"\n.txt", []byte("\xff\xfe<b>&"), "caption", false)
	f.Add("audio", "audio/ogg", "", []byte("OggS"), "v", true)
	f.Add("", "application/zip", "z", []byte("PK"), "", false)
	f.Fuzz(func(t *testing.T, kind, mediaType, name string, data []byte, text string, flag bool) {
		p := NewPart(kind, mediaType, name, data)
		req := provider.Request{Model: "m", Messages: []provider.Message{{Role: provider.RoleUser, Content: text, Parts: []provider.Part{p}}}}
		body, err := encode(req, flag)
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
