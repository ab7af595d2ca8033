package dbcheck

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// MarkerSuffix names the clean-shutdown marker: the database's path plus
// this suffix (mirror.db.clean).
const MarkerSuffix = ".clean"

// stamp is what the marker says of the file it vouches for: the
// transaction of its meta page in use, and the file's size, modification
// time and inode. A file copied in, written by anything else, or changed by
// any commit since no longer matches.
func stamp(fi os.FileInfo, txid uint64) string {
	ino := uint64(0)
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = uint64(st.Ino)
	}
	return fmt.Sprintf("mirror clean shutdown: txid %d size %d mtime %d inode %d\n", txid, fi.Size(), fi.ModTime().UnixNano(), ino)
}

// MarkClean records, beside the database at path, that it was closed
// cleanly: with its freelist written (chats.CloseDB), so that the next open
// needs neither bbolt's nor Check's walk of the tree. Call it after the
// database is closed. A file without a written freelist is not marked.
func MarkClean(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	m, ok := inUse(f, fi.Size())
	if !ok || m.freelist == noFreelist {
		return errors.New("the database has no written freelist: not marked as closed cleanly")
	}
	tmp := path + MarkerSuffix + ".tmp"
	if err := os.WriteFile(tmp, []byte(stamp(fi, m.txid)), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path+MarkerSuffix)
}

// cleanTxid is the transaction the marker beside path vouches for when it
// matches the file fi; 0 when there is none or it does not match.
func cleanTxid(path string, fi os.FileInfo) uint64 {
	b, err := os.ReadFile(path + MarkerSuffix)
	if err != nil || len(b) > 256 {
		return 0
	}
	var txid uint64
	if _, err := fmt.Sscanf(string(b), "mirror clean shutdown: txid %d ", &txid); err != nil || txid == 0 {
		return 0
	}
	if string(b) != stamp(fi, txid) {
		return 0
	}
	return txid
}

// inUse reads the meta page bbolt would use, without the rest of Check.
func inUse(f *os.File, size int64) (meta, bool) {
	m0, err0 := readMeta(f, size, 0)
	if err0 != nil {
		return meta{}, false
	}
	m1, err1 := readMeta(f, size, int64(m0.pageSize))
	if err1 == nil && m1.txid > m0.txid {
		return m1, true
	}
	return m0, true
}
