package chats

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"image"
	"image/png"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config/datadir"
)

func testBlobs(t testing.TB) (*Blobs, string) {
	t.Helper()
	data, err := datadir.Prepare(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenBlobs(data, BlobLimits{Image: 1 << 20, Document: 1000, Audio: 1 << 20}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return b, data
}

func pngBytes(t testing.TB, w, h int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// entries lists what is under data/blobs, relative to it.
func entries(t *testing.T, data string) []string {
	t.Helper()
	var out []string
	root := filepath.Join(data, "blobs")
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if p != root {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return err
	})
	return out
}

// A blob is stored once under its sha256, private, with the image's pixel
// size; storing the same content again keeps one file; Open reads it back.
func TestBlobPutReadDedup(t *testing.T) {
	b, data := testBlobs(t)
	img := pngBytes(t, 3, 2)
	sum := sha256.Sum256(img)
	want := hex.EncodeToString(sum[:])
	a, err := b.Put(bytes.NewReader(img), "image/png", "dir/../shot.png")
	if err != nil {
		t.Fatal(err)
	}
	if a != (Attachment{SHA256: want, Type: "image/png", Size: int64(len(img)), Name: "shot.png", Width: 3, Height: 2}) {
		t.Fatalf("attachment %+v", a)
	}
	a2, err := b.Put(bytes.NewReader(img), "image/png; q=1", "again.png")
	if err != nil || a2.SHA256 != want {
		t.Fatalf("second put: %+v %v", a2, err)
	}
	if got := entries(t, data); strings.Join(got, ",") != want[:2]+","+filepath.Join(want[:2], want) {
		t.Fatalf("blobs dir holds %v", got)
	}
	for p, mode := range map[string]fs.FileMode{filepath.Join(data, "blobs"): 0o700, filepath.Join(data, "blobs", want[:2]): 0o700,
		filepath.Join(data, "blobs", want[:2], want): 0o600} {
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v (%v)", p, fi.Mode(), mode, err)
		}
	}
	f, err := b.Open(want)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(f)
	f.Close()
	if !bytes.Equal(got, img) {
		t.Fatal("read back other bytes")
	}
	if _, err := b.Open(strings.Repeat("0", 64)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing blob: %v", err)
	}
}

// A refused file leaves nothing on disk: no blob, no temp file.
func TestBlobRefusals(t *testing.T) {
	corrupt := append(pngBytes(t, 1, 1)[:16], bytes.Repeat([]byte{0xff}, 40)...)
	for _, tc := range []struct {
		name, typ string
		body      []byte
		want      error
		msg       string
	}{
		{"document over its limit", "application/pdf", append([]byte("%PDF-1.4\n"), make([]byte, 1000)...), ErrTooLarge, "at most 1000 bytes"},
		{"html declared as an image", "image/png", []byte("<html><script>alert(1)</script></html>"), ErrBadInput, "declared image/png but its content is text/html"},
		{"an image declared as text", "text/plain", pngBytes(t, 1, 1), ErrBadInput, "content is image/png"},
		{"a page declared as a document", "application/octet-stream", []byte("<!DOCTYPE html><p>x"), ErrBadInput, "text/html"},
		{"corrupt image", "image/png", corrupt, ErrBadInput, "cannot be read"},
		{"empty", "text/plain", nil, ErrBadInput, "empty"},
		{"no media type", "", []byte("hello"), ErrBadInput, "media type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, data := testBlobs(t)
			_, err := b.Put(bytes.NewReader(tc.body), tc.typ, "f")
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want %v with %q", err, tc.want, tc.msg)
			}
			if got := entries(t, data); len(got) != 0 {
				t.Fatalf("left on disk: %v", got)
			}
		})
	}
}

// countingReader counts what was read from it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// A body past its limit is read no further than one byte past the limit.
func TestBlobStopsReadingPastTheLimit(t *testing.T) {
	b, _ := testBlobs(t)
	cr := &countingReader{r: io.MultiReader(strings.NewReader("text "), zeroText{})}
	if _, err := b.Put(cr, "text/plain", "big.txt"); !errors.Is(err, ErrTooLarge) {
		t.Fatal(err)
	}
	if cr.n > 1001 {
		t.Fatalf("read %d bytes for a 1000-byte limit", cr.n)
	}
}

// zeroText is an endless text.
type zeroText struct{}

func (zeroText) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// Links in the blob store are refused, never followed.
func TestBlobSymlinkRefused(t *testing.T) {
	b, data := testBlobs(t)
	img := pngBytes(t, 2, 2)
	sum := sha256.Sum256(img)
	name := hex.EncodeToString(sum[:])
	elsewhere := t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(data, "blobs", name[:2])); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(bytes.NewReader(img), "image/png", "x.png"); !errors.Is(err, datadir.ErrUnsafe) {
		t.Fatalf("put through a linked folder: %v", err)
	}
	if _, err := b.Open(name); !errors.Is(err, datadir.ErrUnsafe) {
		t.Fatalf("open through a linked folder: %v", err)
	}
	if got, _ := os.ReadDir(elsewhere); len(got) != 0 {
		t.Fatalf("wrote through the link: %v", got)
	}
	// A linked blob file.
	os.Remove(filepath.Join(data, "blobs", name[:2]))
	os.Mkdir(filepath.Join(data, "blobs", name[:2]), 0o700)
	target := filepath.Join(elsewhere, "secret")
	os.WriteFile(target, img, 0o600)
	if err := os.Symlink(target, filepath.Join(data, "blobs", name[:2], name)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open(name); !errors.Is(err, datadir.ErrUnsafe) {
		t.Fatalf("open of a linked blob: %v", err)
	}
	if _, err := b.Put(bytes.NewReader(img), "image/png", "x.png"); !errors.Is(err, datadir.ErrUnsafe) {
		t.Fatalf("put over a linked blob: %v", err)
	}
}

// Opening the store removes the temp files a crash left, and only those.
func TestOpenBlobsRemovesTemps(t *testing.T) {
	b, data := testBlobs(t)
	a, err := b.Put(strings.NewReader("kept"), "text/plain", "k.txt")
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(data, "blobs", tmpPrefix+"crashed")
	os.WriteFile(tmp, []byte("half"), 0o600)
	if _, err := OpenBlobs(data, b.limits, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("temp file stayed: %v", err)
	}
	if f, err := b.Open(a.SHA256); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
}

// message.send names uploads; the stored rows carry them; an unknown one
// is refused; a pending message can drop its attachments.
func TestSendAndEditAttachments(t *testing.T) {
	data, err := datadir.Prepare(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	g := newGate(false)
	e := &env{t: t, path: filepath.Join(t.TempDir(), "mirror.db"), gate: g, dataDir: data}
	e.start()
	t.Cleanup(e.stop)
	c := e.chat()
	img, err := e.svc.Upload(bg, bytes.NewReader(pngBytes(t, 4, 5)), "image/png", "a.png")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := e.svc.Upload(bg, strings.NewReader("a,b\n1,2\n"), "text/csv", "t.csv")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.SendAttached(bg, c.ID, "x", "u", "", []string{strings.Repeat("a", 64)}, Origin{}); !errors.Is(err, ErrUnknownAttachment) {
		t.Fatalf("unknown attachment: %v", err)
	}
	if _, err := e.svc.SendAttached(bg, c.ID, "x", "v", "", []string{"../x"}, Origin{}); !errors.Is(err, ErrBadInput) {
		t.Fatalf("bad sha: %v", err)
	}
	first, err := e.svc.SendAttached(bg, c.ID, "", "1", "", []string{img.SHA256}, Origin{})
	if err != nil || len(first.Attachments) != 1 || first.Attachments[0] != img {
		t.Fatalf("send with an image and no text: %+v %v", first, err)
	}
	recvStarted(t, g) // the first is picked up; the second waits
	second, err := e.svc.SendAttached(bg, c.ID, "both", "2", "", []string{img.SHA256, doc.SHA256}, Origin{})
	if err != nil || len(second.Attachments) != 2 {
		t.Fatalf("second: %+v %v", second, err)
	}
	if _, err := e.svc.EditAttached(bg, c.ID, second.ID, nil, []string{strings.Repeat("b", 64)}, Origin{}); !errors.Is(err, ErrBadInput) {
		t.Fatalf("keeping one it does not carry: %v", err)
	}
	m, err := e.svc.EditAttached(bg, c.ID, second.ID, nil, []string{doc.SHA256}, Origin{})
	if err != nil || m.Text != "both" || len(m.Attachments) != 1 || m.Attachments[0] != doc {
		t.Fatalf("edit: %+v %v", m, err)
	}
	empty := ""
	if _, err := e.svc.EditAttached(bg, c.ID, second.ID, &empty, []string{}, Origin{}); !errors.Is(err, ErrBadInput) {
		t.Fatalf("an edit leaving nothing: %v", err)
	}
	if _, err := e.svc.EditAttached(bg, c.ID, first.ID, nil, []string{}, Origin{}); !errors.Is(err, ErrInUse) {
		t.Fatalf("edit of a picked message: %v", err)
	}
	var accepted, updated int
	for _, ev := range e.durable(c.ID) {
		m := ev.Message()
		if m == nil {
			continue
		}
		switch {
		case ev.Type == EvMessageAccepted && m.ID == first.ID && len(m.Attachments) == 1:
			accepted++
		case ev.Type == EvMessageUpdated && len(m.Attachments) == 1 && m.Attachments[0].SHA256 == doc.SHA256:
			updated++
		}
	}
	if accepted != 1 || updated != 1 {
		t.Fatalf("stored rows: accepted with attachment %d, updated %d", accepted, updated)
	}
	g.release <- struct{}{}
	g.release <- struct{}{}
}

// Pruning a chat removes the blobs only its rows named; a blob another
// chat still names stays, and so does a young upload; an old upload no row
// names goes.
func TestCollectBlobsOnPrune(t *testing.T) {
	e, old, recent, asking := pruneEnv(t)
	up := func(s string) Attachment {
		a, err := e.svc.Upload(bg, strings.NewReader(s), "text/plain", "f.txt")
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	only, shared, unsent := up("only the old chat"), up("both chats"), up("never sent")
	for i, c := range []struct {
		chat Chat
		sums []string
	}{{old, []string{only.SHA256, shared.SHA256}}, {recent, []string{shared.SHA256}}} {
		s := newSub()
		if err := e.svc.Open(bg, c.chat.ID, nil, s, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.SendAttached(bg, c.chat.ID, "see attached", string(rune('a'+i)), "", c.sums, Origin{}); err != nil {
			t.Fatal(err)
		}
		s.waitFor(t, "turn", has(EvTurnFinished, 1))
		e.svc.Unsubscribe(bg, c.chat.ID, s)
	}
	e.restart() // the chats must not be in memory for their rows to go
	e.age(old.ID)
	// A day and a half later: every upload is past its TTL.
	e.blobs.now = func() time.Time { return time.Now().Add(36 * time.Hour) }
	young := up("uploaded just now")
	r, err := e.svc.Prune(bg, 30, asking.ID)
	if err != nil || r.Removed != 1 {
		t.Fatalf("prune: %+v %v", r, err)
	}
	if r.Blobs != 2 || !strings.Contains(r.String(), "2 attachment files no remaining message names removed") {
		t.Fatalf("report: %+v %s", r, r)
	}
	for _, c := range []struct {
		a    Attachment
		kept bool
	}{{only, false}, {unsent, false}, {shared, true}, {young, true}} {
		f, err := e.blobs.Open(c.a.SHA256)
		if c.kept != (err == nil) {
			t.Errorf("blob %s: kept %v, want %v", c.a.Name, err == nil, c.kept)
		}
		if f != nil {
			f.Close()
		}
	}
	if _, err := e.svc.SendAttached(bg, recent.ID, "again", "z", "", []string{unsent.SHA256}, Origin{}); !errors.Is(err, ErrUnknownAttachment) {
		t.Fatalf("a collected upload: %v", err)
	}
}

// Whatever the bytes and the declared type, Put either stores exactly those
// bytes under their sha256, or refuses and leaves nothing on disk.
func FuzzBlobPut(f *testing.F) {
	f.Add([]byte("hello"), "text/plain", "a.txt")
	f.Add(pngBytes(f, 2, 2), "image/png", "p.png")
	f.Add(pngBytes(f, 2, 2)[:30], "image/png", "cut.png")
	f.Add([]byte("GIF89a\x01\x00\x01\x00"), "image/gif", "g.gif")
	f.Add([]byte("%PDF-1.7\n"), "application/pdf", "d.pdf")
	f.Add([]byte("<html>"), "text/html; charset=utf-8", "../../x")
	f.Add([]byte("OggS\x00"), "audio/ogg", "v.ogg")
	f.Fuzz(func(t *testing.T, body []byte, typ, name string) {
		b, data := testBlobs(t)
		a, err := b.Put(bytes.NewReader(body), typ, name)
		if err != nil {
			if !errors.Is(err, ErrBadInput) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			if got := entries(t, data); len(got) != 0 {
				t.Fatalf("refused, but left %v", got)
			}
			return
		}
		sum := sha256.Sum256(body)
		if a.SHA256 != hex.EncodeToString(sum[:]) || a.Size != int64(len(body)) || strings.ContainsAny(a.Name, "/\\\x00") {
			t.Fatalf("attachment %+v for %d bytes", a, len(body))
		}
		f, err := b.Open(a.SHA256)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(f)
		f.Close()
		if !bytes.Equal(got, body) {
			t.Fatal("stored other bytes")
		}
	})
}
