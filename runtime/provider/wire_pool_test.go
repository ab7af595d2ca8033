package provider

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestMarshalWireReuse: MarshalWire's pooled encoder gives each value the
// bytes json gives it unescaped, in a slice of its own that later calls
// (and a failed one) leave alone.
func TestMarshalWireReuse(t *testing.T) {
	values := []any{
		map[string]string{"content": "<b>bold</b> & more"},
		[]int{1, 2, 3},
		"x",
		struct {
			A string `json:"a"`
		}{strings.Repeat("long text ", 500)},
	}
	var got [][]byte
	for _, v := range values {
		b, err := MarshalWire(v)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, b)
		if _, err := MarshalWire(make(chan int)); err == nil {
			t.Fatal("a channel encoded")
		}
	}
	for i, v := range values {
		want, _ := json.Marshal(v)
		want = []byte(strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(want)))
		if string(got[i]) != string(want) {
			t.Errorf("value %d: %.80q, want %.80q", i, got[i], want)
		}
	}
}
