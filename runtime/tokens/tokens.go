// Package tokens counts tokens locally, exactly as tiktoken does, offline:
// the BPE rank tables are generated at build time and embedded in the
// binary in a compact, pointer-free form (table.go), so the gateway never
// downloads anything, loading an encoding costs microseconds and the
// collector never scans the tables. Every function here is safe for
// concurrent use.
//
// Counts are of plain text: special-token markers such as <|endoftext|> in
// user text are counted as ordinary text, never interpreted (and never panic).
package tokens

import (
	"strings"
	"sync"
)

// Encoding names.
const (
	O200kBase  = "o200k_base"  // gpt-4o, gpt-4.1, gpt-4.5, gpt-5, o-series
	CL100kBase = "cl100k_base" // gpt-4, gpt-3.5, text-embedding-3 / ada-002
)

// Chat formatting overhead, after OpenAI's cookbook ("How to count tokens
// with tiktoken"): every message is wrapped as <|start|>{role}<|message|>
// {content}<|end|>, about MessageOverhead tokens beyond its content, and every
// reply is primed with <|start|>assistant<|message|>, ReplyOverhead tokens
// once per request. It is an estimate; callers correct it with what the
// provider billed.
const (
	MessageOverhead = 3
	ReplyOverhead   = 3
)

// Overhead is the formatting overhead of a request carrying n messages.
func Overhead(n int) int {
	if n <= 0 {
		return 0
	}
	return n*MessageOverhead + ReplyOverhead
}

// Counter counts tokens with one encoding. The zero value is not usable; get
// one from For or Get.
type Counter struct {
	name   string
	once   sync.Once
	enc    encoder
	err    error
	recent countCache
}

var (
	o200k  = &Counter{name: O200kBase}
	cl100k = &Counter{name: CL100kBase}
)

// Get returns the shared counter of the named encoding, or nil when the
// encoding is not one Mirror carries.
func Get(encoding string) *Counter {
	switch encoding {
	case O200kBase:
		return o200k
	case CL100kBase:
		return cl100k
	}
	return nil
}

// For returns the counter for a model name. The name may carry a vendor
// prefix ("openai/gpt-4o") and any suffix ("gpt-4o-2024-08-06"). gpt-4 and
// gpt-3.5 chat models and the text-embedding family use cl100k_base;
// everything else, including unknown and non-OpenAI models, uses o200k_base,
// the encoding of every current OpenAI model and a reasonable estimate for
// the rest.
func For(model string) *Counter {
	m := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	switch {
	// gpt-4o, gpt-4.1 and gpt-4.5 share the gpt-4 prefix; check them first.
	case strings.HasPrefix(m, "gpt-4o"), strings.HasPrefix(m, "gpt-4.1"), strings.HasPrefix(m, "gpt-4.5"),
		strings.HasPrefix(m, "chatgpt-4o"):
		return o200k
	case strings.HasPrefix(m, "gpt-4"), strings.HasPrefix(m, "gpt-3.5"), strings.HasPrefix(m, "gpt-35"),
		strings.HasPrefix(m, "text-embedding-"):
		return cl100k
	}
	return o200k
}

// Count counts text with o200k_base, the default encoding.
func Count(text string) int { return o200k.Count(text) }

// Encoding is the counter's encoding name.
func (c *Counter) Encoding() string { return c.name }

// Load loads the encoding now (it is loaded on first use otherwise) and
// reports whether it could be loaded. Loading only checks the embedded
// table's header and reads 256 of its entries (microseconds, no
// allocation to speak of), so the first count costs what every later one
// does and nothing needs to be loaded ahead.
func (c *Counter) Load() error {
	c.once.Do(func() {
		switch c.name {
		case O200kBase:
			c.enc.t, c.err = parseTable(o200kTable)
			c.enc.split = splitO200k
		case CL100kBase:
			c.enc.t, c.err = parseTable(cl100kTable)
			c.enc.split = splitCL100k
		}
	})
	return c.err
}

// Warm loads the encoding and reads its whole table once. The table is
// part of the binary: mapped, not read, so each lookup that lands on a page
// not touched yet waits for a page fault, and the first counts of a process
// touch hundreds of them (about a millisecond of the first turn on a VM).
// The gateway warms its counters in the background once it listens, so no
// turn pays for that. The fault-around of those first counts maps most of
// the table anyway: warming adds little to the memory after a first turn.
func (c *Counter) Warm() error {
	if err := c.Load(); err != nil {
		return err
	}
	c.enc.t.touch()
	return nil
}

// Count returns the number of tokens in text, in time linear in its length
// (split.go bounds the pre-tokens that would make it quadratic). Should the
// embedded tables ever fail to load, it returns a deliberately high
// estimate (bytes/2.8, above every measured text) rather than 0, so budgets
// stay on the safe side.
func (c *Counter) Count(text string) int {
	if text == "" {
		return 0
	}
	if c.Load() != nil {
		return (len(text)*10 + 27) / 28
	}
	if len(text) > cacheMaxText {
		return c.count(text)
	}
	if n, ok := c.recent.get(text); ok {
		return n
	}
	n := c.count(text)
	c.recent.put(text, n)
	return n
}

func (c *Counter) count(text string) int { return c.enc.walk(text, nil) }

// The same text is often counted twice close together (a fixed prompt every
// turn; an answer by its provider and again when it is stored), and BPE
// encoding is the dearest step of sizing a turn, so recent counts are kept.
const (
	cacheMaxText    = 16 << 10 // longer texts are rare and not kept
	cacheGeneration = 512      // entries per generation; two are kept
)

// countCache keeps two generations of counts: when the young one is full it
// becomes the old one, so memory stays bounded without per-entry bookkeeping.
type countCache struct {
	mu         sync.Mutex
	young, old map[string]int
}

func (c *countCache) get(s string) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.young[s]; ok {
		return n, true
	}
	n, ok := c.old[s]
	return n, ok
}

func (c *countCache) put(s string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.young == nil || len(c.young) >= cacheGeneration {
		c.old, c.young = c.young, make(map[string]int, cacheGeneration)
	}
	c.young[s] = n
}

// Encode returns the token ids of text, treating special-token markers as
// plain text. It returns nil when the encoding cannot be loaded. The ids
// are tiktoken's, except inside a pre-token longer than maxPiece bytes,
// which is encoded in bounded pieces (see bpe.go), as Count counts it.
func (c *Counter) Encode(text string) []int {
	if c.Load() != nil {
		return nil
	}
	var out []int
	c.enc.walk(text, &out)
	return out
}
