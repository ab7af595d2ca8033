package openai

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// A fake transcription server, whisper style: it parses the multipart
// form as OpenAI's /audio/transcriptions does and answers per the test.
func TestTranscribe(t *testing.T) {
	audio := bytes.Repeat([]byte("OggS\x00\x02voice"), 5000) // 50 kB, more than one pipe write
	tests := []struct {
		name    string
		status  int
		answer  string
		want    string
		class   provider.Class
		checkIn bool
	}{
		{"transcript", 200, `{"text":"  Hello from a voice note.  "}`, "Hello from a voice note.", "", true},
		{"whisper.cpp verbose answer", 200, `{"text":"hi","segments":[]}`, "hi", "", false},
		{"bad key", 401, `{"error":{"message":"Incorrect API key provided: ` + testKey + `","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, "", provider.ClassAuth, false},
		{"rate limited", 429, `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`, "", provider.ClassRateLimited, false},
		{"not a transcription", 200, `<html>proxy</html>`, "", provider.ClassServer, false},
		{"error in a 200", 200, `{"error":{"message":"model not found","type":"invalid_request_error","code":"model_not_found"}}`, "", provider.ClassBadRequest, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var problem string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.Method != http.MethodPost || r.URL.Path != "/v1/audio/transcriptions":
					problem = r.Method + " " + r.URL.Path
				case r.Header.Get("Authorization") != "Bearer "+testKey:
					problem = "authorization " + r.Header.Get("Authorization")
				default:
					if err := r.ParseMultipartForm(1 << 20); err != nil {
						problem = err.Error()
						break
					}
					f, fh, err := r.FormFile("file")
					if err != nil {
						problem = err.Error()
						break
					}
					got, _ := io.ReadAll(f)
					switch {
					case r.FormValue("model") != "whisper-1" || r.FormValue("response_format") != "json":
						problem = "fields " + r.FormValue("model") + " " + r.FormValue("response_format")
					case fh.Filename != "voice.ogg" || fh.Header.Get("Content-Type") != "audio/ogg":
						problem = "file " + fh.Filename + " " + fh.Header.Get("Content-Type")
					case !bytes.Equal(got, audio):
						problem = "audio bytes differ"
					}
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.answer)
			}))
			defer srv.Close()
			c := New(Config{Name: "stt", BaseURL: srv.URL + "/v1", APIKey: testKey})
			text, err := c.Transcribe(context.Background(), "whisper-1", bytes.NewReader(audio), "audio/ogg", "voice.ogg")
			if problem != "" {
				t.Fatalf("server saw: %s", problem)
			}
			if tt.class == "" {
				if err != nil || text != tt.want {
					t.Fatalf("Transcribe = %q, %v; want %q", text, err, tt.want)
				}
				return
			}
			if provider.ClassOf(err) != tt.class {
				t.Fatalf("err %v, want class %s", err, tt.class)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Fatalf("key in error: %v", err)
			}
		})
	}
}

// A server that is not there is a network error, and the call returns
// (its writer goroutine ends with it).
func TestTranscribeUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c := New(Config{Name: "stt", BaseURL: url + "/v1"})
	_, err := c.Transcribe(context.Background(), "", strings.NewReader("x"), "audio/ogg", "v.ogg")
	if provider.ClassOf(err) != provider.ClassNetwork {
		t.Fatalf("err %v", err)
	}
}
