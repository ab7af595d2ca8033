package limit

import (
	"testing"
	"time"
)

func TestKeyed(t *testing.T) {
	now := time.Unix(1000, 0)
	k := New[string](6, 3, 2) // one every 10 s, three at once
	k.Now = func() time.Time { return now }
	steps := []struct {
		key     string
		advance time.Duration
		ok      bool
		retry   time.Duration
	}{
		{"a", 0, true, 0},
		{"a", 0, true, 0},
		{"a", 0, true, 0},
		{"a", 0, false, 10 * time.Second}, // burst spent
		{"b", 0, true, 0},                 // keys do not share
		{"a", 4 * time.Second, false, 6 * time.Second},
		{"a", 6 * time.Second, true, 0}, // one refilled
		{"a", 0, false, 10 * time.Second},
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		retry, ok := k.Take(s.key)
		if ok != s.ok || retry != s.retry {
			t.Fatalf("step %d (%s): ok %v retry %v, want %v %v", i, s.key, ok, retry, s.ok, s.retry)
		}
	}
	if w := k.Wait("a"); w != 10*time.Second {
		t.Fatalf("Wait %v", w)
	}
	if w := k.Wait("never seen"); w != 0 {
		t.Fatalf("Wait of a new key %v", w)
	}
	// A third key makes room: b has refilled by now and is forgotten, a
	// (still spent) is kept.
	now = now.Add(time.Second)
	if _, ok := k.Take("c"); !ok || k.Len() != 2 {
		t.Fatalf("len %d", k.Len())
	}
	if _, ok := k.Take("a"); ok {
		t.Fatal("a spent key was forgotten while a refilled one was there")
	}
	// With every bucket spent, one is dropped anyway: the map stays bounded.
	for _, key := range []string{"d", "e", "f", "g"} {
		k.Take(key)
		if k.Len() > 2 {
			t.Fatalf("%d keys kept, max 2", k.Len())
		}
	}
}
