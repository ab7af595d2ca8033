package tokens

import (
	_ "embed" // the rank tables
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"
)

// The rank tables are generated at build time from the tables
// tiktoken-go-loader ships (internal/gentables) and embedded as they are:
// nothing is parsed or allocated at run time. A table lives in the
// binary's read-only data, so the collector never scans it and the
// kernel pages in only what lookups touch. Layout, little-endian:
//
//	"MTOKBPE3" n slots blobLen (uint32 each)
//	offsets  [n+1]uint32   token of rank r = blob[offsets[r]:offsets[r+1]]
//	slots    [slots]uint32 open addressing from the hash's top bits, linear
//	                       probing; rank+1 in the low rankBits (0: empty),
//	                       the hash's low bits above, so most misses are
//	                       told apart without reading the token
//	pairs    [65536]uint32 rank of each two-byte string (noRank: none), the
//	                       first step of every merge
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

const (
	tableMagic = "MTOKBPE3"
	rankBits   = 18
	rankMask   = 1<<rankBits - 1
)

// table is one encoding's ranks, viewing the embedded file.
type table struct {
	n       uint32
	shift   uint32 // 32 - log2(slots)
	mask    uint32 // slots-1
	offsets []uint32
	slots   []uint32
	pairs   []uint32
	blob    string
	byte1   [256]uint32 // rank of each single byte, the commonest lookup
}

func parseTable(s string) (*table, error) {
	if len(s) < len(tableMagic)+12 || s[:len(tableMagic)] != tableMagic {
		return nil, errors.New("tokens: bad table header")
	}
	h := s[len(tableMagic):]
	n := binary.LittleEndian.Uint32([]byte(h[0:4]))
	slots := binary.LittleEndian.Uint32([]byte(h[4:8]))
	blobLen := binary.LittleEndian.Uint32([]byte(h[8:12]))
	body := h[12:]
	if n >= rankMask || slots == 0 || slots&(slots-1) != 0 ||
		uint64(len(body)) != 4*uint64(n+1)+4*uint64(slots)+4<<16+uint64(blobLen) {
		return nil, fmt.Errorf("tokens: table sizes do not add up (%d tokens, %d slots)", n, slots)
	}
	t := &table{
		n:       n,
		mask:    slots - 1,
		offsets: uint32s(body[:4*(n+1)]),
		slots:   uint32s(body[4*(n+1) : 4*(n+1)+4*slots]),
		pairs:   uint32s(body[4*(n+1)+4*slots : 4*(n+1)+4*slots+4<<16]),
		blob:    body[4*(n+1)+4*slots+4<<16:],
	}
	for slots>>1 > 0 {
		slots >>= 1
		t.shift++
	}
	t.shift = 32 - t.shift
	if t.offsets[n] != blobLen {
		return nil, errors.New("tokens: table offsets do not match its tokens")
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

// uint32s views s as little-endian uint32s without copying where the
// machine is little-endian and s is aligned (the linker aligns large
// embedded data), and decodes a copy otherwise.
func uint32s(s string) []uint32 {
	p := unsafe.StringData(s)
	if littleEndian && uintptr(unsafe.Pointer(p))%4 == 0 {
		return unsafe.Slice((*uint32)(unsafe.Pointer(p)), len(s)/4)
	}
	out := make([]uint32, len(s)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32([]byte(s[4*i : 4*i+4]))
	}
	return out
}

var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// touched keeps touch's reads from being optimised away.
var touched atomic.Uint32

// touch reads a word of every page of the table (see Counter.Warm).
func (t *table) touch() {
	const page = 4096
	var sum uint32
	for _, words := range [][]uint32{t.offsets, t.slots, t.pairs} {
		for i := 0; i < len(words); i += page / 4 {
			sum += words[i]
		}
	}
	for i := 0; i < len(t.blob); i += page {
		sum += uint32(t.blob[i])
	}
	touched.Add(sum)
}

// token is the bytes of rank r.
func (t *table) token(r uint32) string {
	return t.blob[t.offsets[r]:t.offsets[r+1]]
}

// rank looks s up.
func (t *table) rank(s string) (uint32, bool) {
	if len(s) == 1 {
		return t.byte1[s[0]], true
	}
	return t.lookup(s)
}

func (t *table) lookup(s string) (uint32, bool) {
	h := hashBytes(s)
	tag := h << rankBits
	for i := h >> t.shift; ; i = (i + 1) & t.mask {
		v := t.slots[i]
		if v == 0 {
			return 0, false
		}
		if v&^rankMask == tag {
			if r := v&rankMask - 1; t.token(r) == s {
				return r, true
			}
		}
	}
}

// hashBytes is FNV-1a, then a multiplication that spreads it to the top
// bits the slot index is taken from; internal/gentables places tokens with
// the same function.
func hashBytes(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h * 0x9e3779b1
}
