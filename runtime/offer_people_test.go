package runtime

import (
	"slices"
	"testing"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/boundary"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tools"
)

// offerFor leaves out what a role's policies deny (by name or pattern,
// an allow by name undoing a pattern), never the runtime's own tools, and
// gives the same slice for the same policies every time: the bytes a
// conversation sends stay the same turn after turn. recall_memory is
// offered only where memory is kept.
func TestOfferWithholdsWhatTheRoleDenies(t *testing.T) {
	e, err := NewEngine([]*Model{{Name: "m", ProvName: "p", Provider: nil, Remote: "m", Window: 128000}},
		map[string][]string{"default": {"m"}}, config.Roles{Chat: "default"}, 4)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.New(tools.Options{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Provision(Options{Tools: reg, DataDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	names := func(defs []provider.Tool) []string {
		var out []string
		for _, d := range defs {
			out = append(out, d.Name)
		}
		return out
	}
	all, _ := e.offerFor(true, nil, nil)
	for _, c := range []struct {
		pols        map[string]string
		gone, stays []string
	}{
		{nil, nil, []string{"shell", "write_file", boundary.ToolRecallMemory}},
		{map[string]string{"shell": "deny"}, []string{"shell"}, []string{"write_file", "read_file"}},
		{map[string]string{"*_file": "deny", "read_file": "allow"}, []string{"write_file"}, []string{"read_file", "shell"}},
		{map[string]string{"*": "deny"}, []string{"shell", "read_file"}, []string{boundary.ToolRecallMemory, boundary.ToolRecallHistory, boundary.ToolHandoffUpdate}},
		{map[string]string{"shell": "ask"}, nil, []string{"shell"}},
	} {
		in := &TurnInput{Host: &journal{}, Withhold: c.pols}
		defs, roster := e.offerIn(in)
		got := names(defs)
		if !slices.Equal(got, roster) {
			t.Fatalf("%v: roster %v of %v", c.pols, roster, got)
		}
		for _, n := range c.gone {
			if slices.Contains(got, n) {
				t.Errorf("%v: %s offered", c.pols, n)
			}
		}
		for _, n := range c.stays {
			if !slices.Contains(got, n) {
				t.Errorf("%v: %s withheld", c.pols, n)
			}
		}
		again, _ := e.offerIn(in)
		if len(defs) > 0 && &again[0] != &defs[0] {
			t.Errorf("%v: a new slice on the second ask", c.pols)
		}
		if c.gone == nil && &defs[0] != &all[0] {
			t.Errorf("%v: denies nothing but is not the whole offering", c.pols)
		}
	}
	// Without a data dir no memory is kept, and none offered.
	e2, _ := NewEngine([]*Model{{Name: "m", ProvName: "p", Remote: "m", Window: 128000}},
		map[string][]string{"default": {"m"}}, config.Roles{Chat: "default"}, 4)
	if err := e2.Provision(Options{Tools: reg}); err != nil {
		t.Fatal(err)
	}
	if defs, _ := e2.offerFor(true, nil, nil); slices.Contains(names(defs), boundary.ToolRecallMemory) {
		t.Fatal("recall_memory offered without memory")
	}
}
