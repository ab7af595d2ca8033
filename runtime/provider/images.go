package provider

import (
	"encoding/base64"
	"strings"
)

// MaxReplyImages bounds the bytes of images one answer may carry: what
// an adapter keeps beyond it is dropped, so a misbehaving server cannot
// make Mirror hold an unbounded answer.
const MaxReplyImages = 50 << 20

// Images collects the images of one answer within MaxReplyImages.
type Images struct {
	list  []Image
	bytes int
}

// AddBase64 adds an image of mediaType given as standard base64; data
// that is not an image type or not base64 is skipped.
func (im *Images) AddBase64(mediaType, data string) {
	mt := strings.ToLower(strings.TrimSpace(mediaType))
	if !strings.HasPrefix(mt, "image/") || data == "" {
		return
	}
	if im.bytes+base64.StdEncoding.DecodedLen(len(data)) > MaxReplyImages {
		return
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil || len(b) == 0 {
		return
	}
	im.bytes += len(b)
	im.list = append(im.list, Image{MediaType: mt, Data: b})
}

// AddDataURL adds an image given as a data: URL with base64 content
// ("data:image/png;base64,..."); anything else is skipped.
func (im *Images) AddDataURL(u string) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok || !strings.HasSuffix(meta, ";base64") {
		return
	}
	mt, _, _ := strings.Cut(meta, ";")
	im.AddBase64(mt, data)
}

// List returns the images collected, in order.
func (im *Images) List() []Image { return im.list }
