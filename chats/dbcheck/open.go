package dbcheck

import (
	"errors"
	"fmt"
	"os"
	"time"

	bolterrors "go.etcd.io/bbolt/errors"
	"golang.org/x/sys/unix"
)

// ErrDamaged classifies a damaged database: errors.Is(err, ErrDamaged).
var ErrDamaged = errors.New("the database file is damaged")

// Damage is a database file that Check refused: which file, and the report.
type Damage struct {
	Path   string
	Report *Report
	// Held says a running gateway holds the file (it was checked there).
	Held bool
}

// Error names the file, says what is wrong and what to do.
func (d *Damage) Error() string {
	first := ""
	if d.Held {
		first = "stop the gateway; "
	}
	return fmt.Sprintf("the database %s is damaged (nothing in it was changed):%s\n"+
		"What to do: %skeep this file as it is; put your latest copy from `mirror backup` in its place "+
		"(or move it aside to start with an empty database); `mirror check` says what is wrong.",
		d.Path, d.Report.describe(), first)
}

// Is makes errors.Is(err, ErrDamaged) true.
func (d *Damage) Is(target error) bool { return target == ErrDamaged }

// lockRetry is how often a held lock is tried again (bbolt's own interval).
const lockRetry = 50 * time.Millisecond

// Open opens path with flag and mode as bbolt would, takes the lock bbolt
// takes (exclusive unless flag is read-only; held by the descriptor, so
// bbolt taking it again on the same descriptor is no conflict), and checks
// the file under that lock, so no other process writes it meanwhile. A lock
// still held by another process after timeout (0: wait for ever) is
// bbolt's ErrTimeout. An empty file is a new database and passes with a nil
// report. A damaged file is closed and reported as *Damage, with its report.
func Open(path string, flag int, mode os.FileMode, timeout time.Duration) (*os.File, *Report, error) {
	return open(path, flag, mode, timeout, false)
}

func open(path string, flag int, mode os.FileMode, timeout time.Duration, atOpen bool) (*os.File, *Report, error) {
	f, err := os.OpenFile(path, flag, mode)
	if err != nil {
		return nil, nil, err
	}
	if err := lock(f, flag&(os.O_WRONLY|os.O_RDWR) != 0, timeout); err != nil {
		f.Close()
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	clean := uint64(0)
	if atOpen {
		clean = cleanTxid(path, fi)
		if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
			// The first commit of this open changes the file: from now on
			// only the next clean close vouches for it.
			if err := os.Remove(path + MarkerSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
				f.Close()
				return nil, nil, fmt.Errorf("remove the clean-shutdown marker: %w", err)
			}
		}
	}
	if fi.Size() == 0 {
		return f, nil, nil
	}
	rep := check(f, fi.Size(), clean)
	if !rep.Sound() {
		f.Close()
		return nil, rep, &Damage{Path: path, Report: rep}
	}
	return f, rep, nil
}

// OpenFile returns a bbolt Options.OpenFile that opens through Open with
// CheckAtOpen: bbolt then sees only files found sound, and a damaged one
// makes bolt.Open return the *Damage untouched. Never set a bbolt
// Tx.WriteFlag with it: WriteTo would reopen the file through here and
// wait for the lock this process holds.
func OpenFile(timeout time.Duration) func(string, int, os.FileMode) (*os.File, error) {
	return OpenFileReport(timeout, nil)
}

// OpenFileReport is OpenFile that also stores the report of each open in
// *report (when not nil): whether the tree was walked, and what was odd.
func OpenFileReport(timeout time.Duration, report **Report) func(string, int, os.FileMode) (*os.File, error) {
	return func(path string, flag int, mode os.FileMode) (*os.File, error) {
		f, rep, err := open(path, flag, mode, timeout, true)
		if report != nil {
			*report = rep
		}
		return f, err
	}
}

func lock(f *os.File, exclusive bool, timeout time.Duration) error {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	deadline := time.Now().Add(timeout)
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		if timeout > 0 && time.Now().After(deadline) {
			return bolterrors.ErrTimeout
		}
		time.Sleep(lockRetry) // polling a lock another process holds, bounded by timeout
	}
}
