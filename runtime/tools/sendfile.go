package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path"
	"strings"
)

// SendFile is the send_file tool's name.
const SendFile = "send_file"

// maxCaption bounds a send_file caption, in characters (Telegram's caption
// limit is 1024).
const maxCaption = 1024

// Delivery is one file send_file hands the person: its bytes (streamed,
// never held whole), its media type, its name and a caption.
type Delivery struct {
	Body      io.Reader
	MediaType string
	Name      string
	Caption   string
}

// ErrNoRecipient is a send_file call where no person can receive a file
// (a turn without a chat).
var ErrNoRecipient = errors.New("there is no person to send a file to here")

func (r *Registry) sendFileTool() *tool {
	return &tool{
		name: SendFile,
		description: "Send a file of the workspace to the person: an image shows as a photo, anything else as a document " +
			"they can download. Optional caption (up to 1024 characters) goes with it. Use it when the person asks for a file " +
			"or when a result is a file (a chart, a report, an archive).",
		schema: object([]string{"path"}, map[string]*schema{
			"path":    str("Path relative to the workspace, such as out/chart.png.", 1, maxPath),
			"caption": str("A short caption shown with the file.", 0, maxCaption),
		}),
		run: r.sendFile,
	}
}

type sendArgs struct {
	Path    string `json:"path"`
	Caption string `json:"caption"`
}

// sendFile opens the file through the workspace root (the same checks as
// read_file: inside the workspace, no symlink out, not private, regular)
// and streams it to meta.Send, which stores it and delivers it.
func (r *Registry) sendFile(ctx context.Context, raw []byte, meta CallMeta) (string, bool, error) {
	var a sendArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return "", true, err
	}
	if meta.Send == nil {
		return "", true, ErrNoRecipient
	}
	rel, root, err := r.ws.open(a.Path)
	if err != nil {
		return "", true, err
	}
	defer root.Close()
	f, fi, err := openRegular(root, rel, a.Path, "send one file (pack a folder with shell first, e.g. tar)")
	if err != nil {
		return "", true, err
	}
	defer f.Close()
	if fi.Size() == 0 {
		return "", true, fmt.Errorf("%s is empty; there is nothing to send", quote(shownPath(a.Path)))
	}
	mt, err := mediaTypeOf(f, rel)
	if err != nil {
		return "", true, opError(a.Path, err)
	}
	name := path.Base(rel)
	if err := meta.Send(ctx, Delivery{Body: f, MediaType: mt, Name: name, Caption: strings.TrimSpace(a.Caption)}); err != nil {
		return "", true, fmt.Errorf("%s was not sent: %w", quote(shownPath(a.Path)), err)
	}
	return fmt.Sprintf("Sent %s (%s, %d bytes) to the person.", name, mt, fi.Size()), false, nil
}

// mediaTypeOf is a file's media type: by its extension when the system
// knows it, else sniffed from its first 512 bytes. The file is left at
// its start.
func mediaTypeOf(f *os.File, name string) (string, error) {
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		if mt, _, err := mime.ParseMediaType(t); err == nil {
			return mt, nil
		}
	}
	head := make([]byte, 512)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	mt, _, _ := strings.Cut(http.DetectContentType(head[:n]), ";")
	return strings.TrimSpace(mt), nil
}
