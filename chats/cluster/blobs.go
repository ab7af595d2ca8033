package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mirror-gateway/mirror/chats"
)

// Attachments shared by the nodes (chats.SharedBlobs): the blobs in an
// object store, named by their SHA-256 (JetStream cuts each into chunks,
// so a 10 MB file fits under the servers' message limit), and the upload
// entries in a KV bucket, by the same name. Both are replicated like the
// records and synced on every write (the server's SyncAlways).
const (
	BlobsBucket   = "mirror_blobs"
	UploadsBucket = "mirror_uploads"
)

// SharedBlobs is the node's side of the shared attachments; see
// chats.SharedBlobs.
type SharedBlobs struct{ n *Node }

var _ chats.SharedBlobs = (*SharedBlobs)(nil)

// SharedBlobs returns the node's side of the attachments the cluster
// shares (give it to chats.Blobs.Share).
func (n *Node) SharedBlobs() *SharedBlobs { return &SharedBlobs{n: n} }

// stores returns the object store and the uploads bucket, binding to
// (or, the first time in the cluster, creating) them on first use: kept
// off the node's setup, which every chat waits for, they cost a start
// nothing. One goroutine of the node does it at a time (blobsMu).
func (s *SharedBlobs) stores(ctx context.Context) (jetstream.ObjectStore, jetstream.KeyValue, error) {
	if _, _, _, err := s.n.buckets(); err != nil {
		return nil, nil, err
	}
	s.n.blobsMu.Lock()
	defer s.n.blobsMu.Unlock()
	s.n.mu.Lock()
	obs, kv := s.n.blobs, s.n.uploads
	s.n.mu.Unlock()
	if obs != nil && kv != nil {
		return obs, kv, nil
	}
	// Short attempts, as the node's setup makes: a create asked while
	// another node's create of the same bucket forms its group can go
	// unanswered, and the next attempt finds the bucket.
	wait := 100 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		obs, kv, err := s.bind(actx)
		cancel()
		if err == nil {
			s.n.mu.Lock()
			s.n.blobs, s.n.uploads = obs, kv
			s.n.mu.Unlock()
			return obs, kv, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil, err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// bind binds to the object store and the uploads bucket, creating them
// when the cluster has none.
func (s *SharedBlobs) bind(ctx context.Context) (jetstream.ObjectStore, jetstream.KeyValue, error) {
	obs, err := s.n.js.ObjectStore(ctx, BlobsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		// The shared attachments: no TTL, the leader collects.
		obs, err = s.n.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket: BlobsBucket, Description: "Mirror attachments, named by their SHA-256",
			Storage: jetstream.FileStorage, Replicas: s.n.o.Replicas,
		})
		if errors.Is(err, jetstream.ErrBucketExists) { // another node made it first
			obs, err = s.n.js.ObjectStore(ctx, BlobsBucket)
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: %s object store: %w", BlobsBucket, err)
	}
	kv, err := s.n.js.KeyValue(ctx, UploadsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = s.n.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: UploadsBucket, Description: "Mirror uploads no message may have named yet, by SHA-256",
			History: 1, Storage: jetstream.FileStorage, Replicas: s.n.o.Replicas,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = s.n.js.KeyValue(ctx, UploadsBucket)
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: %s bucket: %w", UploadsBucket, err)
	}
	return obs, kv, nil
}

// digestOf is how the object store writes a content's SHA-256 (given in
// hex) in an object's Digest.
func digestOf(sum string) string {
	raw, err := hex.DecodeString(sum)
	if err != nil || len(raw) != sha256.Size {
		return ""
	}
	return "SHA-256=" + base64.URLEncoding.EncodeToString(raw)
}

// Store implements chats.SharedBlobs: an object of this content stored
// within fresh is kept as it is (its age keeps it from collection for
// longer than an upload takes); otherwise the content is stored anew.
func (s *SharedBlobs) Store(ctx context.Context, sum string, r io.Reader, fresh time.Duration) error {
	obs, _, err := s.stores(ctx)
	if err != nil {
		return err
	}
	info, err := obs.GetInfo(ctx, sum)
	if err == nil && info.Digest == digestOf(sum) && time.Since(info.ModTime) < fresh {
		return nil
	}
	if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return err
	}
	_, err = obs.Put(ctx, jetstream.ObjectMeta{Name: sum}, r)
	return err
}

// Fetch implements chats.SharedBlobs.
func (s *SharedBlobs) Fetch(ctx context.Context, sum string) (io.ReadCloser, error) {
	obs, _, err := s.stores(ctx)
	if err != nil {
		return nil, err
	}
	wait := 20 * time.Millisecond
	for {
		rc, err := obs.Get(ctx, sum)
		if !errors.Is(err, jetstream.ErrObjectNotFound) {
			return rc, err
		}
		// The replica that answered may be behind an upload just
		// acknowledged on another node: the stream's leader decides.
		meta, _, seq, lerr := s.n.leaderLast(ctx, "OBJ_"+BlobsBucket, "$O."+BlobsBucket+".M."+base64.URLEncoding.EncodeToString([]byte(sum)))
		if lerr != nil {
			return nil, fmt.Errorf("read the object's meta: %w", lerr)
		}
		var info struct {
			Deleted bool `json:"deleted"`
		}
		if seq == 0 || json.Unmarshal(meta, &info) != nil || info.Deleted {
			return nil, fmt.Errorf("the cluster does not hold it: %w", fs.ErrNotExist)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the cluster holds it but its replica here is behind: %w", ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// Note implements chats.SharedBlobs, by compare-and-set on the entry's
// revision.
func (s *SharedBlobs) Note(ctx context.Context, sum string, update func(old []byte) []byte) error {
	_, kv, err := s.stores(ctx)
	if err != nil {
		return err
	}
	for {
		old, rev, err := s.lastNote(ctx, sum)
		if err != nil {
			return err
		}
		if rev == 0 {
			_, err = kv.Create(ctx, sum, update(nil))
		} else {
			_, err = kv.Update(ctx, sum, update(old), rev)
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !wrongLastSeq(err) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// Noted implements chats.SharedBlobs. The entry is read from the bucket's
// stream leader, not from any replica (as a KV Get may be): a replica a
// moment behind would miss an upload just acknowledged on another node,
// or show the collector an entry it just removed.
func (s *SharedBlobs) Noted(ctx context.Context, sum string) ([]byte, error) {
	v, _, err := s.lastNote(ctx, sum)
	return v, err
}

// lastNote reads sum's upload entry (nil: none) and the revision its key
// is at (0: never written) from the stream's leader (leaderLast).
func (s *SharedBlobs) lastNote(ctx context.Context, sum string) ([]byte, uint64, error) {
	if _, _, err := s.stores(ctx); err != nil {
		return nil, 0, err
	}
	data, hdr, seq, err := s.n.leaderLast(ctx, "KV_"+UploadsBucket, "$KV."+UploadsBucket+"."+sum)
	if err != nil {
		return nil, 0, fmt.Errorf("read upload entry: %w", err)
	}
	if op := hdr.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
		// Removed: no entry, but the next one is written after this
		// revision.
		return nil, seq, nil
	}
	return data, seq, nil
}

// Leading implements chats.SharedBlobs: the leader collects.
func (s *SharedBlobs) Leading() bool { return s.n.IsLeader() }

// Notes implements chats.SharedBlobs.
func (s *SharedBlobs) Notes(ctx context.Context) (map[string][]byte, error) {
	_, kv, err := s.stores(ctx)
	if err != nil {
		return nil, err
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	out := map[string][]byte{}
	for {
		select {
		case e := <-w.Updates():
			if e == nil {
				return out, nil // the initial values are all read
			}
			out[e.Key()] = e.Value()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Stored implements chats.SharedBlobs.
func (s *SharedBlobs) Stored(ctx context.Context) (map[string]time.Time, error) {
	obs, _, err := s.stores(ctx)
	if err != nil {
		return nil, err
	}
	infos, err := obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return map[string]time.Time{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := make(map[string]time.Time, len(infos))
	for _, i := range infos {
		out[i.Name] = i.ModTime
	}
	return out, nil
}

// Remove implements chats.SharedBlobs.
func (s *SharedBlobs) Remove(ctx context.Context, sum string) error {
	obs, _, err := s.stores(ctx)
	if err != nil {
		return err
	}
	if err := obs.Delete(ctx, sum); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return err
	}
	return nil
}

// Forget implements chats.SharedBlobs.
func (s *SharedBlobs) Forget(ctx context.Context, sum string) error {
	_, kv, err := s.stores(ctx)
	if err != nil {
		return err
	}
	if err := kv.Purge(ctx, sum); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return err
	}
	return nil
}
