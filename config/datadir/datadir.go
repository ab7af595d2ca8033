// Package datadir owns the storage trust boundary: the data directory that
// holds the database and the access token, and the files in it.
//
// The directory must be a real directory (not a symlink) owned by the
// current user with no group or world access (0700 or stricter); files in it
// must be regular files owned by the user with mode 0600 or stricter. Unsafe
// objects are refused with what is wrong and the command that fixes it, never
// followed or repaired silently: a data dir someone else can read or swap
// leaks every conversation and the token. Opens go through a descriptor of
// the checked directory with O_NOFOLLOW, and every check is made on the
// opened object itself, so a path swapped between check and use is caught.
//
// Unix only.
package datadir

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrUnsafe classifies every refusal of an existing object: errors.Is(err,
// ErrUnsafe) tells "fix the permissions" from I/O failures.
var ErrUnsafe = errors.New("unsafe data dir entry")

// UnsafeError says which object was refused, why, and how to fix it:
//
//	data dir ./data is group/world accessible (0755); fix with: chmod 700 ./data
type UnsafeError struct {
	Kind    string // "data dir" or "data file"
	Path    string // as the caller named it
	Problem string // "is a symlink", "is group/world accessible (0755)"
	Fix     string // a command or step that fixes it
}

func (e *UnsafeError) Error() string {
	return fmt.Sprintf("%s %s %s; fix with: %s", e.Kind, e.Path, e.Problem, e.Fix)
}

// Is makes errors.Is(err, ErrUnsafe) true.
func (e *UnsafeError) Is(target error) bool { return target == ErrUnsafe }

// Prepare makes path ready to hold Mirror's data and returns it absolute. A
// missing directory is created 0700 (missing parents 0755, as mkdir -p
// would); an existing one is checked and refused when unsafe.
func Prepare(path string) (string, error) {
	if path == "" {
		return "", errors.New("data dir: no path given")
	}
	abs, err := filepath.Abs(path) // also drops a trailing /, which would make Lstat follow a link
	if err != nil {
		return "", fmt.Errorf("data dir %s: %w", path, err)
	}
	if _, err := os.Lstat(abs); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			return "", fmt.Errorf("create data dir %s: %w", path, err)
		}
		// Mkdir, not MkdirAll: the final directory must be ours, made now.
		// EEXIST means someone raced us; the checks below judge what they made.
		if err := os.Mkdir(abs, 0o700); err == nil {
			// The umask may have taken bits we need; it can never have added any.
			if err := os.Chmod(abs, 0o700); err != nil {
				return "", fmt.Errorf("create data dir %s: %w", path, err)
			}
		} else if !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("create data dir %s: %w", path, err)
		}
	} else if err != nil {
		return "", fmt.Errorf("data dir %s: %w", path, err)
	}
	fd, err := OpenDirAt(unix.AT_FDCWD, abs, path)
	if err != nil {
		return "", err
	}
	unix.Close(fd)
	return abs, nil
}

// CheckDir checks an existing data dir without creating it: for commands
// that only read (replay), where a missing dir means there is nothing yet.
func CheckDir(path string) error {
	fd, err := OpenDirAt(unix.AT_FDCWD, path, path)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// OpenFile opens the plain file name inside the data dir dir, as os.OpenFile
// does, but never through a symlink: new files are created 0600, and an
// existing file that is not a private regular file of this user is refused
// before flag (O_TRUNC, say) can touch it.
func OpenFile(dir, name string, flag int) (*os.File, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	dfd, err := OpenDirAt(unix.AT_FDCWD, dir, dir)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	return OpenAt(dfd, dir, name, flag)
}

// ReadFile reads the file name in the data dir dir. A missing file gives an
// error wrapping fs.ErrNotExist.
func ReadFile(dir, name string) ([]byte, error) {
	f, err := OpenFile(dir, name, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// WriteFile replaces the file name in the data dir dir with data, atomically:
// a reader sees the old content or the new, never a part, even across a
// crash. It writes a 0600 temp file in the same directory, syncs it, renames
// it over name and syncs the directory. An unsafe existing name is refused,
// not replaced, so a planted link or a foreign file is noticed.
func WriteFile(dir, name string, data []byte) error {
	if err := CheckName(name); err != nil {
		return err
	}
	dfd, err := OpenDirAt(unix.AT_FDCWD, dir, dir)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	if err := checkAt(dfd, dir, name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	tmp, f, err := CreateTemp(dfd, dir, name)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dfd, tmp, dfd, name)
	}
	if err != nil {
		unix.Unlinkat(dfd, tmp, 0)
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
	}
	// The rename is durable only once the directory entry is.
	if err := unix.Fsync(dfd); err != nil {
		return fmt.Errorf("write %s: sync dir: %w", filepath.Join(dir, name), err)
	}
	return nil
}

// CheckFile checks path, a file in a data dir that another package opens
// itself (the bbolt database), and its directory. A missing file gives an
// error wrapping fs.ErrNotExist; the caller may then let it be created.
func CheckFile(path string) error {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if err := CheckName(name); err != nil {
		return err
	}
	dfd, err := OpenDirAt(unix.AT_FDCWD, filepath.Clean(dir), filepath.Clean(dir))
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	return checkAt(dfd, filepath.Clean(dir), name)
}

// CheckName refuses anything but a plain file name: no separators, no . or
// .., no NUL, at most 255 bytes. Names come from our own code, but a name
// built from a chat id must never reach outside the data dir.
func CheckName(name string) error {
	switch {
	case name == "":
		return errors.New("data file: empty name")
	case name == "." || name == "..":
		return fmt.Errorf("data file %q: not a file name", name)
	case strings.ContainsAny(name, "/\\\x00"):
		return fmt.Errorf("data file %q: a name inside the data dir must not contain / \\ or NUL", name)
	case len(name) > 255:
		return fmt.Errorf("data file %.40q...: name longer than 255 bytes", name)
	}
	return nil
}

// SyncDir fsyncs the directory dir, so that a file just created or renamed
// in it survives a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
