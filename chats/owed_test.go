package chats

import (
	"strconv"
	"testing"
)

// Client ids owed to the index go on in the actor's own array while they
// are fewer than a batch (not a copy of it at each flush); the flush that
// makes a batch hands all of them, in order, to the commit in an array of
// their own, and owes nothing after it.
func TestOwedClientIDsAreNotCopiedEachFlush(t *testing.T) {
	a := &actor{}
	for i := range clientIDBatch - 1 {
		b := &batch{clients: [][2]string{{"k" + strconv.Itoa(i), "m" + strconv.Itoa(i)}}}
		f := &Flush{}
		var owed [][2]string
		allocs := testing.AllocsPerRun(1, func() { owed = a.indexClientIDs(b, f) })
		if f.ClientIDs != nil || len(owed) != i+1 || owed[i] != b.clients[0] {
			t.Fatalf("flush %d: handed %d, owed %d", i, len(f.ClientIDs), len(owed))
		}
		if cap(a.owed) > len(a.owed) && allocs > 0 {
			t.Fatalf("flush %d: owed copied (%v allocations) while its array had room", i, allocs)
		}
		a.owed = owed
	}
	kept := a.owed
	b := &batch{clients: [][2]string{{"last", "m-last"}}}
	f := &Flush{}
	if owed := a.indexClientIDs(b, f); owed != nil || len(f.ClientIDs) != clientIDBatch {
		t.Fatalf("the batch's flush: handed %d, owed %d", len(f.ClientIDs), len(owed))
	}
	for i, p := range f.ClientIDs[:clientIDBatch-1] {
		if p != kept[i] {
			t.Fatalf("handed %d is %v, want %v", i, p, kept[i])
		}
	}
	if &f.ClientIDs[0] == &kept[0] {
		t.Fatal("the ids handed to the commit share the actor's array")
	}
}
