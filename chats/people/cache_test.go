package people

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// probe is what the cached reads are asked after each write.
type probe struct {
	tokens []string
	users  []int64
	chats  []string
}

// answers is what r's reads say, one line each.
func (q *probe) answers(r *Registry, db *bolt.DB) string {
	var b strings.Builder
	people := q.people(db)
	for _, p := range people {
		got, err := r.Get(p.ID)
		fmt.Fprintf(&b, "get %s: %+v %v\n", p.ID, got, err)
	}
	first, err := r.First()
	fmt.Fprintf(&b, "first: %+v %v\n", first, err)
	for _, tok := range q.tokens {
		p, ok := r.ByToken(tok)
		fmt.Fprintf(&b, "token %.6s: %+v %v\n", tok, p, ok)
	}
	for _, u := range q.users {
		p, ok := r.ByTelegram(u)
		fmt.Fprintf(&b, "telegram %d: %+v %v\n", u, p, ok)
	}
	for _, c := range q.chats {
		fmt.Fprintf(&b, "creator %s: %s\n", c, r.Creator(c))
		for _, p := range people {
			fmt.Fprintf(&b, "access %s %s: %v\n", p.Name, c, r.Access(p, c))
		}
	}
	return b.String()
}

// people are every person stored, read from the database.
func (q *probe) people(db *bolt.DB) []Person {
	var out []Person
	_ = db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketPeople).Cursor()
		for k, _ := c.Seek([]byte("p/")); k != nil && strings.HasPrefix(string(k), "p/"); k, _ = c.Next() {
			p, _ := get(tx.Bucket(bucketPeople), string(k[2:]))
			out = append(out, p.Person)
		}
		return nil
	})
	return out
}

// truth is what the reads say computed from the database alone, in one
// transaction, as the registry answered before it had a cache.
func (q *probe) truth(main string, db *bolt.DB) string {
	var b strings.Builder
	people := q.people(db)
	_ = db.View(func(tx *bolt.Tx) error {
		pb, gb := tx.Bucket(bucketPeople), tx.Bucket(bucketGrants)
		byID := func(id string) (Person, bool) {
			p, ok := get(pb, id)
			return p.Person, ok
		}
		for _, p := range people {
			got, ok := byID(p.ID)
			var err error
			if !ok {
				got, err = Person{}, fmt.Errorf("%s: %w", p.ID, ErrNotFound)
			}
			fmt.Fprintf(&b, "get %s: %+v %v\n", p.ID, got, err)
		}
		firstID := string(pb.Get([]byte("first")))
		first, ok := byID(firstID)
		var ferr error
		if !ok {
			first, ferr = Person{}, fmt.Errorf("first owner: %w", ErrNotFound)
		}
		fmt.Fprintf(&b, "first: %+v %v\n", first, ferr)
		for _, tok := range q.tokens {
			var p Person
			ok := false
			if tok == main {
				p, ok = first, ferr == nil
			} else if id := pb.Get(hashKey(hashOf(tok))); id != nil {
				p, ok = byID(string(id))
				ok = ok && !p.Revoked
			}
			fmt.Fprintf(&b, "token %.6s: %+v %v\n", tok, p, ok)
		}
		for _, u := range q.users {
			p, ok := ByTelegramTx(tx, u)
			fmt.Fprintf(&b, "telegram %d: %+v %v\n", u, p, ok)
		}
		for _, c := range q.chats {
			creator := string(gb.Get(ownerKey(c)))
			if creator == "" {
				fmt.Fprintf(&b, "creator %s: %s\n", c, firstID)
			} else {
				fmt.Fprintf(&b, "creator %s: %s\n", c, creator)
			}
			for _, p := range people {
				lvl := None
				switch {
				case p.Revoked:
				case p.IsOwner(), creator == p.ID:
					lvl = Own
				default:
					lvl, _ = ParseLevel(string(gb.Get(grantKey(c, p.ID))))
				}
				fmt.Fprintf(&b, "access %s %s: %v\n", p.Name, c, lvl)
			}
		}
		return nil
	})
	return b.String()
}

// check compares r's answers with the database's, twice: the first read
// after a write (which a stale cache would answer wrong), then again from
// a warm cache.
func (q *probe) check(t *testing.T, what string, r *Registry, db *bolt.DB) {
	t.Helper()
	for _, pass := range []string{"first read", "warm read"} {
		want := q.truth(testToken, db)
		if got := q.answers(r, db); got != want {
			t.Fatalf("after %s (%s): the registry answers\n%s\nthe database says\n%s", what, pass, got, want)
		}
	}
}

// TestCacheSeesEveryWrite: after each kind of write the registry makes
// (its own, and those made inside another package's transaction), every
// cached read, warmed before the write, answers as the database does.
func TestCacheSeesEveryWrite(t *testing.T) {
	r, db := openTest(t, testToken)
	q := &probe{tokens: []string{testToken, "not-a-token"}, users: []int64{7, 8}, chats: []string{"c1", "c2"}}
	q.check(t, "open", r, db)
	var alice, bob Person
	steps := []struct {
		name  string
		write func() error
		want  func() bool // the write's effect, as a read sees it
	}{
		{"add alice", func() (err error) {
			var tok string
			alice, tok, err = r.Add("alice", "")
			q.tokens = append(q.tokens, tok)
			return err
		}, func() bool { _, ok := r.ByToken(q.tokens[2]); return ok }},
		{"add bob, an owner", func() (err error) {
			var tok string
			bob, tok, err = r.Add("bob", RoleOwner)
			q.tokens = append(q.tokens, tok)
			return err
		}, func() bool { p, _ := r.Get(bob.ID); return p.IsOwner() }},
		{"create c1 (another package's transaction)", func() error {
			return db.Update(func(tx *bolt.Tx) error { return SetCreatorTx(tx, "c1", alice.ID) })
		}, func() bool { return r.Creator("c1") == alice.ID }},
		{"share c2 with alice", func() error { _, err := r.Share("c2", "alice", Read); return err },
			func() bool { return r.Access(alice, "c2") == Read }},
		{"alice writes c2", func() error { _, err := r.Share("c2", "alice", Write); return err },
			func() bool { return r.Access(alice, "c2") == Write }},
		{"link telegram 7 to alice", func() error { _, err := r.Link("alice", 7); return err },
			func() bool { p, ok := r.ByTelegram(7); return ok && p.ID == alice.ID }},
		{"move telegram 7 to bob (in another package's transaction)", func() error {
			return db.Update(func(tx *bolt.Tx) error { _, err := LinkTx(tx, "bob", 7, time.Now()); return err })
		}, func() bool {
			p, ok := r.ByTelegram(7)
			a, _ := r.Get(alice.ID)
			return ok && p.ID == bob.ID && len(a.Telegram) == 0
		}},
		{"pair telegram 8 as a new person", func() error {
			return db.Update(func(tx *bolt.Tx) error { _, err := LinkNewTx(tx, "tg-8", 8, time.Now()); return err })
		}, func() bool { p, ok := r.ByTelegram(8); return ok && p.Name == "tg-8" }},
		{"unshare c2", func() error { _, err := r.Share("c2", "alice", None); return err },
			func() bool { return r.Access(alice, "c2") == None }},
		{"revoke bob", func() error { _, err := r.Revoke("bob"); return err },
			func() bool { _, tok := r.ByToken(q.tokens[3]); _, tg := r.ByTelegram(7); return !tok && !tg }},
		{"remove c1", func() error { return db.Update(func(tx *bolt.Tx) error { return DropChatTx(tx, "c1") }) },
			func() bool { f, _ := r.First(); return r.Creator("c1") == f.ID && r.Access(alice, "c1") == None }},
	}
	for _, s := range steps {
		q.check(t, "before "+s.name, r, db) // warms the cache
		if err := s.write(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if !s.want() {
			t.Fatalf("%s: the very next read does not see it", s.name)
		}
		q.check(t, s.name, r, db)
	}
}

// TestCacheSeesReplicatedWrites: every kind of write made on node a is
// seen by node b's cached reads, warmed before, once b applied it from
// the log (b's follower, and b's catch-up on a miss).
func TestCacheSeesReplicatedWrites(t *testing.T) {
	l := newMemLog()
	a, adb := replicaOn(t, l)
	b, bdb := replicaOn(t, l)
	q := &probe{tokens: []string{testToken}, users: []int64{7}, chats: []string{"c1"}}
	// applied waits for b to be where a is, then compares b with its store.
	applied := func(what string) {
		t.Helper()
		want, _ := a.applied()
		eventually(t, what+" applied on b", func() bool { pos, _ := b.applied(); return pos == want })
		q.check(t, what, b, bdb)
	}
	alice, tok, err := a.Add("alice", "")
	if err != nil {
		t.Fatal(err)
	}
	q.tokens = append(q.tokens, tok)
	// b asked first: its miss catches up.
	if p, ok := b.ByToken(tok); !ok || p.ID != alice.ID {
		t.Fatalf("a's new token on b: %+v %v", p, ok)
	}
	applied("add alice")
	// The chat's creator travels in the chat's record: both nodes write it.
	for _, db := range []*bolt.DB{adb, bdb} {
		if err := db.Update(func(tx *bolt.Tx) error { return SetCreatorTx(tx, "c1", alice.ID) }); err != nil {
			t.Fatal(err)
		}
	}
	applied("create c1")
	for _, s := range []struct {
		name  string
		write func() error
		seen  func() bool
	}{
		{"share", func() error { _, err := a.Share("c2", "alice", Write); return err },
			func() bool { return b.Access(alice, "c2") == Write }},
		{"link", func() error {
			return adb.Update(func(tx *bolt.Tx) error { _, err := LinkTx(tx, "alice", 7, time.Now()); return err })
		}, func() bool { p, ok := b.ByTelegram(7); return ok && p.ID == alice.ID }},
		{"promote (a person's record rewritten)", func() error {
			return a.update(func(bk buckets) error {
				p, _ := get(bk.people, alice.ID)
				p.Role = RoleOwner
				return put(bk.people, p)
			})
		}, func() bool { p, _ := b.Get(alice.ID); return p.IsOwner() && b.Access(p, "c3") == Own }},
		{"revoke", func() error { _, err := a.Revoke("alice"); return err },
			func() bool { _, ok := b.ByToken(tok); return !ok }},
	} {
		q.chats = append(q.chats, "c2", "c3")
		q.check(t, "before "+s.name, b, bdb) // warms b's cache
		if err := s.write(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		want, _ := a.applied()
		eventually(t, s.name+" applied on b", func() bool { pos, _ := b.applied(); return pos == want })
		if !s.seen() {
			t.Fatalf("%s on a: b's first read after applying it does not see it", s.name)
		}
		q.check(t, s.name, b, bdb)
		q.chats = q.chats[:1]
	}
}

// TestCacheFillRacingAWrite: a read that missed and read the database
// before a write committed does not keep what it read, whether it tries
// while the write's transaction is open or after it committed; a
// transaction that rolls back leaves the cache answering the store.
func TestCacheFillRacingAWrite(t *testing.T) {
	r, db := openTest(t, testToken)
	alice, _, _ := r.Add("alice", "")
	first, _ := r.First()
	if got := r.Creator("c1"); got != first.ID {
		t.Fatalf("creator before %s", got)
	}
	setCreator := func(during func()) {
		t.Helper()
		err := db.Update(func(tx *bolt.Tx) error {
			if err := SetCreatorTx(tx, "c1", alice.ID); err != nil {
				return err
			}
			during()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Kept while the write is open: refused, the key is being written.
	setCreator(func() { r.c.keepCreator(r.c.generation(), "c1", first.ID) })
	if got := r.Creator("c1"); got != alice.ID {
		t.Fatalf("a value read before the write, kept during it, answers: %s", got)
	}
	// Read before the write, kept after it committed: refused.
	_ = db.Update(func(tx *bolt.Tx) error { return DropChatTx(tx, "c1") })
	gen := r.c.generation()
	setCreator(func() {})
	r.c.keepCreator(gen, "c1", "")
	if got := r.Creator("c1"); got != alice.ID {
		t.Fatalf("a value read before the write, kept after it, answers: %s", got)
	}
	// A foreign transaction that marks and rolls back.
	errAbort := errors.New("abort")
	err := db.Update(func(tx *bolt.Tx) error {
		if err := SetCreatorTx(tx, "c1", first.ID); err != nil {
			return err
		}
		if _, err := LinkTx(tx, "alice", 9, time.Now()); err != nil {
			return err
		}
		return errAbort
	})
	if !errors.Is(err, errAbort) {
		t.Fatal(err)
	}
	if got := r.Creator("c1"); got != alice.ID {
		t.Fatalf("after a rolled back write: %s", got)
	}
	if _, ok := r.ByTelegram(9); ok {
		t.Fatal("a rolled back link is seen")
	}
	// The registry's own write that marks and fails ends its marks at
	// once (and the rolled back one's before it): what they marked is
	// cached again.
	err = r.updateDB(func(tx *bolt.Tx) error {
		if err := (marking{kv: tx.Bucket(bucketPeople), tx: tx}).Put(personKey(alice.ID), []byte("{}")); err != nil {
			return err
		}
		return errAbort
	})
	if !errors.Is(err, errAbort) {
		t.Fatal(err)
	}
	if p, err := r.Get(alice.ID); err != nil || p.Name != "alice" {
		t.Fatalf("after a failed write: %+v %v", p, err)
	}
	r.c.mu.RLock()
	_, kept := r.c.persons[alice.ID]
	r.c.mu.RUnlock()
	if !kept {
		t.Fatal("a person read after failed writes is not cached")
	}
}

// TestCacheCopies: what a read returns is the caller's: changing it
// changes nothing another read sees.
func TestCacheCopies(t *testing.T) {
	r, _ := openTest(t, testToken)
	if _, _, err := r.Add("alice", ""); err != nil {
		t.Fatal(err)
	}
	p, err := r.Link("alice", 7)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // a miss, then a hit
		got, _ := r.Get(p.ID)
		got.Telegram[0] = 99
		got.Role = RoleOwner
		tg, _ := r.ByTelegram(7)
		tg.Telegram[0] = 98
	}
	if got, _ := r.Get(p.ID); got.Telegram[0] != 7 || got.Role != RoleMember {
		t.Fatalf("a caller's change reached the cache: %+v", got)
	}
}

// TestCacheBounded: reads of many chats keep a bounded number of them.
func TestCacheBounded(t *testing.T) {
	r, _ := openTest(t, testToken)
	alice, _, _ := r.Add("alice", "")
	for i := range maxChats + 100 {
		c := fmt.Sprintf("c_%d", i)
		r.Creator(c)
		r.Access(alice, c)
	}
	r.c.mu.RLock()
	defer r.c.mu.RUnlock()
	if len(r.c.creators) > maxChats || len(r.c.grants) > maxChats {
		t.Fatalf("%d creators, %d grants kept, bound %d", len(r.c.creators), len(r.c.grants), maxChats)
	}
}

// TestCacheOneDatabaseOneCache: two registries of one database (the
// gateway's, and one a tool opened) see each other's writes.
func TestCacheOneDatabaseOneCache(t *testing.T) {
	r, db := openTest(t, testToken)
	r2, err := Open(db, "")
	if err != nil {
		t.Fatal(err)
	}
	_, tok, _ := r.Add("alice", "")
	if p, ok := r2.ByToken(tok); !ok || p.Name != "alice" {
		t.Fatal("warm")
	}
	if _, err := r2.Revoke("alice"); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.ByToken(tok); ok {
		t.Fatal("a revocation through another registry of the database is not seen")
	}
}

// TestCacheRace: readers hammer the cached reads while a writer changes
// what they read; each write is seen by the writer's very next read, and
// at the end every read answers as the database does. Run with -race.
func TestCacheRace(t *testing.T) {
	r, db := openTest(t, testToken)
	db.NoSync = true // many small commits; durability is not what is tested
	alice, atok, _ := r.Add("alice", "")
	bob, _, _ := r.Add("bob", "")
	dave, _, _ := r.Add("dave", "")
	q := &probe{tokens: []string{testToken, atok}, users: []int64{7}, chats: []string{"c0", "c1", "c2"}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				c := q.chats[n%3]
				r.Creator(c)
				r.Access(alice, c)
				r.Access(dave, c)
				_, _ = r.Get(alice.ID)
				r.ByToken(atok)
				r.ByTelegram(7)
				if i == 0 {
					_, _ = r.First()
				}
			}
		}()
	}
	fail := func(format string, args ...any) {
		cancel()
		wg.Wait()
		t.Fatalf(format, args...)
	}
	levels := []Level{Read, Write, None}
	for n := range 200 {
		c := q.chats[n%3]
		lvl := levels[n%3]
		if _, err := r.Share(c, "dave", lvl); err != nil {
			fail("share: %v", err)
		}
		if got := r.Access(dave, c); got != lvl {
			fail("write %d: shared %v, read %v", n, lvl, got)
		}
		who := []Person{alice, bob}[n%2]
		if err := db.Update(func(tx *bolt.Tx) error { return SetCreatorTx(tx, c, who.ID) }); err != nil {
			fail("creator: %v", err)
		}
		if got := r.Creator(c); got != who.ID {
			fail("write %d: creator %s, read %s", n, who.ID, got)
		}
		owner := []string{"alice", "bob"}[n%2]
		if _, err := r.Link(owner, 7); err != nil {
			fail("link: %v", err)
		}
		if p, ok := r.ByTelegram(7); !ok || p.Name != owner {
			fail("write %d: linked to %s, read %+v", n, owner, p)
		}
	}
	const nt = "carol"
	_, ctok, _ := r.Add(nt, "")
	if _, ok := r.ByToken(ctok); !ok {
		fail("a new token is not seen")
	}
	if _, err := r.Revoke(nt); err != nil {
		fail("revoke: %v", err)
	}
	if _, ok := r.ByToken(ctok); ok {
		fail("a revoked token still speaks")
	}
	cancel()
	wg.Wait()
	q.check(t, "the race", r, db)
}
