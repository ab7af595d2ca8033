package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
)

// TestTelegramStateLog: the Telegram bot's state log appends only after
// the position the writer names (a write on a stale copy is refused and
// stores nothing), and every node reads and follows the same entries in
// order, from any position.
func TestTelegramStateLog(t *testing.T) {
	tc := newCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b := tc.nodes[0].Telegram(), tc.nodes[1].Telegram()
	defer a.Close()
	defer b.Close()

	p1, err := a.Append(ctx, 0, []byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, 0, []byte("stale")); !errors.Is(err, chats.ErrFenced) {
		t.Fatalf("an append after a position the log has passed: %v, want fenced", err)
	}
	p2, err := b.Append(ctx, p1, []byte("two"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(ctx, p1, []byte("stale")); !errors.Is(err, chats.ErrFenced) {
		t.Fatalf("a second append after one position: %v, want fenced", err)
	}
	read := func(tg *Telegram, after uint64) string {
		t.Helper()
		var got string
		if err := tg.Read(ctx, after, func(pos uint64, e []byte) error {
			got += fmt.Sprintf("%d:%s ", pos, e)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := fmt.Sprintf("%d:one %d:two ", p1, p2)
	for _, tg := range []*Telegram{a, b, tc.nodes[2].Telegram()} {
		if got := read(tg, 0); got != want {
			t.Fatalf("%s read %q, want %q", tg.Name(), got, want)
		}
	}
	if got := read(a, p1); got != fmt.Sprintf("%d:two ", p2) {
		t.Fatalf("read after %d: %q", p1, got)
	}

	// Follow gets what is there, then what comes.
	fctx, fcancel := context.WithCancel(ctx)
	got := make(chan string, 8)
	done := make(chan error, 1)
	go func() {
		done <- tc.nodes[2].Telegram().Follow(fctx, p1, func(pos uint64, e []byte) error {
			got <- fmt.Sprintf("%d:%s", pos, e)
			return nil
		})
	}()
	p3, err := a.Append(ctx, p2, []byte("three"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{fmt.Sprintf("%d:two", p2), fmt.Sprintf("%d:three", p3)} {
		select {
		case g := <-got:
			if g != w {
				t.Fatalf("followed %q, want %q", g, w)
			}
		case <-ctx.Done():
			t.Fatalf("%s never followed", w)
		}
	}
	fcancel()
	if err := <-done; err != nil {
		t.Fatalf("follow ended with %v, want nil when its context ends", err)
	}
}

// TestTelegramStatePurge: the state log's writer drops the entries below
// a snapshot; readers and followers whose position is in the purged range
// go on from the first entry still stored, and appends stay fenced.
func TestTelegramStatePurge(t *testing.T) {
	tc := newCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b := tc.nodes[0].Telegram(), tc.nodes[1].Telegram()
	defer a.Close()
	defer b.Close()
	var pos []uint64
	var at uint64
	for i := range 5 {
		p, err := a.Append(ctx, at, fmt.Appendf(nil, "e%d", i))
		if err != nil {
			t.Fatal(err)
		}
		pos, at = append(pos, p), p
	}
	if err := a.Purge(ctx, pos[2]); err != nil {
		t.Fatal(err)
	}
	read := func(tg *Telegram, after uint64) string {
		t.Helper()
		var got string
		if err := tg.Read(ctx, after, func(pos uint64, e []byte) error {
			got += fmt.Sprintf("%d:%s ", pos, e)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := fmt.Sprintf("%d:e2 %d:e3 %d:e4 ", pos[2], pos[3], pos[4])
	for _, after := range []uint64{0, pos[0], pos[1]} {
		if got := read(b, after); got != want {
			t.Fatalf("read after %d (purged): %q, want %q", after, got, want)
		}
	}
	// Purging below a position already purged changes nothing.
	if err := b.Purge(ctx, pos[1]); err != nil {
		t.Fatal(err)
	}
	if got := read(a, 0); got != want {
		t.Fatalf("after a second purge below: %q, want %q", got, want)
	}
	// A follower from a purged position starts at the first entry left.
	fctx, fcancel := context.WithCancel(ctx)
	defer fcancel()
	got := make(chan string, 8)
	go func() {
		_ = b.Follow(fctx, pos[0], func(pos uint64, e []byte) error {
			got <- fmt.Sprintf("%d:%s", pos, e)
			return nil
		})
	}()
	select {
	case g := <-got:
		if w := fmt.Sprintf("%d:e2", pos[2]); g != w {
			t.Fatalf("followed %q first, want %q", g, w)
		}
	case <-ctx.Done():
		t.Fatal("never followed")
	}
	// The fence holds across a purge.
	if _, err := b.Append(ctx, pos[3], []byte("stale")); !errors.Is(err, chats.ErrFenced) {
		t.Fatalf("an append after a passed position: %v, want fenced", err)
	}
	if _, err := b.Append(ctx, pos[4], []byte("e5")); err != nil {
		t.Fatal(err)
	}
	if max := a.MaxEntry(); max <= 0 {
		t.Fatalf("MaxEntry %d", max)
	}
}

// TestTelegramStateOldStream: a state log stream made denying purges (by
// an earlier Mirror) is kept, not refused, and Purge says why it cannot
// compact it.
func TestTelegramStateOldStream(t *testing.T) {
	tc := newCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := tc.nodes[0]
	if err := n.js.DeleteStream(ctx, TelegramStream); err != nil {
		t.Fatal(err)
	}
	old := tgStateConfig(1)
	old.DenyPurge = true
	if _, err := n.js.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	s, err := makeTgState(ctx, n.js, 1)
	if err != nil {
		t.Fatalf("an old stream refused: %v", err)
	}
	n.mu.Lock()
	n.tgState = s
	n.mu.Unlock()
	tg := n.Telegram()
	defer tg.Close()
	p, err := tg.Append(ctx, 0, []byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tg.Append(ctx, p, []byte("two")); err != nil {
		t.Fatal(err)
	}
	if err := tg.Purge(ctx, p+1); err == nil || !strings.Contains(err.Error(), "denied purging") {
		t.Fatalf("purge of an old stream: %v, want a clear refusal", err)
	}
	if cfg := tgStateConfig(3); cfg.DenyPurge || !cfg.DenyDelete {
		t.Fatalf("a new stream: deny purge %v, deny delete %v", cfg.DenyPurge, cfg.DenyDelete)
	}
}
