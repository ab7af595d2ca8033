package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
)

// asset is one static file as it is served: its bytes, an ETag of the
// content, and, for a text file, a gzipped copy made on first use (gzipped)
// and kept when it is smaller.
type asset struct {
	raw  []byte
	etag string
	pack bool // compressible: gzipped asks for the copy
	once sync.Once
	gz   []byte // set by once; nil when not smaller or not packed
}

// gzipped returns a's gzipped copy, or nil when a has none. The first call
// compresses, at the best level: the files never change while the binary
// runs, so they are compressed once per process, and not at its start
// (~900 KB at the best level took two thirds of the time to the first
// accepted connection).
func (a *asset) gzipped() []byte {
	if a.pack {
		a.once.Do(func() {
			var buf bytes.Buffer
			buf.Grow(len(a.raw) / 2)
			zw := gzippers.Get().(*gzip.Writer)
			zw.Reset(&buf)
			_, _ = zw.Write(a.raw)
			_ = zw.Close()
			gzippers.Put(zw)
			if buf.Len() < len(a.raw)*9/10 {
				a.gz = buf.Bytes()
			}
		})
	}
	return a.gz
}

// gzippers are the compressors gzipped reuses: each holds about a MiB of
// state, and one per file made ~30 MiB of garbage at every start.
var gzippers = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestCompression)
	return zw
}}

// body is what to send of a for r: gzipped when a has a gzipped form and r
// accepts it (setting Vary and Content-Encoding in h), else raw.
func (a *asset) body(h http.Header, r *http.Request) []byte {
	gz := a.gzipped()
	if gz == nil {
		return a.raw
	}
	h.Add("Vary", "Accept-Encoding")
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		h.Set("Content-Encoding", "gzip")
		return gz
	}
	return a.raw
}

// assets are the embedded files by name, read and hashed on first use.
var assets = sync.OnceValue(readAssets)

// compressible says a file is text worth gzipping (images such as the
// favicon's SVG are text too; fonts and PNGs would not be).
func compressible(name string) bool {
	switch path.Ext(name) {
	case ".js", ".mjs", ".css", ".html", ".svg", ".json", ".txt", ".map":
		return true
	}
	return false
}

// readAssets reads every embedded file (no copy: they are in the binary)
// and hashes it for its ETag; compressing waits for gzipped.
func readAssets() map[string]*asset {
	m := map[string]*asset{}
	_ = fs.WalkDir(static, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(static, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		m[name] = &asset{raw: b, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, pack: compressible(name)}
		return nil
	})
	return m
}

// Warm compresses every text asset now, so that the first page load does
// not: the gateway calls it in the background once it listens.
func Warm() {
	for _, a := range assets() {
		a.gzipped()
	}
}

// StaticHandler serves Static() (mount it with http.StripPrefix at
// /static/): gzipped when the browser accepts it (Content-Encoding: gzip,
// Vary: Accept-Encoding), with an ETag of the content so a reload
// revalidates with a 304 instead of fetching the files again
// (Cache-Control: no-cache, as the names carry no version).
func StaticHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/")
		a := assets()[name]
		if a == nil {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("ETag", a.etag)
		h.Set("Cache-Control", "no-cache")
		body := a.body(h, r)
		// ServeContent sets the type from the name, answers If-None-Match
		// with 304, and HEAD; a Range applies to the bytes sent.
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(body))
	})
}

// WritePage writes the embedded page name (index.html, monitor.html) as
// text/html, gzipped when r accepts it; the caller sets its other headers
// (the pages are not cached: Cache-Control no-store).
func WritePage(w http.ResponseWriter, r *http.Request, name string) {
	a := assets()[name]
	if a == nil {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	body := a.body(h, r)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// acceptsGzip reads an Accept-Encoding header: gzip (or *) listed and not
// refused with q=0.
func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		coding = strings.ToLower(strings.TrimSpace(coding))
		if coding != "gzip" && coding != "*" {
			continue
		}
		q := strings.ReplaceAll(strings.ToLower(params), " ", "")
		if q == "q=0" || q == "q=0.0" || q == "q=0.00" || q == "q=0.000" {
			return false
		}
		return true
	}
	return false
}
