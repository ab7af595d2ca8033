package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/runtime"
)

// MaxBotDownload is the largest file the Bot API lets a bot download
// (getFile); past it Telegram refuses, so the bot says so at once.
const MaxBotDownload = 20 << 20

// DefaultAlbumQuiet is how long after an album's last part arrived the
// bot waits for more before passing the album on: Telegram sends the parts
// of one media_group_id as separate messages, close together.
const DefaultAlbumQuiet = 1500 * time.Millisecond

// downloadTries bounds the attempts at one file download that failed on
// the way (network, 5xx); then the person is told.
const downloadTries = 3

// fileRef is one file of a message to fetch: its Telegram id, size when
// known, the media type it is stored as, its name, and what to call it
// when telling the person about it.
type fileRef struct {
	id   string
	size int64
	typ  string
	name string
	what string
}

// media is what a message carries besides its text: files to pass on, a
// stand-in text (a sticker), or a kind the bot cannot pass on (what names
// it for the person).
type media struct {
	files       []fileRef
	standIn     string
	unsupported string
}

// mediaOf reads what m carries. imageLimit is the configured image limit:
// of a photo's sizes the largest within it (and within Telegram's download
// limit) is taken.
func mediaOf(m *tgbotapi.Message, imageLimit int64) media {
	limit := min(imageLimit, MaxBotDownload)
	switch {
	case len(m.Photo) > 0:
		p := pickPhoto(m.Photo, limit)
		return media{files: []fileRef{{id: p.FileID, size: int64(p.FileSize), typ: "image/jpeg", name: fmt.Sprintf("photo_%d.jpg", m.MessageID), what: "photo"}}}
	case m.Sticker != nil:
		return media{standIn: strings.TrimSpace(m.Sticker.Emoji + " sticker")}
	case m.Animation != nil:
		return media{unsupported: "an animation (Telegram sends GIFs as videos)"}
	case m.Video != nil:
		return media{unsupported: "a video"}
	case m.Document != nil:
		d := m.Document
		typ := documentType(d.MimeType, d.FileName)
		if strings.HasPrefix(typ, "video/") {
			return media{unsupported: "a video"}
		}
		what := "file"
		if chats.KindOf(typ) == chats.KindImage {
			what = "image"
		}
		return media{files: []fileRef{{id: d.FileID, size: int64(d.FileSize), typ: typ, name: d.FileName, what: what}}}
	case m.Voice != nil:
		typ := audioType(m.Voice.MimeType, "audio/ogg")
		return media{files: []fileRef{{id: m.Voice.FileID, size: int64(m.Voice.FileSize), typ: typ, name: "voice" + ext(typ, ".ogg"), what: "voice message"}}}
	case m.Audio != nil:
		typ := audioType(m.Audio.MimeType, "audio/mpeg")
		name := m.Audio.FileName
		if name == "" {
			name = "audio" + ext(typ, ".mp3")
		}
		return media{files: []fileRef{{id: m.Audio.FileID, size: int64(m.Audio.FileSize), typ: typ, name: name, what: "audio file"}}}
	case m.VideoNote != nil:
		// Its audio, in the MP4 it comes in: Go has no audio demuxer and
		// Mirror takes no ffmpeg, so the file is passed on as audio/mp4,
		// which transcription endpoints (OpenAI's, whisper.cpp's) read
		// the sound of.
		return media{files: []fileRef{{id: m.VideoNote.FileID, size: int64(m.VideoNote.FileSize), typ: "audio/mp4", name: "video_note.mp4", what: "video message"}}}
	case m.Text != "":
		return media{}
	case m.Location != nil || m.Venue != nil:
		return media{unsupported: "a location"}
	case m.Contact != nil:
		return media{unsupported: "a contact"}
	case m.Poll != nil:
		return media{unsupported: "a poll"}
	case m.Dice != nil:
		return media{unsupported: "a dice roll"}
	}
	return media{unsupported: "this kind of message"}
}

// pickPhoto returns the largest of a photo's sizes whose file is within
// limit (a size of unknown file size counts as within it), or, when none
// is, the smallest, which fetch then refuses with the reason.
func pickPhoto(sizes []tgbotapi.PhotoSize, limit int64) tgbotapi.PhotoSize {
	best, smallest := -1, 0
	area := func(p tgbotapi.PhotoSize) int64 { return int64(p.Width) * int64(p.Height) }
	for i, p := range sizes {
		if int64(p.FileSize) < int64(sizes[smallest].FileSize) {
			smallest = i
		}
		if int64(p.FileSize) > limit {
			continue
		}
		if best < 0 || area(p) > area(sizes[best]) || area(p) == area(sizes[best]) && p.FileSize > sizes[best].FileSize {
			best = i
		}
	}
	if best < 0 {
		return sizes[smallest]
	}
	return sizes[best]
}

// documentType is the media type a document is stored as: the one
// Telegram names, else the one its name's extension gives, else bytes.
func documentType(mimeType, name string) string {
	if mt, _, err := mime.ParseMediaType(mimeType); err == nil && strings.Contains(mt, "/") {
		return mt
	}
	if mt := mime.TypeByExtension(strings.ToLower(path.Ext(name))); mt != "" {
		if mt, _, err := mime.ParseMediaType(mt); err == nil {
			return mt
		}
	}
	return "application/octet-stream"
}

// audioType is an audio file's media type, def when Telegram names none.
func audioType(mimeType, def string) string {
	if mt, _, err := mime.ParseMediaType(mimeType); err == nil && strings.HasPrefix(mt, "audio/") {
		return mt
	}
	return def
}

func ext(typ, def string) string {
	switch typ {
	case "audio/ogg", "audio/opus":
		return ".ogg"
	case "audio/mpeg":
		return ".mp3"
	case "audio/mp4", "audio/x-m4a", "audio/m4a":
		return ".m4a"
	}
	return def
}

// fileEndpoint is the download URL pattern of the configured Bot API
// endpoint: …/bot%s/%s becomes …/file/bot%s/%s, as on api.telegram.org
// and a local Bot API server.
func fileEndpoint(api string) string {
	if api == "" {
		api = tgbotapi.APIEndpoint
	}
	if i := strings.LastIndex(api, "/bot%s/%s"); i >= 0 {
		return api[:i] + "/file/bot%s/%s"
	}
	if u, err := url.Parse(api); err == nil && u.Host != "" {
		return u.Scheme + "://" + u.Host + "/file/bot%s/%s"
	}
	return tgbotapi.FileEndpoint
}

// sizeText says a byte count the way a person reads it.
func sizeText(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// aKind is a kind of attachment with its article: "an image", "a document".
func aKind(kind string) string {
	if kind != "" && strings.IndexByte("aeiou", kind[0]) >= 0 {
		return "an " + kind
	}
	return "a " + kind
}

// tooBigForBots is what the person reads about a file past MaxBotDownload.
func tooBigForBots(f fileRef) string {
	size := ""
	if f.size > 0 {
		size = " (" + sizeText(f.size) + ")"
	}
	return fmt.Sprintf("Your %s%s did not reach the assistant: Telegram does not let bots download files over 20 MB. Send a smaller one, or a link to it.", f.what, size)
}

// refusal is why a file of a message was not passed on: text is what the
// person is told, outcome the media diagnostic's (runtime.Outcome*).
type refusal struct {
	text    string
	outcome string
}

// fetch downloads one file of a message into the blob store as an upload
// (streamed: getFile, then the file's bytes straight into Upload, which
// hashes and writes them to disk as they come, so nothing is held whole).
// problem is set, and nothing stored, when the file cannot be passed on;
// its text is what to tell the person. An error is returned only when the
// update must be handled again (the bot is shutting down).
func (b *Bot) fetch(ctx context.Context, sc chats.Scope, f fileRef) (a chats.Attachment, problem refusal, err error) {
	blobs := b.svc.Blobs()
	if blobs == nil {
		return a, refusal{fmt.Sprintf("Your %s did not reach the assistant: this Mirror stores no attachments.", f.what), runtime.OutcomeUnsupported}, nil
	}
	if f.size > MaxBotDownload {
		return a, refusal{tooBigForBots(f), runtime.OutcomeTooLarge}, nil
	}
	if limit := blobs.Limits().For(f.typ); f.size > limit {
		return a, refusal{fmt.Sprintf("Your %s (%s) did not reach the assistant: %s attachment may be at most %s here.", f.what, sizeText(f.size), aKind(chats.KindOf(f.typ)), sizeText(limit)), runtime.OutcomeTooLarge}, nil
	}
	resp, err := b.call(ctx, callOpts{prio: prioFirst}, tgbotapi.FileConfig{FileID: f.id})
	if err != nil {
		if ctx.Err() != nil {
			return a, refusal{}, err
		}
		if isAPIError(err, "file is too big") {
			return a, refusal{tooBigForBots(f), runtime.OutcomeTooLarge}, nil
		}
		return a, refusal{fmt.Sprintf("Your %s could not be downloaded from Telegram (%s), so it did not reach the assistant; please send it again.", f.what, Redact(err.Error())), runtime.OutcomeDownload}, nil
	}
	var file tgbotapi.File
	if err := json.Unmarshal(resp.Result, &file); err != nil || file.FilePath == "" {
		return a, refusal{fmt.Sprintf("Your %s could not be downloaded: Telegram gave no file path for it; please send it again.", f.what), runtime.OutcomeDownload}, nil
	}
	if int64(file.FileSize) > MaxBotDownload {
		return a, refusal{tooBigForBots(f), runtime.OutcomeTooLarge}, nil
	}
	wait := 500 * time.Millisecond
	var last error
	for try := 0; try < downloadTries; try++ {
		if try > 0 {
			if err := b.pause(ctx, wait); err != nil {
				return a, refusal{}, err
			}
			wait *= 2
		}
		a, retry, err := b.download(ctx, sc, file.FilePath, f)
		if err == nil {
			return a, refusal{}, nil
		}
		if ctx.Err() != nil {
			return a, refusal{}, ctx.Err()
		}
		last = err
		if !retry {
			break
		}
		b.log.Warn("telegram: file download failed; retrying", "err", err)
	}
	switch {
	case errors.Is(last, chats.ErrTooLarge), errors.Is(last, chats.ErrBadInput):
		problem = refusal{fmt.Sprintf("Your %s did not reach the assistant: %s", f.what, last.Error()), chats.RefusalOutcome(last)}
	default:
		problem = refusal{fmt.Sprintf("Your %s could not be downloaded from Telegram (%s), so it did not reach the assistant; please send it again.", f.what, Redact(last.Error())), runtime.OutcomeDownload}
	}
	return chats.Attachment{}, problem, nil
}

// download streams the file at filePath into the blob store. retry says
// whether a failure came on the way (worth another try) rather than from
// the file itself.
func (b *Bot) download(ctx context.Context, sc chats.Scope, filePath string, f fileRef) (chats.Attachment, bool, error) {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	u := fmt.Sprintf(fileEndpoint(b.cfg.APIEndpoint), b.opt.Token, strings.TrimPrefix(filePath, "/"))
	req, err := http.NewRequestWithContext(dctx, http.MethodGet, u, nil)
	if err != nil {
		return chats.Attachment{}, false, redactErr(err)
	}
	resp, err := ctxClient{ctx: dctx, c: b.opt.HTTPClient}.Do(req)
	if err != nil {
		return chats.Attachment{}, true, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return chats.Attachment{}, resp.StatusCode >= 500 || resp.StatusCode == 429, fmt.Errorf("the file download answered %s", resp.Status)
	}
	body := &readErr{r: resp.Body}
	a, err := sc.Upload(dctx, body, f.typ, f.name) // the sender's upload
	if err != nil {
		if body.err != nil && !errors.Is(body.err, io.EOF) {
			// Cut on the way; Upload removed what it had written.
			return chats.Attachment{}, true, redactErr(body.err)
		}
		return chats.Attachment{}, false, err
	}
	return a, false, nil
}

// readErr remembers the error its reader failed with, so a download cut
// on the way is told from a file the store refused.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && r.err == nil {
		r.err = err
	}
	return n, err
}
