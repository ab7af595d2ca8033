package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mirror-gateway/mirror/runtime/tokens"
)

func TestKindOf(t *testing.T) {
	cases := []struct{ mediaType, name, want string }{
		{"image/png", "a.png", PartImage},
		{"IMAGE/JPEG", "", PartImage},
		{"application/pdf", "r.pdf", PartDocument},
		{"audio/ogg; codecs=opus", "voice.oga", PartAudio},
		{"text/markdown; charset=utf-8", "n.md", PartText},
		{"application/json", "", PartText},
		{"application/octet-stream", "main.go", PartText},
		{"application/octet-stream", "server.LOG", PartText},
		{"application/octet-stream", "data.csv", PartText},
		{"application/zip", "a.zip", ""},
		{"video/mp4", "v.mp4", ""},
		{"", "", ""},
	}
	for _, c := range cases {
		if got := KindOf(c.mediaType, c.name); got != c.want {
			t.Errorf("KindOf(%q, %q) = %q, want %q", c.mediaType, c.name, got, c.want)
		}
	}
}

type failing struct{}

func (failing) Open() (io.ReadCloser, error) { return nil, errors.New("blob gone") }

func part(data string) Part {
	sum := sha256.Sum256([]byte(data))
	return Part{Kind: PartText, MediaType: "text/plain", Name: "n.txt", Size: int64(len(data)),
		SHA256: hex.EncodeToString(sum[:]), Source: BytesSource(data)}
}

// Bytes refuses what does not match the stored metadata, with a message
// naming the attachment: nothing unchecked reaches a model.
func TestPartBytesChecks(t *testing.T) {
	ok := part("hello")
	short := ok
	short.Size = 9
	changed := ok
	changed.Source = BytesSource("HELLO")
	none := ok
	none.Source = nil
	gone := ok
	gone.Source = failing{}
	huge := ok
	huge.Size = MaxPartBytes + 1
	cases := []struct {
		name string
		p    Part
		err  string
	}{
		{"ok", ok, ""},
		{"size", short, "read 5 bytes, expected 9"},
		{"digest", changed, "does not match its sha256"},
		{"no source", none, "has no source"},
		{"open fails", gone, "blob gone"},
		{"too big", huge, "over the"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := c.p.Bytes()
			if c.err == "" {
				if err != nil || string(b) != "hello" {
					t.Fatalf("Bytes = %q, %v", b, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "n.txt") {
				t.Fatalf("err %v, want one naming n.txt and saying %q", err, c.err)
			}
		})
	}
}

func TestPartTokens(t *testing.T) {
	img := Part{Kind: PartImage, MediaType: "image/png", Width: 1024, Height: 1024}
	cases := []struct {
		kind string
		p    Part
		want int
	}{
		{"openai", img, 765},
		{"anthropic", img, tokens.AnthropicImage(1024, 1024)},
		{"gemini", img, 1032},
		{"builtin", img, tokens.ImageDefault},
		{"openai", Part{Kind: PartImage, MediaType: "image/png"}, tokens.ImageDefault}, // pixel size unknown
		{"anthropic", Part{Kind: PartDocument, MediaType: "application/pdf", Size: 1 << 20}, tokens.ImageDefault},
		{"gemini", Part{Kind: PartAudio, MediaType: "audio/ogg", Size: 5000}, tokens.ImageDefault},
	}
	for _, c := range cases {
		if got := PartTokens(c.kind, c.p); got != c.want {
			t.Errorf("PartTokens(%s, %s %dx%d) = %d, want %d", c.kind, c.p.Kind, c.p.Width, c.p.Height, got, c.want)
		}
	}
	// A text file: its header plus ~4 bytes a token.
	txt := part(strings.Repeat("word ", 400))
	if got, want := PartTokens("openai", txt), tokens.Count(txt.textHeader())+500; got != want {
		t.Errorf("text part %d, want %d", got, want)
	}
	if PartsTokens("gemini", []Part{img, img}) != 2064 {
		t.Error("PartsTokens does not sum")
	}
}

// A text-like file of any bytes becomes valid UTF-8 text naming the file,
// and its head is whole lines of valid UTF-8.
func FuzzPartText(f *testing.F) {
	f.Add([]byte("a,b\n1,2\n"), 3)
	f.Add([]byte("\xff\xfe\x00bad\nutf8 \xe2\x82"), 1)
	f.Add([]byte(strings.Repeat("é", 3000)), 2)
	f.Fuzz(func(t *testing.T, data []byte, n int) {
		p := part(string(data))
		s, err := p.AsText()
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.ValidString(s) || !strings.HasPrefix(s, "[file n.txt, text/plain, ") {
			t.Fatalf("AsText = %q", s)
		}
		lines, err := p.Head(n % 10)
		if err != nil || len(lines) > max(n%10, 0) {
			t.Fatalf("Head(%d) = %d lines, %v", n%10, len(lines), err)
		}
		for _, l := range lines {
			if !utf8.ValidString(l) {
				t.Fatalf("line %q not valid UTF-8", l)
			}
		}
	})
}

// Head reads at most headMax bytes and drops a rune the limit split,
// rather than showing it as U+FFFD.
func TestHeadSplitRune(t *testing.T) {
	p := part(strings.Repeat("a", headMax-1) + "é and more")
	lines, err := p.Head(3)
	if err != nil || len(lines) != 1 || lines[0] != strings.Repeat("a", headMax-1) {
		t.Fatalf("Head = %d lines (%q…), %v", len(lines), lines[0][len(lines[0])-3:], err)
	}
	p = part("one\r\ntwo\n\nfour\nfive")
	if lines, _ := p.Head(3); strings.Join(lines, "|") != "one\r|two|" {
		t.Fatalf("Head = %q", lines)
	}
}

// A text file longer than MaxTextPart goes as its head and a line saying
// how much was left out, cut on a character boundary, and is sized as
// what is sent.
func TestLongTextFileIsCut(t *testing.T) {
	data := []byte("x" + strings.Repeat("é", MaxTextPart)) // 2 bytes each: the cut falls inside one
	p := Part{Kind: PartText, MediaType: "text/plain", Name: "big.log", Size: int64(len(data)), Source: BytesSource(data)}
	got, err := p.AsText()
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.ValidString(got) || strings.Contains(got, "\uFFFD") || !strings.HasSuffix(got, fmt.Sprintf("[… %d more bytes of big.log not sent: the file is longer than the %d bytes a message carries]", len(data)-MaxTextPart+1, MaxTextPart)) {
		t.Fatalf("cut text ends %q", got[len(got)-120:])
	}
	if n := PartTokens("openai", p); n > MaxTextPart/4+100 {
		t.Fatalf("sized %d tokens", n)
	}
}
