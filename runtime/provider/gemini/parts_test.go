package gemini

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
	"github.com/mirror-gateway/mirror/runtime/tokens"
)

type gotBody struct {
	Contents []struct {
		Role  string          `json:"role"`
		Parts json.RawMessage `json:"parts"`
	} `json:"contents"`
}

// answerBilled answers with promptTokenCount set to what Gemini's rule
// bills for the inline images of the request the fake recorded last.
func answerBilled(f **fake) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		reqs := (*f).requests()
		var body gotBody
		if err := json.Unmarshal(reqs[len(reqs)-1].Body, &body); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		billed := 0
		for _, c := range body.Contents {
			var parts []struct {
				InlineData *struct {
					MimeType string `json:"mimeType"`
					Data     string `json:"data"`
				} `json:"inlineData"`
			}
			_ = json.Unmarshal(c.Parts, &parts)
			for _, p := range parts {
				if p.InlineData == nil || p.InlineData.MimeType != "image/png" {
					continue
				}
				raw, err := base64.StdEncoding.DecodeString(p.InlineData.Data)
				wd, ht, derr := providertest.PixelSize(raw)
				if err != nil || derr != nil {
					http.Error(w, "bad image", 400)
					return
				}
				billed += providertest.BillGemini(wd, ht)
			}
		}
		sseHeaders(w)
		chunk(w, fmt.Sprintf(`{"candidates": [{"content": {"parts": [{"text": "seen"}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": %d,"candidatesTokenCount": 1,"totalTokenCount": %d,"promptTokensDetails": [{"modality": "IMAGE","tokenCount": %d}]},"modelVersion": "gemini-2.5-flash"}`, billed, billed+1, billed))
	}
}

// Images, a PDF and audio reach Gemini as inlineData parts with their
// media type and the exact bytes in base64, ahead of the text; a text
// file as a text part naming it.
func TestPartsOnTheWire(t *testing.T) {
	var f *fake
	f = newFake(t, answerBilled(&f))
	img := providertest.ImagePart("cat.png", 40, 30)
	imgRaw, _ := img.Bytes()
	pdf := providertest.NewPart(provider.PartDocument, "application/pdf", "report.pdf", providertest.PDF)
	audio := providertest.NewPart(provider.PartAudio, "audio/ogg", "voice.ogg", []byte("OggS\x00voice"))
	txt := providertest.NewPart(provider.PartText, "application/json", "a.json", []byte(`{"a":1}`))
	zip := providertest.NewPart("", "application/zip", "x.zip", []byte("PK"))
	req := provider.Request{Model: "gemini-2.5-flash", Messages: []provider.Message{
		{Role: provider.RoleUser, Content: "What are these?", Parts: []provider.Part{img, pdf, audio, txt, zip}}}}
	if _, err := f.client(testKey).Stream(context.Background(), req, collect(new([]string))); err != nil {
		t.Fatal(err)
	}
	var body gotBody
	if err := json.Unmarshal(f.requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString
	want := `[{"inlineData":{"mimeType":"image/png","data":"` + b64(imgRaw) + `"}},` +
		`{"inlineData":{"mimeType":"application/pdf","data":"` + b64(providertest.PDF) + `"}},` +
		`{"inlineData":{"mimeType":"audio/ogg","data":"` + b64([]byte("OggS\x00voice")) + `"}},` +
		`{"text":"[file a.json, application/json, 7 bytes]\n{\"a\":1}\n[end of file a.json]"},` +
		`{"text":"[attachment x.zip (application/zip, 2 bytes) was not sent: Mirror does not send this kind of file to models]"},` +
		`{"text":"What are these?"}]`
	if len(body.Contents) != 1 || body.Contents[0].Role != "user" {
		t.Fatalf("contents %+v", body.Contents)
	}
	if got := string(body.Contents[0].Parts); got != want {
		t.Fatalf("parts\n got %s\nwant %s", got, want)
	}
}

// The same message with parts gives the same bytes every time (Gemini's
// implicit cache), pinned by a golden file.
func TestPartsRequestGolden(t *testing.T) {
	req := provider.Request{Model: "gemini-2.5-flash", Messages: []provider.Message{
		{Role: provider.RoleSystem, Content: "Be brief."},
		{Role: provider.RoleUser, Content: "Compare.", Parts: []provider.Part{
			providertest.NewPart(provider.PartImage, "image/jpeg", "a.jpg", []byte("\xff\xd8\xff\xe0fake-jpeg")),
			providertest.NewPart(provider.PartDocument, "application/pdf", "b.pdf", providertest.PDF),
		}},
		{Role: provider.RoleAssistant, Content: "They differ."},
		{Role: provider.RoleUser, Content: "How?"},
	}}
	got, err := encodeRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	providertest.Golden(t, filepath.Join("testdata", "parts.golden.json"), got, *update)
}

// The image estimate before calibration is within 10 % of what a server
// billing by Gemini's documented rule bills.
func TestImageEstimateWithinTenPercentOfBill(t *testing.T) {
	var f *fake
	f = newFake(t, answerBilled(&f))
	for _, sz := range [][2]int{{64, 64}, {384, 384}, {385, 200}, {1024, 1024}, {1920, 1080}, {300, 3000}} {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) {
			p := providertest.ImagePart("i.png", sz[0], sz[1])
			req := provider.Request{Model: "gemini-2.5-flash", Messages: []provider.Message{{Role: provider.RoleUser, Parts: []provider.Part{p}}}}
			res, err := f.client(testKey).Stream(context.Background(), req, collect(new([]string)))
			if err != nil {
				t.Fatal(err)
			}
			est, billed := provider.PartsTokens("gemini", req.Messages[0].Parts), res.Usage.InputTokens
			t.Logf("estimate %d, billed %d", est, billed)
			if billed <= 0 || math.Abs(float64(est-billed)) > 0.10*float64(billed) {
				t.Fatalf("estimate %d, billed %d: more than 10 %% apart", est, billed)
			}
		})
	}
}

// Where a model bills images by another rule than the documented one
// (Gemini 3 bills a fixed figure per media resolution, ~1,100 for any
// photo), the rule's estimate is corrected by the per-model calibration
// that corrects every request estimate: after a few bills the corrected
// estimate is within a few percent above the bill.
func TestImageEstimateCorrectedByCalibration(t *testing.T) {
	const flat = 1100
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		chunk(w, fmt.Sprintf(`{"candidates": [{"content": {"parts": [{"text": "seen"}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": %d,"candidatesTokenCount": 1,"totalTokenCount": %d},"modelVersion": "gemini-3-flash"}`, flat, flat+1))
	})
	var cal tokens.Calibration
	var est, billed int
	// Photos from one phone: the same size each time.
	for i, sz := range [][2]int{{1920, 1080}, {1080, 1920}, {1920, 1080}, {1920, 1080}, {1080, 1920}, {1920, 1080}} {
		p := providertest.ImagePart("p.png", sz[0], sz[1])
		req := provider.Request{Model: "gemini-3-flash", Messages: []provider.Message{{Role: provider.RoleUser, Parts: []provider.Part{p}}}}
		res, err := f.client(testKey).Stream(context.Background(), req, collect(new([]string)))
		if err != nil {
			t.Fatal(err)
		}
		est, billed = provider.PartsTokens("gemini", req.Messages[0].Parts), res.Usage.InputTokens
		if i == 0 && math.Abs(float64(est-billed)) < 0.2*float64(billed) {
			t.Fatalf("the rule (%d) is already near the flat bill (%d): the test shows nothing", est, billed)
		}
		cal.Observe("gemini-3-flash", est, billed)
	}
	got := cal.Correct("gemini-3-flash", est)
	t.Logf("raw estimate %d, bill %d, corrected %d", est, billed, got)
	if got < billed || float64(got) > 1.15*float64(billed) {
		t.Fatalf("corrected estimate %d for a bill of %d (raw estimate %d)", got, billed, est)
	}
}
