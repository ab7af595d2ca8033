package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/jpeg"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// serveFile serves /file/bot<token>/photos/<file_id>.jpg as the Bot API
// does; a held file sends half its bytes, then waits.
func (f *tgFake) serveFile(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimSuffix(filepath.Base(r.URL.Path), ".jpg")
	f.mu.Lock()
	data, ok := f.files[id]
	hold := f.holdFile == id
	f.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	if !hold {
		w.Write(data)
		return
	}
	w.Write(data[:len(data)/2])
	w.(http.Flusher).Flush()
	f.mu.Lock()
	f.fileHeld++
	f.notifyLocked()
	f.mu.Unlock()
	for {
		f.mu.Lock()
		still, ch := f.holdFile == id, f.changed
		f.mu.Unlock()
		if !still {
			break
		}
		select {
		case <-ch:
		case <-r.Context().Done():
			return // the process died mid-download
		}
	}
	w.Write(data[len(data)/2:])
}

// pushPhoto queues a photo from user 111, a part of album group, and
// returns its update_id.
func (f *tgFake) pushPhoto(group, caption string, seed byte) int {
	img := image.NewRGBA(image.Rect(0, 0, 200, 150))
	for i := range img.Pix {
		img.Pix[i] = seed + byte(i%11)
	}
	var buf bytes.Buffer
	_ = jpeg.Encode(&buf, img, nil)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.files == nil {
		f.files = map[string][]byte{}
	}
	id := fmt.Sprintf("AgAD%d", seed)
	f.files[id] = buf.Bytes()
	f.nextUpd++
	f.nextMsg++
	capt := ""
	if caption != "" {
		capt = fmt.Sprintf(`,"caption":%q`, caption)
	}
	f.updates = append(f.updates, fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":111,"type":"private","first_name":"Ann"},"date":1767225600,"media_group_id":%q,"photo":[{"file_id":%q,"file_unique_id":"u%d","width":200,"height":150,"file_size":%d}]%s}}`,
		f.nextUpd, f.nextMsg, group, id, seed, buf.Len(), capt))
	f.notifyLocked()
	return f.nextUpd
}

// TestTelegramKillMinusNineWhileAlbumGathers runs the gateway as a real
// process: two photos of an album are handled (their files stored, their
// updates confirmed to Telegram), the third one's download is cut by
// SIGKILL half-way, between its blob write and any row naming it. After
// the restart the half-written file is gone, the album reaches the chat as
// one message with all three photos and the caption (nothing Telegram was
// told was handled is lost), and every stored message names only whole
// blobs.
func TestTelegramKillMinusNineWhileAlbumGathers(t *testing.T) {
	f := newTGFake(t)
	cfg := tgConfig(t, f, "1ms")
	data := filepath.Join(t.TempDir(), "data")
	p := startChild(t, cfg, data, "MIRROR_AS_MAIN=1", tgToken)
	const caption = "three views of the bridge"
	f.pushPhoto("9001", caption, 1)
	u2 := f.pushPhoto("9001", "", 2)
	f.waitFor(t, "the first two parts confirmed", func() bool {
		return len(f.offsets) > 0 && f.offsets[len(f.offsets)-1] > u2
	})
	f.mu.Lock()
	f.holdFile = "AgAD3"
	f.mu.Unlock()
	f.pushPhoto("9001", "", 3)
	f.waitFor(t, "the third download half-way", func() bool { return f.fileHeld > 0 })
	p.kill()
	if n := len(f.withLocked("You said")); n != 0 {
		t.Fatalf("%d replies before the album was complete", n)
	}
	f.mu.Lock()
	f.holdFile = ""
	f.notifyLocked()
	f.mu.Unlock()

	p = startChild(t, cfg, data, "MIRROR_AS_MAIN=1", tgToken)
	f.waitFor(t, "the answer to the album", func() bool { return len(f.withLocked("three views")) > 0 })
	if left, _ := filepath.Glob(filepath.Join(data, "blobs", ".tmp-*")); len(left) > 0 {
		t.Errorf("half-written files outlived the restart: %v", left)
	}
	h := http.Header{"Authorization": {"Bearer " + benchToken}}
	c, _, err := websocket.DefaultDialer.Dial("ws://"+p.addr+"/ws", h)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	w := &wsClient{t: t, c: c}
	w.send(map[string]any{"type": "hello", "client": "t"})
	w.next("welcome", nil)
	req, _ := http.NewRequest("GET", "http://"+p.addr+"/api/chats", nil)
	req.Header.Set("Authorization", "Bearer "+benchToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Chats []struct{ ID string } }
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || len(list.Chats) != 1 {
		t.Fatalf("chats %+v: %v", list, err)
	}
	w.send(map[string]any{"type": "chat.open", "chat": list.Chats[0].ID})
	sn := w.next("chat.snapshot", nil)
	albums := 0
	for _, key := range []string{"messages", "pending"} {
		ms, _ := sn[key].([]any)
		for _, x := range ms {
			m := x.(map[string]any)
			atts, _ := m["attachments"].([]any)
			for _, a := range atts {
				sum := a.(map[string]any)["sha256"].(string)
				if !blobOK(data, sum) {
					t.Errorf("message %v names a missing or partial blob %s", m["id"], sum)
				}
			}
			if m["role"] == "user" {
				albums++
				if m["text"] != caption || len(atts) != 3 {
					t.Errorf("the person's message is %q with %d attachments, want the caption with 3 photos", m["text"], len(atts))
				}
			}
		}
	}
	if albums != 1 {
		t.Fatalf("%d messages of the person stored, want the album as one", albums)
	}
	if _, err := os.Stat(filepath.Join(data, "blobs")); err != nil {
		t.Fatal(err)
	}
	p.stop(t)
}
