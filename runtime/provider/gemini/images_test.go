package gemini

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
)

// An image an image-output model streams as inlineData reaches the result
// decoded; a transcribed voice note goes as its transcript, not inline.
func TestReplyImagesAndTranscripts(t *testing.T) {
	png := providertest.PNG(3, 3)
	sse := `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Drawn."},{"inlineData":{"mimeType":"image/png","data":"` +
		base64.StdEncoding.EncodeToString(png) + `"}},{"inlineData":{"mimeType":"image/png","data":"%%%"}}]},"finishReason":"STOP","index":0}]}` + "\n\n"
	var s stream
	if err := s.read(strings.NewReader(sse), func(provider.Delta) error { return nil }); err != nil {
		t.Fatal(err)
	}
	res := s.result()
	if res.Text != "Drawn." || len(res.Images) != 1 || string(res.Images[0].Data) != string(png) {
		t.Fatalf("result %q with %d images", res.Text, len(res.Images))
	}

	voice := providertest.NewPart(provider.PartAudio, "audio/ogg", "v.ogg", []byte("OggS"))
	voice.Transcript = "hello"
	body, err := encodeRequest(provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Parts: []provider.Part{voice}}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"text":"[voice note v.ogg, transcribed]\nhello"}`; !strings.Contains(string(body), want) || strings.Contains(string(body), "inlineData") {
		t.Fatalf("body %s, want %s", body, want)
	}
}
