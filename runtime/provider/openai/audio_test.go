package openai

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
)

// Audio goes as an input_audio part (base64 without a prefix, format wav
// or mp3) only to a model that hears audio; a transcribed voice note goes
// as its transcript and a withheld part as its note, to every model.
func TestAudioParts(t *testing.T) {
	wav := []byte("RIFF....WAVEfmt ")
	b64 := base64.StdEncoding.EncodeToString(wav)
	heard := providertest.NewPart(provider.PartAudio, "audio/ogg", "v.ogg", []byte("OggS"))
	heard.Transcript = "book a table"
	withheld := providertest.NewPart(provider.PartAudio, "audio/ogg", "v.ogg", []byte("OggS"))
	withheld.Withheld = "v.ogg could not be transcribed (server)"
	for _, tc := range []struct {
		name, model string
		part        provider.Part
		want        string
	}{
		{"wav to an audio model", "gpt-4o-audio-preview", providertest.NewPart(provider.PartAudio, "audio/wav", "a.wav", wav),
			`{"type":"input_audio","input_audio":{"data":"` + b64 + `","format":"wav"}}`},
		{"mp3 through a router", "openai/gpt-audio-mini", providertest.NewPart(provider.PartAudio, "audio/mpeg", "a.mp3", wav),
			`{"type":"input_audio","input_audio":{"data":"` + b64 + `","format":"mp3"}}`},
		{"ogg to an audio model", "gpt-audio", providertest.NewPart(provider.PartAudio, "audio/ogg", "v.ogg", wav),
			`{"type":"text","text":"[attachment v.ogg (audio/ogg, 16 bytes) was not sent: this model hears WAV and MP3 audio only]"}`},
		{"wav to a text model", "gpt-4o", providertest.NewPart(provider.PartAudio, "audio/wav", "a.wav", wav),
			`{"type":"text","text":"[attachment a.wav (audio/wav, 16 bytes) was not sent: audio reaches this model only as a transcript (roles.transcribe)]"}`},
		{"transcribed", "gpt-4o-audio-preview", heard, `{"type":"text","text":"[voice note v.ogg, transcribed]\nbook a table"}`},
		{"withheld", "gpt-4o", withheld, `{"type":"text","text":"[attachment v.ogg (audio/ogg, 4 bytes) was not sent: v.ogg could not be transcribed (server)]"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, err := encodeRequest(provider.Request{Model: tc.model, Messages: []provider.Message{
				{Role: provider.RoleUser, Content: "listen", Parts: []provider.Part{tc.part}}}}, false)
			if err != nil {
				t.Fatal(err)
			}
			var r struct {
				Messages []struct {
					Content []json.RawMessage `json:"content"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(body, &r); err != nil || len(r.Messages) != 1 || len(r.Messages[0].Content) != 2 {
				t.Fatalf("body %s (%v)", body, err)
			}
			if got := string(r.Messages[0].Content[0]); got != tc.want {
				t.Fatalf("part\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// Images an OpenAI-compatible router streams in delta.images reach the
// result decoded, in order; what is not a base64 image data URL is left
// out.
func TestStreamedReplyImages(t *testing.T) {
	png := providertest.PNG(2, 2)
	u := "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
	sse := `data: {"choices":[{"index":0,"delta":{"content":"Here.","images":[{"type":"image_url","image_url":{"url":"` + u + `"}},{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" + "data: [DONE]\n\n"
	var s stream
	if err := s.read(strings.NewReader(sse), func(provider.Delta) error { return nil }); err != nil {
		t.Fatal(err)
	}
	res := s.result()
	if res.Text != "Here." || len(res.Images) != 1 || res.Images[0].MediaType != "image/png" || string(res.Images[0].Data) != string(png) {
		t.Fatalf("result %q with %d images", res.Text, len(res.Images))
	}
}
