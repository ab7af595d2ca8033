package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/config"
	bolt "go.etcd.io/bbolt"
)

// get fetches path with header and returns the answer and its body.
func (st *stack) get(t testing.TB, path string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", st.http.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// upload posts body and returns its sha256.
func (st *stack) upload(t testing.TB, typ, name string, body []byte) string {
	t.Helper()
	status, out := st.post(t, bearer(), typ, name, bytes.NewReader(body), int64(len(body)))
	if status != http.StatusCreated {
		t.Fatalf("upload %s: %d %v", name, status, out)
	}
	return out["attachment"].(map[string]any)["sha256"].(string)
}

// forgetUpload removes sum's upload entry, as collection does once its
// unreferenced_ttl is over: from then on only rows keep it visible.
func (st *stack) forgetUpload(t testing.TB, sum string) {
	t.Helper()
	err := st.store.Write(context.Background(), func(tx *bolt.Tx) error { return tx.Bucket([]byte("uploads")).Delete([]byte(sum)) })
	if err != nil {
		t.Fatal(err)
	}
}

// GET /api/blobs/{sha256} serves a file only to the token, only while an
// upload or a stored row names it, with the stored type, a disposition by
// kind, and headers that keep a hostile file inert.
func TestBlobRoute(t *testing.T) {
	st := newStack(t, nil)
	img := pngOf(t, 5, 4)
	imgSum := st.upload(t, "image/png", "cat.png", img)
	page := []byte("alert(1) <script>x</script>")
	pageSum := st.upload(t, "text/plain", "notes.txt", page)
	// A row names this one; its upload entry is gone.
	sent := []byte("sent in a message")
	sentSum := st.upload(t, "text/plain", "msg.txt", sent)
	cl := st.connect()
	cl.send(map[string]any{"type": "chat.create", "title": "Blobs"})
	chat := cl.expect("chat.created")["chat"].(map[string]any)["id"].(string)
	cl.send(map[string]any{"type": "message.send", "chat": chat, "text": "here", "attachments": []string{sentSum}, "client_id": "c1"})
	cl.expect("message.accepted")
	st.forgetUpload(t, sentSum)
	// On disk, but nothing names it: stored by the store directly, or an
	// upload whose entry went and that no message named.
	orphan, err := st.svc.Blobs().Put(strings.NewReader("nobody names me"), "text/plain", "orphan.txt")
	if err != nil {
		t.Fatal(err)
	}
	gone := st.upload(t, "text/plain", "gone.txt", []byte("uploaded, never sent"))
	st.forgetUpload(t, gone)

	for _, tc := range []struct {
		name        string
		path        string
		header      http.Header
		status      int
		body        []byte
		typ         string
		disposition string
		sandbox     bool
	}{
		{"without the token", "/api/blobs/" + imgSum, nil, http.StatusUnauthorized, nil, "", "", false},
		{"a wrong token", "/api/blobs/" + imgSum, http.Header{"Authorization": {"Bearer wrong-token-0123456789"}}, http.StatusUnauthorized, nil, "", "", false},
		{"an image of a live upload", "/api/blobs/" + imgSum + "?thumb=1", bearer(), http.StatusOK, img, "image/png", `inline; filename=` + imgSum, false},
		{"the login cookie", "/api/blobs/" + imgSum, http.Header{"Cookie": {CookieName + "=" + testToken}}, http.StatusOK, img, "image/png", "inline", false},
		{"an image by its name", "/api/blobs/" + imgSum + "?name=cat.png", bearer(), http.StatusOK, img, "image/png", `inline; filename=cat.png`, false},
		{"a name no row gives it", "/api/blobs/" + imgSum + "?name=evil.html", bearer(), http.StatusOK, img, "image/png", `inline; filename=` + imgSum, false},
		{"a page stored as text", "/api/blobs/" + pageSum + "?name=notes.txt", bearer(), http.StatusOK, page, "text/plain", `attachment; filename=notes.txt`, true},
		{"named by a message row only", "/api/blobs/" + sentSum + "?name=msg.txt", bearer(), http.StatusOK, sent, "text/plain", `attachment; filename=msg.txt`, true},
		{"on disk, named by nothing", "/api/blobs/" + orphan.SHA256, bearer(), http.StatusNotFound, nil, "", "", false},
		{"an upload no message named, its entry gone", "/api/blobs/" + gone, bearer(), http.StatusNotFound, nil, "", "", false},
		{"a hash never stored", "/api/blobs/" + strings.Repeat("ab", 32), bearer(), http.StatusNotFound, nil, "", "", false},
		{"not a hash", "/api/blobs/..%2f..%2ftoken", bearer(), http.StatusNotFound, nil, "", "", false},
		{"upper-case hex", "/api/blobs/" + strings.ToUpper(imgSum), bearer(), http.StatusNotFound, nil, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := st.get(t, tc.path, tc.header)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, tc.status)
			}
			if tc.status != http.StatusOK {
				if resp.Header.Get("Cache-Control") != "" {
					t.Fatalf("a refusal is cacheable: %q", resp.Header.Get("Cache-Control"))
				}
				return
			}
			h := resp.Header
			if !bytes.Equal(body, tc.body) {
				t.Fatalf("body %q", body)
			}
			if h.Get("Content-Type") != tc.typ {
				t.Fatalf("Content-Type %q, want %q", h.Get("Content-Type"), tc.typ)
			}
			if !strings.HasPrefix(h.Get("Content-Disposition"), tc.disposition) {
				t.Fatalf("Content-Disposition %q, want %q", h.Get("Content-Disposition"), tc.disposition)
			}
			if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Cache-Control") != "private, max-age=31536000, immutable" {
				t.Fatalf("headers %v", h)
			}
			if csp := h.Get("Content-Security-Policy"); strings.Contains(csp, "sandbox") != tc.sandbox {
				t.Fatalf("Content-Security-Policy %q, sandbox wanted: %v", csp, tc.sandbox)
			}
		})
	}

	// Audio seeks with ranges; a cached copy is revalidated by its hash.
	resp, body := st.get(t, "/api/blobs/"+pageSum, http.Header{"Authorization": {"Bearer " + testToken}, "Range": {"bytes=9-16"}})
	if resp.StatusCode != http.StatusPartialContent || string(body) != "<script>" {
		t.Fatalf("range: %d %q", resp.StatusCode, body)
	}
	resp, _ = st.get(t, "/api/blobs/"+pageSum, http.Header{"Authorization": {"Bearer " + testToken}, "If-None-Match": {`"` + pageSum + `"`}})
	if resp.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match: %d", resp.StatusCode)
	}

	// A non-ASCII name travels in the RFC 2231 form.
	uni := st.upload(t, "text/plain", "r%C3%A9sum%C3%A9.txt", []byte("cv"))
	resp, _ = st.get(t, "/api/blobs/"+uni+"?name=r%C3%A9sum%C3%A9.txt", bearer())
	if cd := resp.Header.Get("Content-Disposition"); cd != `attachment; filename*=utf-8''r%C3%A9sum%C3%A9.txt` {
		t.Fatalf("Content-Disposition %q", cd)
	}
}

// GET /api/uploads/limits tells the browser each kind's limit, so a file
// over it is refused before a byte is sent.
func TestUploadLimitsRoute(t *testing.T) {
	st := newStack(t, func(c *config.Config) { c.Attachments.MaxImageBytes = 12345 })
	resp, body := st.get(t, "/api/uploads/limits", nil)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", resp.StatusCode)
	}
	resp, body = st.get(t, "/api/uploads/limits", bearer())
	var l map[string]int64
	if err := json.Unmarshal(body, &l); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if l["max_image_bytes"] != 12345 || l["max_document_bytes"] == 0 || l["max_audio_bytes"] == 0 || l["max_attachments"] != 20 {
		t.Fatalf("limits %v", l)
	}
}

// Whatever name a row gives a file, the header carries it back exactly
// (or, when it cannot, the hash): never a second parameter, never a
// broken header.
func FuzzContentDisposition(f *testing.F) {
	for _, s := range []string{"cat.png", "résumé.txt", `a"b.txt`, "a;b=c", "x\r\nSet-Cookie: y", "", "\xff", "名前.pdf"} {
		f.Add(s)
	}
	sum := strings.Repeat("ab", 32)
	f.Fuzz(func(t *testing.T, name string) {
		for _, kind := range []string{"inline", "attachment"} {
			h := contentDisposition(kind, name, sum)
			if strings.ContainsAny(h, "\r\n") {
				t.Fatalf("%q: header %q", name, h)
			}
			d, params, err := mime.ParseMediaType(h)
			if err != nil || d != kind || len(params) != 1 {
				t.Fatalf("%q: header %q parses as %q %v %v", name, h, d, params, err)
			}
			if got := params["filename"]; got != name && got != sum {
				t.Fatalf("%q: header %q names %q", name, h, got)
			}
		}
	})
}
