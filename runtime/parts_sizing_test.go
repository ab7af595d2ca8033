package runtime

import (
	"testing"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tokens"
	"github.com/mirror-gateway/mirror/runtime/view"
)

// A chat's attachments are sized by the rule of its first model's
// provider, both in the soft/hard reading a turn starts with and in the
// view's message counts, not at seed 000's flat allowance: the provider
// kind travels from runtime.yaml to the Model, the sizer and view.Input.
func TestAttachmentsAreSizedByTheFirstModelsProvider(t *testing.T) {
	img := provider.Part{Kind: provider.PartImage, MediaType: "image/png", Name: "a.png", Size: 10, Width: 1024, Height: 1024,
		Source: provider.BytesSource("0123456789")}
	for _, tc := range []struct {
		kind string
		want int
	}{
		{config.KindOpenAI, tokens.OpenAIImage(1024, 1024, false)},
		{config.KindAnthropic, tokens.AnthropicImage(1024, 1024)},
		{config.KindGemini, tokens.GeminiImage(1024, 1024)},
		{config.KindBuiltin, tokens.ImageDefault},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			if tc.kind != config.KindBuiltin && tc.want == tokens.ImageDefault {
				t.Fatalf("the test needs %s's rule to differ from the flat allowance", tc.kind)
			}
			cfg := config.Default()
			p := cfg.Providers[0]
			p.Name, p.Kind, p.BaseURL = "p", tc.kind, "http://127.0.0.1:1"
			cfg.Providers = []config.Provider{p}
			cfg.Models[0].Provider = "p"
			e, err := New(cfg, func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			m := e.models[cfg.Models[0].Name]
			if m.ProvKind != tc.kind {
				t.Fatalf("model's provider kind = %q, want %q", m.ProvKind, tc.kind)
			}
			e.cal = nil // the raw estimate: calibration's margin is not what is tested
			sz := e.sizer(m, nil)
			plain := []view.Row{{Seq: 1, Kind: view.KindUser, Text: "look", Tokens: 1}}
			with := []view.Row{{Seq: 1, Kind: view.KindUser, Text: "look", Tokens: 1, Parts: []provider.Part{img}}}
			if got := sz.readRows(with, nil).Used - sz.readRows(plain, nil).Used; got != tc.want {
				t.Errorf("reading: the image adds %d tokens, want %d", got, tc.want)
			}
			// Outside the view (the boundary's ask, the rows a boundary
			// leaves) an image sent without text is still the image.
			alone := []view.Row{{Seq: 1, Kind: view.KindUser, Parts: []provider.Part{img}}}
			msgs := sz.messagesOf(alone)
			if len(msgs) != 1 || len(msgs[0].Parts) != 1 || msgs[0].Tokens != tc.want {
				t.Errorf("messagesOf an image without text: %+v, want its part and %d tokens", msgs, tc.want)
			}
			in := &TurnInput{Rows: with}
			vin := e.viewInput(in, sz, with, ContextInfo{}, "")
			if vin.Provider != tc.kind {
				t.Fatalf("view.Input.Provider = %q, want %q", vin.Provider, tc.kind)
			}
			v, err := view.Materialize(vin)
			if err != nil {
				t.Fatal(err)
			}
			var got int
			for _, msg := range v.Messages {
				if len(msg.Parts) > 0 {
					got = msg.Tokens - 1
				}
			}
			if got != tc.want {
				t.Errorf("view: the image adds %d tokens, want %d", got, tc.want)
			}
		})
	}
}
