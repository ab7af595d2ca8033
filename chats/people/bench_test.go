package people

import (
	"fmt"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkAccess is the check every WebSocket frame and route naming a
// chat now pays: one bbolt read of the chat's creator and grant, with
// 1000 chats and 50 people in the database.
func BenchmarkAccess(b *testing.B) {
	r, db := openTest(b, "the-access-token-0123456789")
	var ps []Person
	for i := range 50 {
		p, _, err := r.Add(fmt.Sprintf("p%d", i), "")
		if err != nil {
			b.Fatal(err)
		}
		ps = append(ps, p)
	}
	err := db.Update(func(tx *bolt.Tx) error {
		for i := range 1000 {
			if err := SetCreatorTx(tx, fmt.Sprintf("c_%04d", i), ps[i%50].ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		// chat c_N was created by person N%50, and so is owned by them.
		if r.Access(ps[i%50], fmt.Sprintf("c_%04d", i%1000)) != Own {
			b.Fatal("wrong access")
		}
	}
}

// BenchmarkByToken is what authenticating a request costs.
func BenchmarkByToken(b *testing.B) {
	r, _ := openTest(b, "the-access-token-0123456789")
	var toks []string
	for i := range 50 {
		_, tok, _ := r.Add(fmt.Sprintf("p%d", i), "")
		toks = append(toks, tok)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, ok := r.ByToken(toks[i%50]); !ok {
			b.Fatal("token")
		}
	}
}

// benchRegistry is a registry of 50 members and 1000 chats, chat c_N
// created by member N%50, as the per-turn benchmarks read it.
func benchRegistry(b *testing.B) (*Registry, []Person, []string) {
	r, db := openTest(b, "the-access-token-0123456789")
	var ps []Person
	for i := range 50 {
		p, _, err := r.Add(fmt.Sprintf("p%d", i), "")
		if err != nil {
			b.Fatal(err)
		}
		ps = append(ps, p)
	}
	chats := make([]string, 1000)
	err := db.Update(func(tx *bolt.Tx) error {
		for i := range chats {
			chats[i] = fmt.Sprintf("c_%04d", i)
			if err := SetCreatorTx(tx, chats[i], ps[i%50].ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return r, ps, chats
}

// BenchmarkGet is a person by id, as every turn reads its chat's creator
// (chats.Service.ownerPolicies).
func BenchmarkGet(b *testing.B) {
	r, ps, _ := benchRegistry(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if p, err := r.Get(ps[i%50].ID); err != nil || p.ID != ps[i%50].ID {
			b.Fatal(p, err)
		}
	}
}

// BenchmarkCreator is a chat's creator, read on every turn.
func BenchmarkCreator(b *testing.B) {
	r, ps, chats := benchRegistry(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if r.Creator(chats[i%1000]) != ps[i%50].ID {
			b.Fatal("wrong creator")
		}
	}
}
