//go:build unix

package clustertest

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// reserve takes port for tb, across processes, until tb ends: an exclusive
// lock on a file named after it in the temporary folder. false: another
// test (of this process or another) holds it. A test that cannot make
// the file reserves nothing and gets the port as drawn.
func reserve(tb testing.TB, port int) bool {
	dir := filepath.Join(os.TempDir(), "mirror-test-route-ports")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	tb.Cleanup(func() { f.Close() }) // closing the file lets the lock go
	return true
}
