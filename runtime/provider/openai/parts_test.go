package openai

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
)

// partsBody is the shape of a request whose user message has parts.
type partsBody struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

type gotPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL    string `json:"url"`
		Detail string `json:"detail"`
	} `json:"image_url"`
	File *struct {
		Filename string `json:"filename"`
		FileData string `json:"file_data"`
	} `json:"file"`
}

// billImages answers a request as OpenAI would bill it: every image_url
// part it carries, decoded, by OpenAI's tile rule.
// The fake has read the body already; f gives it back.
func billImages(f **fake) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		reqs := (*f).requests()
		var body partsBody
		if err := json.Unmarshal(reqs[len(reqs)-1].Body, &body); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		billed := 0
		for _, m := range body.Messages {
			var parts []gotPart
			if json.Unmarshal(m.Content, &parts) != nil {
				continue
			}
			for _, p := range parts {
				if p.Type != "image_url" {
					continue
				}
				data, ok := strings.CutPrefix(p.ImageURL.URL, "data:image/png;base64,")
				raw, err := base64.StdEncoding.DecodeString(data)
				if !ok || err != nil {
					http.Error(w, "bad image url", 400)
					return
				}
				wd, ht, err := providertest.PixelSize(raw)
				if err != nil {
					http.Error(w, err.Error(), 400)
					return
				}
				billed += providertest.BillOpenAI(wd, ht)
			}
		}
		sseHeaders(w)
		event(w, textChunk("seen"))
		event(w, finishChunk("stop"))
		event(w, usageChunk(billed, 1, 0))
		event(w, "[DONE]")
	}
}

// A user message with attachments goes as a content array: image_url parts
// with a data: URL of the exact bytes, text files as text with a header,
// then the message's text. Audio and (on a compatible server) PDFs become
// a note, and their bytes are never read.
func TestPartsOnTheWire(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		event(w, textChunk("ok"))
		event(w, finishChunk("stop"))
		event(w, "[DONE]")
	})
	img := providertest.ImagePart("cat.png", 64, 48)
	raw, _ := img.Bytes()
	txt := providertest.NewPart(provider.PartText, "text/csv", "data.csv", []byte("a,b\n1,2\n"))
	pdfSrc := &providertest.Counted{Data: providertest.PDF}
	pdf := providertest.NewPart(provider.PartDocument, "application/pdf", "report.pdf", providertest.PDF)
	pdf.Source = pdfSrc
	audioSrc := &providertest.Counted{Data: []byte("OggS....")}
	audio := providertest.NewPart(provider.PartAudio, "audio/ogg", "voice.ogg", audioSrc.Data)
	audio.Source = audioSrc
	req := provider.Request{Model: "llava", Messages: []provider.Message{
		{Role: provider.RoleUser, Content: "What is in these?", Parts: []provider.Part{img, txt, pdf, audio}},
	}}
	if _, err := f.client("").Stream(context.Background(), req, collect(new([]string))); err != nil {
		t.Fatal(err)
	}
	var body partsBody
	if err := json.Unmarshal(f.requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`[{"type":"image_url","image_url":{"url":"data:image/png;base64,%s"}},`+
		`{"type":"text","text":"[file data.csv, text/csv, 8 bytes]\na,b\n1,2\n\n[end of file data.csv]"},`+
		`{"type":"text","text":"[attachment report.pdf (application/pdf, %d bytes) was not sent: this OpenAI-compatible endpoint takes no PDF files; OpenAI's own API, Anthropic and Gemini do]"},`+
		`{"type":"text","text":"[attachment voice.ogg (audio/ogg, 8 bytes) was not sent: audio reaches this model only as a transcript (roles.transcribe)]"},`+
		`{"type":"text","text":"What is in these?"}]`, base64.StdEncoding.EncodeToString(raw), len(providertest.PDF))
	if got := string(body.Messages[0].Content); got != want {
		t.Fatalf("content\n got %s\nwant %s", got, want)
	}
	if pdfSrc.Opens() != 0 || audioSrc.Opens() != 0 {
		t.Fatalf("parts not sent were read: pdf %d, audio %d opens", pdfSrc.Opens(), audioSrc.Opens())
	}
	// A message without parts keeps its plain string content.
	if _, err := f.client("").Stream(context.Background(), hello(), collect(new([]string))); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(f.requests()[1].Body, &body); err != nil {
		t.Fatal(err)
	}
	if c := body.Messages[len(body.Messages)-1].Content; c[0] != '"' {
		t.Fatalf("plain content became %s", c)
	}
}

// officialClient is a client for OpenAI's own host, dialled to a local TLS
// fake (as in TestCapFieldOnTheWire).
func officialClient(t *testing.T, h http.HandlerFunc) (*Client, func() [][]byte) {
	var (
		mu     sync.Mutex
		bodies [][]byte
	)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var raw json.RawMessage
		if err := json.NewDecoder(r.Body).Decode(&raw); err == nil {
			mu.Lock()
			bodies = append(bodies, raw)
			mu.Unlock()
		}
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
	}
	tr.TLSClientConfig = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, ServerName: "example.com"}
	c := New(Config{Name: "openai", BaseURL: "https://api.openai.com/v1", APIKey: testKey, HTTPClient: &http.Client{Transport: tr}})
	return c, func() [][]byte { mu.Lock(); defer mu.Unlock(); return append([][]byte(nil), bodies...) }
}

// On OpenAI's own API a PDF goes as a file part: its name and a data: URL
// of the exact bytes (platform.openai.com/docs/guides/pdf-files?api-mode=chat).
func TestPDFAsFilePartOnOpenAI(t *testing.T) {
	c, bodies := officialClient(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		event(w, textChunk("ok"))
		event(w, finishChunk("stop"))
		event(w, "[DONE]")
	})
	pdf := providertest.NewPart(provider.PartDocument, "application/pdf", "report.pdf", providertest.PDF)
	req := provider.Request{Model: "gpt-4o", Messages: []provider.Message{
		{Role: provider.RoleUser, Content: "Summarize.", Parts: []provider.Part{pdf}}}}
	if _, err := c.Stream(context.Background(), req, collect(new([]string))); err != nil {
		t.Fatal(err)
	}
	var body partsBody
	if err := json.Unmarshal(bodies()[0], &body); err != nil {
		t.Fatal(err)
	}
	want := `[{"type":"file","file":{"filename":"report.pdf","file_data":"data:application/pdf;base64,` +
		base64.StdEncoding.EncodeToString(providertest.PDF) + `"}},{"type":"text","text":"Summarize."}]`
	if got := string(body.Messages[0].Content); got != want {
		t.Fatalf("content\n got %s\nwant %s", got, want)
	}
}

// The image estimate before calibration is within 10 % of what a server
// billing by OpenAI's documented rule bills for the same images.
func TestImageEstimateWithinTenPercentOfBill(t *testing.T) {
	var f *fake
	f = newFake(t, billImages(&f))
	for _, sz := range [][2]int{{64, 64}, {512, 512}, {1024, 1024}, {1280, 720}, {800, 2000}, {3000, 1000}} {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) {
			p := providertest.ImagePart("i.png", sz[0], sz[1])
			req := provider.Request{Model: "gpt-4o", Messages: []provider.Message{{Role: provider.RoleUser, Parts: []provider.Part{p}}}}
			res, err := f.client("").Stream(context.Background(), req, collect(new([]string)))
			if err != nil {
				t.Fatal(err)
			}
			est, billed := provider.PartsTokens("openai", req.Messages[0].Parts), res.Usage.InputTokens
			t.Logf("estimate %d, billed %d", est, billed)
			if billed <= 0 || math.Abs(float64(est-billed)) > 0.10*float64(billed) {
				t.Fatalf("estimate %d, billed %d: more than 10 %% apart", est, billed)
			}
		})
	}
}

// A part whose bytes do not match its sha256 is refused locally, before
// anything is sent.
func TestCorruptPartRefusedLocally(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) { t.Error("request sent") })
	p := providertest.ImagePart("a.png", 10, 10)
	p.Source = provider.BytesSource(providertest.PNG(11, 10))
	p.Size = 0 // only the digest can tell
	req := provider.Request{Model: "m", Messages: []provider.Message{{Role: provider.RoleUser, Parts: []provider.Part{p}}}}
	_, err := f.client("").Stream(context.Background(), req, collect(new([]string)))
	if provider.ClassOf(err) != provider.ClassBadRequest || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("err %v", err)
	}
}

// The same message with parts gives the same bytes every time (the
// prefix cache), pinned by a golden file.
func TestPartsRequestGolden(t *testing.T) {
	req := provider.Request{Model: "gpt-4o", Messages: []provider.Message{
		{Role: provider.RoleUser, Content: "Compare.", Parts: []provider.Part{
			providertest.NewPart(provider.PartImage, "image/jpeg", "a.jpg", []byte("\xff\xd8\xff\xe0fake-jpeg")),
			providertest.NewPart(provider.PartDocument, "application/pdf", "b.pdf", providertest.PDF),
		}},
		{Role: provider.RoleAssistant, Content: "They differ."},
		{Role: provider.RoleUser, Content: "How?"},
	}}
	got, err := encodeRequest(req, true)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	providertest.Golden(t, filepath.Join("testdata", "parts.golden.json"), got, *update)
}
