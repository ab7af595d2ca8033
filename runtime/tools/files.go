package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// maxRead is the largest file read_file returns: more would be previewed
// anyway, and a bigger file is better searched with the shell.
const maxRead = 1 << 20

// maxContent bounds write_file content and edit_file texts, in characters.
const maxContent = 1 << 20

func (r *Registry) fileTools() []*tool {
	return []*tool{
		{
			name:        "read_file",
			description: "Read a text file in the workspace. Optional offset (first line, from 1) and limit (number of lines) read part of it. Files over 1 MiB and binary files are refused.",
			schema: object([]string{"path"}, map[string]*schema{
				"path":   str("Path relative to the workspace, such as notes/todo.md.", 1, maxPath),
				"offset": integer("First line to read, counting from 1.", 1, 1<<31),
				"limit":  integer("Most lines to read.", 1, 1<<31),
			}),
			run: r.readFile,
		},
		{
			name:        "list_dir",
			description: "List a folder of the workspace, sorted by name; folders end with /, symlinks with @. Without path, lists the workspace itself.",
			schema: object(nil, map[string]*schema{
				"path": str("Folder relative to the workspace; empty or . for the workspace.", 0, maxPath),
			}),
			run: r.listDir,
		},
		{
			name:        "write_file",
			description: "Write a whole text file in the workspace, creating it and its folders when missing and replacing it when it exists.",
			schema: object([]string{"path", "content"}, map[string]*schema{
				"path":    str("Path relative to the workspace, such as notes/todo.md.", 1, maxPath),
				"content": str("The whole new content of the file.", 0, maxContent),
			}),
			run: r.writeFile,
		},
		{
			name:        "edit_file",
			description: "Replace one exact piece of text in a file of the workspace. old must match exactly once (whitespace included); include surrounding lines to make it unique.",
			schema: object([]string{"path", "old", "new"}, map[string]*schema{
				"path": str("Path relative to the workspace, such as notes/todo.md.", 1, maxPath),
				"old":  str("The exact text to replace; must occur exactly once.", 1, maxContent),
				"new":  str("The text to put in its place.", 0, maxContent),
			}),
			run: r.editFile,
		},
	}
}

type readArgs struct {
	Path   string `json:"path"`
	Offset *int   `json:"offset"`
	Limit  *int   `json:"limit"`
}

func (r *Registry) readFile(_ context.Context, raw []byte, _ CallMeta) (string, bool, error) {
	var a readArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return "", true, err
	}
	rel, root, err := r.ws.open(a.Path)
	if err != nil {
		return "", true, err
	}
	defer root.Close()
	data, err := readRegular(root, rel, a.Path, maxRead, "read_file reads at most 1 MiB; use shell (head, sed -n, grep) to read parts of it")
	if err != nil {
		return "", true, err
	}
	if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
		return "", true, fmt.Errorf("%s looks binary (%d bytes); read_file reads text only", quote(a.Path), len(data))
	}
	if len(data) == 0 {
		return "(empty file)", false, nil
	}
	text := string(data)
	if a.Offset == nil && a.Limit == nil {
		return text, false, nil
	}
	lines := strings.SplitAfter(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	first := 1
	if a.Offset != nil {
		first = *a.Offset
	}
	if first > len(lines) {
		return "", true, fmt.Errorf("offset %d is past the end: %s has %d lines", first, quote(a.Path), len(lines))
	}
	last := len(lines)
	if a.Limit != nil && first-1+*a.Limit < last {
		last = first - 1 + *a.Limit
	}
	out := strings.Join(lines[first-1:last], "")
	if first > 1 || last < len(lines) {
		if !strings.HasSuffix(out, "\n") {
			out += "\n"
		}
		out += fmt.Sprintf("…[lines %d-%d of %d; use offset and limit to read more]", first, last, len(lines))
	}
	return out, false, nil
}

type listArgs struct {
	Path string `json:"path"`
}

func (r *Registry) listDir(_ context.Context, raw []byte, _ CallMeta) (string, bool, error) {
	var a listArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return "", true, err
	}
	rel, root, err := r.ws.open(a.Path)
	if err != nil {
		return "", true, err
	}
	defer root.Close()
	fi, err := root.Stat(rel)
	if err != nil {
		return "", true, opError(a.Path, err)
	}
	if !fi.IsDir() {
		return "", true, fmt.Errorf("%s is a file, not a folder; use read_file to read it", quote(shownPath(a.Path)))
	}
	d, err := root.Open(rel)
	if err != nil {
		return "", true, opError(a.Path, err)
	}
	defer d.Close()
	entries, err := d.ReadDir(-1)
	if err != nil {
		return "", true, opError(a.Path, err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		n := e.Name()
		switch {
		case e.IsDir():
			n += "/"
		case e.Type()&fs.ModeSymlink != 0:
			n += "@"
		}
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "(empty folder)", false, nil
	}
	return strings.Join(names, "\n"), false, nil
}

type writeArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

func (r *Registry) writeFile(_ context.Context, raw []byte, meta CallMeta) (string, bool, error) {
	var a writeArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return "", true, err
	}
	status, err := r.change(a.Path, meta, func(prior []byte, existed bool) ([]byte, error) {
		return []byte(a.Content), nil
	})
	if err != nil {
		return "", true, err
	}
	return fmt.Sprintf("wrote %d bytes to %s (%s)", len(a.Content), shownPath(a.Path), status), false, nil
}

type editArgs struct {
	Path string `json:"path"`
	Old  string `json:"old"`
	New  string `json:"new"`
}

func (r *Registry) editFile(_ context.Context, raw []byte, meta CallMeta) (string, bool, error) {
	var a editArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return "", true, err
	}
	if a.Old == a.New {
		return "", true, errors.New(`"old" and "new" are the same; nothing would change`)
	}
	var line int
	_, err := r.change(a.Path, meta, func(prior []byte, existed bool) ([]byte, error) {
		if !existed {
			return nil, fmt.Errorf("%s does not exist; use write_file to create it", quote(a.Path))
		}
		next, at, err := applyEdit(string(prior), a)
		if err != nil {
			return nil, err
		}
		line = at
		return []byte(next), nil
	})
	if err != nil {
		return "", true, err
	}
	return fmt.Sprintf("replaced 1 occurrence in %s at line %d", shownPath(a.Path), line), false, nil
}

// change is the one way a file tool changes a file: resolve the path, read
// the current bytes, let edit compute the new ones, record the previous state
// in the ledger (committed first), then write. It is serialised with every
// other change and with rewinds, so the recorded bytes are the replaced ones.
// It returns the status (created, modified or unchanged).
func (r *Registry) change(p string, meta CallMeta, edit func(prior []byte, existed bool) ([]byte, error)) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rel, root, err := r.ws.open(p)
	if err != nil {
		return "", err
	}
	defer root.Close()
	if rel == "." {
		return "", fmt.Errorf("%s is the workspace folder itself; name a file in it", quote(p))
	}

	var (
		prior   []byte
		existed bool
		mode    fs.FileMode
	)
	switch fi, err := root.Lstat(rel); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return "", opError(p, err)
	default:
		limit, tooBig := int64(maxSnapshot), "files over 8 MiB are not changed by the file tools, so /rewind can always restore them"
		if meta.Journal != nil && r.ledger != nil {
			// The previous bytes travel in one message of the cluster's log.
			limit, tooBig = maxJournaledSnapshot, "in a cluster, files over 4 MiB are not changed by the file tools, so /rewind can always restore them"
		}
		prior, err = readRegular(root, rel, p, limit, tooBig)
		if err != nil {
			return "", err
		}
		existed, mode = true, fi.Mode().Perm()
	}
	next, err := edit(prior, existed)
	if err != nil {
		return "", err
	}
	if existed && bytes.Equal(prior, next) {
		return "unchanged", nil
	}
	status := StatusCreated
	if existed {
		status = StatusModified
	}
	if r.ledger != nil {
		e := entry{Turn: meta.Turn, CallID: meta.CallID, Path: rel, Status: status,
			SizeBefore: int64(len(prior)), SizeAfter: int64(len(next)), Mode: uint32(mode), Time: time.Now()}
		if err := r.ledger.record(meta.Chat, e, prior, meta.Journal); err != nil {
			return "", fmt.Errorf("could not record the change for /rewind, so the file was not changed: %w", err)
		}
	}
	if dir := path.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o700); err != nil {
			return "", opError(p, err)
		}
	}
	if !existed {
		mode = 0o600
	}
	if err := writeFile(root, rel, next, mode); err != nil {
		return "", opError(p, err)
	}
	return status, nil
}

// openRegular opens rel for reading when it is a regular file, never
// following a symlink in its last component nor blocking on a FIFO; a
// folder is refused with folderHint saying what to do instead. The caller
// closes the file.
func openRegular(root *os.Root, rel, shownAs, folderHint string) (*os.File, fs.FileInfo, error) {
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, opError(shownAs, err)
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
		err = opError(shownAs, err)
	case fi.IsDir():
		err = fmt.Errorf("%s is a folder; %s", quote(shownPath(shownAs)), folderHint)
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("%s is not a regular file", quote(shownPath(shownAs)))
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// readRegular reads a regular file of at most limit bytes.
func readRegular(root *os.Root, rel, shownAs string, limit int64, tooBig string) ([]byte, error) {
	f, fi, err := openRegular(root, rel, shownAs, "use list_dir to see what it holds")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	switch {
	case fi.Size() > limit:
		return nil, fmt.Errorf("%s is %d bytes; %s", quote(shownPath(shownAs)), fi.Size(), tooBig)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, opError(shownAs, err)
	}
	if int64(len(data)) > limit { // grew while being read
		return nil, fmt.Errorf("%s is more than %d bytes; %s", quote(shownPath(shownAs)), limit, tooBig)
	}
	return data, nil
}

// writeFile replaces the bytes of rel, never following a symlink in its last
// component, and syncs them so a rewind record is never ahead of the disk
// by more than one file.
func writeFile(root *os.Root, rel string, data []byte, mode fs.FileMode) error {
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// opError reports a failed file operation by the path the model gave,
// without the OS error's absolute paths.
func opError(p string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		err = le.Err
	}
	return fmt.Errorf("%s: %w", quote(shownPath(p)), err)
}

// shownPath is p as the model gave it, "." for the workspace.
func shownPath(p string) string {
	if p == "" {
		return "."
	}
	return p
}
