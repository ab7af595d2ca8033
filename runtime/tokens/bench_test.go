package tokens

import (
	"os"
	"strings"
	"testing"
)

// BenchmarkTokenize measures one uncached count (the count cache left
// out: a turn's new text is never in it) with each encoding, on 2 KiB of
// English prose, of source code and of mixed scripts and emoji, on a short
// message, and on 256 KiB of prose: ns/op, B/op and allocs/op.
func BenchmarkTokenize(b *testing.B) {
	read := func(name string, size int) string {
		p, err := os.ReadFile("testdata/" + name)
		if err != nil {
			b.Fatal(err)
		}
		return strings.Repeat(string(p), size/len(p)+1)[:size]
	}
	cases := []struct{ name, text string }{
		{"short", "Hi! Can you help me plan a trip to Lisbon next week?"},
		{"prose-2KiB", read("prose.txt", 2048)},
		{"code-2KiB", read("code.txt", 2048)},
		{"emoji-2KiB", read("emoji.txt", 2048)},
		{"cjk-2KiB", read("cjk.txt", 2048)},
		{"prose-256KiB", read("prose.txt", 256<<10)},
		{"base64-256KiB", benchText(b, "base64")},
	}
	for _, c := range []*Counter{o200k, cl100k} {
		if err := c.Load(); err != nil {
			b.Fatal(err)
		}
		for _, bc := range cases {
			b.Run(c.name+"/"+bc.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(bc.text)))
				for b.Loop() {
					c.count(bc.text)
				}
			})
		}
	}
}
