package view

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/budget"
	"github.com/mirror-gateway/mirror/runtime/provider"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update if the change is meant):\n%s", name, firstDiff(want, got))
	}
}

func firstDiff(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(0, i-80)
	return fmt.Sprintf("at byte %d\nwant …%q\n got …%q", i, a[lo:min(len(a), i+80)], b[lo:min(len(b), i+80)])
}

// conv builds a stored conversation as the lead's record would hold it.
type conv struct {
	rows []Row
	seq  uint64
	turn int
	call int
}

func (c *conv) add(r Row) *Row {
	c.seq++
	r.Seq = c.seq
	if r.Turn == "" && c.turn > 0 {
		r.Turn = fmt.Sprintf("t%d", c.turn)
	}
	c.rows = append(c.rows, r)
	return &c.rows[len(c.rows)-1]
}

func (c *conv) user(text string, tokens int) *Row {
	c.turn++
	return c.add(Row{Kind: KindUser, Text: text, Tokens: tokens})
}

// step adds an assistant row asking for one call and its result.
func (c *conv) step(name, args, result string, resultTokens int, isErr bool) {
	c.call++
	id := fmt.Sprintf("call_%d", c.call)
	c.add(Row{Kind: KindAssistant, ToolCalls: []provider.ToolCall{{ID: id, Name: name, Arguments: args}}, Tokens: 20})
	c.add(Row{Kind: KindTool, ToolCallID: id, ToolName: name, Text: result, Tokens: resultTokens, IsError: isErr})
}

func (c *conv) answer(text string, tokens int) *Row {
	return c.add(Row{Kind: KindAssistant, Text: text, Tokens: tokens, Reasoning: "thinking " + text[:min(len(text), 10)]})
}

func (c *conv) context(secs []Section, tokens int) {
	c.add(Row{Kind: KindContext, Sections: secs, Tokens: tokens})
}

func mustBudget(t testing.TB, window int, limit string) budget.Budget {
	b, err := budget.New(window, limit, 0)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func marshal(t testing.TB, v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

var fullRoster = []string{ToolOutput, GlobalSearch, "shell", "read_file"}
