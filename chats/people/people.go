// Package people owns who may use Mirror and what each person may see: people
// (a name, a role, browser tokens, linked Telegram user ids), which person
// created each chat, and the grants that share a chat with others. It keeps
// them in two buckets of the one database file, "people" and "grants".
//
// It decides nothing about transports: the gateway resolves a request to a
// Person (by token or Telegram user), and package chats asks Access before
// it lets that person see or change a chat.
//
// The access token Mirror always had (auth.token_env or data_dir/token)
// belongs to the first owner, a person created on first use: a single user
// sees and does exactly what they did before people existed.
package people

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// Roles a person may have.
const (
	// RoleOwner sees every chat, answers any approval, manages people.
	RoleOwner = "owner"
	// RoleMember sees the chats they created and those shared with them.
	RoleMember = "member"
)

// Level is how far a person may reach into one chat.
type Level int

// Levels, each including the ones before it.
const (
	// None: the chat does not exist as far as the person can tell.
	None Level = iota
	// Read: open it, read its record, follow its events.
	Read
	// Write: send, edit, delete, stop, pin, run commands, answer its
	// approvals and recoveries.
	Write
	// Own: the chat's creator, or an owner; may share it.
	Own
)

// String is the level's name as grants and the API spell it.
func (l Level) String() string {
	switch l {
	case Read:
		return "read"
	case Write:
		return "write"
	case Own:
		return "own"
	}
	return "none"
}

// ParseLevel reads a grant's level: read or write.
func ParseLevel(s string) (Level, error) {
	switch s {
	case "read":
		return Read, nil
	case "write", "read-write", "rw":
		return Write, nil
	}
	return None, fmt.Errorf("%w: a grant is read or write, not %q", ErrBadInput, s)
}

// Errors of this package.
var (
	ErrNotFound = errors.New("no such person")
	ErrExists   = errors.New("a person of that name exists")
	ErrBadInput = errors.New("bad input")
)

// Person is someone who may use Mirror. Tokens are never kept: only their
// SHA-256, so a copy of the database does not let anyone in.
type Person struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	Role     string    `json:"role"`
	Telegram []int64   `json:"telegram,omitempty"`
	Created  time.Time `json:"created"`
	// First marks the first owner, whose token is the access token.
	First bool `json:"first,omitempty"`
	// Tokens counts the person's browser tokens (the first owner's
	// access token not included).
	Tokens int `json:"tokens"`
	// Revoked says the person was revoked: no token or Telegram link of
	// theirs works any more; their chats stay (owners still see them).
	Revoked bool `json:"revoked,omitempty"`
}

// IsOwner reports whether p has the owner role.
func (p Person) IsOwner() bool { return p.Role == RoleOwner && !p.Revoked }

// record is a Person as stored.
type record struct {
	Person
	Hashes []string `json:"hashes,omitempty"` // hex SHA-256 of each token
}

var (
	bucketPeople = []byte("people") // p/<id> → record; n/<name> → id; t/<hash> → id; tg/<user> → id; first → id
	bucketGrants = []byte("grants") // o/<chat> → creator id; g/<chat>/<person> → level
)

// MaxName bounds a person's name.
const MaxName = 64

// Registry is the people of one database. Its hot reads (a person, a
// token's or Telegram user's person, a chat's creator, a grant) answer from
// the database's cache (cache.go), which every write of those keys keeps
// exactly the store's; the rest read the database. `mirror person` writes
// the file only while no gateway holds it open.
type Registry struct {
	db   *bolt.DB
	c    *cache
	rep  *replica // cluster mode (Replicate): the cluster's log of the registry's writes
	main [32]byte // SHA-256 of the access token, which is the first owner's
	now  func() time.Time
}

// Open prepares the registry's buckets and the first owner; mainToken is the
// access token (auth.token_env or data_dir/token), which speaks for the
// first owner. An empty one is allowed for tools that only manage people.
func Open(db *bolt.DB, mainToken string) (*Registry, error) {
	r := &Registry{db: db, c: cacheFor(db), now: time.Now}
	if mainToken != "" {
		r.main = sha256.Sum256([]byte(mainToken))
	}
	err := r.updateDB(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketGrants); err != nil {
			return err
		}
		raw, err := tx.CreateBucketIfNotExists(bucketPeople)
		if err != nil {
			return err
		}
		if raw.Get([]byte("first")) != nil {
			return nil
		}
		bk := marking{kv: raw, tx: tx}
		p := record{Person: Person{ID: newID(), Name: "owner", Role: RoleOwner, First: true, Created: r.now().UTC()}}
		if bk.Get(nameKey(p.Name)) != nil {
			return fmt.Errorf("people: a person named %q exists but no first owner is recorded", p.Name)
		}
		if err := put(bk, p); err != nil {
			return err
		}
		return bk.Put([]byte("first"), []byte(p.ID))
	})
	if err != nil {
		return nil, fmt.Errorf("people: %w", err)
	}
	return r, nil
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "p_" + hex.EncodeToString(b[:])
}

func nameKey(name string) []byte  { return []byte("n/" + strings.ToLower(name)) }
func hashKey(h string) []byte     { return []byte("t/" + h) }
func tgKey(user int64) []byte     { return []byte("tg/" + strconv.FormatInt(user, 10)) }
func personKey(id string) []byte  { return []byte("p/" + id) }
func ownerKey(chat string) []byte { return []byte("o/" + chat) }
func grantKey(chat, person string) []byte {
	return []byte("g/" + chat + "/" + person)
}

func hashOf(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

func put(bk kv, p record) error {
	p.Tokens = len(p.Hashes)
	v, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if err := bk.Put(personKey(p.ID), v); err != nil {
		return err
	}
	return bk.Put(nameKey(p.Name), []byte(p.ID))
}

func get(bk kv, id string) (record, bool) {
	var p record
	v := bk.Get(personKey(id))
	if v == nil || json.Unmarshal(v, &p) != nil {
		return record{}, false
	}
	return p, true
}

// CheckName refuses a name that is empty, too long, or holds anything but
// letters, digits, '-', '_' and '.': a name is typed on command lines and
// printed to terminals.
func CheckName(name string) error {
	if name == "" || utf8.RuneCountInString(name) > MaxName {
		return fmt.Errorf("%w: a name is 1 to %d characters", ErrBadInput, MaxName)
	}
	for _, c := range name {
		if !unicode.IsLetter(c) && !unicode.IsDigit(c) && c != '-' && c != '_' && c != '.' {
			return fmt.Errorf("%w: a name holds letters, digits, '-', '_' and '.' only, not %q", ErrBadInput, c)
		}
	}
	return nil
}

// Add creates a person with role (RoleMember when empty) and returns them
// with a new token, shown this once.
func (r *Registry) Add(name, role string) (Person, string, error) {
	if role == "" {
		role = RoleMember
	}
	if role != RoleOwner && role != RoleMember {
		return Person{}, "", fmt.Errorf("%w: a role is owner or member, not %q", ErrBadInput, role)
	}
	if err := CheckName(name); err != nil {
		return Person{}, "", err
	}
	token := newToken()
	var out Person
	err := r.update(func(b buckets) error {
		bk := b.people
		if bk.Get(nameKey(name)) != nil {
			return fmt.Errorf("%q: %w", name, ErrExists)
		}
		p := record{Person: Person{ID: newID(), Name: name, Role: role, Created: r.now().UTC()}, Hashes: []string{hashOf(token)}}
		if err := put(bk, p); err != nil {
			return err
		}
		out = p.Person
		out.Tokens = 1
		return bk.Put(hashKey(p.Hashes[0]), []byte(p.ID))
	})
	return out, token, err
}

func newToken() string {
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	return base64.RawURLEncoding.EncodeToString(raw[:])
}

// List returns every person, the first owner first, then by name.
func (r *Registry) List() ([]Person, error) {
	var out []Person
	err := r.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketPeople).Cursor()
		for k, v := c.Seek([]byte("p/")); k != nil && strings.HasPrefix(string(k), "p/"); k, v = c.Next() {
			var p record
			if json.Unmarshal(v, &p) == nil {
				out = append(out, p.Person)
			}
		}
		return nil
	})
	slices.SortFunc(out, func(a, b Person) int {
		if a.First != b.First {
			if a.First {
				return -1
			}
			return 1
		}
		return strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name))
	})
	return out, err
}

// ByName returns the person of that name (names are matched ignoring case).
func (r *Registry) ByName(name string) (Person, error) {
	var out Person
	err := r.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketPeople)
		id := bk.Get(nameKey(name))
		p, ok := get(bk, string(id))
		if id == nil || !ok {
			return fmt.Errorf("%q: %w", name, ErrNotFound)
		}
		out = p.Person
		return nil
	})
	return out, err
}

// Get returns the person with that id.
func (r *Registry) Get(id string) (Person, error) {
	p, ok := r.person(id)
	if !ok {
		return Person{}, fmt.Errorf("%s: %w", id, ErrNotFound)
	}
	return p, nil
}

// person returns the person with that id, from the cache or else the
// database: a copy the caller may change.
func (r *Registry) person(id string) (Person, bool) {
	p, ok, gen := r.c.person(id)
	if !ok {
		var rec record
		_ = r.db.View(func(tx *bolt.Tx) error {
			rec, ok = get(tx.Bucket(bucketPeople), id)
			return nil
		})
		if !ok {
			return Person{}, false
		}
		p = rec.Person
		r.c.keepPerson(gen, p)
	}
	p.Telegram = slices.Clone(p.Telegram) // the cache's stays the cache's
	return p, true
}

// firstID is the first owner's id ("" before Open made them).
func (r *Registry) firstID() string {
	id, gen := r.c.firstID()
	if id == "" {
		_ = r.db.View(func(tx *bolt.Tx) error {
			id = string(tx.Bucket(bucketPeople).Get([]byte("first")))
			return nil
		})
		if id != "" {
			r.c.keepFirst(gen, id)
		}
	}
	return id
}

// First returns the first owner, whose token is the access token.
func (r *Registry) First() (Person, error) {
	p, ok := r.person(r.firstID())
	if !ok {
		return Person{}, fmt.Errorf("first owner: %w", ErrNotFound)
	}
	return p, nil
}

// ByToken returns the person a token speaks for; false for a token that
// speaks for nobody (or for a revoked person). The access token is the
// first owner's.
func (r *Registry) ByToken(token string) (Person, bool) {
	if token == "" {
		return Person{}, false
	}
	var buf [64]byte // a token is 43 bytes: hashed without an allocation
	h := sha256.Sum256(append(buf[:0], token...))
	if r.main != [32]byte{} && h == r.main {
		// Cluster mode: the first owner is the cluster's once this node
		// joined (a chat created before would name this file's own).
		r.awaitJoin()
		p, err := r.First()
		return p, err == nil
	}
	out, ok, known := r.byHash(h)
	if !known && r.caughtUpOnMiss() {
		// Cluster mode: a token made on another node a moment ago.
		out, ok, _ = r.byHash(h)
	}
	return out, ok
}

// byHash looks a token's hash up; known says whether any person had it.
// A hash nobody has is not kept (anyone may present any token).
func (r *Registry) byHash(h [32]byte) (out Person, ok, known bool) {
	id, known, gen := r.c.token(h)
	if !known {
		key := hashKey(hex.EncodeToString(h[:]))
		_ = r.db.View(func(tx *bolt.Tx) error {
			id = string(tx.Bucket(bucketPeople).Get(key))
			return nil
		})
		if id == "" {
			return Person{}, false, false
		}
		r.c.keepToken(gen, h, id)
	}
	p, found := r.person(id)
	return p, found && !p.Revoked, true
}

// ByTelegram returns the person a Telegram user is linked to.
func (r *Registry) ByTelegram(user int64) (Person, bool) {
	out, ok, known := r.byTelegram(user)
	if !known && r.caughtUpOnMiss() {
		// Cluster mode: a pairing approved on another node a moment ago.
		out, ok, _ = r.byTelegram(user)
	}
	return out, ok
}

// byTelegram looks a Telegram user up; known says whether the user is
// linked to anyone. A user linked to nobody is not kept.
func (r *Registry) byTelegram(user int64) (out Person, ok, known bool) {
	id, known, gen := r.c.tgUser(user)
	if !known {
		_ = r.db.View(func(tx *bolt.Tx) error {
			if bk := tx.Bucket(bucketPeople); bk != nil {
				id = string(bk.Get(tgKey(user)))
			}
			return nil
		})
		if id == "" {
			return Person{}, false, false
		}
		r.c.keepTgUser(gen, user, id)
	}
	p, found := r.person(id)
	return p, found && !p.Revoked, true
}

// ByTelegramTx is ByTelegram inside a transaction.
func ByTelegramTx(tx *bolt.Tx, user int64) (Person, bool) {
	bk := tx.Bucket(bucketPeople)
	if bk == nil {
		return Person{}, false
	}
	id := bk.Get(tgKey(user))
	if id == nil {
		return Person{}, false
	}
	p, found := get(bk, string(id))
	return p.Person, found && !p.Revoked
}

// Link links a Telegram user to the person of that name; a user linked to
// someone else moves to them.
func (r *Registry) Link(name string, user int64) (Person, error) {
	var out Person
	err := r.update(func(b buckets) (err error) {
		out, err = link(b.people, name, user, false, r.now())
		return err
	})
	return out, err
}

// LinkTx links user to the person named name, inside tx (replicated when
// tx's database is a cluster node's, see Replicate).
func LinkTx(tx *bolt.Tx, name string, user int64, now time.Time) (Person, error) {
	return linkTx(tx, name, user, false, now)
}

// LinkNewTx links user to the person named name, creating them as a member
// when nobody has that name (an approved Telegram pairing); replicated
// like LinkTx.
func LinkNewTx(tx *bolt.Tx, name string, user int64, now time.Time) (Person, error) {
	return linkTx(tx, name, user, true, now)
}

func linkTx(tx *bolt.Tx, name string, user int64, create bool, now time.Time) (Person, error) {
	var out Person
	err := updateTx(tx, func(b buckets) (err error) {
		out, err = link(b.people, name, user, create, now)
		return err
	})
	return out, err
}

func link(bk kv, name string, user int64, create bool, now time.Time) (Person, error) {
	if user == 0 {
		return Person{}, fmt.Errorf("%w: a Telegram user id is a non-zero number", ErrBadInput)
	}
	id := bk.Get(nameKey(name))
	var p record
	switch {
	case id != nil:
		var ok bool
		if p, ok = get(bk, string(id)); !ok {
			return Person{}, fmt.Errorf("%q: %w", name, ErrNotFound)
		}
		if p.Revoked {
			return Person{}, fmt.Errorf("%w: %q is revoked", ErrBadInput, name)
		}
	case create:
		if err := CheckName(name); err != nil {
			return Person{}, err
		}
		p = record{Person: Person{ID: newID(), Name: name, Role: RoleMember, Created: now.UTC()}}
	default:
		return Person{}, fmt.Errorf("%q: %w", name, ErrNotFound)
	}
	if old := bk.Get(tgKey(user)); old != nil && string(old) != p.ID {
		if o, ok := get(bk, string(old)); ok {
			o.Telegram = slices.DeleteFunc(o.Telegram, func(u int64) bool { return u == user })
			if err := put(bk, o); err != nil {
				return Person{}, err
			}
		}
	}
	if !slices.Contains(p.Telegram, user) {
		p.Telegram = append(p.Telegram, user)
	}
	if err := put(bk, p); err != nil {
		return Person{}, err
	}
	p.Tokens = len(p.Hashes)
	return p.Person, bk.Put(tgKey(user), []byte(p.ID))
}

// Revoke takes every token and Telegram link of the person of that name
// away. The first owner cannot be revoked (their token is the access token:
// change auth.token_env or data_dir/token instead).
func (r *Registry) Revoke(name string) (Person, error) {
	var out Person
	err := r.update(func(b buckets) error {
		bk := b.people
		id := bk.Get(nameKey(name))
		p, ok := get(bk, string(id))
		if id == nil || !ok {
			return fmt.Errorf("%q: %w", name, ErrNotFound)
		}
		if p.First {
			return fmt.Errorf("%w: the first owner holds the access token and cannot be revoked", ErrBadInput)
		}
		for _, h := range p.Hashes {
			if err := bk.Delete(hashKey(h)); err != nil {
				return err
			}
		}
		for _, u := range p.Telegram {
			if err := bk.Delete(tgKey(u)); err != nil {
				return err
			}
		}
		p.Hashes, p.Telegram, p.Revoked = nil, nil, true
		out = p.Person
		out.Tokens = 0
		return put(bk, p)
	})
	return out, err
}

// SetCreatorTx records, inside the transaction that creates the chat, who
// created it.
func SetCreatorTx(tx *bolt.Tx, chat, person string) error {
	bk, err := tx.CreateBucketIfNotExists(bucketGrants)
	if err != nil {
		return err
	}
	return marking{kv: bk, tx: tx}.Put(ownerKey(chat), []byte(person))
}

// DropChatTx forgets a chat's creator and grants (the chat is removed).
func DropChatTx(tx *bolt.Tx, chat string) error {
	bk := tx.Bucket(bucketGrants)
	if bk == nil {
		return nil
	}
	var keys [][]byte
	c := bk.Cursor()
	prefix := "g/" + chat + "/"
	for k, _ := c.Seek([]byte(prefix)); k != nil && strings.HasPrefix(string(k), prefix); k, _ = c.Next() {
		keys = append(keys, slices.Clone(k))
	}
	keys = append(keys, ownerKey(chat))
	for _, k := range keys {
		if err := (marking{kv: bk, tx: tx}).Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// Creator returns the id of the person who created chat; a chat created
// before people existed is the first owner's.
func (r *Registry) Creator(chat string) string {
	if id := r.creator(chat); id != "" {
		return id
	}
	return r.firstID()
}

// creator is the creator recorded for chat, "" when none is.
func (r *Registry) creator(chat string) string {
	id, ok, gen := r.c.creator(chat)
	if !ok {
		_ = r.db.View(func(tx *bolt.Tx) error {
			if bk := tx.Bucket(bucketGrants); bk != nil {
				id = string(bk.Get(ownerKey(chat)))
			}
			return nil
		})
		r.c.keepCreator(gen, chat, id)
	}
	return id
}

// NoteOwner is the id of the person a memory note belongs to: the person
// its trailer names (person); for a note written before notes named one,
// the creator of the chat it names, which is the first owner for a chat
// the registry never saw or a note that names no chat. No note is
// without an owner, so none is offered everywhere.
func (r *Registry) NoteOwner(person, chat string) string {
	if person != "" {
		return person
	}
	return r.Creator(chat)
}

// Access returns how far p reaches into chat: owners reach every chat, its
// creator owns it, a grant gives read or write, anyone else nothing.
func (r *Registry) Access(p Person, chat string) Level {
	if p.ID == "" || p.Revoked {
		return None
	}
	if p.IsOwner() {
		return Own
	}
	if r.creator(chat) == p.ID {
		return Own
	}
	v, ok, gen := r.c.grant(chat, p.ID)
	if !ok {
		_ = r.db.View(func(tx *bolt.Tx) error {
			if bk := tx.Bucket(bucketGrants); bk != nil {
				v = string(bk.Get(grantKey(chat, p.ID)))
			}
			return nil
		})
		r.c.keepGrant(gen, chat, p.ID, v)
	}
	lvl, _ := ParseLevel(v)
	return lvl
}

// Grant is one chat shared with one person.
type Grant struct {
	Chat   string `json:"chat"`
	Person string `json:"person"` // id
	Name   string `json:"name"`
	Level  string `json:"level"` // read or write
}

// Share gives the person of that name level (Read or Write) on chat;
// None takes the grant away.
func (r *Registry) Share(chat, name string, level Level) (Grant, error) {
	var g Grant
	err := r.update(func(b buckets) error {
		pb, gb := b.people, b.grants
		id := pb.Get(nameKey(name))
		p, ok := get(pb, string(id))
		if id == nil || !ok {
			return fmt.Errorf("%q: %w", name, ErrNotFound)
		}
		g = Grant{Chat: chat, Person: p.ID, Name: p.Name, Level: level.String()}
		if level == None {
			return gb.Delete(grantKey(chat, p.ID))
		}
		if level != Read && level != Write {
			return fmt.Errorf("%w: a grant is read or write", ErrBadInput)
		}
		return gb.Put(grantKey(chat, p.ID), []byte(level.String()))
	})
	return g, err
}

// Grants lists who chat is shared with.
func (r *Registry) Grants(chat string) ([]Grant, error) {
	var out []Grant
	err := r.db.View(func(tx *bolt.Tx) error {
		pb, gb := tx.Bucket(bucketPeople), tx.Bucket(bucketGrants)
		c := gb.Cursor()
		prefix := "g/" + chat + "/"
		for k, v := c.Seek([]byte(prefix)); k != nil && strings.HasPrefix(string(k), prefix); k, v = c.Next() {
			id := strings.TrimPrefix(string(k), prefix)
			p, _ := get(pb, id)
			out = append(out, Grant{Chat: chat, Person: id, Name: p.Name, Level: string(v)})
		}
		return nil
	})
	return out, err
}

// usageKey keys a person's tokens of one UTC day: u/<day>/<person>.
func usageKey(day, person string) []byte { return []byte("u/" + day + "/" + person) }

// Day is the UTC day t falls in, as usage is kept by.
func Day(t time.Time) string { return t.UTC().Format("2006-01-02") }

// AddUsageTx adds tokens to the person's usage of day, inside the
// transaction that records the turn that used them. The cache holds no
// usage counter, so nothing is marked.
func AddUsageTx(tx *bolt.Tx, person, day string, tokens int64) error {
	if person == "" || tokens <= 0 {
		return nil
	}
	bk, err := tx.CreateBucketIfNotExists(bucketPeople)
	if err != nil {
		return err
	}
	k := usageKey(day, person)
	n, _ := strconv.ParseInt(string(bk.Get(k)), 10, 64)
	return bk.Put(k, []byte(strconv.FormatInt(n+tokens, 10)))
}

// Usage returns the tokens person used on day.
func (r *Registry) Usage(person, day string) int64 {
	var n int64
	_ = r.db.View(func(tx *bolt.Tx) error {
		n, _ = strconv.ParseInt(string(tx.Bucket(bucketPeople).Get(usageKey(day, person))), 10, 64)
		return nil
	})
	return n
}

// DayUsage is one person's tokens of one day, for the Monitor.
type DayUsage struct {
	Person string `json:"person"` // id
	Name   string `json:"name"`
	Role   string `json:"role"`
	Tokens int64  `json:"tokens"`
}

// UsageOn returns every person's tokens of day, most first.
func (r *Registry) UsageOn(day string) ([]DayUsage, error) {
	var out []DayUsage
	err := r.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketPeople)
		c := bk.Cursor()
		prefix := "u/" + day + "/"
		for k, v := c.Seek([]byte(prefix)); k != nil && strings.HasPrefix(string(k), prefix); k, v = c.Next() {
			id := strings.TrimPrefix(string(k), prefix)
			n, _ := strconv.ParseInt(string(v), 10, 64)
			p, _ := get(bk, id)
			out = append(out, DayUsage{Person: id, Name: p.Name, Role: p.Role, Tokens: n})
		}
		return nil
	})
	slices.SortFunc(out, func(a, b DayUsage) int {
		if a.Tokens != b.Tokens {
			if a.Tokens > b.Tokens {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, err
}
