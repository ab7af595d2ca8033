package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestClusterAttachmentAcrossNodes: a file uploaded over HTTP to node n1
// is named by a message sent through n1 into a chat n2 created (and owns):
// the send is accepted, the model request n2 makes carries the file's
// bytes, and n3, which neither received nor sent it, serves it by its
// sha256. Real processes: the upload is acknowledged only once the
// cluster holds it, and each node fetches what it lacks.
func TestClusterAttachmentAcrossNodes(t *testing.T) {
	c := startE2E(t, e2eOpts{})
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]

	img := image.NewRGBA(image.Rect(0, 0, 16, 16))
	for i := range img.Pix {
		img.Pix[i] = byte(i * 13)
	}
	img.Set(3, 3, color.RGBA{R: 200, A: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	file := buf.Bytes()
	h := sha256.Sum256(file)
	sum := hex.EncodeToString(h[:])
	b64 := base64.StdEncoding.EncodeToString(file)
	carried := map[string]bool{} // node → a request of it carried the file
	c.llm.mu.Lock()
	c.llm.bodies = func(node string, body []byte) {
		if bytes.Contains(body, []byte(b64)) {
			carried[node] = true
		}
	}
	c.llm.mu.Unlock()

	chat := dialNode(t, n2).create("files")
	req, err := http.NewRequest("POST", "http://"+n1.p.addr+"/api/uploads?name=dot.png", bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e2eToken)
	req.Header.Set("Content-Type", "image/png")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var up struct {
		Attachment struct {
			SHA256 string `json:"sha256"`
		} `json:"attachment"`
	}
	err = json.NewDecoder(resp.Body).Decode(&up)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated || up.Attachment.SHA256 != sum {
		t.Fatalf("upload on n1: %d %+v %v", resp.StatusCode, up, err)
	}

	sock := dialNode(t, n1)
	f := sock.must(map[string]any{"type": "message.send", "chat": chat, "text": "m-att1", "client_id": "att-1", "attachments": []string{sum}})
	if f.typ() != "message.accepted" {
		t.Fatalf("a send through n1 naming n1's upload in n2's chat answered %v", f)
	}
	c.llm.waitFor(t, "the owner's model request carrying the file", e2eWait, func() bool { return c.llm.answered["m-att1"] > 0 })
	c.llm.mu.Lock()
	got := map[string]bool{}
	for k, v := range carried {
		got[k] = v
	}
	c.llm.mu.Unlock()
	if !got[n2.name] || got[n1.name] || got[n3.name] {
		t.Fatalf("requests carrying the file came from %v, want the owner %s alone", got, n2.name)
	}

	// n3 serves it once it followed the message (a bounded poll: 404
	// until then).
	deadline := time.Now().Add(e2eWait)
	for {
		req, _ := http.NewRequest("GET", "http://"+n3.p.addr+"/api/blobs/"+sum, nil)
		req.Header.Set("Authorization", "Bearer "+e2eToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusOK {
			if !bytes.Equal(body, file) || resp.Header.Get("Content-Type") != "image/png" {
				t.Fatalf("n3 served %d bytes of %s, not the file", len(body), resp.Header.Get("Content-Type"))
			}
			break
		}
		if resp.StatusCode != http.StatusNotFound || time.Now().After(deadline) {
			t.Fatalf("n3 answered %d %s for the file", resp.StatusCode, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
