package openai

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"slices"
	"sync"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// encCacheBytes bounds what an encCache holds (encoded bytes plus the text
// it keeps to compare): about 8 MiB per client.
const encCacheBytes = 8 << 20

// encCache keeps the encoded JSON of messages a client sent, so the next
// request of the same conversation encodes only what is new. A view is
// byte-identical between checkpoints by design: each turn's request is the
// last one's messages plus a few, so nearly every message is found. The
// cache is keyed by content, not by conversation: a checkpoint or a
// boundary changes the messages, which then simply miss, and a message's
// encoding is a pure function of its fields (messages with attachments,
// whose encoding also depends on the model, are not cached), so the bytes
// sent are those a fresh encoding gives. Two generations make it roughly
// least-recently-used within encCacheBytes. Keying costs a hash of every
// message of the history each turn, so a request that names its
// conversation finds the messages its last request sent by position first
// (positions), and keys only the others.
type encCache struct {
	seed maphash.Seed

	mu       sync.Mutex
	cur, old map[uint64]encEntry
	size     int // of cur

	hits, misses int // for tests
	posHits      int // of hits, found by position (for tests)
	keyed        int // messages hashed (for tests)

	// convs are the messages of each conversation's last request, by
	// position (positions).
	convs positions

	// toolSets are encoded tool lists: a chat offers the same tools turn
	// after turn, and their schemas are most of a short request.
	toolSets map[uint64]toolsEntry
	// lastTools is the tool list last encoded or found, tried before the
	// list is hashed: most chats offer the same list, and hashing its
	// schemas each turn cost more than comparing them.
	lastTools  toolsEntry
	toolHashes int // lists hashed (for tests)

	// frames are requests encoded without their messages and tools, and
	// where the messages go in them (frame): the same few a chain sends
	// turn after turn, each encoded by reflection before.
	frames      map[frameKey]frame
	frameMisses int // frames encoded (for tests)
}

// frameKey is every field of a wireRequest but its messages and tools:
// what its frame's bytes are made of.
type frameKey struct {
	model, toolChoice          string
	choice                     bool // toolChoice is set
	maxTokens, maxCompletionTo int
}

// frame is a request encoded with an empty message list and no tools,
// and head, the length of its part before the message list ("[]").
type frame struct {
	rest []byte
	head int
}

// maxFrames bounds frames: a few per model of a chain.
const maxFrames = 64

// frame is w's frame (w has no messages and no tools), encoded once per
// frameKey. Its bytes are shared: only read.
func (c *encCache) frame(w *wireRequest) (rest []byte, head int, err error) {
	k := frameKey{model: w.Model, maxTokens: w.MaxTokens, maxCompletionTo: w.MaxCompletionTokens}
	if w.ToolChoice != nil {
		k.toolChoice, k.choice = w.ToolChoice.Function.Name, true
	}
	c.mu.Lock()
	f, ok := c.frames[k]
	c.mu.Unlock()
	if ok {
		return f.rest, f.head, nil
	}
	if f, err = encodeFrame(w); err != nil {
		return nil, 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frameMisses++
	if c.frames == nil || len(c.frames) >= maxFrames {
		c.frames = map[frameKey]frame{}
	}
	c.frames[k] = f
	return f.rest, f.head, nil
}

type toolsEntry struct {
	tools []provider.Tool
	enc   []byte
}

// maxToolSets bounds toolSets: a few per chain and MCP server choice.
const maxToolSets = 64

type encEntry struct {
	m   provider.Message
	enc []byte
}

func newEncCache() *encCache {
	return &encCache{seed: maphash.MakeSeed(), cur: map[uint64]encEntry{}, toolSets: map[uint64]toolsEntry{},
		convs: positions{byName: map[string]*convState{}, maxBytes: convBytes, maxConvs: maxConvs}}
}

// forget drops every kept encoding and conversation (the tool lists stay:
// a few, and the same after a pause). See Client.Forget.
func (c *encCache) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cur, c.old, c.size = map[uint64]encEntry{}, nil, 0
	c.convs = positions{byName: map[string]*convState{}, maxBytes: c.convs.maxBytes, maxConvs: c.convs.maxConvs}
}

// cacheable says whether m's encoding is kept.
func cacheable(m provider.Message) bool { return len(m.Parts) == 0 }

// key is m's hash. Every message of a request is keyed each turn (a long
// chat's request is a few hundred messages), so a plain message costs two
// calls of the runtime's hash, its content's in one call: a maphash.Hash
// hashes 128 bytes per call and its setup and writes cost more than the
// short messages themselves. A key only says where to look: sameWire
// compares the whole message, so a collision is a miss, never wrong bytes.
func (c *encCache) key(m provider.Message) uint64 {
	k := maphash.String(c.seed, m.Content) ^ maphash.String(c.seed, m.Role)*0x9e3779b97f4a7c15
	if m.ToolCallID == "" && len(m.ToolCalls) == 0 {
		return k
	}
	var h maphash.Hash
	h.SetSeed(c.seed)
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], k)
	h.Write(b[:])
	h.WriteString(m.ToolCallID)
	for _, tc := range m.ToolCalls {
		h.WriteByte(1)
		h.WriteString(tc.ID)
		h.WriteByte(0)
		h.WriteString(tc.Name)
		h.WriteByte(0)
		binary.LittleEndian.PutUint64(b[:], maphash.String(c.seed, tc.Arguments))
		h.Write(b[:])
	}
	return h.Sum64()
}

// sameWire says whether a and b encode alike: the fields the wire message
// is made of are equal.
func sameWire(a, b provider.Message) bool {
	if a.Role != b.Role || a.Content != b.Content || a.ToolCallID != b.ToolCallID || len(a.ToolCalls) != len(b.ToolCalls) {
		return false
	}
	for i, tc := range a.ToolCalls {
		o := b.ToolCalls[i]
		if tc.ID != o.ID || tc.Name != o.Name || tc.Arguments != o.Arguments {
			return false
		}
	}
	return true
}

// lookup fills encs[i] for every message msgs[i] found by content, of
// those at the indexes todo (keys[i] is its key).
func (c *encCache) lookup(msgs []provider.Message, todo []int, keys []uint64, encs [][]byte) {
	if len(todo) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, i := range todo {
		m := msgs[i]
		if !cacheable(m) {
			continue
		}
		c.keyed++
		e, ok := c.cur[keys[i]]
		if !ok {
			if e, ok = c.old[keys[i]]; ok && sameWire(e.m, m) {
				c.putLocked(keys[i], e)
			}
		}
		if ok && sameWire(e.m, m) {
			encs[i] = e.enc
			c.hits++
		} else {
			c.misses++
		}
	}
}

func (c *encCache) putLocked(key uint64, e encEntry) {
	n := len(e.enc) + len(e.m.Content) + 64
	if n > encCacheBytes/4 {
		return // a huge message would push out everything else
	}
	if _, ok := c.cur[key]; ok {
		return
	}
	if c.size+n > encCacheBytes/2 {
		c.old, c.cur, c.size = c.cur, map[uint64]encEntry{}, 0
	}
	c.cur[key] = e
	c.size += n
}

// wireFields is m as the cache keeps it: the fields its encoding is made
// of, its tool calls copied (the caller's slice may change).
func wireFields(m provider.Message) provider.Message {
	return provider.Message{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, ToolCalls: slices.Clone(m.ToolCalls)}
}

// encodeMessages writes head, then the JSON array of msgs' wire messages to
// buf, each element exactly as MarshalWire encodes it, from c where it
// can. conv names the conversation (Request.Conversation): what its last
// request sent is found by position, the rest by content. extra is what
// the caller writes after them: the buffer is grown once for all of it (a
// request is the size of the history, and growing it again for the tools
// copied it twice a turn).
func (c *encCache) encodeMessages(buf *bytes.Buffer, head []byte, msgs []provider.Message, official bool, model string, extra int, conv string) error {
	sc := scratches.Get().(*encScratch)
	defer sc.put()
	keys, encs := sc.size(len(msgs))
	sc.todo = c.byPosition(conv, msgs, encs, sc.todo[:0])
	for _, i := range sc.todo {
		if cacheable(msgs[i]) {
			keys[i] = c.key(msgs[i])
		}
	}
	c.lookup(msgs, sc.todo, keys, encs)
	need := len(head) + len(msgs) + 2
	for i, e := range encs {
		if e != nil {
			need += len(e)
		} else {
			need += len(msgs[i].Content) + 64
		}
	}
	buf.Grow(need + extra)
	buf.Write(head)
	buf.WriteByte('[')
	sc.fresh = sc.fresh[:0]
	for i, m := range msgs {
		if i > 0 {
			buf.WriteByte(',')
		}
		if encs[i] != nil {
			buf.Write(encs[i])
			continue
		}
		wm, err := wireMessageOf(i, m, official, model)
		if err != nil {
			return err
		}
		b, err := provider.MarshalWire(wm)
		if err != nil {
			return err
		}
		buf.Write(b)
		if cacheable(m) {
			encs[i] = b
			sc.fresh = append(sc.fresh, i)
		}
	}
	buf.WriteByte(']')
	c.remember(conv, msgs, sc.todo, sc.fresh, keys, encs)
	return nil
}

// remember keeps what encodeMessages found or encoded other than by
// position: the fresh encodings (at the indexes fresh) by content, and
// every message at the indexes todo (all the others were found where
// conv's last request had them) in conv's positions, which then mirror
// msgs. One lock for all of it: a turn's new messages are a few.
func (c *encCache) remember(conv string, msgs []provider.Message, todo, fresh []int, keys []uint64, encs [][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, i := range fresh {
		c.putLocked(keys[i], encEntry{m: wireFields(msgs[i]), enc: encs[i]})
	}
	if conv != "" {
		c.convs.update(conv, msgs, todo, encs)
	}
}

// encScratch is encodeMessages' working space, a key and an encoding per
// message: kept between requests, since a long chat's were a few KiB of
// garbage a turn.
type encScratch struct {
	keys []uint64
	encs [][]byte
	// todo and fresh are indexes of msgs: those not found by position,
	// those encoded afresh.
	todo, fresh []int
}

var scratches = sync.Pool{New: func() any { return new(encScratch) }}

// size returns the keys and encodings of n messages, zeroed.
func (sc *encScratch) size(n int) ([]uint64, [][]byte) {
	if cap(sc.keys) < n {
		sc.keys, sc.encs = make([]uint64, n), make([][]byte, n)
	}
	sc.keys, sc.encs = sc.keys[:n], sc.encs[:n]
	clear(sc.keys)
	clear(sc.encs)
	return sc.keys, sc.encs
}

// put returns sc to the pool without the encodings it points to, which
// the cache may drop meanwhile.
func (sc *encScratch) put() {
	clear(sc.encs)
	scratches.Put(sc)
}

// encodeTools returns the JSON array of tools as sent (the "tools" field),
// from c when it encoded the same list before.
func (c *encCache) encodeTools(tools []provider.Tool) ([]byte, error) {
	c.mu.Lock()
	last := c.lastTools
	c.mu.Unlock()
	if last.enc != nil && provider.SameTools(last.tools, tools) {
		return last.enc, nil
	}
	var h maphash.Hash
	h.SetSeed(c.seed)
	for _, t := range tools {
		h.WriteString(t.Name)
		h.WriteByte(0)
		h.WriteString(t.Description)
		h.WriteByte(0)
		h.Write(t.Parameters)
		h.WriteByte(1)
	}
	key := h.Sum64()
	c.mu.Lock()
	c.toolHashes++
	e, ok := c.toolSets[key]
	c.mu.Unlock()
	if ok && provider.SameTools(e.tools, tools) {
		c.mu.Lock()
		c.lastTools = e
		c.mu.Unlock()
		return e.enc, nil
	}
	wire, err := wireToolsOf(tools)
	if err != nil {
		return nil, err
	}
	enc, err := provider.MarshalWire(wire)
	if err != nil {
		return nil, err
	}
	kept := provider.CloneTools(tools)
	c.mu.Lock()
	if len(c.toolSets) >= maxToolSets {
		clear(c.toolSets)
	}
	c.toolSets[key] = toolsEntry{tools: kept, enc: enc}
	c.lastTools = c.toolSets[key]
	c.mu.Unlock()
	return enc, nil
}
