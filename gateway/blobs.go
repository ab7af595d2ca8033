package gateway

import (
	"errors"
	"io/fs"
	"mime"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/mirror-gateway/mirror/chats"
)

// blobRoutes adds GET /api/blobs/{sha256}: an attachment's bytes, for the
// browser's thumbnails, inline images, voice notes and download links.
func (s *Server) blobRoutes() {
	s.mux.Handle("GET /api/blobs/{sha256}", s.need(http.HandlerFunc(s.blob)))
	s.mux.Handle("GET /api/uploads/limits", s.need(http.HandlerFunc(s.uploadLimits)))
}

// inlineImages are the image types a browser shows as a picture and
// nothing else: these alone are served inline. An SVG may carry script,
// so it is downloaded like any other file.
var inlineImages = map[string]bool{
	"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true, "image/avif": true, "image/bmp": true,
}

// blobSandbox is the Content-Security-Policy of a blob that is not an
// inline image: opened in a tab anyway, it runs nothing and reaches
// nothing, whatever its bytes are.
const blobSandbox = "default-src 'none'; sandbox"

// blob serves one attachment to the holder of the token, only when
// something that token can see names it (a stored row or a live upload;
// see chats.Service.BlobRefs): a hash that nothing names is 404 whether or
// not its file is on disk, so the route cannot be used to probe the blob
// store. The media type is the one the referencing row stored, never
// sniffed (nosniff); images of the raster types are inline, anything else
// is an attachment under a sandbox CSP. ?name= picks the download name
// among the names the rows give the file (else the hash names it), and
// ?thumb=1 asks for a thumbnail, which is the file itself: the browser
// scales it. Range and If-None-Match requests are answered (audio seeks;
// the ETag is the hash).
func (s *Server) blob(w http.ResponseWriter, r *http.Request) {
	if s.opt.Chats == nil || s.opt.Chats.Blobs() == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not_found", "message": "attachments are not enabled"})
		return
	}
	sum := r.PathValue("sha256")
	want := r.URL.Query().Get("name")
	ref, found, err := s.blobRef(r, sum, want)
	if err != nil {
		s.log.Error("blob lookup failed", "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "internal", "message": "the file could not be looked up"})
		return
	}
	if !found {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not_found", "message": "no such file"})
		return
	}
	f, err := s.opt.Chats.Blobs().OpenContext(r.Context(), sum) // in a cluster, fetched when this node has no copy
	if errors.Is(err, fs.ErrNotExist) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not_found", "message": "the file is no longer stored"})
		return
	}
	if errors.Is(err, chats.ErrUnavailable) {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "unavailable", "message": "the cluster could not give the file now"})
		return
	}
	if err != nil {
		s.log.Error("blob open failed", "sha256", sum, "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "internal", "message": "the file could not be read"})
		return
	}
	defer f.Close()
	name := sum
	if want != "" && len(ref.Names) > 0 && ref.Names[0] == want {
		name = want
	}
	h := w.Header()
	typ := ref.Type
	if typ == "" {
		typ = "application/octet-stream"
	}
	h.Set("Content-Type", typ)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "private, max-age=31536000, immutable")
	h.Set("ETag", `"`+sum+`"`)
	disposition := "attachment"
	if inlineImages[typ] {
		disposition = "inline"
	} else {
		h.Set("Content-Security-Policy", blobSandbox)
	}
	h.Set("Content-Disposition", contentDisposition(disposition, name, sum))
	http.ServeContent(w, r, "", time.Time{}, f)
}

// blobRefTTL is how long a found reference is trusted without a new scan:
// a thumbnail shown in many places costs one scan of the rows, and a blob a
// pruned chat alone named stops being served within this time (or at once,
// when its file is collected).
const blobRefTTL = time.Minute

// maxBlobRefs bounds the references kept; past it they are all dropped.
const maxBlobRefs = 4096

type cachedRef struct {
	ref   chats.BlobRef
	until time.Time
}

// blobCache holds found blob references for blobRefTTL.
type blobCache struct {
	mu sync.Mutex
	m  map[string]cachedRef
}

// blobRef looks up what names sum (chats.Service.BlobRefs), through a short
// cache of found references; a name the cached one lacks is looked up again.
func (s *Server) blobRef(r *http.Request, sum, want string) (chats.BlobRef, bool, error) {
	now := time.Now()
	bc := &s.blobCache
	bc.mu.Lock()
	key := sum + "/" + personOf(r).ID // what one person may fetch, another may not
	c, ok := bc.m[key]
	bc.mu.Unlock()
	if ok && now.Before(c.until) && (want == "" || slices.Contains(c.ref.Names, want)) {
		ref := c.ref
		ref.Names = slices.Clone(ref.Names)
		if i := slices.Index(ref.Names, want); i > 0 {
			ref.Names[0], ref.Names[i] = ref.Names[i], ref.Names[0]
		}
		return ref, true, nil
	}
	ref, found, err := s.scope(r).BlobRefs(r.Context(), sum, want)
	if err != nil || !found {
		return ref, found, err
	}
	bc.mu.Lock()
	if bc.m == nil || len(bc.m) >= maxBlobRefs {
		bc.m = map[string]cachedRef{}
	}
	bc.m[key] = cachedRef{ref: chats.BlobRef{Type: ref.Type, Names: slices.Clone(ref.Names)}, until: now.Add(blobRefTTL)}
	bc.mu.Unlock()
	return ref, true, nil
}

// contentDisposition is the header for a file named name; a name the
// header cannot carry falls back to the hash.
func contentDisposition(kind, name, sum string) string {
	if v := mime.FormatMediaType(kind, map[string]string{"filename": name}); v != "" {
		return v
	}
	return mime.FormatMediaType(kind, map[string]string{"filename": sum})
}

// uploadLimits answers GET /api/uploads/limits: the largest file of each
// kind POST /api/uploads takes, so the browser refuses a file over it
// before sending a byte.
func (s *Server) uploadLimits(w http.ResponseWriter, r *http.Request) {
	if s.opt.Chats == nil || s.opt.Chats.Blobs() == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "unavailable", "message": "attachments are not enabled"})
		return
	}
	l := s.opt.Chats.Blobs().Limits()
	writeJSON(w, http.StatusOK, map[string]any{"max_image_bytes": l.Image, "max_document_bytes": l.Document, "max_audio_bytes": l.Audio,
		"max_attachments": chats.MaxAttachments})
}
