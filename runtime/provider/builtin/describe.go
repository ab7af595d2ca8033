package builtin

import (
	"bytes"
	"fmt"
	"image"
	_ "image/gif" // pixel sizes of the image kinds people send
	_ "image/jpeg"
	_ "image/png"
	"io"
	"strings"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// headLines is how many first lines of a text file a description quotes.
const headLines = 3

// DescribeParts describes attachments deterministically, one line each:
// the name, the kind and media type, the size, an image's pixel size (from
// the part, else read from the image's header) and a text file's first
// lines. Nothing in it depends on time or on the order of map iteration,
// so the same parts always give the same text.
func DescribeParts(parts []provider.Part) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You attached %s:\n", plural(len(parts), "file"))
	for _, p := range parts {
		name := p.Name
		if name == "" {
			name = "(unnamed)"
		}
		kind := p.Kind
		if kind == "" {
			kind = "unsupported file"
		}
		fmt.Fprintf(&b, "- %s: %s, %s, %s", name, kind, p.MediaType, byteSize(p.Size))
		switch p.Kind {
		case provider.PartImage:
			if w, h, ok := pixelSize(p); ok {
				fmt.Fprintf(&b, ", %d×%d pixels", w, h)
			} else {
				b.WriteString(", pixel size unknown")
			}
		case provider.PartAudio:
			if p.Transcript != "" {
				b.WriteString("; it says «" + truncate(strings.Join(strings.Fields(p.Transcript), " "), 120) + "»")
			} else if p.Withheld != "" {
				b.WriteString("; not heard: " + p.Withheld)
			}
		case provider.PartText:
			if lines, err := p.Head(headLines); err == nil && len(lines) > 0 {
				quoted := make([]string, len(lines))
				for i, l := range lines {
					quoted[i] = "«" + truncate(strings.TrimRight(l, "\r"), 80) + "»"
				}
				b.WriteString("; it begins " + strings.Join(quoted, " "))
			}
		}
		b.WriteString(".\n")
	}
	b.WriteString("\n")
	return b.String()
}

// pixelSize is the part's stored pixel size, or the one its header says.
func pixelSize(p provider.Part) (int, int, bool) {
	if p.Width > 0 && p.Height > 0 {
		return p.Width, p.Height, true
	}
	if p.Source == nil {
		return 0, 0, false
	}
	rc, err := p.Source.Open()
	if err != nil {
		return 0, 0, false
	}
	defer rc.Close()
	// Headers sit at the start; 64 KiB covers JPEG's EXIF ahead of SOF.
	head, _ := io.ReadAll(io.LimitReader(rc, 64<<10))
	cfg, _, err := image.DecodeConfig(bytes.NewReader(head))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return 0, 0, false
	}
	return cfg.Width, cfg.Height, true
}

// byteSize is n bytes in words: "812 bytes", "14.2 KB", "3.1 MB".
func byteSize(n int64) string {
	switch {
	case n < 1024:
		return plural(int(n), "byte")
	case n < 1<<20:
		return fmt.Sprintf("%.1f KB", float64(n)/1024)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
}
