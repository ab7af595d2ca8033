package datadir

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

const (
	kindDir  = "data dir"
	kindFile = "data file"
)

// OpenDirAt opens the directory name in dirfd (unix.AT_FDCWD: name is a
// path) without following a link in its last element, and checks the
// opened directory itself: a directory of yours, 0700. shown is the path
// for messages. Parts of the data dir that keep their own folders (the
// blob store) open each level with it, so nothing is reached through a link.
func OpenDirAt(dirfd int, name, shown string) (int, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		// Classify by what is there: the errno for a link differs between
		// systems (ELOOP, ENOTDIR).
		var st unix.Stat_t
		if lerr := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); lerr == nil {
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				fix := "point data_dir at the real directory instead of the link"
				if target, err := os.Readlink(shown); err == nil {
					fix += fmt.Sprintf(" (it links to %s)", target)
				}
				return -1, &UnsafeError{kindDir, shown, "is a symlink", fix}
			}
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				return -1, &UnsafeError{kindDir, shown, "is not a directory",
					"move it away, or point data_dir at a directory"}
			}
		}
		return -1, &fs.PathError{Op: "open data dir", Path: shown, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, &fs.PathError{Op: "stat data dir", Path: shown, Err: err}
	}
	if err := checkDir(&st, shown); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func checkDir(st *unix.Stat_t, shown string) error {
	perm := st.Mode & 0o777
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return &UnsafeError{kindDir, shown, "is not a directory", "move it away, or point data_dir at a directory"}
	case int(st.Uid) != os.Geteuid():
		return &UnsafeError{kindDir, shown, fmt.Sprintf("is owned by uid %d, not by you (uid %d)", st.Uid, os.Geteuid()),
			fmt.Sprintf("sudo chown -R %d %s (or run mirror as its owner)", os.Geteuid(), shown)}
	case perm&0o077 != 0:
		return &UnsafeError{kindDir, shown, fmt.Sprintf("is group/world accessible (%04o)", perm), "chmod 700 " + shown}
	case perm&0o700 != 0o700:
		return &UnsafeError{kindDir, shown, fmt.Sprintf("is not readable, writable and searchable by you (%04o)", perm), "chmod 700 " + shown}
	}
	return nil
}

func checkFile(st *unix.Stat_t, shown string) error {
	perm := st.Mode & 0o777
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return symlinkFile(shown)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return &UnsafeError{kindFile, shown, "is not a regular file", "move it out of the data dir"}
	case int(st.Uid) != os.Geteuid():
		return &UnsafeError{kindFile, shown, fmt.Sprintf("is owned by uid %d, not by you (uid %d)", st.Uid, os.Geteuid()),
			fmt.Sprintf("sudo chown %d %s", os.Geteuid(), shown)}
	case perm&0o077 != 0:
		return &UnsafeError{kindFile, shown, fmt.Sprintf("is group/world accessible (%04o)", perm), "chmod 600 " + shown}
	}
	return nil
}

// symlinkFile refuses a link where a data file should be. The fix puts the
// real file in its place, so nothing it held is lost.
func symlinkFile(shown string) error {
	return &UnsafeError{kindFile, shown, "is a symlink",
		fmt.Sprintf("cp --remove-destination \"$(readlink -f %s)\" %s && chmod 600 %s", shown, shown, shown)}
}

// checkAt checks the existing entry name in the directory dfd without
// following it. A missing one gives an error wrapping fs.ErrNotExist.
func checkAt(dfd int, dir, name string) error {
	shown := filepath.Join(dir, name)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &fs.PathError{Op: "stat", Path: shown, Err: err}
	}
	return checkFile(&st, shown)
}

// OpenAt opens name in the checked directory dfd (see OpenDirAt; dir is its
// path, for messages) without following a link, and checks the opened
// file: a regular file of yours, 0600. A missing one wraps fs.ErrNotExist.
func OpenAt(dfd int, dir, name string, flag int) (*os.File, error) {
	shown := filepath.Join(dir, name)
	// Check before opening, so O_TRUNC never touches a file we refuse.
	err := checkAt(dfd, dir, name)
	created := errors.Is(err, fs.ErrNotExist) && flag&os.O_CREATE != 0
	if err != nil && !created {
		return nil, err
	}
	// O_NONBLOCK: a FIFO planted after the check must not hang the open.
	fd, err := unix.Openat(dfd, name, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0o600)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, symlinkFile(shown)
		}
		return nil, &fs.PathError{Op: "open", Path: shown, Err: err}
	}
	// Judge the object opened, not the name: it may have been swapped.
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "stat", Path: shown, Err: err}
	}
	if err := checkFile(&st, shown); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if created {
		// The umask may have taken bits the owner needs.
		if err := unix.Fchmod(fd, 0o600); err != nil {
			unix.Close(fd)
			return nil, &fs.PathError{Op: "chmod", Path: shown, Err: err}
		}
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "open", Path: shown, Err: err}
	}
	return os.NewFile(uintptr(fd), shown), nil
}

// TempPrefix starts the name of every temp file CreateTemp makes, so what
// a crash left can be found and removed.
const TempPrefix = ".tmp-"

// CreateTemp creates a fresh 0600 temp file, open for reading and writing,
// in the checked directory dfd, named TempPrefix, random hex and name; it
// returns its name in dfd.
func CreateTemp(dfd int, dir, name string) (string, *os.File, error) {
	base := name
	if len(base) > 200 {
		base = base[:200] // keep the temp name within NAME_MAX
	}
	for range 10 {
		var r [8]byte
		rand.Read(r[:])
		tmp := TempPrefix + hex.EncodeToString(r[:]) + "-" + base
		fd, err := unix.Openat(dfd, tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return "", nil, &fs.PathError{Op: "create", Path: filepath.Join(dir, tmp), Err: err}
		}
		if err := unix.Fchmod(fd, 0o600); err != nil {
			unix.Close(fd)
			unix.Unlinkat(dfd, tmp, 0)
			return "", nil, &fs.PathError{Op: "chmod", Path: filepath.Join(dir, tmp), Err: err}
		}
		return tmp, os.NewFile(uintptr(fd), filepath.Join(dir, tmp)), nil
	}
	return "", nil, fmt.Errorf("write %s: no free temp name", filepath.Join(dir, name))
}
