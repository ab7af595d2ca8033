package web

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestStaticHandlerCompresses: text assets go gzipped to a browser that
// accepts it and plain to one that does not, with Vary and an ETag that a
// reload revalidates with a 304; what is not embedded is a 404.
func TestStaticHandlerCompresses(t *testing.T) {
	h := StaticHandler()
	for _, tc := range []struct {
		name, path, accept, inm string
		code                    int
		gzipped                 bool
		ctype                   string
	}{
		{"script gzipped", "/app.js", "gzip, deflate, br", "", 200, true, "text/javascript"},
		{"style gzipped", "/style.css", "br;q=1, gzip;q=0.8", "", 200, true, "text/css"},
		{"any coding", "/app.js", "*", "", 200, true, "text/javascript"},
		{"gzip refused", "/app.js", "gzip;q=0, identity", "", 200, false, "text/javascript"},
		{"no header", "/app.js", "", "", 200, false, "text/javascript"},
		{"vendored module", "/vendor/dompurify/purify.es.mjs", "gzip", "", 200, true, "text/javascript"},
		{"revalidated", "/app.js", "gzip", etagOf(t, "app.js"), 304, false, ""},
		{"missing", "/nope.js", "gzip", "", 404, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", tc.path, nil)
			if tc.accept != "" {
				r.Header.Set("Accept-Encoding", tc.accept)
			}
			if tc.inm != "" {
				r.Header.Set("If-None-Match", tc.inm)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.code {
				t.Fatalf("code %d, want %d", w.Code, tc.code)
			}
			if tc.code != 200 {
				return
			}
			if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, tc.ctype) {
				t.Errorf("Content-Type %q, want %s", ct, tc.ctype)
			}
			if w.Header().Get("ETag") == "" || w.Header().Get("Vary") != "Accept-Encoding" {
				t.Errorf("headers %v", w.Header())
			}
			want, _ := fs.ReadFile(Static(), strings.TrimPrefix(tc.path, "/"))
			body := w.Body.Bytes()
			if got := w.Header().Get("Content-Encoding") == "gzip"; got != tc.gzipped {
				t.Fatalf("gzipped %v, want %v", got, tc.gzipped)
			}
			if tc.gzipped {
				if len(body) >= len(want) {
					t.Errorf("gzipped %d B, raw %d B", len(body), len(want))
				}
				zr, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				if body, err = io.ReadAll(zr); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(body, want) {
				t.Fatalf("served %d B differ from the embedded %d B", len(body), len(want))
			}
		})
	}
}

// TestWritePage: the pages go gzipped to a browser that accepts it, as
// they are to one that does not.
func TestWritePage(t *testing.T) {
	for _, name := range []string{"index.html", "monitor.html"} {
		for _, accept := range []string{"gzip", ""} {
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set("Accept-Encoding", accept)
			w := httptest.NewRecorder()
			WritePage(w, r, name)
			body := w.Body.Bytes()
			if gz := w.Header().Get("Content-Encoding") == "gzip"; gz != (accept == "gzip") {
				t.Fatalf("%s, Accept-Encoding %q: gzipped %v", name, accept, gz)
			} else if gz {
				zr, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				body, _ = io.ReadAll(zr)
			}
			want, _ := fs.ReadFile(Static(), name)
			if !bytes.Equal(body, want) || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
				t.Fatalf("%s, Accept-Encoding %q: %d B of %s", name, accept, len(body), w.Header().Get("Content-Type"))
			}
		}
	}
}

func etagOf(t *testing.T, name string) string {
	w := httptest.NewRecorder()
	StaticHandler().ServeHTTP(w, httptest.NewRequest("GET", "/"+name, nil))
	if w.Header().Get("ETag") == "" {
		t.Fatalf("%s has no ETag", name)
	}
	return w.Header().Get("ETag")
}

// FuzzAcceptsGzip: any header is read without panic, and a header listing
// plain gzip first is always accepted.
func FuzzAcceptsGzip(f *testing.F) {
	for _, s := range []string{"", "gzip", "gzip;q=0", "br, gzip;q=0.5", "*;q=0", "identity", ",,;;=", "GZIP ; Q = 0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		_ = acceptsGzip(header)
		if !acceptsGzip("gzip, " + header) {
			t.Fatalf("gzip first in %q not accepted", header)
		}
	})
}

// TestAssetsCompressOnFirstUse: reading the assets (what a start does)
// compresses nothing; the first request for a text file compresses that
// file alone, and Warm the rest.
func TestAssetsCompressOnFirstUse(t *testing.T) {
	m := readAssets()
	packed := func() (n int) {
		for _, a := range m {
			if a.gz != nil {
				n++
			}
		}
		return n
	}
	if n := packed(); n != 0 {
		t.Fatalf("%d assets compressed as they were read", n)
	}
	app := m["app.js"]
	r := httptest.NewRequest("GET", "/app.js", nil)
	r.Header.Set("Accept-Encoding", "gzip")
	w := httptest.NewRecorder()
	if body := app.body(w.Header(), r); len(body) >= len(app.raw) || w.Header().Get("Content-Encoding") != "gzip" {
		t.Fatalf("first use sent %d B (raw %d B), headers %v", len(body), len(app.raw), w.Header())
	}
	if n := packed(); n != 1 {
		t.Fatalf("%d assets compressed after one was asked for, want 1", n)
	}
	for _, a := range m {
		a.gzipped()
	}
	if Warm(); assets()["app.js"].gz == nil {
		t.Error("Warm left app.js uncompressed")
	}
	texts := 0
	for name, a := range m {
		if compressible(name) {
			texts++
		}
		if a.gz != nil && !compressible(name) {
			t.Errorf("%s compressed", name)
		}
	}
	if n := packed(); n < texts*3/4 {
		t.Fatalf("%d of %d text assets compressed once all were asked for", n, texts)
	}
}
