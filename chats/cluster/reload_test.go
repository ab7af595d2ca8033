package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
)

// TestUnconfirmedFlushReloadsChat: an owner whose flush the store did
// not confirm (two of three servers stopped while its turn ran) unloads
// the chat but keeps it; once the servers are back the chat is loaded
// again on its own, with nobody sending to it, and the interrupted turn
// is answered once. (Before, the chat stayed unloaded while its lease
// was renewed: neither the sweeper nor another node would ever pick its
// work up, and the turn was never answered.)
func TestUnconfirmedFlushReloadsChat(t *testing.T) {
	tc := newSvcCluster(t)
	a := newSvcNode(t, tc.nodes[0])
	// Held whatever the lease says: renewals fail while the servers are
	// down, and this test is about the record, not the lease.
	chat := a.create("reload", func(c *Claim) chats.Fence { return liar{c} })
	bg, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sub := &recorder{}
	if err := a.svc.Open(bg, chat, nil, sub, "r1"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.svc.Send(bg, chat, "m1 asked before the outage", "k1", "", chats.Origin{}); err != nil {
		t.Fatal(err)
	}
	a.model.waitStarted(t, "m1")

	var wg sync.WaitGroup
	for _, i := range []int{1, 2} {
		wg.Go(func() { tc.stop(i) })
	}
	wg.Wait()
	a.model.release <- struct{}{} // the answer's flush is not confirmed
	eventually(t, 30*time.Second, "the chat unloaded after its flush was not confirmed", func() bool {
		return sub.has(func(d chats.Delivery) bool { return d.Closed == chat })
	})
	if n := a.finished(chat); n != 0 {
		t.Fatalf("%d answers stored while the store had no quorum", n)
	}
	a.model.open.Store(true)
	tc.start(1)
	tc.start(2)
	tc.waitReady()
	// No operation on the chat from here on: the owner goes on by itself.
	eventually(t, 60*time.Second, "the interrupted turn answered once the servers are back", func() bool {
		return a.finished(chat) >= 1
	})
	if n := a.finished(chat); n != 1 {
		t.Fatalf("the turn answered %d times, want once: %v", n, a.frames(chat))
	}
}

// loseAnswer is a record log whose next append (once lose is set) is
// stored but answered ErrUnavailable, as when the store's answer is lost
// on the way.
type loseAnswer struct {
	Records
	lose   atomic.Bool
	landed chan uint64 // the position of the append whose answer was lost
}

func (l *loseAnswer) Append(ctx context.Context, chat string, at uint64, f *chats.Flush) (uint64, error) {
	pos, err := l.Records.Append(ctx, chat, at, f)
	if err == nil && l.lose.CompareAndSwap(true, false) {
		l.landed <- pos
		return 0, fmt.Errorf("%w: the store's answer was lost (test)", chats.ErrUnavailable)
	}
	return pos, err
}

// toggle is a fence a test holds or lets lapse; it counts the times it
// was asked while lapsed.
type toggle struct {
	*Claim
	held   atomic.Bool
	denied atomic.Int64
}

func (f *toggle) Held() bool {
	h := f.held.Load()
	if !h {
		f.denied.Add(1)
	}
	return h
}

// TestLandedFlushWhileLapsedKeepsChat: a flush that landed though its
// answer was lost, found when the chat is loaded again while the owner's
// fence does not hold for a moment (a renewal late), does not make the
// owner drop the chat: the load waits, and once the fence holds again the
// chat goes on from what landed (its message is answered once). Before,
// the owner forgot the chat there (ErrFenced) while its lease stayed this
// node's, so nobody ran the chat again and every write to it was refused.
func TestLandedFlushWhileLapsedKeepsChat(t *testing.T) {
	tc := newSvcCluster(t)
	log := &loseAnswer{Records: tc.nodes[0].Records(), landed: make(chan uint64, 1)}
	a := newSvcNodeLog(t, tc.nodes[0], log)
	var fence *toggle
	chat := a.create("landed", func(c *Claim) chats.Fence {
		if fence == nil {
			fence = &toggle{Claim: c}
			fence.held.Store(true)
		}
		return fence
	})
	a.model.open.Store(true)
	bg := ctx(t)

	// The fence lapses; the send's flush lands, but its answer is lost.
	fence.held.Store(false)
	log.lose.Store(true)
	_, err := a.svc.Send(bg, chat, "m1 landed unconfirmed", "k1", "", chats.Origin{})
	if !errors.Is(err, chats.ErrUnavailable) {
		t.Fatalf("send whose answer was lost: %v, want ErrUnavailable", err)
	}
	<-log.landed
	// The owner loads the chat again meanwhile: the fence is asked while
	// it does not hold (a load finding what landed). Waited for (bounded,
	// not fatal: without a second look the answer below is missing).
	fence.denied.Store(0)
	for deadline := time.Now().Add(10 * time.Second); fence.denied.Load() < 2 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond) // polling a counter, bounded
	}
	fence.held.Store(true)
	eventually(t, 30*time.Second, "the landed message answered once the fence holds", func() bool {
		return a.finished(chat) >= 1
	})
	if _, err := a.svc.Send(bg, chat, "m2 after", "k2", "", chats.Origin{}); err != nil {
		t.Fatalf("send once the fence holds again: %v", err)
	}
	eventually(t, 30*time.Second, "m2 answered", func() bool { return a.finished(chat) >= 2 })
	accepted := 0
	for _, f := range a.frames(chat) {
		if strings.HasSuffix(f, " "+chats.EvMessageAccepted) {
			accepted++
		}
	}
	if accepted != 2 || a.finished(chat) != 2 {
		t.Fatalf("%d messages accepted, %d answered; want 2 and 2: %v", accepted, a.finished(chat), a.frames(chat))
	}
}
