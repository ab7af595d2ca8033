package runtime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/provider"
)

// pieces is a model that streams its answer in fixed pieces, as fast as
// emit returns, and closes emitted once it has emitted the last one.
type pieces struct {
	parts   []string
	emitted chan struct{}
	errs    []error // what each emit returned
}

func (p *pieces) Stream(_ context.Context, _ provider.Request, emit func(provider.Delta) error) (provider.Result, error) {
	defer close(p.emitted)
	for _, s := range p.parts {
		err := emit(provider.Delta{Text: s})
		p.errs = append(p.errs, err)
		if err != nil {
			return provider.Result{Text: strings.Join(p.parts, "")}, err
		}
	}
	return provider.Result{Text: strings.Join(p.parts, ""), FinishReason: "stop"}, nil
}

// piecesEngine is an engine whose one model "m" (chain default, the chat
// role) is served by p, provisioned.
func piecesEngine(t *testing.T, p provider.Provider) *Engine {
	t.Helper()
	e, err := NewEngine([]*Model{{Name: "m", ProvName: "fake", Provider: p, Remote: "m", Window: 128000}},
		map[string][]string{"default": {"m"}}, config.Roles{Chat: "default"}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Provision(Options{}); err != nil {
		t.Fatal(err)
	}
	return e
}

// A turn's consumer that is busy (a chat committing the turn's start) does
// not hold the model's stream up: the stream runs to its end, and what came
// meanwhile reaches the consumer joined, in order, before Run returns.
func TestStreamedTextIsJoinedWhileTheConsumerIsBusy(t *testing.T) {
	p := &pieces{parts: strings.SplitAfter("one two three four five six seven eight", " "), emitted: make(chan struct{})}
	e := piecesEngine(t, p)
	var mu sync.Mutex
	var got []string
	res, err := e.Run(context.Background(), TurnInput{Chain: "default", History: []provider.Message{{Role: "user", Content: "hi"}}},
		func(text string) error {
			mu.Lock()
			first := len(got) == 0
			got = append(got, text)
			mu.Unlock()
			if first {
				select {
				case <-p.emitted:
				case <-time.After(10 * time.Second):
					return errors.New("the stream waited for the consumer")
				}
			}
			return nil
		})
	if err != nil || res.End != Answered {
		t.Fatalf("ended %s: %v", res.End, err)
	}
	mu.Lock()
	defer mu.Unlock()
	// The first call may already hold several pieces (the stream can get
	// ahead before it is made); all that came while it waited is the
	// second.
	if len(got) > 2 || strings.Join(got, "") != strings.Join(p.parts, "") {
		t.Fatalf("deltas %q, want the pieces %q joined into at most two", got, p.parts)
	}
}

// The pump itself: every piece reaches out once, in order, whatever the
// pace; an error out returns stops the stream at its next piece and is
// returned by close.
func TestDeltaPump(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		failAt  int // out fails on its call number failAt (0: never)
		parts   []string
		wantErr error
	}{
		{name: "all delivered", parts: []string{"a", "", "b", "cd", "e"}},
		{name: "one empty piece", parts: []string{""}},
		{name: "out fails", parts: []string{"a", "b", "c"}, failAt: 1, wantErr: boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var text strings.Builder
			calls := 0
			p := newDeltaPump(func(s string) error {
				calls++
				text.WriteString(s)
				if calls == tc.failAt {
					return boom
				}
				return nil
			})
			var sendErr error
			for _, s := range tc.parts {
				if sendErr = p.send(s); sendErr != nil {
					break
				}
				if tc.failAt > 0 {
					// Let out run (and fail) before the next piece.
					if err := p.close(); err != nil {
						sendErr = p.send("after")
						break
					}
				}
			}
			err := p.close()
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("close: %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				if !errors.Is(sendErr, tc.wantErr) || text.String() != "a" {
					t.Fatalf("after the failure: send %v, delivered %q", sendErr, text.String())
				}
				return
			}
			if text.String() != strings.Join(tc.parts, "") || calls == 0 || calls > len(tc.parts) {
				t.Fatalf("delivered %q in %d calls", text.String(), calls)
			}
		})
	}
}

// Pieces that wait for a busy consumer reach it joined once, in order; a
// piece that finds it idle reaches it as it came, not a copy.
func TestDeltaPumpJoinsOnce(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var got []string
	p := newDeltaPump(func(s string) error {
		if len(got) == 0 {
			close(started)
			<-release // busy with the first piece while the rest queue
		}
		got = append(got, s)
		return nil
	})
	first := strings.Repeat("x", 64)
	if err := p.send(first); err != nil {
		t.Fatal(err)
	}
	<-started
	for _, s := range []string{"a", "b", "c"} {
		if err := p.send(s); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1] != "abc" {
		t.Fatalf("delivered %q, want the first piece, then \"abc\"", got)
	}
	if unsafe.StringData(got[0]) != unsafe.StringData(first) {
		t.Fatal("a lone piece was copied")
	}
}

// Pieces that queue past the pump's first array (a commit that holds the
// chat while a fast model streams on) still reach it once, joined in
// order, as do the pieces after them while the consumer stays busy.
func TestDeltaPumpJoinsALongQueueOnce(t *testing.T) {
	for _, n := range []int{7, 8, 9, 40} {
		started, release := make(chan struct{}), make(chan struct{})
		var got []string
		p := newDeltaPump(func(s string) error {
			if len(got) == 0 {
				close(started)
				<-release
			}
			got = append(got, s)
			return nil
		})
		if err := p.send("first"); err != nil {
			t.Fatal(err)
		}
		<-started
		var want strings.Builder
		for i := range n {
			s := strings.Repeat(string(rune('a'+i%26)), i%3) // empty pieces too
			want.WriteString(s)
			if err := p.send(s); err != nil {
				t.Fatal(err)
			}
		}
		close(release)
		if err := p.close(); err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0] != "first" || got[1] != want.String() {
			t.Fatalf("%d queued: delivered %q, want \"first\", then %q", n, got, want.String())
		}
	}
}

// close waits for a piece out is still handling, however late it is
// called: the channel it waits on is made only then.
func TestDeltaPumpCloseWaitsForOut(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	delivered := make(chan string, 4)
	p := newDeltaPump(func(s string) error {
		close(started)
		<-release
		delivered <- s
		return nil
	})
	if err := p.send("a"); err != nil {
		t.Fatal(err)
	}
	<-started
	closed := make(chan error, 1)
	go func() { closed <- p.close() }()
	select {
	case err := <-closed:
		t.Fatalf("close returned (%v) while out still ran", err)
	case <-time.After(50 * time.Millisecond): // close is waiting, as it must
	}
	close(release)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("close did not return after out did")
	}
	if len(delivered) != 1 || <-delivered != "a" {
		t.Fatal("the piece was not delivered before close returned")
	}
}
