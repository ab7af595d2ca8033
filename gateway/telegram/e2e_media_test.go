package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/runtime"
)

// The whole path, no hand-built event: the model's send_file call on a
// workspace file is asked about (policy ask), allowed with the Telegram
// button, stored as a blob and file.sent by the runtime, and arrives at
// the Bot API as one sendPhoto with the file's bytes and the caption (and
// a PDF as one sendDocument); a restart sends neither again.
func TestSendFileEndToEnd(t *testing.T) {
	st := newStackWith(t, stackOpts{delay: time.Millisecond})
	f := st.fake
	if err := os.MkdirAll(st.cfg.Tools.Workspace, 0o700); err != nil {
		t.Fatal(err)
	}
	chart, report := pngOf(120, 80, 5), pdfBytes("quarterly")
	for name, data := range map[string][]byte{"chart.png": chart, "report.pdf": report} {
		if err := os.WriteFile(filepath.Join(st.cfg.Tools.Workspace, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for i, tc := range []struct {
		args, method, name, caption string
		data                        []byte
	}{
		{`{"path":"chart.png","caption":"the chart"}`, "sendPhoto", "chart.png", "the chart", chart},
		{`{"path":"report.pdf"}`, "sendDocument", "report.pdf", "", report},
	} {
		f.pushText(111, 111, "/tool send_file "+tc.args)
		var ask *fakeMsg
		f.waitFor("the approval of send_file "+tc.args, func() bool {
			ask = f.msgWithLocked(111, "wants to run send_file "+tc.args)
			return ask != nil
		})
		f.mu.Lock()
		allow := buttons(t, ask)[0]
		f.mu.Unlock()
		if ans := st.press(t, 111, ask.ID, allow); ans != "Allowed." {
			t.Fatalf("allow: %q", ans)
		}
		chat := st.bot.currentChat(111)
		f.waitFor("the file sent and the turn done", func() bool {
			f.mu.Unlock()
			defer f.mu.Lock()
			return len(f.sentFiles()) > i && st.idle(t, chat)
		})
		sent := f.sentFiles()
		if len(sent) != i+1 {
			t.Fatalf("%d files sent, want %d", len(sent), i+1)
		}
		s := sent[i]
		if s.Method != tc.method || s.Name != tc.name || s.Caption != tc.caption || !bytes.Equal(s.Data, tc.data) || s.Chat != 111 {
			t.Fatalf("sent %s %q %q (%d bytes) to %d, want %s %q %q (%d bytes)", s.Method, s.Name, s.Caption, len(s.Data), s.Chat, tc.method, tc.name, tc.caption, len(tc.data))
		}
		// The stored file.sent names the same blob.
		var fileSent []chats.Attachment
		for _, m := range st.snapshot(t, chat).Messages {
			if m.Role == "assistant" && len(m.Attachments) == 1 && m.Attachments[0].Name == tc.name {
				fileSent = append(fileSent, m.Attachments[0])
			}
		}
		if len(fileSent) != 1 || fileSent[0].Size != int64(len(tc.data)) {
			t.Fatalf("the snapshot shows %+v as sent", fileSent)
		}
	}
	// Nothing is sent twice after a restart (the follower resumes past them).
	st.restart(t)
	f.pushText(111, 111, "still there?")
	st.waitReply(t, 111, "still there?")
	if n := len(f.sentFiles()); n != 2 {
		t.Fatalf("%d files sent after the restart, want 2", n)
	}
}

// A voice note through the whole path: fetched with getFile and the file
// download, transcribed by the transcribe role's server (which gets the
// exact bytes), the transcript stored on the message and replied to the
// voice message; a failed transcription is replied as plainly, leaves a
// diagnostic, and the turn still answers.
func TestVoiceNoteEndToEnd(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		reply  string // in the bot's reply to the voice message
	}{
		{"heard", 0, "Buy milk & eggs on the way home"},
		{"failed", 503, "could not transcribe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &providertest.Whisper{Text: "Buy milk & eggs on the way home", Status: tc.status}
			st := newStackWith(t, stackOpts{delay: time.Millisecond, stt: w.Serve(t)})
			f := st.fake
			voice := oggBytes(700)
			id := f.pushMedia(111, 111, fmt.Sprintf(`"voice":{"file_id":%q,"file_unique_id":"v1","duration":3,"mime_type":"audio/ogg","file_size":%d}`, f.addFile(voice, 0), len(voice)))
			f.waitFor("the reply to the voice note", func() bool {
				for _, x := range f.msgs[111] {
					if x.ReplyTo == id && strings.Contains(x.Text, tc.reply) {
						return true
					}
				}
				return false
			})
			chat := st.bot.currentChat(111)
			f.waitFor("the turn done", func() bool {
				f.mu.Unlock()
				defer f.mu.Lock()
				return st.idle(t, chat)
			})
			files := w.Files()
			if len(files) == 0 || !bytes.Equal(files[0], voice) {
				t.Fatalf("the transcription server got %d files, want the voice note's bytes", len(files))
			}
			m, ok := st.passedMessage(t, 111, id)
			if !ok || len(m.Attachments) != 1 {
				t.Fatalf("the voice note is %+v", m)
			}
			if tc.status == 0 && m.Attachments[0].Transcript != tc.reply {
				t.Fatalf("stored transcript %q", m.Attachments[0].Transcript)
			}
			if tc.status != 0 && (m.Attachments[0].Transcript != "" || m.TranscribeError == "") {
				t.Fatalf("a failed transcription stored %q, error %q", m.Attachments[0].Transcript, m.TranscribeError)
			}
			frames, err := st.svc.Events(context.Background(), chat, 0, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			var outcomes []string
			for _, fr := range frames {
				var ev chats.Event
				if json.Unmarshal(fr.Raw, &ev) != nil {
					continue
				}
				if p, ok := ev.Payload.(*chats.Diagnosed); ok && p.Diagnostic != nil && p.Diagnostic.Kind == runtime.DiagTranscribe {
					outcomes = append(outcomes, p.Diagnostic.Outcome)
				}
			}
			if want := map[bool]string{true: "ok", false: "overloaded"}[tc.status == 0]; strings.Join(outcomes, " ") != want {
				t.Fatalf("transcription diagnostics %q, want %q", outcomes, want)
			}
			if st.lastReply(t, chat) == "" {
				t.Fatal("the turn gave no reply")
			}
		})
	}
}
