package monitor

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Buckets owned by this package in the one database file.
var (
	// id → stored: the current state of each breaker that ever changed state.
	bucketBreakers = []byte("breakers")
	// id, 0x00, seq (8 bytes big endian) → Record. Append-only, never pruned;
	// the id prefix lets Records read one breaker's records without a scan,
	// and seq is the bucket's sequence, so records are numbered across ids.
	bucketRecords = []byte("breaker_records")
	// closed_at (unix nanoseconds, 8 bytes big endian), seq (8 bytes) →
	// BreakerView of a closed incident. Sorted by closing time, so History
	// reads it newest first and Prune cuts from the old end.
	bucketDisplay = []byte("breaker_display")
)

// Record is one canonical breaker record: a transition with its time,
// reason, trips so far in the incident, and whether it was made by hand.
type Record struct {
	Seq     uint64     `json:"seq"`
	ID      string     `json:"id"`
	Kind    Kind       `json:"kind"`
	Scope   string     `json:"scope"`
	From    State      `json:"from"`
	To      State      `json:"to"`
	At      time.Time  `json:"at"`
	Reason  string     `json:"reason"`
	Trips   int        `json:"trips"`
	Manual  bool       `json:"manual"`
	RetryAt *time.Time `json:"retry_at,omitempty"`
}

// DayGroup is one date of the display history (UTC), entries newest first.
type DayGroup struct {
	Date    string        `json:"date"` // YYYY-MM-DD
	Entries []BreakerView `json:"entries"`
}

// stored is a breaker's state as the "breakers" bucket keeps it: what a
// restart needs to resume an open breaker where it was.
type stored struct {
	ID       string    `json:"id"`
	Kind     Kind      `json:"kind"`
	Scope    string    `json:"scope"`
	State    State     `json:"state"`
	Reason   string    `json:"reason"`
	OpenedAt time.Time `json:"opened_at,omitzero"`
	ClosedAt time.Time `json:"closed_at,omitzero"`
	RetryAt  time.Time `json:"retry_at,omitzero"`
	Trips    int       `json:"trips"`
	Level    int       `json:"level"`
	ClosedBy string    `json:"closed_by,omitempty"`
}

func (b *Breaker) storedLocked() stored {
	return stored{
		ID: b.id, Kind: b.kind, Scope: b.scope, State: b.state, Reason: b.reason,
		OpenedAt: b.openedAt, ClosedAt: b.closedAt, RetryAt: b.retryAt,
		Trips: b.trips, Level: b.level, ClosedBy: b.closedBy,
	}
}

// load creates the buckets and restores the stored breakers. A half-open
// breaker comes back half open with no probe in flight, so the first request
// after the restart probes; counts start afresh.
func (m *Monitor) load() error {
	return m.db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketBreakers, bucketRecords, bucketDisplay, bucketRollups, bucketCosts} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("monitor: create bucket %s: %w", name, err)
			}
		}
		return tx.Bucket(bucketBreakers).ForEach(func(k, v []byte) error {
			var s stored
			if err := json.Unmarshal(v, &s); err != nil {
				return fmt.Errorf("monitor: breaker %q: %w", k, err)
			}
			m.breakers[s.ID] = &Breaker{
				m: m, id: s.ID, kind: s.Kind, scope: s.Scope, state: s.State, reason: s.Reason,
				openedAt: s.OpenedAt, closedAt: s.ClosedAt, retryAt: s.RetryAt,
				trips: s.Trips, level: s.Level, closedBy: s.ClosedBy,
			}
			return nil
		})
	})
}

// store writes one transition: the breaker's state, its canonical record
// (rec.Seq is filled in), and when the incident closed its display entry,
// all in one transaction so history never shows what the records lack.
func (m *Monitor) store(s stored, rec *Record, closing bool) error {
	return m.db.Update(func(tx *bolt.Tx) error {
		state, err := json.Marshal(s)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bucketBreakers).Put([]byte(s.ID), state); err != nil {
			return fmt.Errorf("put state: %w", err)
		}
		records := tx.Bucket(bucketRecords)
		seq, err := records.NextSequence()
		if err != nil {
			return fmt.Errorf("record sequence: %w", err)
		}
		rec.Seq = seq
		data, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		if err := records.Put(recordKey(s.ID, seq), data); err != nil {
			return fmt.Errorf("put record: %w", err)
		}
		if !closing {
			return nil
		}
		entry := BreakerView{
			ID: s.ID, Kind: s.Kind, Scope: s.Scope, State: StateClosed, Reason: s.Reason,
			Trips: s.Trips, ClosedBy: s.ClosedBy,
		}
		opened, closed := s.OpenedAt, s.ClosedAt
		entry.OpenedAt, entry.ClosedAt = &opened, &closed
		data, err = json.Marshal(entry)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bucketDisplay).Put(displayKey(closed, seq), data); err != nil {
			return fmt.Errorf("put history entry: %w", err)
		}
		return nil
	})
}

func recordKey(id string, seq uint64) []byte {
	k := make([]byte, 0, len(id)+9)
	k = append(k, id...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, seq)
}

func displayKey(closed time.Time, seq uint64) []byte {
	k := make([]byte, 0, 16)
	k = binary.BigEndian.AppendUint64(k, uint64(max(closed.UnixNano(), 0)))
	return binary.BigEndian.AppendUint64(k, seq)
}

func displayTime(k []byte) time.Time {
	if len(k) < 8 {
		return time.Time{}
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(k))).UTC()
}

// Records returns the canonical records of one breaker, oldest first. They
// are never pruned.
func (m *Monitor) Records(id string) ([]Record, error) {
	var recs []Record
	prefix := append([]byte(id), 0)
	err := m.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketRecords).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var r Record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("record %q: %w", k, err)
			}
			// An id containing 0x00 could share the prefix; the record knows.
			if r.ID == id {
				recs = append(recs, r)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("monitor: read records of %s: %w", id, err)
	}
	return recs, nil
}

// cutoff is the oldest closing time the display history keeps at now.
func (m *Monitor) cutoff(now time.Time) time.Time {
	return now.Add(-time.Duration(m.historyDays) * 24 * time.Hour)
}

// History returns the closed incidents of the display history grouped by
// the UTC date they closed, newest first: those closed within the last
// breaker_history_days days (counted as 24-hour days back from now) and at
// most breaker_history_max of them. It applies the limits as it reads, so
// the answer is the same before and after Prune.
func (m *Monitor) History() ([]DayGroup, error) {
	cutoff := m.cutoff(m.now())
	groups := []DayGroup{}
	err := m.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketDisplay).Cursor()
		n := 0
		for k, v := c.Last(); k != nil && n < m.historyMax; k, v = c.Prev() {
			if displayTime(k).Before(cutoff) {
				break // the keys are sorted by closing time: the rest is older
			}
			var e BreakerView
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("history entry %x: %w", k, err)
			}
			n++
			date := displayTime(k).Format(time.DateOnly)
			if len(groups) == 0 || groups[len(groups)-1].Date != date {
				groups = append(groups, DayGroup{Date: date})
			}
			g := &groups[len(groups)-1]
			g.Entries = append(g.Entries, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("monitor: read history: %w", err)
	}
	return groups, nil
}

// Prune removes from the display history the entries that closed before
// breaker_history_days days before now and those beyond the newest
// breaker_history_max, and reports how many it removed. It touches only the
// display: unresolved breakers live in "breakers" and are never in it, and
// the canonical records stay as they are. The cron job of Start calls it.
func (m *Monitor) Prune(now time.Time) (removed int, err error) {
	cutoff := m.cutoff(now.UTC())
	err = m.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketDisplay)
		var dead [][]byte
		kept := 0
		c := b.Cursor()
		for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
			if kept >= m.historyMax || displayTime(k).Before(cutoff) {
				// Copy: a key is only valid until the transaction changes.
				dead = append(dead, bytes.Clone(k))
				continue
			}
			kept++
		}
		for _, k := range dead {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		removed = len(dead)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("monitor: prune history: %w", err)
	}
	return removed, nil
}
