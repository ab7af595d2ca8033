package boundary

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mirror-gateway/mirror/config/datadir"
)

// Where boundaries write in the data dir.
const (
	WorkstreamsDir = "workstreams" // data_dir/workstreams/<chat>/handoff.md
	HandoffName    = "handoff.md"
	MemoryDir      = "memory" // data_dir/memory/<date>-<chat>-<slug>.md
)

// CheckChat refuses a chat id that could not be a plain directory name:
// ids are generated ("c_" and hex), but one that reaches a file path must
// never lead outside the data dir, so only ASCII letters, digits, _ and -
// are accepted, 1 to 128 of them.
func CheckChat(chat string) error {
	if chat == "" || len(chat) > 128 {
		return fmt.Errorf("chat id %.40q: must be 1 to 128 characters", chat)
	}
	for _, r := range chat {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Errorf("chat id %.40q: only letters, digits, _ and - may name a chat on disk", chat)
		}
	}
	return nil
}

// WriteHandoff keeps data_dir/workstreams/<chat>/handoff.md current with
// text: directories are made 0700, the file is replaced atomically with a
// 0600 one, and a symlink or a foreign or open object anywhere on the way
// is refused (datadir.ErrUnsafe), never followed.
func WriteHandoff(dataDir, chat, text string) error {
	if err := CheckChat(chat); err != nil {
		return err
	}
	dir, err := ensureDirs(dataDir, WorkstreamsDir, chat)
	if err != nil {
		return err
	}
	return datadir.WriteFile(dir, HandoffName, []byte(text))
}

// ReadHandoff reads what WriteHandoff last wrote; a missing file gives an
// error wrapping fs.ErrNotExist.
func ReadHandoff(dataDir, chat string) (string, error) {
	if err := CheckChat(chat); err != nil {
		return "", err
	}
	dir := filepath.Join(dataDir, WorkstreamsDir, chat)
	for _, d := range []string{dataDir, filepath.Join(dataDir, WorkstreamsDir), dir} {
		if err := datadir.CheckDir(d); err != nil {
			return "", err
		}
	}
	b, err := datadir.ReadFile(dir, HandoffName)
	return string(b), err
}

// ensureDirs makes each of parts below the data dir in turn (0700) and
// checks each with the data dir's rules, so a link planted anywhere on the
// way is refused. It returns the last one.
func ensureDirs(dataDir string, parts ...string) (string, error) {
	if err := datadir.CheckDir(dataDir); err != nil {
		return "", err
	}
	dir := dataDir
	for _, p := range parts {
		dir = filepath.Join(dir, p)
		if err := os.Mkdir(dir, 0o700); err == nil {
			// The umask may have taken bits we need; it can never have added any.
			if err := os.Chmod(dir, 0o700); err != nil {
				return "", err
			}
		} else if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
		if err := datadir.CheckDir(dir); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// WriteNotes writes each note reflect produced as its own markdown file,
// data_dir/memory/<date>-<chat>-<slug>.md (date of at, UTC), 0600, written
// atomically and never over an existing note: a name that is taken gets a
// -2, -3, ... suffix. Its trailer names the chat, the boundary and, when
// person is not "", the person the note belongs to (the chat's owner), so
// it is offered only in their chats. It returns the names written, in
// order. Notes written before a failure stay; the error says which note
// failed.
func WriteNotes(dataDir, chat, person string, boundarySeq uint64, at time.Time, notes []Note) ([]string, error) {
	if err := CheckChat(chat); err != nil {
		return nil, err
	}
	if person != "" {
		if err := CheckChat(person); err != nil { // ids are the same plain kind
			return nil, fmt.Errorf("person: %w", err)
		}
	}
	if len(notes) == 0 {
		return nil, nil
	}
	dir, err := ensureDirs(dataDir, MemoryDir)
	if err != nil {
		return nil, err
	}
	date := at.UTC().Format("2006-01-02")
	var names []string
	for _, n := range notes {
		body := fmt.Sprintf("# %s\n\n%s\n\n---\nFrom chat %s, the boundary at event %d, %s.\n",
			oneLine(n.Title, 200), strings.TrimSpace(n.Body), chat, boundarySeq, date)
		if person != "" {
			body += "Person: " + person + "\n"
		}
		name, err := writeNew(dir, date+"-"+chat+"-"+Slug(n.Title), ".md", []byte(body))
		if err != nil {
			return names, fmt.Errorf("memory note %q: %w", oneLine(n.Title, 60), err)
		}
		names = append(names, name)
	}
	return names, nil
}

// writeNew writes data under base+ext in dir, or base-2+ext and so on when
// taken, atomically: the content goes to a temp file first, which is then
// hard-linked to the final name (link never replaces an existing name, and
// the note appears whole or not at all).
func writeNew(dir, base, ext string, data []byte) (string, error) {
	tmp := ".note-" + rand.Text() + ext
	if err := datadir.WriteFile(dir, tmp, data); err != nil {
		return "", err
	}
	defer os.Remove(filepath.Join(dir, tmp))
	for i := 1; i <= 1000; i++ {
		name := base + ext
		if i > 1 {
			name = fmt.Sprintf("%s-%d%s", base, i, ext)
		}
		err := os.Link(filepath.Join(dir, tmp), filepath.Join(dir, name))
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		return name, datadir.SyncDir(dir)
	}
	return "", fmt.Errorf("no free name for %s%s", base, ext)
}

// Slug makes a title a file name part: lowercase ASCII letters and digits,
// other runs turned into one "-", at most 48 bytes; "note" when nothing is
// left.
func Slug(title string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(title) {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		switch {
		case ok:
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
		default:
			dash = true
		}
		if b.Len() >= 48 {
			break
		}
	}
	s := strings.Trim(b.String(), "-")
	if len(s) > 48 {
		s = strings.Trim(s[:48], "-")
	}
	if s == "" {
		return "note"
	}
	return s
}

// RemoveWorkstream deletes data_dir/workstreams/<chat> with everything in
// it, for a chat that is deleted. The data dir and the workstreams dir are
// checked first with the data dir's rules (a link or a foreign directory
// there is refused with datadir.ErrUnsafe, never followed); below them
// nothing is followed either, since a link inside is removed as a link.
// A chat that never had a folder gives nil.
func RemoveWorkstream(dataDir, chat string) error {
	if err := CheckChat(chat); err != nil {
		return err
	}
	ws := filepath.Join(dataDir, WorkstreamsDir)
	for _, d := range []string{dataDir, ws} {
		if err := datadir.CheckDir(d); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // no workstreams at all
			}
			return err
		}
	}
	return os.RemoveAll(filepath.Join(ws, chat))
}

// Workstreams lists the chat ids that have a folder under
// data_dir/workstreams; names that could not be a chat are left out.
func Workstreams(dataDir string) ([]string, error) {
	entries, err := readDataSubdir(dataDir, WorkstreamsDir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if CheckChat(e.Name()) == nil {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// readDataSubdir lists data_dir/sub once both pass the data dir's rules;
// nil, nil when either is missing.
func readDataSubdir(dataDir, sub string) ([]os.DirEntry, error) {
	dir := filepath.Join(dataDir, sub)
	for _, d := range []string{dataDir, dir} {
		if err := datadir.CheckDir(d); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, nil
			}
			return nil, err
		}
	}
	return os.ReadDir(dir)
}
