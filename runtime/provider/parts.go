package provider

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/mirror-gateway/mirror/runtime/tokens"
)

// Part kinds: what an attachment is to the model.
const (
	PartImage    = "image"    // a picture: each provider's image part
	PartDocument = "document" // a PDF: a document part where the provider takes one
	PartAudio    = "audio"    // a voice note or audio file
	PartText     = "text"     // a text-like file (source, markdown, CSV, JSON, logs): sent as text
)

// Source gives an attachment's bytes when an adapter puts them on the wire.
// It is an interface rather than a []byte so that a Message (which lives
// through a whole turn and is copied into every request of it) holds only a
// reference: the bytes are read while one request body is encoded and
// dropped with it, and a part an adapter does not send (a PDF to a server
// that takes none) is never read at all. The chats blob store implements it
// over its content-addressed files.
type Source interface {
	Open() (io.ReadCloser, error)
}

// BytesSource is a Source over bytes already in memory (tests, small
// generated parts).
type BytesSource []byte

// Open returns a reader of the bytes.
func (b BytesSource) Open() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }

// Part is one attachment of a message. The metadata is stored with the
// row, so sizing a request never opens a file.
type Part struct {
	Kind      string `json:"kind"`
	MediaType string `json:"media_type"`
	Name      string `json:"name,omitempty"`
	Size      int64  `json:"size"`
	// SHA256 is the hex digest of the bytes; when set, Bytes checks it, so
	// a blob changed under its name never reaches a model.
	SHA256 string `json:"sha256,omitempty"`
	// Width and Height are an image's pixel size, 0 when unknown.
	Width  int `json:"width,omitempty"`
	Height int `json:"height,omitempty"`
	// Transcript is what an audio part says, once the transcribe role has
	// read it: the model gets this text in place of the audio.
	Transcript string `json:"transcript,omitempty"`
	// Withheld says why the part's bytes are not sent (a transcription
	// that failed); the model gets a note saying so in place of the part.
	Withheld string `json:"withheld,omitempty"`
	// Source gives the bytes; it is not part of the stored form.
	Source Source `json:"-"`
}

// InPlace is the text a model gets in place of the part's bytes, when the
// part goes as text whatever the provider takes: an audio part's
// transcript, or the note of a part withheld. ok is false for a part
// whose bytes go as the adapter decides. Every adapter asks this first,
// so a transcribed voice note reads the same on every provider.
func (p Part) InPlace() (text string, ok bool) {
	switch {
	case p.Kind == PartAudio && p.Transcript != "":
		return fmt.Sprintf("[voice note %s, transcribed]\n%s", p.label(), p.Transcript), true
	case p.Withheld != "":
		return p.Note(p.Withheld), true
	}
	return "", false
}

// MaxPartBytes bounds what Bytes reads of one part, whatever Size claims:
// above every provider's inline limit (Anthropic 32 MB per request, Gemini
// 20 MB, OpenAI 50 MB per file), so a bigger part is refused locally.
const MaxPartBytes = 50 << 20

// Bytes reads the part's bytes, checking them against Size and SHA256.
func (p Part) Bytes() ([]byte, error) {
	if p.Source == nil {
		return nil, fmt.Errorf("attachment %s has no source", p.label())
	}
	if p.Size > MaxPartBytes {
		return nil, fmt.Errorf("attachment %s is %d bytes, over the %d a request may carry", p.label(), p.Size, MaxPartBytes)
	}
	rc, err := p.Source.Open()
	if err != nil {
		return nil, fmt.Errorf("attachment %s: %w", p.label(), err)
	}
	defer rc.Close()
	// Sized from the start: one allocation, not ReadAll's doublings.
	var buf bytes.Buffer
	buf.Grow(int(max(p.Size, 0)) + bytes.MinRead)
	if _, err := buf.ReadFrom(io.LimitReader(rc, MaxPartBytes+1)); err != nil {
		return nil, fmt.Errorf("attachment %s: %w", p.label(), err)
	}
	b := buf.Bytes()
	if len(b) > MaxPartBytes {
		return nil, fmt.Errorf("attachment %s is over the %d bytes a request may carry", p.label(), MaxPartBytes)
	}
	if p.Size > 0 && int64(len(b)) != p.Size {
		return nil, fmt.Errorf("attachment %s: read %d bytes, expected %d", p.label(), len(b), p.Size)
	}
	if p.SHA256 != "" {
		sum := sha256.Sum256(b)
		if !strings.EqualFold(hex.EncodeToString(sum[:]), p.SHA256) {
			return nil, fmt.Errorf("attachment %s: content does not match its sha256", p.label())
		}
	}
	return b, nil
}

// Base64 is the part's bytes in standard base64, as every provider's
// inline form takes them.
func (p Part) Base64() (string, error) { return p.encoded("") }

// DataURL is the part as a data: URL (OpenAI's image_url and file_data).
func (p Part) DataURL() (string, error) { return p.encoded("data:" + p.MediaType + ";base64,") }

// encoded is prefix followed by the bytes in base64, built in one buffer
// of its final size (a request may carry tens of megabytes of these).
func (p Part) encoded(prefix string) (string, error) {
	b, err := p.Bytes()
	if err != nil {
		return "", err
	}
	var sb strings.Builder
	sb.Grow(len(prefix) + base64.StdEncoding.EncodedLen(len(b)))
	sb.WriteString(prefix)
	enc := base64.NewEncoder(base64.StdEncoding, &sb)
	enc.Write(b) // a strings.Builder does not fail
	enc.Close()
	return sb.String(), nil
}

// AsText is a text-like part as the text a model reads: a header naming the
// file, then its content (invalid UTF-8 replaced). The header makes the
// file's boundaries and name plain to the model whatever it contains.
//
// A file longer than MaxTextPart goes as its first MaxTextPart bytes and
// a line saying how much was left out: a log of megabytes would not fit
// any request, and would fail the turn that carries it.
func (p Part) AsText() (string, error) {
	b, err := p.Bytes()
	if err != nil {
		return "", err
	}
	end := "\n[end of file " + p.label() + "]"
	if len(b) > MaxTextPart {
		cut := MaxTextPart
		for cut > MaxTextPart-utf8.UTFMax && !utf8.RuneStart(b[cut]) {
			cut--
		}
		end = fmt.Sprintf("\n[… %d more bytes of %s not sent: the file is longer than the %d bytes a message carries]", len(b)-cut, p.label(), MaxTextPart)
		b = b[:cut]
	}
	return p.textHeader() + strings.ToValidUTF8(string(b), "\uFFFD") + end, nil
}

// MaxTextPart is how much of a text-like file a message carries: about
// 32,000 tokens.
const MaxTextPart = 128 << 10

func (p Part) textHeader() string {
	return fmt.Sprintf("[file %s, %s, %d bytes]\n", p.label(), p.MediaType, p.Size)
}

// Note is the text sent in place of a part the provider cannot take, so the
// model can tell the person plainly instead of the part vanishing.
func (p Part) Note(why string) string {
	return fmt.Sprintf("[attachment %s (%s, %d bytes) was not sent: %s]", p.label(), p.MediaType, p.Size, why)
}

func (p Part) label() string {
	if p.Name != "" {
		return p.Name
	}
	return p.Kind
}

// textTypes are media types, beyond text/*, of files a model reads as text.
var textTypes = map[string]bool{
	"application/json": true, "application/x-ndjson": true, "application/xml": true,
	"application/yaml": true, "application/x-yaml": true, "application/toml": true,
	"application/javascript": true, "application/x-sh": true, "application/sql": true,
	"application/x-python": true, "application/csv": true,
}

// textExts are file extensions of text-like files whose media type is
// often sent as application/octet-stream (Telegram documents, browsers).
var textExts = map[string]bool{
	".txt": true, ".md": true, ".markdown": true, ".csv": true, ".tsv": true, ".json": true, ".jsonl": true,
	".log": true, ".yaml": true, ".yml": true, ".toml": true, ".xml": true, ".html": true, ".css": true,
	".go": true, ".py": true, ".js": true, ".ts": true, ".tsx": true, ".jsx": true, ".java": true, ".c": true,
	".h": true, ".cpp": true, ".hpp": true, ".cc": true, ".rs": true, ".rb": true, ".php": true, ".sh": true,
	".sql": true, ".kt": true, ".swift": true, ".cs": true, ".ini": true, ".conf": true, ".diff": true, ".patch": true,
}

// KindOf classifies an attachment by its media type and file name; "" is
// a kind Mirror does not send to models (archives, executables, video).
func KindOf(mediaType, name string) string {
	mt := strings.ToLower(strings.TrimSpace(mediaType))
	if i := strings.IndexByte(mt, ';'); i >= 0 {
		mt = strings.TrimSpace(mt[:i])
	}
	switch {
	case strings.HasPrefix(mt, "image/"):
		return PartImage
	case mt == "application/pdf":
		return PartDocument
	case strings.HasPrefix(mt, "audio/"):
		return PartAudio
	case strings.HasPrefix(mt, "text/"), textTypes[mt]:
		return PartText
	}
	if textExts[strings.ToLower(path.Ext(name))] {
		return PartText
	}
	return ""
}

// headMax is what Head reads at most.
const headMax = 4 << 10

// Head returns up to n first lines of a text-like part (at most 4 KiB
// read), for descriptions that must not read the whole file.
func (p Part) Head(n int) ([]string, error) {
	if n < 1 {
		return nil, nil
	}
	if p.Source == nil {
		return nil, errors.New("no source")
	}
	rc, err := p.Source.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, headMax))
	if err != nil {
		return nil, err
	}
	// The limit may split the last rune; drop that piece, then mark
	// whatever else is not UTF-8.
	if len(b) == headMax {
		for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
			if utf8.RuneStart(b[i]) {
				if !utf8.FullRune(b[i:]) {
					b = b[:i]
				}
				break
			}
		}
	}
	text := strings.ToValidUTF8(string(b), "\uFFFD")
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return lines, nil
}

// Image token rules by provider kind (config providers[].kind).
func imageRule(kind string) tokens.ImageRule {
	switch kind {
	case "openai":
		return tokens.RuleOpenAI
	case "anthropic":
		return tokens.RuleAnthropic
	case "gemini":
		return tokens.RuleGemini
	}
	return tokens.RuleNone
}

// PartTokens is the estimated input tokens of one part sent to a provider
// of kind (config providers[].kind): images by that provider's rule
// (tokens.ImageTokens), text-like files by their size at ~4 bytes a token
// plus their header, and documents and audio at seed 000's flat allowance
// (their cost depends on pages and seconds the metadata does not carry).
// A part sent as text in its place (InPlace) counts as that text.
// The estimate joins the request's estimate, which the per-model
// calibration corrects with what the provider billed.
func PartTokens(kind string, p Part) int {
	if text, ok := p.InPlace(); ok {
		return tokens.Count(text)
	}
	switch p.Kind {
	case PartImage:
		return tokens.ImageTokens(imageRule(kind), p.Width, p.Height)
	case PartText:
		return tokens.Count(p.textHeader()) + int((min(p.Size, MaxTextPart)+3)/4)
	}
	return tokens.ImageDefault
}

// PartsTokens sums PartTokens over parts.
func PartsTokens(kind string, parts []Part) int {
	n := 0
	for _, p := range parts {
		n += PartTokens(kind, p)
	}
	return n
}
