package main

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// upload posts body to the gateway at addr; it returns the sha256 the
// gateway acknowledged, or "" when the upload was not acknowledged.
func upload(addr, typ string, body io.Reader) string {
	req, err := http.NewRequest("POST", "http://"+addr+"/api/uploads?name=f", body)
	if err != nil {
		return ""
	}
	req.Header.Set("Authorization", "Bearer test-token-0123456789abcdef")
	req.Header.Set("Content-Type", typ)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var out struct {
		Attachment struct {
			SHA256 string `json:"sha256"`
		} `json:"attachment"`
	}
	if resp.StatusCode != http.StatusCreated || json.NewDecoder(resp.Body).Decode(&out) != nil {
		return ""
	}
	return out.Attachment.SHA256
}

// blobOK reports whether data/blobs holds the blob sum, whole.
func blobOK(data, sum string) bool {
	b, err := os.ReadFile(filepath.Join(data, "blobs", sum[:2], sum))
	if err != nil {
		return false
	}
	got := sha256.Sum256(b)
	return hex.EncodeToString(got[:]) == sum
}

// TestKillMinusNineBetweenBlobAndRow kills the gateway with SIGKILL while
// uploads stream in (one is mid-body, its temp file on disk) and messages
// naming uploads are being sent. After the restart: every acknowledged
// upload's blob is there, whole, and can still be named; every stored
// message names only blobs that are there; no temp file is left.
func TestKillMinusNineBetweenBlobAndRow(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	p := startServe(t, data)
	w := dialWS(t, p.addr)
	w.send(map[string]any{"type": "chat.create"})
	chat := w.next("chat.created", nil)["chat"].(map[string]any)["id"].(string)

	// An upload that is mid-body when the process dies.
	pr, pw := io.Pipe()
	defer pw.Close()
	go upload(p.addr, "text/plain", pr)
	if _, err := pw.Write(bytes.Repeat([]byte("half of a file\n"), 4096)); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var acked []string // uploads acknowledged
	sent := map[string]string{}
	stop := make(chan struct{})
	done := make(chan struct{})
	enough := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			body := make([]byte, 64<<10)
			rand.Read(body)
			sum := upload(p.addr, "application/octet-stream", bytes.NewReader(body))
			if sum == "" {
				return // the process is gone
			}
			mu.Lock()
			acked = append(acked, sum)
			n := len(acked)
			mu.Unlock()
			if n == 20 {
				close(enough)
			}
			// Every other upload is sent right away: the kill lands among
			// blob writes, upload commits and message commits.
			if i%2 == 0 {
				cid := fmt.Sprintf("c%d", i)
				if err := w.c.WriteJSON(map[string]any{"type": "message.send", "chat": chat, "text": "see " + cid,
					"attachments": []string{sum}, "client_id": cid}); err != nil {
					return
				}
				mu.Lock()
				sent[cid] = sum
				mu.Unlock()
			}
		}
	}()
	select {
	case <-enough:
	case <-time.After(60 * time.Second):
		t.Fatal("20 uploads were not acknowledged")
	}
	w.next("message.accepted", nil) // at least one message is stored before the kill
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	close(stop)
	<-done
	pw.CloseWithError(io.ErrClosedPipe)

	mu.Lock()
	defer mu.Unlock()
	for _, sum := range acked {
		if !blobOK(data, sum) {
			t.Errorf("acknowledged upload %s lost its blob", sum)
		}
	}

	// The upload cut mid-body left its temp file (when its request had
	// reached the handler); the restart removes it.
	if left, _ := filepath.Glob(filepath.Join(data, "blobs", ".tmp-*")); len(left) == 0 {
		t.Log("no temp file was left by the kill (the cut upload had not reached the store)")
	}
	p = startServe(t, data)
	entries, err := os.ReadDir(filepath.Join(data, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Errorf("temp file %s outlived the restart", e.Name())
		}
	}
	// Every stored message names blobs that are there.
	w = dialWS(t, p.addr)
	w.send(map[string]any{"type": "chat.open", "chat": chat, "since": 0})
	stored := 0
	w.next("chat.resumed", func(m map[string]any) {
		if m["type"] != "message.accepted" {
			return
		}
		msg := m["message"].(map[string]any)
		atts, _ := msg["attachments"].([]any)
		if len(atts) != 1 {
			t.Errorf("stored message %v carries %d attachments", msg["client_id"], len(atts))
			return
		}
		sum := atts[0].(map[string]any)["sha256"].(string)
		if want := sent[msg["client_id"].(string)]; sum != want {
			t.Errorf("message %v names %s, sent with %s", msg["client_id"], sum, want)
		}
		if !blobOK(data, sum) {
			t.Errorf("stored message %v names a missing blob %s", msg["client_id"], sum)
		}
		stored++
	})
	if stored == 0 {
		t.Fatal("no message was stored before the kill")
	}
	// The last acknowledged upload can still be named.
	w.send(map[string]any{"type": "message.send", "chat": chat, "text": "after", "attachments": []string{acked[len(acked)-1]}, "client_id": "after"})
	w.next("message.accepted", nil)
	p.stop(t)
}
