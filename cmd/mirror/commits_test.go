package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// dbTxID reads the transaction id of the last commit of the bbolt file at
// path from its two meta pages (the higher of the two is current). bbolt
// writes the meta page with a plain write before its fsync, so a reader of
// the file sees every commit: the difference of two readings is how many
// synced commits happened between them.
func dbTxID(tb testing.TB, path string) uint64 {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	// Meta page 0 at offset 0; its page size tells where meta page 1 is.
	// Layout: page header (16 bytes), then magic, version, page size,
	// flags (4 bytes each), root bucket (16), freelist (8), pgid (8), txid (8).
	const txidAt = 16 + 4*4 + 16 + 8 + 8
	var head [txidAt + 8]byte
	if _, err := f.ReadAt(head[:], 0); err != nil {
		tb.Fatal(err)
	}
	if binary.LittleEndian.Uint32(head[16:]) != 0xED0CDAED {
		tb.Fatalf("%s: not a bbolt file", path)
	}
	pageSize := int64(binary.LittleEndian.Uint32(head[24:]))
	tx0 := binary.LittleEndian.Uint64(head[txidAt:])
	var tail [8]byte
	if _, err := f.ReadAt(tail[:], pageSize+txidAt); err != nil {
		tb.Fatal(err)
	}
	return max(tx0, binary.LittleEndian.Uint64(tail[:]))
}

// TestLoneTurnSyncedCommits (issue 20, item 5) counts the synced bbolt
// commits of a lone turn through the whole gateway (serve as in production:
// the chats, the runtime with its cost ledger, the search indexer, the
// people tables): one. A turn that ends within PickupDelay of its message
// commits the message's acceptance (durable before it is acknowledged: the
// acknowledgement waits for this commit), its pickup and its end with the
// reply, usage and cost (the final text, once) together. Anything else a
// lone turn commits on its own (its acceptance did before the end, the cost
// ledger did in a transaction of its own) makes a turn cost one more fsync.
func TestLoneTurnSyncedCommits(t *testing.T) {
	dir := t.TempDir()
	addr, logs := startInProc(t, dir)
	f := newFleet(t, addr, 1)
	// The first turn of a chat also writes what only a first turn does.
	if _, _, err := f.runTurns(1); err != nil {
		t.Fatalf("%v; log %s", err, logs)
	}
	const turns = 10
	path := filepath.Join(dir, "data", DBFile)
	before := dbTxID(t, path)
	lats, _, err := f.runTurns(turns)
	if err != nil {
		t.Fatalf("%v; log %s", err, logs)
	}
	got := dbTxID(t, path) - before
	// A turn the client saw end within PickupDelay (serve keeps
	// chats.Options' default, 20 ms) ended before its start was due to be
	// committed alone, so it made one commit; a slower one (a loaded
	// machine) may make two.
	want := uint64(turns)
	for _, l := range lats {
		if l > 20*time.Millisecond {
			want++
		}
	}
	t.Logf("%d synced commits in %d lone turns (%d slower than 20 ms)", got, turns, want-turns)
	if got > want {
		t.Errorf("%d lone turns made %d synced commits; want at most %d (1 a turn, 2 for a turn slower than 20 ms)", turns, got, want)
	}
}
