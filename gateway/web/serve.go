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

// asset is one static file as it is served: its bytes, a gzipped copy
// when that is smaller, and an ETag of the content.
type asset struct {
	raw, gz []byte
	etag    string
}

// body is what to send of a for r: gzipped when a has a gzipped form and r
// accepts it (setting Vary and Content-Encoding in h), else raw.
func (a *asset) body(h http.Header, r *http.Request) []byte {
	if a.gz == nil {
		return a.raw
	}
	h.Add("Vary", "Accept-Encoding")
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		h.Set("Content-Encoding", "gzip")
		return a.gz
	}
	return a.raw
}

var (
	assetsOnce sync.Once
	assets     map[string]*asset
)

// compressible says a file is text worth gzipping (images such as the
// favicon's SVG are text too; fonts and PNGs would not be).
func compressible(name string) bool {
	switch path.Ext(name) {
	case ".js", ".mjs", ".css", ".html", ".svg", ".json", ".txt", ".map":
		return true
	}
	return false
}

// loadAssets reads every embedded file once and gzips the text ones at the
// best level: the files never change while the binary runs, so they are
// compressed once per process instead of on every request.
func loadAssets() {
	assets = map[string]*asset{}
	_ = fs.WalkDir(static, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(static, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		a := &asset{raw: b, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		if compressible(name) {
			var buf bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
			_, _ = zw.Write(b)
			_ = zw.Close()
			if buf.Len() < len(b)*9/10 {
				a.gz = buf.Bytes()
			}
		}
		assets[name] = a
		return nil
	})
}

// StaticHandler serves Static() (mount it with http.StripPrefix at
// /static/): gzipped when the browser accepts it (Content-Encoding: gzip,
// Vary: Accept-Encoding), with an ETag of the content so a reload
// revalidates with a 304 instead of fetching the files again
// (Cache-Control: no-cache, as the names carry no version).
func StaticHandler() http.Handler {
	assetsOnce.Do(loadAssets)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/")
		a := assets[name]
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
	assetsOnce.Do(loadAssets)
	a := assets[name]
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
