package people

import (
	"encoding/hex"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"weak"

	bolt "go.etcd.io/bbolt"
)

// The registry's hot reads come from memory. Every turn asks who created
// its chat and what role they have (chats.Service.ownerPolicies), every
// request whom its token speaks for, every frame naming a chat how far its
// person reaches into it: each was a bbolt read and, for a person, a JSON
// decode. A cache keeps the values of the keys those reads look at,
// decoded: a person (p/), a token's person (t/), a Telegram user's (tg/),
// the first owner (first), a chat's creator (o/) and a grant (g/).
//
// It is exactly the store's, by one rule kept where every write of those
// keys goes through (mark): a write transaction marks each cached key
// before it puts or deletes it, which drops the key's entry and keeps the
// key out of the cache until that transaction ends (its commit, seen by
// tx.OnCommit; a rollback of the registry's own transactions, seen by
// updateDB; or else the next write transaction that marks, bbolt running
// one at a time). Every mark and every end bumps a generation, and a read
// that missed keeps what it read only when the generation did not move
// while it read the database. So an entry is always its key's committed
// value, and a write is seen by the very next read: one made here, in
// another package's transaction (a chat's creator, a pairing's link), or
// applied from the cluster's log.
//
// A database has one cache, whichever Registry or package writes it.

// Bounds of the cache: people are few, chats may be many. A full map
// forgets an entry it holds at random (Go's map order) to take a new one.
// An entry costs its key and value, ~100 bytes (a person ~200): the cache
// stays under 10 MB.
const (
	maxPersons = 4096
	maxIDs     = 4096 // tokens and Telegram users
	maxChats   = 32768
)

// cache is one database's registry reads in memory.
type cache struct {
	mu  sync.RWMutex
	gen uint64
	// writing is the last write transaction that marked a key, and
	// pending the keys it marked, until it ends.
	writing *bolt.Tx
	pending map[string]struct{}

	first    string // the first owner's id ("" not read yet)
	persons  map[string]Person
	tokens   map[[32]byte]string // SHA-256 of a token → person id
	telegram map[int64]string    // Telegram user → person id
	creators map[string]string   // chat → creator id; "" for none recorded
	grants   map[grantRef]string // chat and person → level; "" for none
}

type grantRef struct{ chat, person string }

func newCache() *cache {
	return &cache{
		persons:  map[string]Person{},
		tokens:   map[[32]byte]string{},
		telegram: map[int64]string{},
		creators: map[string]string{},
		grants:   map[grantRef]string{},
	}
}

// caches are the databases' caches, held weakly: a closed database that
// is gone takes its cache with it.
var caches sync.Map // weak.Pointer[bolt.DB] → *cache

// cacheFor returns db's cache, made on first use.
func cacheFor(db *bolt.DB) *cache {
	k := weak.Make(db)
	if c, ok := caches.Load(k); ok {
		return c.(*cache)
	}
	c, loaded := caches.LoadOrStore(k, newCache())
	if !loaded {
		runtime.AddCleanup(db, func(k weak.Pointer[bolt.DB]) { caches.Delete(k) }, k)
	}
	return c.(*cache)
}

// markKey is mark on the cache of tx's database, when it has one (no
// Registry opened on it has read anything yet otherwise).
func markKey(tx *bolt.Tx, key []byte) {
	if c, ok := caches.Load(weak.Make(tx.DB())); ok {
		c.(*cache).mark(tx, key)
	}
}

// mark tells the cache that tx, a write transaction, is about to put or
// delete key: its entry goes, and it is not kept again before tx ended.
func (c *cache) mark(tx *bolt.Tx, key []byte) {
	k := string(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.forget(k) {
		return // a key the cache never holds (a name, a usage counter)
	}
	if c.writing != tx {
		// bbolt runs one write transaction at a time: the one before
		// ended (committed, and then visible to every read that begins
		// now, or rolled back).
		c.writing, c.pending = tx, map[string]struct{}{}
		tx.OnCommit(func() { c.ended(tx) })
	}
	c.pending[k] = struct{}{}
	c.gen++
}

// forget drops the entry of key and says whether the cache holds such
// keys. The caller holds c.mu.
func (c *cache) forget(key string) bool {
	switch {
	case key == "first":
		c.first = ""
	case strings.HasPrefix(key, "p/"):
		delete(c.persons, key[2:])
	case strings.HasPrefix(key, "t/"):
		var h [32]byte
		if n, err := hex.Decode(h[:], []byte(key[2:])); err == nil && n == len(h) {
			delete(c.tokens, h)
		}
	case strings.HasPrefix(key, "tg/"):
		if u, err := strconv.ParseInt(key[3:], 10, 64); err == nil {
			delete(c.telegram, u)
		}
	case strings.HasPrefix(key, "o/"):
		delete(c.creators, key[2:])
	case strings.HasPrefix(key, "g/"):
		// g/<chat>/<person>: a person's id holds no '/'.
		if i := strings.LastIndexByte(key, '/'); i > 1 {
			delete(c.grants, grantRef{key[2:i], key[i+1:]})
		}
	default:
		return false
	}
	return true
}

// ended tells the cache tx ended (committed or rolled back): its keys may
// be kept again, read from a transaction that begins after this.
func (c *cache) ended(tx *bolt.Tx) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writing == tx {
		c.writing, c.pending = nil, nil
		c.gen++
	}
}

// generation is where a read that missed begins.
func (c *cache) generation() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.gen
}

// keep says whether what a read that began at gen found under key may be
// kept: no write marked anything since, and none is writing key. The
// caller holds c.mu for writing.
func (c *cache) keep(gen uint64, key string) bool {
	if c.gen != gen {
		return false
	}
	_, busy := c.pending[key]
	return !busy
}

// keepIn stores v under k in m, forgetting an entry when m holds max.
func keepIn[K comparable, V any](m map[K]V, k K, v V, max int) {
	if _, ok := m[k]; !ok && len(m) >= max {
		for old := range m {
			delete(m, old)
			break
		}
	}
	m[k] = v
}

func (c *cache) person(id string) (Person, bool, uint64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	p, ok := c.persons[id]
	return p, ok, c.gen
}

func (c *cache) keepPerson(gen uint64, p Person) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keep(gen, "p/"+p.ID) {
		keepIn(c.persons, p.ID, p, maxPersons)
	}
}

func (c *cache) firstID() (string, uint64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.first, c.gen
}

func (c *cache) keepFirst(gen uint64, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keep(gen, "first") {
		c.first = id
	}
}

func (c *cache) token(h [32]byte) (string, bool, uint64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	id, ok := c.tokens[h]
	return id, ok, c.gen
}

func (c *cache) keepToken(gen uint64, h [32]byte, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keep(gen, string(hashKey(hex.EncodeToString(h[:])))) {
		keepIn(c.tokens, h, id, maxIDs)
	}
}

func (c *cache) tgUser(user int64) (string, bool, uint64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	id, ok := c.telegram[user]
	return id, ok, c.gen
}

func (c *cache) keepTgUser(gen uint64, user int64, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keep(gen, string(tgKey(user))) {
		keepIn(c.telegram, user, id, maxIDs)
	}
}

func (c *cache) creator(chat string) (string, bool, uint64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	id, ok := c.creators[chat]
	return id, ok, c.gen
}

func (c *cache) keepCreator(gen uint64, chat, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keep(gen, string(ownerKey(chat))) {
		keepIn(c.creators, strings.Clone(chat), id, maxChats)
	}
}

func (c *cache) grant(chat, person string) (string, bool, uint64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	lvl, ok := c.grants[grantRef{chat, person}]
	return lvl, ok, c.gen
}

func (c *cache) keepGrant(gen uint64, chat, person, lvl string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keep(gen, string(grantKey(chat, person))) {
		keepIn(c.grants, grantRef{strings.Clone(chat), strings.Clone(person)}, lvl, maxChats)
	}
}

// marking is a bucket of a write transaction whose every write marks the
// cache first.
type marking struct {
	kv
	tx *bolt.Tx
}

func (m marking) Put(key, value []byte) error {
	markKey(m.tx, key)
	return m.kv.Put(key, value)
}

func (m marking) Delete(key []byte) error {
	markKey(m.tx, key)
	return m.kv.Delete(key)
}

// updateDB is db.Update for the registry's own transactions: one that did
// not commit (an error) ends its marks at once, not at the next write.
func (r *Registry) updateDB(fn func(tx *bolt.Tx) error) error {
	var last *bolt.Tx
	err := r.db.Update(func(tx *bolt.Tx) error {
		last = tx
		return fn(tx)
	})
	if err != nil && last != nil {
		r.c.ended(last)
	}
	return err
}
