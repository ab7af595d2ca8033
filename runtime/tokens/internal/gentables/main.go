// Command gentables writes the rank tables of o200k_base and cl100k_base in
// the compact form runtime/tokens embeds (see runtime/tokens/table.go for
// the layout), from the tables tiktoken-go-loader ships. It runs at build
// time only (go generate ./runtime/tokens), so the gateway neither links the
// loader nor parses its base64 text at run time.
package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"

	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// Must match runtime/tokens/table.go.
const (
	magic    = "MTOKBPE3"
	rankBits = 18 // a slot is rank+1 in its low bits, a tag of the hash above
	noRank   = 1<<32 - 1
)

func main() {
	out := "tables"
	if len(os.Args) > 1 {
		out = os.Args[1]
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		fail(err)
	}
	for _, name := range []string{"o200k_base", "cl100k_base"} {
		ranks, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(name + ".tiktoken")
		if err != nil {
			fail(err)
		}
		data, err := build(ranks)
		if err != nil {
			fail(fmt.Errorf("%s: %w", name, err))
		}
		if err := os.WriteFile(filepath.Join(out, name+".bin"), data, 0o644); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gentables:", err)
	os.Exit(1)
}

// build lays the table out: header, offsets, hash slots, pair ranks,
// token bytes.
func build(ranks map[string]int) ([]byte, error) {
	n := len(ranks)
	byRank := make([]string, n)
	for tok, r := range ranks {
		if r < 0 || r >= n || byRank[r] != "" {
			return nil, fmt.Errorf("ranks are not 0..%d, each once (rank %d)", n-1, r)
		}
		if n >= 1<<rankBits-1 {
			return nil, fmt.Errorf("%d tokens do not fit %d bits", n, rankBits)
		}
		if tok == "" || len(tok) > 255 {
			return nil, fmt.Errorf("token of rank %d has %d bytes", r, len(tok))
		}
		byRank[r] = tok
	}
	slots := 1
	for slots < 2*n { // load factor at most 1/2: short probe chains
		slots <<= 1
	}
	bits := 0
	for 1<<bits < slots {
		bits++
	}
	table := make([]uint32, slots)
	for r, tok := range byRank {
		h := hash(tok)
		i := h >> (32 - bits)
		for table[i] != 0 {
			i = (i + 1) & uint32(slots-1)
		}
		table[i] = uint32(r) + 1 | h<<rankBits
	}
	var blob bytes.Buffer
	offsets := make([]uint32, n+1)
	for r, tok := range byRank {
		offsets[r] = uint32(blob.Len())
		blob.WriteString(tok)
	}
	offsets[n] = uint32(blob.Len())

	var b bytes.Buffer
	b.WriteString(magic)
	for _, v := range []uint32{uint32(n), uint32(slots), uint32(blob.Len())} {
		binary.Write(&b, binary.LittleEndian, v)
	}
	binary.Write(&b, binary.LittleEndian, offsets)
	binary.Write(&b, binary.LittleEndian, table)
	pairs := make([]uint32, 1<<16)
	for i := range pairs {
		pairs[i] = noRank
		if r, ok := ranks[string([]byte{byte(i >> 8), byte(i)})]; ok {
			pairs[i] = uint32(r)
		}
	}
	binary.Write(&b, binary.LittleEndian, pairs)
	b.Write(blob.Bytes())
	return b.Bytes(), nil
}

// hash must equal runtime/tokens.hashBytes.
func hash(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h * 0x9e3779b1
}
