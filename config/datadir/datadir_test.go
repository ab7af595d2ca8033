package datadir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// private makes a 0700 data dir for a test.
func private(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestPrepareCreates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "data")
	got, err := Prepare(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != path {
		t.Errorf("Prepare = %q, want %q", got, path)
	}
	if m := mode(t, path); m != 0o700 {
		t.Errorf("mode = %04o, want 0700", m)
	}
	// Prepared twice is fine.
	if _, err := Prepare(path + "/"); err != nil {
		t.Errorf("second Prepare: %v", err)
	}
}

func TestPrepareRelative(t *testing.T) {
	t.Chdir(t.TempDir())
	got, err := Prepare("./data")
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(got) || filepath.Base(got) != "data" {
		t.Errorf("Prepare = %q, want an absolute path", got)
	}
	if err := os.Chmod("data", 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = Prepare("./data")
	const want = "data dir ./data is group/world accessible (0755); fix with: chmod 700 ./data"
	if err == nil || err.Error() != want {
		t.Errorf("Prepare(0755) = %v\nwant %s", err, want)
	}
}

func TestPrepareRefuses(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, path string)
		want  string // the error after "data dir PATH "
	}{
		{"symlink", func(t *testing.T, path string) {
			real := private(t)
			if err := os.Symlink(real, path); err != nil {
				t.Fatal(err)
			}
		}, "is a symlink; fix with: point data_dir at the real directory instead of the link (it links to "},
		{"dangling symlink", func(t *testing.T, path string) {
			if err := os.Symlink("/nonexistent/mirror-test", path); err != nil {
				t.Fatal(err)
			}
		}, "is a symlink; fix with: "},
		{"file", func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "is not a directory; fix with: move it away, or point data_dir at a directory"},
		{"world readable", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
			os.Chmod(path, 0o755)
		}, "is group/world accessible (0755); fix with: chmod 700 "},
		{"group writable", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
			os.Chmod(path, 0o720)
		}, "is group/world accessible (0720); fix with: chmod 700 "},
		{"not writable", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
			os.Chmod(path, 0o500)
		}, "is not readable, writable and searchable by you (0500); fix with: chmod 700 "},
		{"foreign owner", func(t *testing.T, path string) {
			if os.Geteuid() != 0 {
				t.Skip("needs root to give a directory away")
			}
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(path, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, "is owned by uid 65534, not by you (uid 0); fix with: sudo chown -R 0 "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "data")
			tc.setup(t, path)
			_, err := Prepare(path)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrUnsafe) {
				t.Errorf("error is not ErrUnsafe: %v", err)
			}
			if want := "data dir " + path + " " + tc.want; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error:\n got %s\nwant %s...", err, want)
			}
			// The same checks guard every file operation.
			if _, err := ReadFile(path, "token"); !errors.Is(err, ErrUnsafe) {
				t.Errorf("ReadFile in it = %v, want ErrUnsafe", err)
			}
			if err := WriteFile(path, "token", []byte("x")); !errors.Is(err, ErrUnsafe) {
				t.Errorf("WriteFile in it = %v, want ErrUnsafe", err)
			}
		})
	}
}

func TestWriteReadFile(t *testing.T) {
	dir := private(t)
	if _, err := ReadFile(dir, "token"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadFile(missing) = %v, want fs.ErrNotExist", err)
	}
	if err := CheckFile(filepath.Join(dir, "token")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("CheckFile(missing) = %v, want fs.ErrNotExist", err)
	}
	for _, content := range []string{"first\n", "second, longer\n", ""} {
		if err := WriteFile(dir, "token", []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFile(dir, "token")
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != content {
			t.Errorf("ReadFile = %q, want %q", got, content)
		}
	}
	if m := mode(t, filepath.Join(dir, "token")); m != 0o600 {
		t.Errorf("mode = %04o, want 0600", m)
	}
	if err := CheckFile(filepath.Join(dir, "token")); err != nil {
		t.Errorf("CheckFile = %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temp files left behind: %v", entries)
	}
}

func TestOpenFileCreates(t *testing.T) {
	dir := private(t)
	old := unix.Umask(0) // the mode must not depend on the umask
	defer unix.Umask(old)
	f, err := OpenFile(dir, "mirror.db", os.O_RDWR|os.O_CREATE)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("x"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if m := mode(t, filepath.Join(dir, "mirror.db")); m != 0o600 {
		t.Errorf("mode = %04o, want 0600", m)
	}
	// O_EXCL still means what it says.
	if _, err := OpenFile(dir, "mirror.db", os.O_RDWR|os.O_CREATE|os.O_EXCL); !errors.Is(err, fs.ErrExist) {
		t.Errorf("O_EXCL on an existing file = %v, want fs.ErrExist", err)
	}
}

func TestFileRefusals(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, path string)
		want  string // the error after "data file PATH "
	}{
		{"symlink", func(t *testing.T, path string) {
			target := filepath.Join(t.TempDir(), "elsewhere")
			if err := os.WriteFile(target, []byte("kept"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}, "is a symlink; fix with: cp --remove-destination "},
		{"world readable", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("kept"), 0o600); err != nil {
				t.Fatal(err)
			}
			os.Chmod(path, 0o644)
		}, "is group/world accessible (0644); fix with: chmod 600 "},
		{"group readable", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("kept"), 0o600); err != nil {
				t.Fatal(err)
			}
			os.Chmod(path, 0o640)
		}, "is group/world accessible (0640); fix with: chmod 600 "},
		{"directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}, "is not a regular file; fix with: move it out of the data dir"},
		{"fifo", func(t *testing.T, path string) {
			if err := unix.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "is not a regular file; fix with: move it out of the data dir"},
		{"foreign owner", func(t *testing.T, path string) {
			if os.Geteuid() != 0 {
				t.Skip("needs root to give a file away")
			}
			if err := os.WriteFile(path, []byte("kept"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(path, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, "is owned by uid 65534, not by you (uid 0); fix with: sudo chown 0 "},
	}
	ops := []struct {
		name string
		do   func(dir, name string) error
	}{
		{"ReadFile", func(dir, name string) error { _, err := ReadFile(dir, name); return err }},
		{"WriteFile", func(dir, name string) error { return WriteFile(dir, name, []byte("new")) }},
		{"OpenFile O_TRUNC", func(dir, name string) error {
			f, err := OpenFile(dir, name, os.O_RDWR|os.O_CREATE|os.O_TRUNC)
			if err == nil {
				f.Close()
			}
			return err
		}},
		{"CheckFile", func(dir, name string) error { return CheckFile(filepath.Join(dir, name)) }},
	}
	for _, tc := range tests {
		for _, op := range ops {
			t.Run(tc.name+"/"+op.name, func(t *testing.T) {
				dir := private(t)
				path := filepath.Join(dir, "token")
				tc.setup(t, path)
				err := op.do(dir, "token")
				if err == nil {
					t.Fatal("accepted")
				}
				if !errors.Is(err, ErrUnsafe) {
					t.Errorf("error is not ErrUnsafe: %v", err)
				}
				if want := "data file " + path + " " + tc.want; !strings.HasPrefix(err.Error(), want) {
					t.Errorf("error:\n got %s\nwant %s...", err, want)
				}
				// Refused means untouched: not truncated, not replaced, link kept.
				if fi, err := os.Lstat(path); err != nil || (fi.Mode().IsRegular() && mustRead(t, path) != "kept") {
					t.Errorf("refused file was changed")
				}
			})
		}
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestBadNames(t *testing.T) {
	dir := private(t)
	for _, name := range []string{"", ".", "..", "../token", "a/b", "/etc/passwd", "a\\b", "a\x00b", strings.Repeat("x", 256)} {
		if _, err := ReadFile(dir, name); err == nil {
			t.Errorf("ReadFile(%q) accepted", name)
		}
		if err := WriteFile(dir, name, []byte("x")); err == nil {
			t.Errorf("WriteFile(%q) accepted", name)
		}
		if _, err := OpenFile(dir, name, os.O_RDWR|os.O_CREATE); err == nil {
			t.Errorf("OpenFile(%q) accepted", name)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("bad names created %v", entries)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "token")); err == nil {
		t.Error("a name escaped the data dir")
	}
}

func TestCheckDir(t *testing.T) {
	dir := private(t)
	if err := CheckDir(dir); err != nil {
		t.Errorf("CheckDir = %v", err)
	}
	if err := CheckDir(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CheckDir(missing) = %v, want fs.ErrNotExist", err)
	}
	os.Chmod(dir, 0o750)
	if err := CheckDir(dir); !errors.Is(err, ErrUnsafe) {
		t.Errorf("CheckDir(0750) = %v, want ErrUnsafe", err)
	}
}

func FuzzCheckName(f *testing.F) {
	for _, s := range []string{"token", "mirror.db", "..", ".", "a/b", "..\\x", "\x00", ".hidden", "...", "a..b"} {
		f.Add(s)
	}
	const dir = "/data"
	f.Fuzz(func(t *testing.T, name string) {
		if CheckName(name) != nil {
			return
		}
		// An accepted name is exactly one entry directly inside dir.
		p := filepath.Join(dir, name)
		if filepath.Dir(p) != dir || filepath.Base(p) != name {
			t.Fatalf("accepted %q, which resolves to %q", name, p)
		}
	})
}
