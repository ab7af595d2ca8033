package runtime

import (
	"testing"

	"github.com/mirror-gateway/mirror/config"
)

// TestWarmCountsTheOfferedTools: after Warm, a turn's sizing finds the
// offered tool list counted (defsCount answers from its cache, with the
// same count a first turn would have made).
func TestWarmCountsTheOfferedTools(t *testing.T) {
	e := piecesEngine(t, &pieces{})
	e.Warm()
	defs, _ := e.offer(true, nil)
	if len(defs) == 0 {
		t.Fatal("nothing offered")
	}
	c, ok := e.defsCache[&defs[0]]
	if !ok || len(c.defs) != len(defs) {
		t.Fatalf("the offered list is not counted after Warm (%d lists counted)", len(e.defsCache))
	}
	if n, _ := countDefs(defs); c.n != n {
		t.Fatalf("Warm counted %d tokens; the list holds %d", c.n, n)
	}
}

// forgetful is a provider that counts the Forget calls it gets.
type forgetful struct {
	*pieces
	forgot int
}

func (f *forgetful) Forget() { f.forgot++ }

// TestForgetReachesProviders: Engine.Forget reaches every model's provider
// that keeps something of past requests.
func TestForgetReachesProviders(t *testing.T) {
	a, b := &forgetful{pieces: &pieces{}}, &forgetful{pieces: &pieces{}}
	e, err := NewEngine([]*Model{{Name: "a", ProvName: "fa", Provider: a, Remote: "a", Window: 128000},
		{Name: "b", ProvName: "fb", Provider: b, Remote: "b", Window: 128000},
		{Name: "c", ProvName: "plain", Provider: &pieces{}, Remote: "c", Window: 128000}},
		map[string][]string{"default": {"a", "b", "c"}}, config.Roles{Chat: "default"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	e.Forget()
	if a.forgot != 1 || b.forgot != 1 {
		t.Fatalf("Forget reached the providers %d and %d times; want once each", a.forgot, b.forgot)
	}
}
