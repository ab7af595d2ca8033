package quota

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/runtime/provider"
	bolt "go.etcd.io/bbolt"
)

// countingStore counts the saves that reach a real store.
type countingStore struct {
	Store
	saves int
}

func (c *countingStore) SaveObservation(k Key, o Observation) error {
	c.saves++
	return c.Store.SaveObservation(k, o)
}

func openDB(t *testing.T, path string) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestObservationSurvivesRestart learns a quota, closes the database as a
// stopping gateway does, reopens it in a new Book and reads the quota back:
// shown always, enforced only while it has not expired.
func TestObservationSurvivesRestart(t *testing.T) {
	key := Key{Provider: "gemini", Model: "gemini-3-flash", Fingerprint: "ab12"}
	other := Key{Provider: "openai", Model: "gpt-5", Fingerprint: "cd34"}
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		down       time.Duration // how long the gateway was stopped
		wantActive bool
	}{
		{"back before expiry", 3 * time.Minute, true},
		{"back after expiry", DefaultExpiry + time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mirror.db")
			now := start
			clock := func() time.Time { return now }

			db := openDB(t, path)
			store := &countingStore{Store: NewBoltStore(db)}
			book := New(Options{Clock: clock, Store: store})
			if err := book.Load(); err != nil {
				t.Fatalf("load of an empty db: %v", err)
			}
			book.Observe429(key, tpm(40_000, 0), 0)
			hdr := &provider.RateLimits{InputTokens: &provider.RateWindow{Limit: 30_000, Remaining: 30_000, Reset: time.Minute}}
			for range 5 { // the same headers on every response: one write
				book.ObserveLimits(other, hdr)
				now = now.Add(time.Second)
			}
			if store.saves != 2 {
				t.Errorf("%d saves for two keys whose quota never changed after the first report, want 2", store.saves)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}

			now = now.Add(tc.down)
			db = openDB(t, path)
			defer db.Close()
			book = New(Options{Clock: clock, Store: NewBoltStore(db)})
			if err := book.Load(); err != nil {
				t.Fatalf("load: %v", err)
			}
			for k, limit := range map[Key]int64{key: 40_000, other: 30_000} {
				st := status(t, book, k)
				if st.Quota == nil || st.Quota.Limit != limit {
					t.Fatalf("%s after restart: quota %+v, want limit %d", k, st.Quota, limit)
				}
				if st.Quota.Active != tc.wantActive {
					t.Errorf("%s after restart: active %v, want %v", k, st.Quota.Active, tc.wantActive)
				}
			}
			if st := status(t, book, key); st.Quota.Source != "429" || st.Quota.ID == "" || !st.Quota.ObservedAt.Equal(start) {
				t.Errorf("the 429's details were not kept: %+v", st.Quota)
			}
			// Enforced only while active: a request over the budget fails
			// at once under the restored quota, and goes when it expired.
			_, err := book.Reserve(context.Background(), key, 39_000, nil)
			var tl *TooLargeError
			if got := errors.As(err, &tl); got != tc.wantActive {
				t.Errorf("a request past the restored budget: err %v, want too large %v", err, tc.wantActive)
			}
		})
	}
}

// TestLoadSkipsBadRows: a row that does not decode is reported, and every
// other key's quota is still restored.
func TestLoadSkipsBadRows(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "mirror.db"))
	defer db.Close()
	store := NewBoltStore(db)
	key := Key{Provider: "p", Model: "m"}
	if err := store.SaveObservation(key, Observation{Limit: 1000, Source: "headers"}); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketObservations)
		if err := b.Put([]byte("not json"), []byte("{}")); err != nil {
			return err
		}
		return b.Put([]byte(`{"provider":"p","model":"x"}`), []byte("{broken"))
	}); err != nil {
		t.Fatal(err)
	}
	book := New(Options{Store: store})
	err := book.Load()
	if err == nil {
		t.Error("bad rows loaded without an error")
	}
	if st := status(t, book, key); st.Quota == nil || st.Quota.Limit != 1000 {
		t.Errorf("the good row was lost: %+v", st)
	}
}

// BenchmarkObserveLimitsStore measures learning from every response's
// rate-limit headers, in memory only and with the bbolt store: the same
// quota repeated is not written again (saves/op), so keeping the last
// observation across restarts costs the hot path nothing measurable.
func BenchmarkObserveLimitsStore(b *testing.B) {
	hdr := &provider.RateLimits{InputTokens: &provider.RateWindow{Limit: 2_000_000, Remaining: 1_500_000, Reset: time.Minute}}
	key := Key{Provider: "openai", Model: "gpt-5", Fingerprint: "ab12"}
	for _, tc := range []struct {
		name  string
		store bool
	}{{"memory", false}, {"bbolt", true}} {
		b.Run(tc.name, func(b *testing.B) {
			var store *countingStore
			opt := Options{}
			if tc.store {
				db, err := bolt.Open(filepath.Join(b.TempDir(), "mirror.db"), 0o600, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				store = &countingStore{Store: NewBoltStore(db)}
				opt.Store = store
			}
			book := New(opt)
			for b.Loop() {
				book.ObserveLimits(key, hdr)
			}
			if store != nil {
				b.ReportMetric(float64(store.saves)/float64(b.N), "saves/op")
			}
		})
	}
}

// failingStore refuses the first fail saves.
type failingStore struct {
	Store
	fail int
}

func (f *failingStore) SaveObservation(k Key, o Observation) error {
	if f.fail > 0 {
		f.fail--
		return errors.New("disk full")
	}
	return f.Store.SaveObservation(k, o)
}

// TestSaveFailureIsRetried: a save that fails keeps the quota in memory
// (still enforced) and the next report of the same quota saves it.
func TestSaveFailureIsRetried(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "mirror.db"))
	defer db.Close()
	store := &failingStore{Store: NewBoltStore(db), fail: 1}
	var logged strings.Builder
	book := New(Options{Store: store, Log: slog.New(slog.NewTextHandler(&logged, nil))})
	key := Key{Provider: "p", Model: "m", Fingerprint: "ab12"}
	hdr := &provider.RateLimits{Tokens: &provider.RateWindow{Limit: 5000, Remaining: -1}}
	book.ObserveLimits(key, hdr)
	if st := status(t, book, key); st.Quota == nil || !st.Quota.Active || st.Budget != 4500 {
		t.Fatalf("after a failed save the quota is not in force: %+v", st)
	}
	if !strings.Contains(logged.String(), "disk full") {
		t.Errorf("the failed save was not logged: %q", logged.String())
	}
	if saved, _ := NewBoltStore(db).LoadObservations(); len(saved) != 0 {
		t.Fatalf("saved despite the failure: %v", saved)
	}
	book.ObserveLimits(key, hdr) // the same quota again: this time it is saved
	if saved, err := NewBoltStore(db).LoadObservations(); err != nil || saved[key].Limit != 5000 {
		t.Fatalf("not saved on the next report: %v %v", saved, err)
	}
}
