package monitor

import (
	"errors"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func txID(t *testing.T, db *bolt.DB) int {
	t.Helper()
	var id int
	if err := db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestQueuedCostsRideAnotherCommit (issue 20, item 5): a recorded cost
// costs no commit of its own. It is queued, seen by CheckBudget at once,
// written by the next commit that carries it (the chats' store's), put back
// when that commit fails, committed by the monitor itself when no commit
// comes within the delay, and counted exactly once in every case.
func TestQueuedCostsRideAnotherCommit(t *testing.T) {
	fail := errors.New("the carrying commit failed")
	for _, tc := range []struct {
		name string
		// carry runs the carrying commits; it returns how many of them
		// committed.
		carry func(t *testing.T, e *env) int
	}{
		{"carried", func(t *testing.T, e *env) int {
			err := e.db.Update(func(tx *bolt.Tx) error {
				done, err := e.m.CarryCosts(tx)
				if done == nil || err != nil {
					t.Fatalf("CarryCosts = %v, %v; want the queued costs written", done != nil, err)
				}
				defer done(true)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return 1
		}},
		{"carried by a failed commit, then by the next", func(t *testing.T, e *env) int {
			var done func(bool)
			err := e.db.Update(func(tx *bolt.Tx) error {
				done, _ = e.m.CarryCosts(tx)
				return fail
			})
			if !errors.Is(err, fail) || done == nil {
				t.Fatalf("Update = %v (carried %v)", err, done != nil)
			}
			done(false)
			if err := e.db.Update(func(tx *bolt.Tx) error {
				d, err := e.m.CarryCosts(tx)
				if d == nil {
					t.Fatal("the costs of the failed commit are not queued again")
				}
				done = d
				return err
			}); err != nil {
				t.Fatal(err)
			}
			done(true)
			return 1
		}},
		{"committed by the monitor after the delay", func(t *testing.T, e *env) int {
			// The RecordCost before this set the timer to an hour: now.
			e.m.costs.mu.Lock()
			if e.m.costs.timer != nil {
				e.m.costs.timer.Reset(time.Millisecond)
			}
			e.m.costs.mu.Unlock()
			select {
			case err := <-e.m.costsFlushed:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the queued cost was not committed")
			}
			return 1
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, costConfig(0, 1))
			e.m.costDelay = time.Hour // no commit of its own unless a case asks
			e.m.costsFlushed = make(chan error, 1)
			model := e.cfg.Models[0].Name
			before := txID(t, e.db)
			if _, err := e.m.RecordCost("c1", model, 1_000_000, 0, 0); err != nil { // 2, over the chat's budget of 1
				t.Fatal(err)
			}
			if got := txID(t, e.db); got != before {
				t.Fatalf("RecordCost committed %d times", got-before)
			}
			var lim *SpendingLimitError
			if err := e.m.CheckBudget("c1"); !errors.As(err, &lim) || !near(lim.Spent, 2) {
				t.Fatalf("CheckBudget with the cost queued = %v; want spent 2", err)
			}
			commits := tc.carry(t, e)
			if err := e.m.CheckBudget("c1"); !errors.As(err, &lim) || !near(lim.Spent, 2) {
				t.Fatalf("CheckBudget with the cost stored = %v; want spent 2", err)
			}
			c, err := e.m.ChatCost("c1")
			if err != nil {
				t.Fatal(err)
			}
			if c.Today.Requests != 1 || !near(c.Today.Cost, 2) {
				t.Errorf("today = %+v; want one request of 2", c.Today)
			}
			if got := txID(t, e.db) - before; got != commits {
				t.Errorf("%d commits; want %d (the carrying ones: reading commits nothing)", got, commits)
			}
			e.reopen()
			if c, err := e.m.ChatCost("c1"); err != nil || c.Total.Requests != 1 {
				t.Errorf("after a restart: %+v, %v; want one request", c.Total, err)
			}
		})
	}
}
