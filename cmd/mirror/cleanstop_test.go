package main

import (
	"context"
	"crypto/sha256"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats/dbcheck"
)

// walkLine is what serve logs when it checked the whole tree at open.
const walkLine = "checked its whole tree"

// TestCleanStopSkipsTheWalk: on the real process, a start after a clean
// stop (SIGTERM) checks only the meta pages and the freelist; a start
// after kill -9 walks and checks the whole tree again; and a damaged file
// put in place of a cleanly stopped one is walked, and refused.
func TestCleanStopSkipsTheWalk(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	path := filepath.Join(data, DBFile)
	marker := path + dbcheck.MarkerSuffix
	cfg := quickConfig(t, "127.0.0.1:0")
	serve := func() *proc { return startProc(t, []string{"serve", "--config", cfg, "--data", data}) }
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }

	p := serve()
	ids := talkChats(t, p.addr, 3, 3)
	p.stop(t)
	if !exists(marker) {
		t.Fatal("no clean-shutdown marker after SIGTERM")
	}

	steps := []struct {
		name string
		kill bool // how this run ends: kill -9, else SIGTERM
		walk bool // whether this run's open walks the tree
	}{
		{"after a clean stop", false, false},
		{"again after a clean stop, then killed", true, false},
		{"after kill -9", false, true},
		{"after the clean stop that followed", false, false},
	}
	for _, s := range steps {
		p := serve()
		if exists(marker) {
			t.Fatalf("%s: the marker outlived the open", s.name)
		}
		if got := listChats(t, p.addr); !slices.Equal(got, ids) {
			t.Fatalf("%s: chats %v, want %v", s.name, got, ids)
		}
		if s.kill {
			talkChats(t, p.addr, 1, 1) // a commit after the open
			ids = listChats(t, p.addr)
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
			if exists(marker) {
				t.Fatalf("%s: a marker after kill -9", s.name)
			}
		} else {
			p.stop(t)
		}
		if walked := strings.Contains(p.errs.String(), walkLine); walked != s.walk {
			t.Fatalf("%s: walked the tree %v, want %v; stderr:\n%s", s.name, walked, s.walk, p.errs)
		}
	}

	// A damaged copy in place of the cleanly stopped file: the marker no
	// longer matches, so the tree is walked and the damage refused.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	l := layout{b}
	leaf := l.find(0x02)
	if leaf < 0 {
		t.Fatal("no leaf page to damage")
	}
	scramble(l.page(leaf), 9)
	// Put in place as a new file (a restored or copied file): the marker
	// names the old one's inode.
	if err := os.WriteFile(path+".new", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	before := sha256.Sum256(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "serve", "--config", cfg, "--data", data)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "MIRROR_AS_MAIN=1", "MIRROR_TOKEN="+testToken)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "is damaged") {
		t.Fatalf("serve on a file damaged after a clean stop: %v\n%s", err, out)
	}
	if after, _ := os.ReadFile(path); sha256.Sum256(after) != before {
		t.Fatal("the damaged file changed")
	}
}
