package cluster

import (
	"context"
	"errors"
	"fmt"
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
