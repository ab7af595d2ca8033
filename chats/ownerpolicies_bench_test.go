package chats

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mirror-gateway/mirror/chats/people"
)

// BenchmarkOwnerPolicies is what every turn's start asks the people
// registry (maybeStart → ownerPolicies): the chat's creator and their
// role, with 50 members and 1000 chats.
func BenchmarkOwnerPolicies(b *testing.B) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "p.db"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	reg, err := people.Open(db, "owner-token")
	if err != nil {
		b.Fatal(err)
	}
	var ps []people.Person
	for i := range 50 {
		p, _, err := reg.Add(fmt.Sprintf("p%d", i), "")
		if err != nil {
			b.Fatal(err)
		}
		ps = append(ps, p)
	}
	chats := make([]string, 1000)
	err = db.Update(func(tx *bolt.Tx) error {
		for i := range chats {
			chats[i] = fmt.Sprintf("c_%04d", i)
			if err := people.SetCreatorTx(tx, chats[i], ps[i%50].ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	s := &Service{opt: Options{People: reg, RolePolicies: map[string]map[string]string{
		people.RoleMember: {"shell": "deny"}, people.RoleOwner: {}}}}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if id, pol := s.ownerPolicies(chats[i%1000]); id != ps[i%50].ID || pol["shell"] != "deny" {
			b.Fatal(id, pol)
		}
	}
}
