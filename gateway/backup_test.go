package gateway

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/chats/dbcheck"
	"github.com/mirror-gateway/mirror/config"
	bolt "go.etcd.io/bbolt"
)

// TestDatabaseRoutes: GET /api/backup and GET /api/check need the token,
// and while writers commit all along, every copy is sound and every check
// of the live tree finds nothing wrong.
func TestDatabaseRoutes(t *testing.T) {
	db, err := chats.OpenDB(filepath.Join(t.TempDir(), "mirror.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	srv := New(Options{Config: config.Default(), Token: testToken, Routes: DatabaseRoutes(db)})
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	first := make(chan struct{}) // closed once the writer has committed, so the copies hold buckets
	go func() {                  // a writer that keeps growing and rewriting the tree
		defer wg.Done()
		for i := uint64(0); ctx.Err() == nil; i++ {
			if i == 1 {
				close(first)
			}
			_ = db.Update(func(tx *bolt.Tx) error {
				b, err := tx.CreateBucketIfNotExists([]byte{byte('a' + i%7)})
				if err != nil {
					return err
				}
				var k [8]byte
				binary.BigEndian.PutUint64(k[:], i)
				if i%3 == 0 {
					_ = b.Delete(k[:])
				}
				return b.Put(k[:], bytes.Repeat([]byte{byte(i)}, 100+int(i%5000)))
			})
		}
	}()
	defer func() { cancel(); wg.Wait() }()
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("the writer committed nothing in 10 s")
	}

	get := func(path string, auth bool) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", hs.URL+path, nil)
		if auth {
			req.Header.Set("Authorization", "Bearer "+testToken)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, path := range []string{"/api/backup", "/api/check"} {
		resp := get(path, false)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s without the token: %d", path, resp.StatusCode)
		}
	}
	for range 20 {
		resp := get("/api/backup", true)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || int64(len(b)) != resp.ContentLength {
			t.Fatalf("backup: %d, %d of %d bytes, %v", resp.StatusCode, len(b), resp.ContentLength, err)
		}
		if rep := dbcheck.Check(bytes.NewReader(b), int64(len(b))); !rep.Sound() {
			t.Fatalf("the copy: %v", rep.Problems)
		}
		resp = get("/api/check", true)
		var rep dbcheck.Report
		err = json.NewDecoder(resp.Body).Decode(&rep)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !rep.Sound() || rep.Buckets == 0 {
			t.Fatalf("check: %d %v %+v", resp.StatusCode, err, rep)
		}
	}
}
