package people

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func openTest(t testing.TB, main string) (*Registry, *bolt.DB) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "p.db"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	r, err := Open(db, main)
	if err != nil {
		t.Fatal(err)
	}
	return r, db
}

// TestAccessTable: who reaches which chat, at what level.
func TestAccessTable(t *testing.T) {
	r, db := openTest(t, "the-access-token-0123456789")
	first, err := r.First()
	if err != nil || !first.IsOwner() || !first.First {
		t.Fatalf("first owner %+v %v", first, err)
	}
	alice, _, _ := r.Add("alice", "")
	bob, _, _ := r.Add("bob", RoleMember)
	boss, _, _ := r.Add("boss", RoleOwner)
	err = db.Update(func(tx *bolt.Tx) error {
		if err := SetCreatorTx(tx, "c_alice", alice.ID); err != nil {
			return err
		}
		return SetCreatorTx(tx, "c_bob", bob.ID)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Share("c_alice", "bob", Read); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		who  Person
		chat string
		want Level
	}{
		{alice, "c_alice", Own},
		{alice, "c_bob", None},
		{bob, "c_alice", Read},
		{bob, "c_bob", Own},
		{boss, "c_alice", Own},
		{first, "c_bob", Own},
		{alice, "c_legacy", None}, // made before people: the first owner's
		{first, "c_legacy", Own},
		{Person{}, "c_alice", None},
	} {
		if got := r.Access(tc.who, tc.chat); got != tc.want {
			t.Errorf("%s on %s: %s, want %s", tc.who.Name, tc.chat, got, tc.want)
		}
	}
	if r.Creator("c_legacy") != first.ID {
		t.Fatal("a chat without a creator is not the first owner's")
	}
	if _, err := r.Share("c_alice", "bob", Write); err != nil || r.Access(bob, "c_alice") != Write {
		t.Fatalf("write grant: %v", err)
	}
	if _, err := r.Share("c_alice", "bob", None); err != nil || r.Access(bob, "c_alice") != None {
		t.Fatalf("grant taken away: %v", err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return DropChatTx(tx, "c_bob") }); err != nil || r.Access(bob, "c_bob") != None {
		t.Fatalf("dropped chat: %v", err)
	}
}

// TestTokensLinksAndRevoke: a token speaks for its person until revoked;
// the access token for the first owner; Telegram links move and go.
func TestTokensLinksAndRevoke(t *testing.T) {
	r, db := openTest(t, "the-access-token-0123456789")
	if p, ok := r.ByToken("the-access-token-0123456789"); !ok || !p.First {
		t.Fatal("the access token is not the first owner's")
	}
	alice, tok, err := r.Add("alice", "")
	if err != nil || alice.Role != RoleMember || alice.Tokens != 1 {
		t.Fatalf("add: %+v %v", alice, err)
	}
	if p, ok := r.ByToken(tok); !ok || p.ID != alice.ID {
		t.Fatal("alice's token")
	}
	for _, bad := range []string{"", "wrong", tok + "x"} {
		if _, ok := r.ByToken(bad); ok {
			t.Fatalf("token %q accepted", bad)
		}
	}
	for _, tc := range []struct{ name, role string }{{"alice", ""}, {"ALICE", ""}, {"", ""}, {"a b", ""}, {"x", "root"}, {"a/b", ""}} {
		if _, _, err := r.Add(tc.name, tc.role); err == nil {
			t.Errorf("add %q %q accepted", tc.name, tc.role)
		}
	}
	if _, err := r.Link("alice", 42); err != nil {
		t.Fatal(err)
	}
	if p, ok := r.ByTelegram(42); !ok || p.ID != alice.ID {
		t.Fatal("link")
	}
	bob, _, _ := r.Add("bob", "")
	if _, err := r.Link("bob", 42); err != nil {
		t.Fatal(err)
	}
	if p, _ := r.ByTelegram(42); p.ID != bob.ID {
		t.Fatal("the link did not move")
	}
	if a, _ := r.Get(alice.ID); len(a.Telegram) != 0 {
		t.Fatalf("alice keeps %v", a.Telegram)
	}
	// A pairing approved links to a new member, or to the named person.
	err = db.Update(func(tx *bolt.Tx) error {
		if p, err := LinkNewTx(tx, "tg-77", 77, time.Now()); err != nil || p.Role != RoleMember {
			return errors.Join(err, errors.New("new member"))
		}
		_, err := LinkNewTx(tx, "alice", 78, time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := r.ByTelegram(78); p.ID != alice.ID {
		t.Fatal("pairing to a named person")
	}
	if _, err := r.Revoke("owner"); !errors.Is(err, ErrBadInput) {
		t.Fatalf("revoke the first owner: %v", err)
	}
	if _, err := r.Revoke("alice"); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.ByToken(tok); ok {
		t.Fatal("a revoked token works")
	}
	if _, ok := r.ByTelegram(78); ok {
		t.Fatal("a revoked link works")
	}
	if a, _ := r.Get(alice.ID); !a.Revoked || r.Access(a, "anything") != None {
		t.Fatal("revoked")
	}
	if _, err := r.Link("alice", 79); !errors.Is(err, ErrBadInput) {
		t.Fatalf("link a revoked person: %v", err)
	}
	// Open again: the same first owner.
	r2, err := Open(db, "another-token-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	f1, _ := r.First()
	f2, _ := r2.First()
	if f1.ID != f2.ID {
		t.Fatal("a second first owner")
	}
	if _, ok := r2.ByToken("the-access-token-0123456789"); ok {
		t.Fatal("the old access token still works after it changed")
	}
}

// FuzzCheckName: a name that passes is safe on a command line and a
// terminal, and never a key separator.
func FuzzCheckName(f *testing.F) {
	for _, s := range []string{"alice", "tg-123", "a b", "a/b", "\x1b[31m", "é", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if CheckName(s) != nil {
			return
		}
		for _, c := range s {
			if c == '/' || c == ' ' || c < 0x20 || c == 0x7f {
				t.Fatalf("%q passed", s)
			}
		}
	})
}
