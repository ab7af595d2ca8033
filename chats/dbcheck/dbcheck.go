// Package dbcheck checks a bbolt database file before bbolt is let near it.
//
// bbolt trusts its file: it maps it into memory and follows page numbers and
// offsets without bounds checks, and with NoFreelistSync (how chats opens the
// database) it walks the whole page tree at every open in a goroutine of its
// own, where a bad page is a SIGSEGV or a panic nothing can recover. A damaged
// file must be reported instead, with what is wrong and what to do, and left
// as it was. Check reads the file with pread (never through a mapping, so a
// page past the end is an error, not a fault), bounds-checks every page the
// tree reaches, and finds at least everything bbolt's own walk would panic
// on: the meta pages (magic, version, FNV-64a checksum, page size), the
// high-water mark against the file's size, every branch and leaf page (its
// header, its elements and their keys inside the page, key order as
// tx.Check sees it, each page reached once), inline buckets, and a written
// freelist when there is one.
//
// It reads each tree page's first page of bytes and the keys, never the
// values (a chat's rows live in overflow pages it does not read), so a check
// costs about what bbolt's own walk at open costs.
package dbcheck

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"strings"
)

// The on-disk layout of bbolt's format version 2 (go.etcd.io/bbolt
// internal/common), in the byte order of the machine that wrote it.
const (
	pageHeaderSize   = 16 // id u64, flags u16, count u16, overflow u32
	elemSize         = 16 // branch: pos u32, ksize u32, pgid u64; leaf: flags u32, pos u32, ksize u32, vsize u32
	metaSize         = 64 // magic, version, pageSize, flags u32; root, sequence, freelist, pgid, txid, checksum u64
	bucketHeaderSize = 16 // root u64, sequence u64
	maxKeySize       = 32768
	magic            = 0xED0CDAED
	formatVersion    = 2
	noFreelist       = ^uint64(0)

	flagBranch   = 0x01
	flagLeaf     = 0x02
	flagMeta     = 0x04
	flagFreelist = 0x10

	bucketLeafFlag = 0x01
)

// Bounds of the check itself, so that a forged file cannot make it recurse
// or allocate without limit.
const (
	// maxDepth bounds branch levels plus nested buckets. A B+tree of 4 KiB
	// pages is a handful of levels deep even at terabytes.
	maxDepth = 128
	// maxProblems is how many problems a report spells out; More counts
	// the rest.
	maxProblems = 20
	// minPageSize and maxPageSize bound the page sizes bbolt can write
	// (it probes for the second meta page between them).
	minPageSize = 1024
	maxPageSize = 1 << 24
	// minFileSize is what bbolt reads to find the first meta page.
	minFileSize = 4096
)

var ne = binary.NativeEndian

// Report is what Check found.
type Report struct {
	// Size is the file's size in bytes.
	Size int64 `json:"size"`
	// PageSize is the database's page size, 0 when no meta page says.
	PageSize int `json:"page_size"`
	// Meta is the meta page in use (0 or 1; -1 when neither is valid).
	Meta int `json:"meta"`
	// Txid is the transaction of that meta page.
	Txid uint64 `json:"txid"`
	// HighWater is how many pages the database uses (in use or free).
	HighWater uint64 `json:"high_water"`
	// Pages counts the pages reached: the meta pages, a written freelist,
	// and every tree page with its overflow.
	Pages uint64 `json:"pages"`
	// Buckets and Keys count what the tree holds (a bucket is a key too).
	Buckets int `json:"buckets"`
	Keys    int `json:"keys"`
	// Problems says what is wrong, the first maxProblems of them; More
	// counts the rest. A report without problems is sound.
	Problems []string `json:"problems,omitempty"`
	More     int      `json:"more,omitempty"`
	// Notes says what is odd but safe, such as a torn meta page bbolt
	// falls back from.
	Notes []string `json:"notes,omitempty"` // Tree says the page tree was walked; false when CheckAtOpen found a
	// cleanly closed file and checked its meta pages and freelist only.
	Tree bool `json:"tree"`
}

// Sound reports whether no problem was found.
func (r *Report) Sound() bool { return len(r.Problems) == 0 && r.More == 0 }

// Summary is one line on what a sound file holds.
func (r *Report) Summary() string {
	s := fmt.Sprintf("%d-byte pages, %d of %d reached (the rest free), %d buckets, %d keys; ",
		r.PageSize, r.Pages, r.HighWater, r.Buckets, r.Keys)
	if r.Meta >= 0 {
		s += fmt.Sprintf("meta page %d, ", r.Meta)
	}
	return s + fmt.Sprintf("transaction %d", r.Txid)
}

func (r *Report) problem(format string, args ...any) {
	if len(r.Problems) < maxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
		return
	}
	r.More++
}

// Check checks the bbolt file r of size bytes as bbolt would open it: the
// meta page bbolt would pick, and everything reachable from it. It never
// panics and never reads outside [0, size).
func Check(r io.ReaderAt, size int64) *Report { return check(r, size, 0) }

// CheckAtOpen is the check of every open: the meta pages, the high-water
// mark and a written freelist always; the page tree too unless the file is
// as a clean close left it: the meta page in use is of transaction clean
// (what the clean-shutdown marker names, see MarkClean; 0 for none) and
// has a written freelist. chats writes the freelist only at a clean close
// (chats.CloseDB) and drops it at the first commit after an open, so bbolt,
// reading that freelist, walks nothing at open either. Otherwise (a kill, a
// crash, a power loss, a file copied in, an older version's file) bbolt
// rebuilds the freelist by walking the whole tree, so the whole tree is
// checked first, as Check does. Report.Tree says which was done; `mirror
// check` always walks.
func CheckAtOpen(r io.ReaderAt, size int64, clean uint64) *Report { return check(r, size, clean) }

func check(r io.ReaderAt, size int64, clean uint64) *Report {
	rep := &Report{Size: size, Meta: -1}
	if size < minFileSize {
		rep.problem("the file is %d bytes, shorter than the smallest bbolt database (%d bytes): it was cut short", size, minFileSize)
		return rep
	}
	m0, err0 := readMeta(r, size, 0)
	ps := uint64(0)
	if err0 == nil {
		ps = uint64(m0.pageSize)
	} else {
		// Like bbolt: without a valid first meta page, look for the second
		// one at each page size it could have been written with.
		for i := 0; i <= 14; i++ {
			pos := int64(1024) << i
			if pos >= size-1024 {
				break
			}
			if m, err := readMeta(r, size, pos); err == nil {
				ps = uint64(m.pageSize)
				break
			}
		}
	}
	if ps == 0 {
		rep.problem("neither meta page is valid (page 0: %v); this is not a bbolt database, or both of its headers were overwritten", err0)
		return rep
	}
	if ps < minPageSize || ps > maxPageSize || ps&(ps-1) != 0 {
		rep.problem("the meta page says pages are %d bytes, which bbolt never writes", ps)
		return rep
	}
	rep.PageSize = int(ps)
	if uint64(size) < 2*ps {
		rep.problem("the file is %d bytes, shorter than its two meta pages (%d bytes): it was cut short", size, 2*ps)
		return rep
	}
	metas := [2]meta{}
	errs := [2]error{}
	metas[0], errs[0] = readMeta(r, size, 0)
	metas[1], errs[1] = readMeta(r, size, int64(ps))
	// bbolt uses the valid meta page of the higher transaction.
	use := 0
	if metas[1].txid > metas[0].txid {
		use = 1
	}
	if errs[use] != nil {
		use = 1 - use
	}
	if errs[use] != nil {
		rep.problem("neither meta page is valid (page 0: %v; page 1: %v)", errs[0], errs[1])
		return rep
	}
	if other := 1 - use; errs[other] != nil {
		rep.Notes = append(rep.Notes, fmt.Sprintf("meta page %d is not valid (%v), so bbolt uses meta page %d (transaction %d): "+
			"the last commit before a crash did not complete, or that page was damaged", other, errs[other], use, metas[use].txid))
	}
	for i := range 2 {
		// A valid meta page's header is whole too (a torn write tears the
		// sector they share as one); bbolt's tx.Check asserts on it.
		if errs[i] == nil {
			if id, flags, ok := header(r, int64(i)*int64(ps)); !ok || id != uint64(i) || flags != flagMeta {
				rep.problem("meta page %d's header is damaged (it says page %d, a %s page)", i, id, pageType(flags))
			}
		}
	}
	if !rep.Sound() {
		return rep
	}
	m := metas[use]
	rep.Meta, rep.Txid, rep.HighWater = use, m.txid, m.pgid
	if uint64(m.pageSize) != ps {
		rep.problem("meta page %d says pages are %d bytes, but the file's pages are %d bytes", use, m.pageSize, ps)
		return rep
	}
	hwm := m.pgid
	if hwm < 3 {
		rep.problem("meta page %d says the database has %d pages; it has at least 3", use, hwm)
		return rep
	}
	if hwm > uint64(size)/ps {
		rep.problem("the file is %d bytes, but transaction %d uses %d pages of %d bytes (%d bytes): the file was cut short",
			size, m.txid, hwm, ps, mulCap(hwm, ps))
		return rep
	}
	if m.root < 2 || m.root >= hwm {
		rep.problem("meta page %d puts the root at page %d, outside the pages in use (2 to %d)", use, m.root, hwm-1)
		return rep
	}
	if m.freelist != noFreelist && (m.freelist < 2 || m.freelist >= hwm) {
		rep.problem("meta page %d puts the freelist at page %d, outside the pages in use (2 to %d)", use, m.freelist, hwm-1)
		return rep
	}
	c := &checker{r: r, size: size, ps: ps, hwm: hwm, rep: rep, seen: newBits(hwm)}
	c.seen.set(0)
	c.seen.set(1)
	rep.Pages = 2
	if m.freelist != noFreelist && !c.freelist(m.freelist) {
		return rep
	}
	if clean != 0 && m.txid == clean && m.freelist != noFreelist {
		// The file is as a clean close left it (see CheckAtOpen): bbolt
		// reads this freelist and walks nothing at open.
		return rep
	}
	rep.Tree = true
	c.walk(m.root, nil, nil, 0, origin{root: true})
	if c.freed != nil && !c.stopped {
		// With a written freelist every page is in use or free; bbolt's
		// tx.Check calls any other one unreachable.
		for id := uint64(2); id < hwm; id++ {
			if !c.seen.has(id) && !c.freed.has(id) {
				rep.problem("page %d is neither in use nor free", id)
			}
		}
	}
	return rep
}

// CheckTree checks the tree of one transaction: pages of size pageSize,
// hwm of them, the root bucket at page root. A running bbolt's read
// transaction pins exactly these pages, so the tree can be checked through
// the file while writers go on (the gateway's GET /api/check). The meta
// pages and the freelist are the writer's and are not looked at.
func CheckTree(r io.ReaderAt, size int64, pageSize int, root, hwm uint64) *Report {
	rep := &Report{Size: size, PageSize: pageSize, Meta: -1, HighWater: hwm}
	ps := uint64(pageSize)
	switch {
	case ps < minPageSize || ps > maxPageSize || ps&(ps-1) != 0:
		rep.problem("pages of %d bytes, which bbolt never writes", pageSize)
	case hwm > uint64(size)/ps:
		rep.problem("the file is %d bytes, but the transaction uses %d pages of %d bytes", size, hwm, ps)
	case root < 2 || root >= hwm:
		rep.problem("the root is at page %d, outside the pages in use (2 to %d)", root, hwm-1)
	default:
		c := &checker{r: r, size: size, ps: ps, hwm: hwm, rep: rep, seen: newBits(hwm)}
		c.seen.set(0)
		c.seen.set(1)
		rep.Pages = 2
		rep.Tree = true
		c.walk(root, nil, nil, 0, origin{root: true})
	}
	return rep
}

// meta is a meta page's fields.
type meta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64
	txid     uint64
}

// Errors of a meta page, worded for a person.
var (
	errShortMeta = errors.New("the file ends inside it")
	errMagic     = errors.New("it does not start with bbolt's magic number")
	errVersion   = errors.New("its format version is not 2")
	errChecksum  = errors.New("its checksum does not match its contents")
)

func readMeta(r io.ReaderAt, size, off int64) (meta, error) {
	var b [pageHeaderSize + metaSize]byte
	if off < 0 || off+int64(len(b)) > size {
		return meta{}, errShortMeta
	}
	if _, err := r.ReadAt(b[:], off); err != nil {
		return meta{}, fmt.Errorf("cannot read it: %w", err)
	}
	f := b[pageHeaderSize:]
	m := meta{pageSize: ne.Uint32(f[8:]), root: ne.Uint64(f[16:]), freelist: ne.Uint64(f[32:]),
		pgid: ne.Uint64(f[40:]), txid: ne.Uint64(f[48:])}
	switch {
	case ne.Uint32(f[0:]) != magic:
		return m, errMagic
	case ne.Uint32(f[4:]) != formatVersion:
		return m, fmt.Errorf("its format version is %d, not %d", ne.Uint32(f[4:]), formatVersion)
	case ne.Uint64(f[56:]) != checksum(f):
		return m, errChecksum
	}
	return m, nil
}

// header reads a page header's id and flags.
func header(r io.ReaderAt, off int64) (id uint64, flags uint16, ok bool) {
	var b [pageHeaderSize]byte
	if _, err := r.ReadAt(b[:], off); err != nil {
		return 0, 0, false
	}
	return ne.Uint64(b[0:]), ne.Uint16(b[8:]), true
}

// checksum is bbolt's: FNV-64a over the meta fields before the checksum.
func checksum(f []byte) uint64 {
	h := fnv.New64a()
	_, _ = h.Write(f[:56])
	return h.Sum64()
}

// mulCap multiplies without wrapping around (for messages only).
func mulCap(a, b uint64) uint64 {
	if b != 0 && a > ^uint64(0)/b {
		return ^uint64(0)
	}
	return a * b
}

type checker struct {
	r     io.ReaderAt
	size  int64
	ps    uint64
	hwm   uint64
	rep   *Report
	seen  bits // pages reached
	freed bits // pages a written freelist lists; nil when bbolt rebuilds it
	// stopped is set at a read error: the rest of the file is not judged.
	stopped bool
	// bufs holds one page buffer per depth: a page's bytes (and the keys
	// sliced from them) stay valid while the pages below it are walked.
	bufs [][]byte
}

func (c *checker) buf(depth int) []byte {
	for len(c.bufs) <= depth {
		c.bufs = append(c.bufs, nil)
	}
	if c.bufs[depth] == nil {
		c.bufs[depth] = make([]byte, c.ps)
	}
	return c.bufs[depth]
}

// node is a branch or leaf page's bytes: head holds the first bytes, the
// rest of span is read from the file at base on demand (keys past the first
// page); an inline page is all in head, with base -1.
type node struct {
	id   uint64
	base int64
	span uint64
	head []byte
}

// bytes returns n bytes at offset at of the node; at+n <= span is the
// caller's to check.
func (c *checker) bytes(n *node, at, size uint64) ([]byte, bool) {
	if at+size <= uint64(len(n.head)) {
		return n.head[at : at+size], true
	}
	if n.base < 0 {
		return nil, false
	}
	b := make([]byte, size)
	if _, err := c.r.ReadAt(b, n.base+int64(at)); err != nil {
		c.rep.problem("page %d: cannot read bytes %d to %d: %v", n.id, at, at+size, err)
		c.stopped = true
		return nil, false
	}
	return b, true
}

// origin says what points at a page, for the messages: the meta page (the
// zero origin), a branch page, or a bucket's key on a leaf page.
type origin struct {
	// root: the page is the root bucket's, which holds only buckets.
	root   bool
	page   uint64
	bucket []byte
}

func (o origin) String() string {
	switch {
	case o.page == 0:
		return "the root bucket"
	case o.bucket != nil:
		return fmt.Sprintf("bucket %s on page %d", printable(o.bucket), o.page)
	}
	return fmt.Sprintf("branch page %d", o.page)
}

// walk checks the page id and the subtree under it, whose keys must lie in
// [lo, hi) (nil: unbounded), and returns the subtree's greatest key. from
// says what points at the page.
func (c *checker) walk(id uint64, lo, hi []byte, depth int, from origin) []byte {
	if c.stopped {
		return nil
	}
	if depth > maxDepth {
		c.rep.problem("page %d (from %s): the tree is deeper than %d levels", id, from, maxDepth)
		return nil
	}
	if id < 2 || id >= c.hwm {
		c.rep.problem("%s points at page %d, outside the pages in use (2 to %d)", from, id, c.hwm-1)
		return nil
	}
	if c.seen.has(id) {
		c.rep.problem("page %d is used twice (again from %s)", id, from)
		return nil
	}
	head := c.buf(depth)
	if _, err := c.r.ReadAt(head, int64(id*c.ps)); err != nil {
		c.rep.problem("page %d: cannot read it: %v", id, err)
		c.stopped = true
		return nil
	}
	hid, flags, overflow := ne.Uint64(head[0:]), ne.Uint16(head[8:]), uint64(ne.Uint32(head[12:]))
	if hid != id {
		c.rep.problem("page %d (from %s) says it is page %d: other bytes were written over it", id, from, hid)
		return nil
	}
	if overflow >= c.hwm-id {
		c.rep.problem("page %d (from %s) says it runs on for %d more pages, past the %d pages in use", id, from, overflow, c.hwm)
		return nil
	}
	for i := id; i <= id+overflow; i++ {
		if c.seen.has(i) {
			c.rep.problem("page %d is used twice (again as part of page %d, from %s)", i, id, from)
			return nil
		}
		if c.freed != nil && c.freed.has(i) {
			c.rep.problem("page %d (from %s) is in use and also listed as free", i, from)
		}
		c.seen.set(i)
	}
	c.rep.Pages += overflow + 1
	n := &node{id: id, base: int64(id * c.ps), span: (overflow + 1) * c.ps, head: head}
	switch flags {
	case flagBranch:
		return c.branch(n, lo, hi, depth, from)
	case flagLeaf:
		return c.leaf(n, lo, hi, depth, from.root)
	}
	c.rep.problem("page %d (from %s) is a %s page where the tree needs a branch or a leaf", id, from, pageType(flags))
	return nil
}

func pageType(flags uint16) string {
	switch flags {
	case flagBranch:
		return "branch"
	case flagLeaf:
		return "leaf"
	case flagMeta:
		return "meta"
	case flagFreelist:
		return "freelist"
	}
	return fmt.Sprintf("unknown (flags %#x)", flags)
}

// elements returns the element array of n, count elements after the header.
func (c *checker) elements(n *node, count uint64) ([]byte, bool) {
	if pageHeaderSize+count*elemSize > n.span {
		c.rep.problem("page %d says it holds %d elements, more than fit in it", n.id, count)
		return nil, false
	}
	return c.bytes(n, pageHeaderSize, count*elemSize)
}

// key returns element i's key: pos counts from the element itself. The key
// may share the node's buffer.
func (c *checker) key(n *node, i, pos, ksize, vsize uint64) ([]byte, bool) {
	if ksize > maxKeySize {
		c.rep.problem("page %d, element %d: a key of %d bytes, more than bbolt allows", n.id, i, ksize)
		return nil, false
	}
	at := pageHeaderSize + i*elemSize + pos
	if at+ksize+vsize > n.span {
		c.rep.problem("page %d, element %d: its key and value run past the end of the page", n.id, i)
		return nil, false
	}
	return c.bytes(n, at, ksize)
}

// order checks key i of a page against the previous key (or the lower
// bound for the first) and the upper bound, as bbolt's tx.Check does.
func (c *checker) order(n *node, i int, k, prev, hi []byte) bool {
	switch {
	case i == 0 && prev != nil && bytes.Compare(prev, k) > 0:
		c.rep.problem("page %d: its first key sorts before the key that leads to it", n.id)
	case i > 0 && bytes.Compare(prev, k) >= 0:
		c.rep.problem("page %d, element %d: its key does not sort after the one before it", n.id, i)
	case hi != nil && bytes.Compare(k, hi) >= 0:
		c.rep.problem("page %d, element %d: its key does not sort before the next key of the page above", n.id, i)
	default:
		return true
	}
	return false
}

func (c *checker) branch(n *node, lo, hi []byte, depth int, from origin) []byte {
	count := uint64(ne.Uint16(n.head[10:]))
	if count == 0 {
		c.rep.problem("page %d (from %s) is a branch with no elements", n.id, from)
		return nil
	}
	els, ok := c.elements(n, count)
	if !ok {
		return nil
	}
	keys := make([][]byte, count)
	kids := make([]uint64, count)
	for i := uint64(0); i < count; i++ {
		e := els[i*elemSize:]
		k, ok := c.key(n, i, uint64(ne.Uint32(e[0:])), uint64(ne.Uint32(e[4:])), 0)
		if !ok {
			return nil
		}
		keys[i], kids[i] = k, ne.Uint64(e[8:])
	}
	prev := lo
	var top []byte
	for i := range keys {
		if !c.order(n, i, keys[i], prev, hi) {
			return nil
		}
		next := hi
		if i+1 < len(keys) {
			next = keys[i+1]
		}
		top = c.walk(kids[i], keys[i], next, depth+1, origin{root: from.root, page: n.id})
		if c.stopped || len(c.rep.Problems) > 0 {
			return top
		}
		prev = top
	}
	return top
}

// leaf checks a leaf page; in the root bucket every key is a bucket.
func (c *checker) leaf(n *node, lo, hi []byte, depth int, root bool) []byte {
	count := uint64(ne.Uint16(n.head[10:]))
	els, ok := c.elements(n, count)
	if !ok {
		return nil
	}
	type sub struct {
		root uint64
		key  []byte
	}
	var subs []sub
	prev := lo
	for i := uint64(0); i < count; i++ {
		e := els[i*elemSize:]
		flags, pos := ne.Uint32(e[0:]), uint64(ne.Uint32(e[4:]))
		ksize, vsize := uint64(ne.Uint32(e[8:])), uint64(ne.Uint32(e[12:]))
		if flags&^bucketLeafFlag != 0 {
			c.rep.problem("page %d, element %d: unknown flags %#x", n.id, i, flags)
			return nil
		}
		k, ok := c.key(n, i, pos, ksize, vsize)
		if !ok || !c.order(n, int(i), k, prev, hi) {
			return nil
		}
		prev = k
		c.rep.Keys++
		if flags&bucketLeafFlag == 0 {
			if root {
				c.rep.problem("page %d, element %d: a value in the root bucket, which holds only buckets", n.id, i)
				return nil
			}
			continue
		}
		c.rep.Buckets++
		if vsize < bucketHeaderSize {
			c.rep.problem("page %d, element %d: a bucket of %d bytes, shorter than a bucket header", n.id, i, vsize)
			return nil
		}
		if vsize > c.ps {
			c.rep.problem("page %d, element %d: a bucket header of %d bytes, more than a page", n.id, i, vsize)
			return nil
		}
		v, ok := c.bytes(n, pageHeaderSize+i*elemSize+pos+ksize, vsize)
		if !ok {
			return nil
		}
		if root := ne.Uint64(v); root != 0 {
			subs = append(subs, sub{root, k})
			continue
		}
		// An inline bucket: its one leaf page follows the header.
		if vsize < bucketHeaderSize+pageHeaderSize {
			c.rep.problem("page %d, element %d: an inline bucket too short to hold its page", n.id, i)
			return nil
		}
		in := &node{id: n.id, base: -1, span: vsize - bucketHeaderSize, head: v[bucketHeaderSize:]}
		if f := ne.Uint16(in.head[8:]); f != flagLeaf {
			c.rep.problem("page %d, element %d: an inline bucket whose page is a %s page, not a leaf", n.id, i, pageType(f))
			return nil
		}
		if depth+1 > maxDepth {
			c.rep.problem("page %d: buckets nested deeper than %d levels", n.id, maxDepth)
			return nil
		}
		c.leaf(in, nil, nil, depth+1, false)
		if c.stopped || len(c.rep.Problems) > 0 {
			return nil
		}
	}
	// The greatest key outlives this page's buffer: the page above compares
	// it after walking the next page at this depth. An empty leaf has none
	// (as in bbolt's check).
	var last []byte
	if count > 0 {
		last = bytes.Clone(prev)
	}
	for _, s := range subs {
		c.walk(s.root, nil, nil, depth+1, origin{page: n.id, bucket: s.key})
		if c.stopped || len(c.rep.Problems) > 0 {
			break
		}
	}
	return last
}

// freelist checks a written freelist at page id and records what it frees.
func (c *checker) freelist(id uint64) bool {
	head := make([]byte, c.ps)
	if _, err := c.r.ReadAt(head, int64(id*c.ps)); err != nil {
		c.rep.problem("freelist page %d: cannot read it: %v", id, err)
		return false
	}
	hid, flags, count, overflow := ne.Uint64(head[0:]), ne.Uint16(head[8:]), uint64(ne.Uint16(head[10:])), uint64(ne.Uint32(head[12:]))
	switch {
	case hid != id:
		c.rep.problem("the freelist page %d says it is page %d: other bytes were written over it", id, hid)
		return false
	case flags != flagFreelist:
		c.rep.problem("the meta page puts the freelist at page %d, which is a %s page", id, pageType(flags))
		return false
	case overflow >= c.hwm-id:
		c.rep.problem("the freelist page %d runs on for %d more pages, past the %d pages in use", id, overflow, c.hwm)
		return false
	}
	for i := id; i <= id+overflow; i++ {
		c.seen.set(i)
	}
	c.rep.Pages += overflow + 1
	n := &node{id: id, base: int64(id * c.ps), span: (overflow + 1) * c.ps, head: head}
	at := uint64(pageHeaderSize)
	if count == 0xFFFF {
		// bbolt's overflow of the u16 count: the real count comes first.
		count = ne.Uint64(head[pageHeaderSize:])
		at += 8
	}
	if count > (n.span-at)/8 {
		c.rep.problem("the freelist page %d says it lists %d pages, more than fit in it", id, count)
		return false
	}
	c.freed = newBits(c.hwm)
	const chunk = 4096
	for done := uint64(0); done < count; {
		k := min(count-done, chunk)
		b, ok := c.bytes(n, at+done*8, k*8)
		if !ok {
			return false
		}
		for j := uint64(0); j < k; j++ {
			f := ne.Uint64(b[j*8:])
			switch {
			case f < 2 || f >= c.hwm:
				c.rep.problem("the freelist lists page %d, outside the pages in use (2 to %d)", f, c.hwm-1)
				return false
			case c.freed.has(f):
				c.rep.problem("the freelist lists page %d twice", f)
				return false
			case c.seen.has(f):
				c.rep.problem("the freelist lists page %d, which holds the freelist itself", f)
				return false
			}
			c.freed.set(f)
		}
		done += k
	}
	return true
}

// printable shows a bucket name in a message: as text when it is text.
func printable(k []byte) string {
	for _, b := range k {
		if b < 0x20 || b > 0x7e {
			return fmt.Sprintf("%x", k)
		}
	}
	return fmt.Sprintf("%q", string(k))
}

// bits is a set of page numbers below a bound.
type bits []uint64

func newBits(n uint64) bits      { return make(bits, (n+63)/64) }
func (b bits) has(i uint64) bool { return b[i/64]&(1<<(i%64)) != 0 }
func (b bits) set(i uint64)      { b[i/64] |= 1 << (i % 64) }

// describe lists a report's problems, one per line, indented.
func (r *Report) describe() string {
	var b strings.Builder
	for _, p := range r.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p)
	}
	if r.More > 0 {
		fmt.Fprintf(&b, "\n  - and %d more", r.More)
	}
	return b.String()
}
