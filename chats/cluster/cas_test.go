package cluster

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestCasWrite: a compare-and-set write refused only because another
// write on its subject is in flight (10164) is asked again, a bounded
// number of times; any other answer (success, the store's own conflict
// 10071, another error) is the write's answer at once.
func TestCasWrite(t *testing.T) {
	inflight := &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant, Description: "wrong last sequence"}
	conflict := &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence, Description: "wrong last sequence: 7"}
	other := errors.New("no quorum")
	for _, c := range []struct {
		name    string
		answers []error // one a call; the last repeats
		calls   int
		want    error
	}{
		{"stored at once", []error{nil}, 1, nil},
		{"in flight, then stored", []error{inflight, inflight, nil}, 3, nil},
		{"in flight, then the rival's write applied", []error{inflight, conflict}, 2, conflict},
		{"a conflict is not asked again", []error{conflict}, 1, conflict},
		{"another error is not asked again", []error{other}, 1, other},
		{"in flight past every wait", []error{inflight}, len(casWaits) + 1, inflight},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := 0
			v, err := casWrite(context.Background(), func() (int, error) {
				err := c.answers[min(calls, len(c.answers)-1)]
				calls++
				if err != nil {
					return 0, err
				}
				return 42, nil
			})
			if calls != c.calls || !errors.Is(err, c.want) || err == nil && v != 42 {
				t.Fatalf("%d calls, %d, %v; want %d calls, %v", calls, v, err, c.calls, c.want)
			}
		})
	}
	// A caller's ended context stops the asking.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	if _, err := casWrite(ctx, func() (int, error) { calls++; return 0, inflight }); calls != 1 || !inFlight(err) {
		t.Fatalf("with an ended context: %d calls, %v", calls, err)
	}
}
