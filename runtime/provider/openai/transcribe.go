package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// maxTranscript bounds the transcription answer read: a JSON object with
// the text of at most a few hours of speech.
const maxTranscript = 4 << 20

// Transcribe sends audio to the endpoint's /audio/transcriptions (OpenAI's
// Whisper API, whisper.cpp's server, any compatible one) and returns the
// transcript. The request is multipart/form-data as the API documents it:
// "file" (named name, typed mediaType), "model" (the configured model of
// the transcribe role's chain; OpenAI refuses a request without one,
// local servers ignore it) and response_format "json", whose answer is
// {"text": "..."}. The audio is streamed into the body, never held whole.
// Failures are *provider.Error values classified as Stream's are, with the
// key redacted.
func (c *Client) Transcribe(ctx context.Context, model string, audio io.Reader, mediaType, name string) (string, error) {
	if name == "" {
		name = "audio"
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	wrote := make(chan struct{})
	go func() {
		// Owned by this call: it ends when the body is written or the
		// pipe is closed below, and Transcribe waits for it.
		defer close(wrote)
		pw.CloseWithError(writeForm(mw, model, audio, mediaType, name))
	}()
	defer func() { pr.Close(); <-wrote }()

	url := strings.TrimSuffix(c.url, "/chat/completions") + "/audio/transcriptions"
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, pr)
	if err != nil {
		return "", provider.LocalError(c.name, c.key, err.Error())
	}
	hreq.Header.Set("Content-Type", mw.FormDataContentType())
	hreq.Header.Set("Accept", "application/json")
	if c.key != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.hc.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("%s: %w", c.name, ctx.Err())
		}
		return "", provider.NetworkError(c.name, c.key, err, "transcription: ")
	}
	defer resp.Body.Close()
	raw, err := provider.ReadCapped(resp.Body, maxTranscript, c.key)
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("%s: %w", c.name, ctx.Err())
		}
		return "", provider.NetworkError(c.name, c.key, err, "reading transcription: ")
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return "", c.bodyError(resp.StatusCode, resp.Header, raw)
	}
	var out struct {
		Text  *string         `json:"text"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.Text == nil {
		if len(out.Error) > 0 && string(out.Error) != "null" {
			return "", c.bodyError(0, nil, raw)
		}
		return "", &provider.Error{Provider: c.name, Class: provider.ClassServer,
			Message: "reply is not a transcription: " + snippet(raw, c.key)}
	}
	return strings.TrimSpace(*out.Text), nil
}

// writeForm writes the multipart body of a transcription request.
func writeForm(mw *multipart.Writer, model string, audio io.Reader, mediaType, name string) error {
	if model != "" {
		if err := mw.WriteField("model", model); err != nil {
			return err
		}
	}
	if err := mw.WriteField("response_format", "json"); err != nil {
		return err
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, strings.NewReplacer(`"`, "", "\r", "", "\n", "").Replace(name)))
	if mediaType == "" {
		mediaType = "application/octet-stream"
	}
	h.Set("Content-Type", mediaType)
	fw, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	if _, err := io.Copy(fw, audio); err != nil {
		return err
	}
	return mw.Close()
}
