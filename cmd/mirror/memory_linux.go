package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// pageOut asks the kernel to reclaim this process's pages of the file at
// path (the database, which bbolt maps read-only): after a load they stay
// resident and count in RSS long after the last read. Reclaiming is only a
// hint, and always safe: MADV_PAGEOUT never discards data (a clean file page
// is read again on the next access; were the range remapped meanwhile,
// anonymous memory would at worst go to swap), unlike MADV_DONTNEED. Kernels
// before 5.4 do not know it and refuse; that is ignored. A folder's path
// covers every file mapped under it (the search index's segments).
func pageOut(path string) {
	if path == "" {
		return
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "start-end perms offset dev inode   path"
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		if p := strings.Join(fields[5:], " "); p != path && !strings.HasPrefix(p, path+"/") {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		_, _, _ = syscall.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_PAGEOUT)
	}
}
