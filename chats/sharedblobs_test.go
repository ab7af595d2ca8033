package chats

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"
)

// memShared is an in-memory SharedBlobs: what the cluster's stores do,
// without NATS (chats/cluster tests the real one).
type memShared struct {
	mu      sync.Mutex
	objects map[string][]byte
	stored  map[string]time.Time
	notes   map[string][]byte
	leading bool
	failPut error
	// onNotes runs (unlocked) after Notes listed the entries: a test's
	// concurrent upload.
	onNotes func()
}

func newMemShared() *memShared {
	return &memShared{objects: map[string][]byte{}, stored: map[string]time.Time{}, notes: map[string][]byte{}}
}

func (m *memShared) Store(_ context.Context, sum string, r io.Reader, _ time.Duration) error {
	if m.failPut != nil {
		return m.failPut
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objects[sum], m.stored[sum] = b, time.Now()
	return nil
}

func (m *memShared) Fetch(_ context.Context, sum string) (io.ReadCloser, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objects[sum]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (m *memShared) Note(_ context.Context, sum string, update func([]byte) []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.notes[sum] = update(m.notes[sum])
	return nil
}

func (m *memShared) Noted(_ context.Context, sum string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.notes[sum], nil
}

func (m *memShared) Leading() bool { return m.leading }

func (m *memShared) Notes(context.Context) (map[string][]byte, error) {
	m.mu.Lock()
	out := map[string][]byte{}
	for k, v := range m.notes {
		out[k] = v
	}
	m.mu.Unlock()
	if m.onNotes != nil {
		m.onNotes()
	}
	return out, nil
}

func (m *memShared) Stored(context.Context) (map[string]time.Time, error) {
	m.mu.Lock()
	out := map[string]time.Time{}
	for k, v := range m.stored {
		out[k] = v
	}
	m.mu.Unlock()
	return out, nil
}

func (m *memShared) Remove(_ context.Context, sum string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects, sum)
	delete(m.stored, sum)
	return nil
}

func (m *memShared) Forget(_ context.Context, sum string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.notes, sum)
	return nil
}

// TestCollectSharedRule: the leader's collection of the shared store, by
// case: a blob goes only when no row names it, no upload entry within the
// TTL and its margin names it, it was stored longer than the TTL ago, and
// no upload of it came while the collection ran.
func TestCollectSharedRule(t *testing.T) {
	b, _ := testBlobs(t) // ttl 1h
	now := time.Now()
	b.now = func() time.Time { return now }
	cutoff := now.Add(-b.ttl - uploadMargin)
	note := func(sum string, at time.Time) []byte {
		return Marshal(upload{Attachment: Attachment{SHA256: sum, Type: "text/plain"}, Time: at})
	}
	for _, tc := range []struct {
		name       string
		named      bool          // a row names it
		noteAge    time.Duration // 0: no upload entry
		storedAge  time.Duration
		lateUpload bool // an upload of it comes after the listing
		removed    bool
		noteKept   bool
	}{
		{name: "named by a row", named: true, noteAge: 5 * time.Hour, storedAge: 5 * time.Hour, removed: false, noteKept: false},
		{name: "live upload", noteAge: 30 * time.Minute, storedAge: 5 * time.Hour, removed: false, noteKept: true},
		{name: "upload past the TTL, within the margin", noteAge: 90 * time.Minute, storedAge: 5 * time.Hour, removed: false, noteKept: true},
		{name: "young blob, no entry", storedAge: 10 * time.Minute, removed: false},
		{name: "old, unnamed, entry expired", noteAge: 5 * time.Hour, storedAge: 5 * time.Hour, removed: true, noteKept: false},
		{name: "old, unnamed, no entry", storedAge: 5 * time.Hour, removed: true},
		{name: "uploaded again during the collection", storedAge: 5 * time.Hour, lateUpload: true, removed: false, noteKept: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMemShared()
			m.leading = true
			sum := strings.Repeat("ab", 32)
			m.objects[sum], m.stored[sum] = []byte("x"), now.Add(-tc.storedAge)
			if tc.noteAge > 0 {
				m.notes[sum] = note(sum, now.Add(-tc.noteAge))
			}
			if tc.lateUpload {
				m.onNotes = func() { m.Note(bg, sum, func([]byte) []byte { return note(sum, now) }) }
			}
			b.shared = m
			keep := map[string]bool{}
			if tc.named {
				keep[sum] = true
			}
			stored, _ := m.Stored(bg)
			n, err := b.collectShared(bg, keep, cutoff, stored)
			if err != nil {
				t.Fatal(err)
			}
			_, still := m.objects[sum]
			if still == tc.removed || (n == 1) != tc.removed {
				t.Fatalf("removed %d, blob still stored %v; want removed %v", n, still, tc.removed)
			}
			if _, ok := m.notes[sum]; ok != tc.noteKept {
				t.Fatalf("upload entry kept %v, want %v", ok, tc.noteKept)
			}
		})
	}
}

// TestSharedUploadAndSend: on a node sharing its store, an upload is
// acknowledged only once the shared store took it (else ErrUnavailable and
// the upload is not known), and a send names an upload another node made
// (known only by its shared entry) within the TTL; a blob this node lacks
// is fetched for the model request.
func TestSharedUploadAndSend(t *testing.T) {
	e := blobEnv(t)
	m := newMemShared()
	e.blobs.Share(m)

	m.failPut = errors.New("too few servers")
	if _, err := e.svc.Upload(bg, strings.NewReader("refused"), "text/plain", "a.txt"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("upload the cluster did not take: %v, want ErrUnavailable", err)
	}
	m.failPut = nil
	mine, err := e.svc.Upload(bg, strings.NewReader("mine"), "text/plain", "a.txt")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.objects[mine.SHA256]; !ok || m.notes[mine.SHA256] == nil {
		t.Fatal("the upload is not in the shared store")
	}

	// Another node's upload: only in the shared store.
	content := []byte("made on another node")
	other := Attachment{SHA256: fmt.Sprintf("%x", sha256.Sum256(content)), Type: "text/plain", Size: int64(len(content)), Name: "b.txt"}
	m.objects[other.SHA256], m.stored[other.SHA256] = content, time.Now()
	m.notes[other.SHA256] = Marshal(upload{Attachment: other, Time: time.Now().Add(-2 * time.Hour)}) // within the 24h TTL
	c, err := e.svc.Create(bg, "files", "", Origin{})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := e.svc.SendAttached(bg, c.ID, "", "c1", "", []string{mine.SHA256, other.SHA256}, Origin{})
	if err != nil {
		t.Fatalf("send naming another node's upload: %v", err)
	}
	if len(msg.Attachments) != 2 || msg.Attachments[1] != other {
		t.Fatalf("the message carries %+v", msg.Attachments)
	}
	if f, err := e.blobs.openLocal(other.SHA256); err == nil {
		f.Close()
		t.Fatal("this node has a copy of another node's upload before anything read it")
	}
	// An entry past the TTL is refused like an unknown upload.
	late := Attachment{SHA256: strings.Repeat("cd", 32), Type: "text/plain", Size: 1}
	m.notes[late.SHA256] = Marshal(upload{Attachment: late, Time: time.Now().Add(-25 * time.Hour)})
	if _, err := e.svc.SendAttached(bg, c.ID, "", "c2", "", []string{late.SHA256}, Origin{}); !errors.Is(err, ErrUnknownAttachment) {
		t.Fatalf("send naming an expired shared upload: %v, want ErrUnknownAttachment", err)
	}
	// The blob this node lacked is fetched (for the model request, or here).
	rc, err := e.blobs.Open(other.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, content) {
		t.Fatalf("opened %q", got)
	}
	if f, err := e.blobs.openLocal(other.SHA256); err != nil {
		t.Fatalf("the fetched blob was not kept: %v", err)
	} else {
		f.Close()
	}
}
