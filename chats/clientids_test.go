package chats

import (
	"strconv"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// sendTurns sends n messages to chat, client ids prefix0..prefix(n-1),
// each answered before the next is sent.
func (e *env) sendTurns(chat, prefix string, n int) []Message {
	e.t.Helper()
	s := newSub()
	if err := e.svc.Open(bg, chat, nil, s, ""); err != nil {
		e.t.Fatal(err)
	}
	var out []Message
	for i := range n {
		m, err := e.svc.Send(bg, chat, "question "+strconv.Itoa(i), prefix+strconv.Itoa(i), "", Origin{Sub: s})
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, m)
		s.waitFor(e.t, "turn "+strconv.Itoa(i), has(EvTurnFinished, i+1))
	}
	return out
}

// clientIndex is what chat's client_ids index holds: its pairs and its
// watermark.
func (e *env) clientIndex(chat string) (pairs map[string]string, through uint64) {
	e.t.Helper()
	pairs = map[string]string{}
	err := e.db.View(func(tx *bolt.Tx) error {
		cb := tx.Bucket(bucketClientIDs).Bucket([]byte(chat))
		if cb == nil {
			return nil
		}
		through = cb.Sequence()
		return cb.ForEach(func(k, v []byte) error { pairs[string(k)] = string(v); return nil })
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return pairs, through
}

// owedIDs is how many client ids chat's actor owes its index.
func (e *env) owedIDs(chat string) int {
	e.t.Helper()
	var n int
	if err := e.svc.do(bg, chat, func(a *actor) error { n = len(a.owed); return nil }); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// TestClientIDsIndexedInBatches: the client_ids index is written
// clientIDBatch pairs at a time, and a repeated client_id is answered with
// the message it created whether its pair is indexed or still owed, before
// and after a restart (which, like a crash, loses what memory held: the
// owed pairs come back from the record).
func TestClientIDsIndexedInBatches(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sends   int
		indexed int // pairs in the index after the sends
		owed    int // pairs owed after them
	}{
		{name: "fewer than a batch", sends: 3, indexed: 0, owed: 3},
		{name: "one less than a batch", sends: clientIDBatch - 1, indexed: 0, owed: clientIDBatch - 1},
		{name: "a batch and more", sends: clientIDBatch + 2, indexed: clientIDBatch, owed: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, newGate(true))
			c := e.chat()
			sent := e.sendTurns(c.ID, "k", tc.sends)
			pairs, through := e.clientIndex(c.ID)
			if len(pairs) != tc.indexed || e.owedIDs(c.ID) != tc.owed {
				t.Fatalf("%d pairs indexed and %d owed, want %d and %d", len(pairs), e.owedIDs(c.ID), tc.indexed, tc.owed)
			}
			if tc.indexed > 0 && through < sent[tc.indexed-1].Seq {
				t.Fatalf("indexed through seq %d, before the batch's last message at %d", through, sent[tc.indexed-1].Seq)
			}
			for round, restart := range []bool{false, true} {
				if restart {
					e.restart()
					if n := e.owedIDs(c.ID); n != tc.owed {
						t.Fatalf("%d pairs owed after the restart, want %d", n, tc.owed)
					}
				}
				for i, m := range sent {
					again, err := e.svc.Send(bg, c.ID, "question "+strconv.Itoa(i), "k"+strconv.Itoa(i), "", Origin{})
					if err != nil || again.ID != m.ID {
						t.Fatalf("round %d: resend of k%d answered %s %v, want %s", round, i, again.ID, err, m.ID)
					}
				}
			}
			if n := count(e.durable(c.ID), EvMessageAccepted); n != tc.sends {
				t.Fatalf("%d messages stored, want %d: a resend stored one", n, tc.sends)
			}
			// The owed pairs taken back from the record are indexed with
			// the next batch.
			more := clientIDBatch - tc.owed
			e.sendTurns(c.ID, "next", more)
			if pairs, _ := e.clientIndex(c.ID); len(pairs) != tc.indexed+clientIDBatch || e.owedIDs(c.ID) != 0 {
				t.Fatalf("after %d more sends: %d pairs indexed and %d owed, want %d and 0", more, len(pairs), e.owedIDs(c.ID), tc.indexed+clientIDBatch)
			}
		})
	}
}

// TestMarkClientIDs: a store whose client_ids index was written by code
// before its watermark (every pair in the commit of its message, no
// sequence) is marked once at open, so that loading a chat owes none of
// the pairs it holds, and its client ids still answer their messages.
func TestMarkClientIDs(t *testing.T) {
	e := newEnv(t, newGate(true))
	c := e.chat()
	sent := e.sendTurns(c.ID, "k", 3)
	e.stop()
	// As the older code left it: every pair indexed, no watermark, the
	// store never marked.
	db, err := OpenDB(e.path, wait)
	if err != nil {
		t.Fatal(err)
	}
	var seq uint64
	err = db.Update(func(tx *bolt.Tx) error {
		meta, _, err := loadChat(tx, c.ID)
		seq = meta.Seq
		if err != nil {
			return err
		}
		top := tx.Bucket(bucketClientIDs)
		cb, err := top.CreateBucketIfNotExists([]byte(c.ID))
		if err != nil {
			return err
		}
		for i, m := range sent {
			if err := cb.Put([]byte("k"+strconv.Itoa(i)), []byte(m.ID)); err != nil {
				return err
			}
		}
		if err := cb.SetSequence(0); err != nil {
			return err
		}
		return top.SetSequence(0)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	e.start()
	if _, through := e.clientIndex(c.ID); through != seq {
		t.Fatalf("marked through seq %d, want the chat's seq %d", through, seq)
	}
	if n := e.owedIDs(c.ID); n != 0 {
		t.Fatalf("%d pairs owed after the mark, want 0", n)
	}
	for i, m := range sent {
		if again, err := e.svc.Send(bg, c.ID, "question", "k"+strconv.Itoa(i), "", Origin{}); err != nil || again.ID != m.ID {
			t.Fatalf("resend of k%d answered %s %v, want %s", i, again.ID, err, m.ID)
		}
	}
	// Marked once: a later watermark is not put back to the chat's seq.
	e.sendTurns(c.ID, "next", clientIDBatch)
	_, through := e.clientIndex(c.ID)
	e.restart()
	if _, again := e.clientIndex(c.ID); again != through || through <= seq {
		t.Fatalf("watermark %d after a restart, %d before it (marked at %d)", again, through, seq)
	}
}
