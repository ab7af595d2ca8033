package anthropic

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
)

type gotBlock struct {
	Type   string `json:"type"`
	Text   string `json:"text"`
	Source *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	} `json:"source"`
}

type gotBody struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// answerBilled answers with input_tokens set to what Anthropic's rule bills
// for the image blocks of the request the fake recorded last.
func answerBilled(f **fake) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		reqs := (*f).requests()
		var body gotBody
		if err := json.Unmarshal(reqs[len(reqs)-1].Body, &body); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		billed := 0
		for _, m := range body.Messages {
			var blocks []gotBlock
			_ = json.Unmarshal(m.Content, &blocks)
			for _, b := range blocks {
				if b.Type != "image" {
					continue
				}
				raw, err := base64.StdEncoding.DecodeString(b.Source.Data)
				wd, ht, derr := providertest.PixelSize(raw)
				if err != nil || derr != nil {
					http.Error(w, "bad image", 400)
					return
				}
				billed += providertest.BillAnthropic(wd, ht)
			}
		}
		sseHeaders(w)
		event(w, fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-20250514","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}`, billed))
		event(w, textStart)
		event(w, textDelta(0, "seen"))
		event(w, textStop)
		event(w, messageDelta("end_turn", 2))
		event(w, messageStop)
	}
}

// Images reach Anthropic as image blocks and a PDF as a document block,
// both with a base64 source of the exact bytes and their media type,
// ahead of the text; a text file as a text block naming it; audio as a
// note whose bytes are never read.
func TestPartsOnTheWire(t *testing.T) {
	var f *fake
	f = newFake(t, answerBilled(&f))
	img := providertest.ImagePart("cat.png", 40, 30)
	imgRaw, _ := img.Bytes()
	pdf := providertest.NewPart(provider.PartDocument, "application/pdf", "report.pdf", providertest.PDF)
	txt := providertest.NewPart(provider.PartText, "text/markdown", "notes.md", []byte("# Notes\n- one\n"))
	audioSrc := &providertest.Counted{Data: []byte("OggS")}
	audio := providertest.NewPart(provider.PartAudio, "audio/ogg", "voice.ogg", audioSrc.Data)
	audio.Source = audioSrc
	req := provider.Request{Model: "claude-sonnet-4-20250514", Messages: []provider.Message{
		{Role: provider.RoleUser, Content: "What are these?", Parts: []provider.Part{img, pdf, txt, audio}}}}
	if _, err := f.client(testKey).Stream(context.Background(), req, collect(new([]string))); err != nil {
		t.Fatal(err)
	}
	var body gotBody
	if err := json.Unmarshal(f.requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	want := `[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + base64.StdEncoding.EncodeToString(imgRaw) + `"}},` +
		`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + base64.StdEncoding.EncodeToString(providertest.PDF) + `"}},` +
		`{"type":"text","text":"[file notes.md, text/markdown, 14 bytes]\n# Notes\n- one\n\n[end of file notes.md]"},` +
		`{"type":"text","text":"[attachment voice.ogg (audio/ogg, 4 bytes) was not sent: audio reaches this model only as a transcript (roles.transcribe)]"},` +
		`{"type":"text","text":"What are these?","cache_control":{"type":"ephemeral"}}]`
	if got := string(body.Messages[0].Content); got != want {
		t.Fatalf("content\n got %s\nwant %s", got, want)
	}
	if audioSrc.Opens() != 0 {
		t.Fatal("audio bytes were read though not sent")
	}
}

// The same message with parts gives the same bytes every time (the
// prefix cache), pinned by a golden file.
func TestPartsRequestGolden(t *testing.T) {
	req := provider.Request{Model: "claude-sonnet-4-20250514", Messages: []provider.Message{
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
// billing by Anthropic's documented rule bills.
func TestImageEstimateWithinTenPercentOfBill(t *testing.T) {
	var f *fake
	f = newFake(t, answerBilled(&f))
	for _, sz := range [][2]int{{64, 64}, {200, 200}, {1000, 1000}, {1092, 1092}, {1920, 1080}, {2000, 1500}, {300, 3000}} {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) {
			p := providertest.ImagePart("i.png", sz[0], sz[1])
			req := provider.Request{Model: "claude-sonnet-4-20250514", Messages: []provider.Message{{Role: provider.RoleUser, Parts: []provider.Part{p}}}}
			res, err := f.client(testKey).Stream(context.Background(), req, collect(new([]string)))
			if err != nil {
				t.Fatal(err)
			}
			est, billed := provider.PartsTokens("anthropic", req.Messages[0].Parts), res.Usage.InputTokens
			t.Logf("estimate %d, billed %d", est, billed)
			if billed <= 0 || math.Abs(float64(est-billed)) > 0.10*float64(billed) {
				t.Fatalf("estimate %d, billed %d: more than 10 %% apart", est, billed)
			}
		})
	}
}
