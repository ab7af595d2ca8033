package openai

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// TestToolListsTriedLastFirst: the tool list a request offers is found
// without hashing when it is the last one encoded or found, by hashing
// otherwise, and encodes as afresh in every case, also when the caller
// changed a schema in place.
func TestToolListsTriedLastFirst(t *testing.T) {
	list := func(n int, desc string) []provider.Tool {
		var tools []provider.Tool
		for i := range n {
			tools = append(tools, provider.Tool{Name: fmt.Sprintf("tool_%d", i), Description: desc,
				Parameters: []byte(`{"type":"object","properties":{"path":{"type":"string"}}}`)})
		}
		return tools
	}
	a, b := list(5, "does a thing"), list(3, "does another")
	c := newEncCache()
	for i, step := range []struct {
		tools  []provider.Tool
		change func()
		hashed int // lists hashed by the step
	}{
		{tools: a, hashed: 1},
		{tools: a, hashed: 0},
		{tools: list(5, "does a thing"), hashed: 0}, // equal, not the same
		{tools: b, hashed: 1},
		{tools: a, hashed: 1}, // found in the map
		{tools: a, hashed: 0},
		{tools: a, change: func() { a[2].Parameters[2] = 'T' }, hashed: 1},
		{tools: a, change: func() { a[4].Name = "tool_x" }, hashed: 1},
		{tools: a[:4], hashed: 1},
	} {
		if step.change != nil {
			step.change()
		}
		before := c.toolHashes
		got, err := c.encodeTools(step.tools)
		if err != nil {
			t.Fatal(err)
		}
		want, err := provider.MarshalWire(must(wireToolsOf(step.tools)))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("step %d: encoded %s, want %s (%v)", i, got, want, err)
		}
		if d := c.toolHashes - before; d != step.hashed {
			t.Fatalf("step %d: %d lists hashed, want %d", i, d, step.hashed)
		}
	}
}
