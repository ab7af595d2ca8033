package providertest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"sync/atomic"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// PNG returns a real PNG of width × height pixels, so fakes can decode the
// pixel size of what they receive.
func PNG(width, height int) []byte {
	// A plain image with a mark in one corner: small and quick to encode
	// at any size, which is all a fake needs.
	img := image.NewGray(image.Rect(0, 0, width, height))
	img.SetGray(0, 0, color.Gray{Y: 200})
	var b bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&b, img); err != nil {
		panic(err) // an in-memory encode of a valid image does not fail
	}
	return b.Bytes()
}

// PDF is a minimal one-page PDF document.
var PDF = []byte("%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n" +
	"2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n" +
	"3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 200 200]>>endobj\n" +
	"trailer<</Root 1 0 R>>\n%%EOF\n")

// Counted is a Source that counts how often it was opened: a part an
// adapter does not send must never be read.
type Counted struct {
	Data  []byte
	opens atomic.Int32
}

// Open returns a reader of the data and counts the opening.
func (c *Counted) Open() (io.ReadCloser, error) {
	c.opens.Add(1)
	return io.NopCloser(bytes.NewReader(c.Data)), nil
}

// Opens is how many times the source was opened.
func (c *Counted) Opens() int { return int(c.opens.Load()) }

// NewPart is an attachment over data with its size and sha256 filled in.
func NewPart(kind, mediaType, name string, data []byte) provider.Part {
	sum := sha256.Sum256(data)
	return provider.Part{Kind: kind, MediaType: mediaType, Name: name, Size: int64(len(data)),
		SHA256: hex.EncodeToString(sum[:]), Source: provider.BytesSource(data)}
}

// ImagePart is a PNG attachment of width × height pixels.
func ImagePart(name string, width, height int) provider.Part {
	p := NewPart(provider.PartImage, "image/png", name, PNG(width, height))
	p.Width, p.Height = width, height
	return p
}

// PixelSize decodes the pixel size of image bytes a fake received.
func PixelSize(data []byte) (width, height int, err error) {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	return cfg.Width, cfg.Height, err
}

// The fakes bill an image by each provider's documented rule, written here
// independently of runtime/tokens (step by step, in integers, as the docs
// state it), so the estimate is checked against the rule, not against
// itself.

// BillOpenAI is what OpenAI bills for an image in detail high or auto:
// fit in 2048 × 2048, shortest side to 768, 170 per 512-px tile plus 85.
func BillOpenAI(w, h int) int {
	if w > 2048 || h > 2048 {
		if w >= h {
			w, h = 2048, h*2048/w
		} else {
			w, h = w*2048/h, 2048
		}
	}
	if w > 768 && h > 768 {
		if w <= h {
			w, h = 768, h*768/w
		} else {
			w, h = w*768/h, 768
		}
	}
	tiles := ((w + 511) / 512) * ((h + 511) / 512)
	return 85 + 170*tiles
}

// BillAnthropic is what Anthropic bills for an image: (w × h) / 750 after
// shrinking it until its long edge is at most 1568 and it is at most
// ~1,600 tokens.
func BillAnthropic(w, h int) int {
	if long := max(w, h); long > 1568 {
		w, h = w*1568/long, h*1568/long
	}
	for w*h > 1_200_000 {
		// Shrink by 1 % steps, as a resizer searching for the fit would.
		w, h = w*99/100, h*99/100
	}
	return (w*h + 749) / 750
}

// BillGemini is what Gemini bills for an image: 258 when both sides are
// at most 384, else 258 for each 768 × 768 tile.
func BillGemini(w, h int) int {
	if w <= 384 && h <= 384 {
		return 258
	}
	tiles := 0
	for y := 0; y < h; y += 768 {
		for x := 0; x < w; x += 768 {
			tiles++
		}
	}
	return 258 * tiles
}

// Golden compares got with the golden file path (rewriting it first when
// update is set) and returns the file's bytes: a request body that must not
// drift, since the provider's prefix cache depends on it.
func Golden(t testing.TB, path string, got []byte, update bool) []byte {
	t.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("request body differs from %s:\n got %s\nwant %s", path, got, want)
	}
	return want
}
