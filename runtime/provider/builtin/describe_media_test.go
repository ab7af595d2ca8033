package builtin

import (
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
)

// The built-in model says what a voice note said, or why it was not heard.
func TestDescribesTranscripts(t *testing.T) {
	heard := providertest.NewPart(provider.PartAudio, "audio/ogg", "v.ogg", []byte("OggS"))
	heard.Transcript = "book  a table\nfor two"
	lost := providertest.NewPart(provider.PartAudio, "audio/ogg", "w.ogg", []byte("OggS"))
	lost.Withheld = "w.ogg could not be transcribed (server)"
	got := DescribeParts([]provider.Part{heard, lost})
	for _, want := range []string{"- v.ogg: audio, audio/ogg, 4 bytes; it says «book a table for two».", "- w.ogg: audio, audio/ogg, 4 bytes; not heard: w.ogg could not be transcribed (server)."} {
		if !strings.Contains(got, want) {
			t.Errorf("%q does not say %q", got, want)
		}
	}
}
