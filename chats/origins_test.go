package chats

import (
	"context"
	"fmt"
	"strconv"
	"testing"
)

// A batch's origins (who asked for each event, to answer them once it is
// published) go in the last batch's array, emptied: it is not grown anew
// at each flush, and it keeps no subscriber of a published event alive.
func TestBatchOriginsReuseTheirArray(t *testing.T) {
	e := newEnv(t, newGate(true))
	c := e.chat()
	ctx := context.Background()
	s := newSub()
	if err := e.svc.Open(ctx, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := e.svc.Send(ctx, c.ID, "hello "+strconv.Itoa(i), "k"+strconv.Itoa(i), "", Origin{Sub: s, Req: "r" + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
		s.waitFor(t, "turn", has(EvTurnFinished, i+1))
		err := e.svc.do(ctx, c.ID, func(a *actor) error {
			// (The actor's goroutine runs this: it reports, the test fails.)
			o := a.b.origins
			if len(o) != 0 || cap(o) == 0 {
				return fmt.Errorf("after turn %d: origins %d of %d, want an empty array kept", i, len(o), cap(o))
			}
			for _, x := range o[:cap(o)] {
				if x != (Origin{}) {
					return fmt.Errorf("after turn %d: a published event's origin is kept: %+v", i, x)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
