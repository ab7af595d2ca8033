package quota

import (
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Store keeps the last observation of each key across restarts, so the
// quota a provider reported is still shown (and, while it has not expired,
// still enforced) after the gateway comes back. Book writes through it
// only when an observation changes what it says (limit, metric, id,
// source), not on every response that repeats it.
type Store interface {
	// LoadObservations returns every saved key's last observation.
	LoadObservations() (map[Key]Observation, error)
	// SaveObservation replaces key's saved observation.
	SaveObservation(key Key, o Observation) error
}

// bucketObservations holds one JSON Observation per Key (JSON-encoded as
// the bucket key, so no separator can collide with a model name).
var bucketObservations = []byte("quota_observations")

// BoltStore is the Store in the gateway's bbolt file; the quota package
// owns its bucket.
type BoltStore struct{ db *bolt.DB }

// NewBoltStore returns a Store on db. It creates nothing until the first
// save, so a read-only db (mirror replay) serves loads.
func NewBoltStore(db *bolt.DB) *BoltStore { return &BoltStore{db: db} }

// LoadObservations implements Store. A row that does not decode is
// skipped with an error naming it, after the others are read: one bad row
// loses no other key's quota.
func (s *BoltStore) LoadObservations() (map[Key]Observation, error) {
	out := map[Key]Observation{}
	var bad []error
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketObservations)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var key Key
			var o Observation
			if err := json.Unmarshal(k, &key); err != nil {
				bad = append(bad, fmt.Errorf("quota: saved key %q: %w", k, err))
				return nil
			}
			if err := json.Unmarshal(v, &o); err != nil || o.Limit <= 0 {
				if err == nil {
					err = errors.New("no limit")
				}
				bad = append(bad, fmt.Errorf("quota: saved observation of %s: %w", key, err))
				return nil
			}
			out[key] = o
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, errors.Join(bad...)
}

// SaveObservation implements Store.
func (s *BoltStore) SaveObservation(key Key, o Observation) error {
	k, err := json.Marshal(key)
	if err != nil {
		return err
	}
	v, err := json.Marshal(o)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketObservations)
		if err != nil {
			return err
		}
		return b.Put(k, v)
	})
}
