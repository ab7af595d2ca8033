package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestPageOut: pages of a file this process maps read-only, as bbolt maps
// the database, stop counting in its RSS once pageOut has run, and still
// read back the same.
func TestPageOut(t *testing.T) {
	const size = 8 << 20
	path := filepath.Join(t.TempDir(), "db")
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i>>12 + i)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)
	sum := 0
	for i := 0; i < size; i += 4096 { // touch every page
		sum += int(m[i])
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		t.Fatal(err)
	}
	before := mappedRSS(t, real)
	t.Logf("resident before pageOut: %d KiB (checksum %d: the reads are kept)", before, sum)
	if before < size/2>>10 {
		t.Skipf("only %d KiB of the mapping resident after reading it all", before)
	}
	pageOut(real)
	after := mappedRSS(t, real)
	t.Logf("after: %d KiB", after)
	if after == before && !pageOutKnown() {
		t.Skip("this kernel has no MADV_PAGEOUT")
	}
	if after > before/4 {
		t.Fatalf("resident pages of the mapping: %d KiB before, %d KiB after pageOut", before, after)
	}
	for i := 0; i < size; i += 4096 {
		if m[i] != data[i] {
			t.Fatalf("byte %d reads %d after pageOut", i, m[i])
		}
	}
}

// mappedRSS is the Rss, in KiB, of this process's mappings of path.
func mappedRSS(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in, total := false, 0
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			in = len(fields) >= 6 && strings.Join(fields[5:], " ") == path
			continue
		}
		if in && fields[0] == "Rss:" && len(fields) >= 2 {
			n, _ := strconv.Atoi(fields[1])
			total += n
		}
	}
	return total
}

// pageOutKnown reports whether madvise knows MADV_PAGEOUT (Linux 5.4+).
func pageOutKnown() bool {
	b := make([]byte, 4096)
	_, _, errno := syscall.Syscall(syscall.SYS_MADVISE, uintptr(0), 0, 21) // MADV_PAGEOUT, empty range
	_ = b
	return errno != syscall.EINVAL
}

// TestPageOutAFolder: pageOut of a folder reclaims the pages of every file
// mapped under it (the search index's segments), and of nothing else.
func TestPageOutAFolder(t *testing.T) {
	const size = 4 << 20
	dir := t.TempDir()
	var paths []string
	for _, name := range []string{"search/a.zap", "search/store/b.zap", "search-other"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, size), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		m, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Munmap(m)
		sum := 0
		for i := 0; i < size; i += 4096 { // touch every page
			sum += int(m[i])
		}
		t.Logf("%s: checksum %d (the reads are kept)", name, sum)
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, real)
	}
	var before []int
	for _, p := range paths {
		n := mappedRSS(t, p)
		if n < size/2>>10 {
			t.Skipf("only %d KiB of %s resident after reading it all", n, p)
		}
		before = append(before, n)
	}
	folder, err := filepath.EvalSymlinks(filepath.Join(dir, "search"))
	if err != nil {
		t.Fatal(err)
	}
	pageOut(folder)
	if !pageOutKnown() {
		t.Skip("this kernel has no MADV_PAGEOUT")
	}
	for i, p := range paths {
		after := mappedRSS(t, p)
		under := i < 2
		if under && after > before[i]/4 || !under && after < before[i]/2 {
			t.Errorf("%s: %d KiB resident before, %d after pageOut of %s", p, before[i], after, folder)
		}
	}
}
