package tokens

import (
	_ "embed" // the rank tables
	"errors"
	"fmt"
)

// The rank tables are generated at build time from the tables
// tiktoken-go-loader ships (internal/gentables) and embedded as they are:
// nothing is parsed or allocated at run time. A table lives in the
// binary's read-only data, so the collector never scans it and the
// kernel pages in only what lookups touch. Layout, little-endian:
//
//	"MTOKBPE1" n slots blobLen (uint32 each)
//	offsets  [n+1]uint32  token of rank r = blob[offsets[r]:offsets[r+1]]
//	slots    [slots]uint32 open addressing, linear probing: rank+1, 0 empty
//	blob     [blobLen]byte the tokens' bytes in rank order
//
// Embedded as strings, which go:embed does not copy (an embed.FS read
// would put a copy of megabytes on the heap).
//
//go:generate go run ./internal/gentables tables
var (
	//go:embed tables/o200k_base.bin
	o200kTable string
	//go:embed tables/cl100k_base.bin
	cl100kTable string
)

const tableMagic = "MTOKBPE1"

// table is one encoding's ranks: strings that slice the embedded file.
type table struct {
	n       uint32
	mask    uint32 // slots-1
	offsets string
	slots   string
	blob    string
	byte1   [256]uint32 // rank of each single byte, the commonest lookup
}

func parseTable(s string) (*table, error) {
	if len(s) < len(tableMagic)+12 || s[:len(tableMagic)] != tableMagic {
		return nil, errors.New("tokens: bad table header")
	}
	h := s[len(tableMagic):]
	n, slots, blobLen := le32(h, 0), le32(h, 1), le32(h, 2)
	body := h[12:]
	if slots == 0 || slots&(slots-1) != 0 || uint64(len(body)) != 4*uint64(n+1)+4*uint64(slots)+uint64(blobLen) {
		return nil, fmt.Errorf("tokens: table sizes do not add up (%d tokens, %d slots)", n, slots)
	}
	t := &table{
		n:       n,
		mask:    slots - 1,
		offsets: body[:4*(n+1)],
		slots:   body[4*(n+1) : 4*(n+1)+4*slots],
		blob:    body[4*(n+1)+4*slots:],
	}
	for b := range 256 {
		r, ok := t.lookup(string([]byte{byte(b)}))
		if !ok {
			return nil, fmt.Errorf("tokens: byte %#x has no rank", b)
		}
		t.byte1[b] = r
	}
	return t, nil
}

// le32 is the i-th little-endian uint32 of s (one load once compiled).
func le32(s string, i uint32) uint32 {
	s = s[4*i : 4*i+4]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// token is the bytes of rank r.
func (t *table) token(r uint32) string {
	return t.blob[le32(t.offsets, r):le32(t.offsets, r+1)]
}

// rank looks s up.
func (t *table) rank(s string) (uint32, bool) {
	if len(s) == 1 {
		return t.byte1[s[0]], true
	}
	return t.lookup(s)
}

func (t *table) lookup(s string) (uint32, bool) {
	for i := hashBytes(s) & t.mask; ; i = (i + 1) & t.mask {
		v := le32(t.slots, i)
		if v == 0 {
			return 0, false
		}
		if t.token(v-1) == s {
			return v - 1, true
		}
	}
}

// hashBytes is FNV-1a with a final mix; internal/gentables places tokens
// with the same function.
func hashBytes(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h ^ h>>15
}
