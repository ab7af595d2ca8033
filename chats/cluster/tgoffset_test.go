package cluster

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// leadRecorder runs a stand-in for the Telegram bot on every node: it
// takes each stint Lead gives, counts the stints running at once across
// the nodes, and gives the stint back when it ends. (Under load a leader
// may miss a renewal and stop counting its lease as held for a moment:
// its stint ends and a new one begins; that is fine, two at once never.)
type leadRecorder struct {
	tgs    []*Telegram
	active atomic.Int32
	most   atomic.Int32

	mu     sync.Mutex
	stints []recStint // in the order they began
}

type recStint struct {
	node int
	ctx  context.Context
}

func newLeadRecorder(t *testing.T, tc *testCluster) *leadRecorder {
	lr := &leadRecorder{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for i, nd := range tc.nodes {
		tg := nd.Telegram()
		lr.tgs = append(lr.tgs, tg)
		wg.Go(func() {
			defer tg.Close()
			for {
				stint, done, err := tg.Lead(ctx)
				if err != nil {
					return
				}
				n := lr.active.Add(1)
				for m := lr.most.Load(); n > m && !lr.most.CompareAndSwap(m, n); m = lr.most.Load() {
				}
				lr.mu.Lock()
				lr.stints = append(lr.stints, recStint{i, stint})
				lr.mu.Unlock()
				<-stint.Done()
				lr.active.Add(-1)
				done()
			}
		})
	}
	return lr
}

// running waits until a stint runs, begun at index from or later, on a
// node other than not (-1: any), and returns it.
func (lr *leadRecorder) running(t *testing.T, from, not int) (recStint, int) {
	t.Helper()
	var got recStint
	idx := -1
	eventually(t, 30*time.Second, "a node leading", func() bool {
		lr.mu.Lock()
		defer lr.mu.Unlock()
		for i := len(lr.stints) - 1; i >= from; i-- {
			if s := lr.stints[i]; s.node != not && s.ctx.Err() == nil {
				got, idx = s, i
				return true
			}
		}
		return false
	})
	return got, idx
}

// TestTelegramLeaderStint: exactly one node receives Telegram updates at
// a time; when the leader closes (its stint ends before it gives the
// lease up) or stops renewing (paused: its stint ends when its lease can
// no longer be counted on, before the store lets another take it), another
// node's stint begins and resumes from the offset the first committed,
// and the former leader's late commit is refused.
func TestTelegramLeaderStint(t *testing.T) {
	for _, how := range []string{"close", "pause"} {
		t.Run(how, func(t *testing.T) {
			tc := newCluster(t, 3)
			lr := newLeadRecorder(t, tc)
			first, _ := lr.running(t, 0, -1)
			old := lr.tgs[first.node]
			off, err := old.Load(ctx(t))
			if err != nil || off != 0 {
				t.Fatalf("first load: %d %v, want 0", off, err)
			}
			for next := 1; next <= 5; next++ {
				if err := old.Commit(ctx(t), next); err != nil {
					t.Fatal(err)
				}
			}
			switch how {
			case "close":
				tc.stop(first.node)
				if first.ctx.Err() == nil {
					t.Fatal("the leader gave its lease up while its stint still ran")
				}
			case "pause":
				tc.nodes[first.node].paused.Store(true)
			}
			second, _ := lr.running(t, 0, first.node)
			if first.ctx.Err() == nil {
				t.Fatal("a second stint began while the first still ran")
			}
			if n := lr.most.Load(); n != 1 {
				t.Fatalf("%d stints ran at once", n)
			}
			now := lr.tgs[second.node]
			if off, err := now.Load(ctx(t)); err != nil || off != 5 {
				t.Fatalf("the new leader loads %d %v, want 5", off, err)
			}
			if err := now.Commit(ctx(t), 6); err != nil {
				t.Fatal(err)
			}
			if how == "pause" {
				// The paused leader wakes and commits what it handled
				// meanwhile: refused, the new leader's offset stands.
				if err := old.Commit(ctx(t), 9); !errors.Is(err, ErrLost) {
					t.Fatalf("stale commit: %v, want ErrLost", err)
				}
				tc.nodes[first.node].paused.Store(false)
				if off, _ := now.Load(ctx(t)); off != 6 {
					t.Fatalf("offset %d after a stale commit, want 6", off)
				}
			}
		})
	}
}

// TestTelegramForward: a webhook update posted to a node that does not
// lead is handled by the leader, its error comes back, and a forward made
// while nobody serves waits for a leader (bounded by its context).
func TestTelegramForward(t *testing.T) {
	tc := newCluster(t, 3)
	tgs := []*Telegram{tc.nodes[0].Telegram(), tc.nodes[1].Telegram()}
	defer tgs[0].Close()
	defer tgs[1].Close()

	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err := tgs[1].Forward(short, []byte(`{"update_id":1}`))
	cancel()
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("forward with nobody serving: %v, want a deadline error", err)
	}

	stint, stop := context.WithCancel(context.Background())
	defer stop()
	var mu sync.Mutex
	var got []string
	err = tgs[0].Serve(stint, func(_ context.Context, raw []byte) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, string(raw))
		if strings.Contains(string(raw), "bad") {
			return errors.New("not handled: bad")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tcase := range []struct {
		raw, err string
	}{
		{`{"update_id":2}`, ""},
		{`{"update_id":3,"bad":1}`, "not handled: bad"},
	} {
		err := tgs[1].Forward(ctx(t), []byte(tcase.raw))
		switch {
		case tcase.err == "" && err != nil:
			t.Fatalf("%s: %v", tcase.raw, err)
		case tcase.err != "":
			var re *RemoteError
			if !errors.As(err, &re) || re.Msg != tcase.err || re.Node != "n1" {
				t.Fatalf("%s: %v, want the leader's error %q", tcase.raw, err, tcase.err)
			}
		}
	}
	mu.Lock()
	if len(got) != 2 || got[0] != `{"update_id":2}` {
		t.Fatalf("the leader handled %q", got)
	}
	mu.Unlock()

	// A stint that ended answers "moved": the forward waits for a leader.
	stop()
	short, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := tgs[1].Forward(short, []byte(`{"update_id":4}`)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("forward after the stint: %v, want a deadline error", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("an ended stint handled %q", got[2:])
	}
}
