package chats

import (
	"os"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// ahead keeps the blocks just past bbolt's high-water mark written with
// zeros, so that a commit's new pages overwrite blocks the file system
// already holds instead of filling holes.
//
// Why: bbolt grows its file with truncate, which leaves holes, and nearly
// every commit of a growing store (a turn adds rows) puts a page or more
// past the mark. A write into a hole makes ext4 allocate a block, and the
// commit's fdatasync must then also commit the journal: 12 page writes and
// two fdatasyncs took 0.41–0.44 ms into written blocks and 0.49–0.57 ms with
// one of the pages in a hole (docs/benchmarks.md, "Issue 20, session 15").
//
// The zeros are written inside a commit, before bbolt allocates anything
// in it: bbolt's writer lock keeps every other write out of the range
// (nothing at or past the mark is in use), and the commit's fdatasync,
// which covers the whole file, makes them blocks on disk. A window ahead of
// the mark is kept written; it grows with the store's recent growth per
// commit, so a commit seldom lands on the blocks its own fill wrote.
type ahead struct {
	f    *os.File // nil: off (see openAhead), or a write failed
	to   int64    // written through here, as far as ahead knows
	last int64    // the mark at the previous commit
	grow int64    // the largest recent growth of the mark per commit, decaying

	wrote int64 // bytes of zeros written (for tests)
}

const (
	aheadMin = 128 << 10 // the least window: a lone turn's commit adds ~1 page
	aheadMax = 8 << 20   // the most: a fill of up to half of it rides one commit
)

// zeros is what a fill writes, a piece at a time (read-only: never
// touched, it costs no memory).
var zeros [64 << 10]byte

// openAhead opens db's file a second time for the fills. Failing that, or
// on tmpfs (memory: no blocks to allocate, no journal, and zeros would
// take memory), the store goes on without them.
func openAhead(db *bolt.DB) *ahead {
	f, err := os.OpenFile(db.Path(), os.O_WRONLY, 0)
	if err != nil {
		return &ahead{}
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &fs); err != nil || fs.Type == unix.TMPFS_MAGIC {
		f.Close()
		return &ahead{}
	}
	return &ahead{f: f}
}

// fill writes zeros over the holes in the window past tx's mark when less
// than half of it is written, within the file's size as bbolt set it (bbolt
// alone grows the file). It is called inside a read-write transaction
// before anything in it is committed. A failure turns ahead off: commits
// go on as before, only slower.
func (a *ahead) fill(tx *bolt.Tx) {
	if a == nil || a.f == nil {
		return
	}
	mark := tx.Size()
	if a.last == 0 {
		a.last = mark // a store just opened: no growth seen yet
	}
	if d := mark - a.last; d > a.grow {
		a.grow = d
	} else {
		a.grow -= a.grow / 8
	}
	a.last = mark
	window := min(max(8*a.grow, aheadMin), aheadMax)
	if a.to >= mark+window/2 {
		return
	}
	fi, err := a.f.Stat()
	if err != nil {
		a.off()
		return
	}
	end := min(mark+window, fi.Size())
	from := max(a.to, mark)
	if from >= end {
		return // written up to the file's end: bbolt grows it first
	}
	// Written already, by an earlier fill or the last process: up to the
	// first hole (the file's end where the file system reports none).
	if from, err = unix.Seek(int(a.f.Fd()), from, unix.SEEK_HOLE); err != nil {
		a.off()
		return
	}
	a.to = from
	if from >= mark+window/2 {
		return
	}
	for off := from; off < end; {
		n := min(end-off, int64(len(zeros)))
		if _, err := a.f.WriteAt(zeros[:n], off); err != nil {
			a.off()
			return
		}
		off += n
		a.to, a.wrote = off, a.wrote+n
	}
}

// off closes the file and stops the fills.
func (a *ahead) off() {
	if a != nil && a.f != nil {
		a.f.Close()
		a.f = nil
	}
}
