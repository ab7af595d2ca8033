package monitor

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a fake clock tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

var epoch = time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)

func newClock() *clock { return &clock{t: epoch} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

type env struct {
	t     *testing.T
	path  string
	db    *bolt.DB
	cfg   *config.Config
	clock *clock
	m     *Monitor
}

// newEnv opens a real bbolt file in a temp dir and a Monitor on it with a
// fake clock; both are closed at the end of the test.
func newEnv(t *testing.T, cfg *config.Config) *env {
	t.Helper()
	if cfg == nil {
		cfg = config.Default()
	}
	e := &env{t: t, path: filepath.Join(t.TempDir(), "mirror.db"), cfg: cfg, clock: newClock()}
	e.open()
	t.Cleanup(e.close)
	return e
}

func (e *env) open() {
	e.t.Helper()
	db, err := bolt.Open(e.path, 0o600, &bolt.Options{Timeout: time.Second, NoSync: true})
	if err != nil {
		e.t.Fatal(err)
	}
	m, err := Open(db, e.cfg, Options{Clock: e.clock.Now})
	if err != nil {
		db.Close()
		e.t.Fatal(err)
	}
	e.db, e.m = db, m
}

func (e *env) close() {
	if e.m == nil {
		return
	}
	e.m.Close()
	if err := e.db.Close(); err != nil {
		e.t.Error(err)
	}
	e.m, e.db = nil, nil
}

func (e *env) reopen() {
	e.close()
	e.open()
}

var errUpstream = errors.New("upstream said no")

// fail sends n requests through b that fail with class.
func fail(t *testing.T, b *Breaker, n int, class string) {
	t.Helper()
	for range n {
		done, err := b.Allow()
		if err != nil {
			t.Fatalf("Allow: %v", err)
		}
		done(errUpstream, class)
	}
}

func succeed(t *testing.T, b *Breaker) {
	t.Helper()
	done, err := b.Allow()
	if err != nil {
		t.Fatalf("Allow: %v", err)
	}
	done(nil, "")
}

func state(b *Breaker) State { return b.View().State }
