package dbcheck_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats/dbcheck"
	bolt "go.etcd.io/bbolt"
)

// The check at open walks the tree unless the clean-shutdown marker
// vouches for the very file: written after a close with the freelist, and
// the file untouched since. The open for writing removes the marker.
func TestCheckAtOpenTrustsOnlyAMatchingMarker(t *testing.T) {
	withFreelist := &bolt.Options{FreelistType: bolt.FreelistMapType}
	open := func(t *testing.T, path string, flag int) *dbcheck.Report {
		t.Helper()
		var rep *dbcheck.Report
		f, err := dbcheck.OpenFileReport(time.Second, &rep)(path, flag, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		return rep
	}
	write := func(t *testing.T, opt *bolt.Options) string {
		t.Helper()
		path := filepath.Join(t.TempDir(), "mirror.db")
		if err := os.WriteFile(path, build(t, opt, 3, 50, 0), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cases := []struct {
		name  string
		opt   *bolt.Options
		mark  bool
		after func(t *testing.T, path string) // between marking and opening
		tree  bool
	}{
		{"marked", withFreelist, true, nil, false},
		{"no marker", withFreelist, false, nil, true},
		{"replaced after marking", withFreelist, true, func(t *testing.T, path string) {
			b, _ := os.ReadFile(path) // the same bytes, in a new file put in its place
			if err := os.WriteFile(path+".new", b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(path+".new", path); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"modified after marking", withFreelist, true, func(t *testing.T, path string) {
			fi, _ := os.Stat(path)
			// A write's new mtime, set explicitly: file times are only as
			// fine as the kernel's clock tick.
			if err := os.Chtimes(path, time.Time{}, fi.ModTime().Add(time.Second)); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"marker of another file", withFreelist, true, func(t *testing.T, path string) {
			other := write(t, withFreelist)
			if err := dbcheck.MarkClean(other); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(other + dbcheck.MarkerSuffix)
			if err := os.WriteFile(path+dbcheck.MarkerSuffix, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"garbage marker", withFreelist, true, func(t *testing.T, path string) {
			if err := os.WriteFile(path+dbcheck.MarkerSuffix, []byte("mirror clean shutdown: txid x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := write(t, tc.opt)
			if tc.mark {
				if err := dbcheck.MarkClean(path); err != nil {
					t.Fatal(err)
				}
			}
			if tc.after != nil {
				tc.after(t, path)
			}
			// A read-only open leaves the marker; a writer's removes it.
			if rep := open(t, path, os.O_RDONLY); rep.Tree != tc.tree || !rep.Sound() {
				t.Fatalf("read-only open: walked %v, want %v; %v", rep.Tree, tc.tree, rep.Problems)
			}
			if rep := open(t, path, os.O_RDWR); rep.Tree != tc.tree {
				t.Fatalf("open: walked %v, want %v", rep.Tree, tc.tree)
			}
			if _, err := os.Stat(path + dbcheck.MarkerSuffix); !os.IsNotExist(err) {
				t.Fatalf("the marker outlived an open for writing: %v", err)
			}
			if rep := open(t, path, os.O_RDWR); !rep.Tree {
				t.Fatal("the next open trusted a marker already used")
			}
		})
	}
	// A file without a written freelist (bbolt would walk it) is not marked.
	if err := dbcheck.MarkClean(write(t, mirrorOptions)); err == nil {
		t.Fatal("marked a file without a freelist")
	}
}
