package providertest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Whisper is a fake OpenAI-compatible /audio/transcriptions server: it
// parses the multipart form as OpenAI's does (model whisper-1, a file
// part), keeps each file it gets, and answers {"text": Text}, or fails
// with Status when it is set.
type Whisper struct {
	Text   string
	Status int

	mu    sync.Mutex
	files [][]byte
}

// Serve starts the server for the test and returns its base URL (…/v1),
// what a transcribe role's provider points at.
func (f *Whisper) Serve(t testing.TB) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/audio/transcriptions" || r.ParseMultipartForm(1<<20) != nil || r.FormValue("model") != "whisper-1" {
			http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, 400)
			return
		}
		file, _, err := r.FormFile("file")
		if err != nil {
			http.Error(w, `{"error":{"message":"no file","type":"invalid_request_error"}}`, 400)
			return
		}
		b, _ := io.ReadAll(file)
		f.mu.Lock()
		f.files = append(f.files, b)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if f.Status != 0 {
			w.WriteHeader(f.Status)
			io.WriteString(w, `{"error":{"message":"the model is overloaded","type":"server_error"}}`)
			return
		}
		json.NewEncoder(w).Encode(map[string]string{"text": f.Text})
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// Files returns the audio files the server was sent, in order.
func (f *Whisper) Files() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.files...)
}
