package chats

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// BlobRef is what the rows that name a blob say of it: its media type
// and the names they give it.
type BlobRef struct {
	// Type is the media type a referencing row stored for the blob.
	Type string
	// Names are the file names the referencing rows give it (deduplicated,
	// at most maxRefNames; the one asked for first when it is among them).
	Names []string
}

// maxRefNames bounds the names BlobRefs collects for one blob.
const maxRefNames = 16

// BlobRefs reports whether anything the person can see names the blob
// sum: a live upload (one a message.send may still name) or a stored row
// of a chat (a message that carries it, a file the assistant sent). Only
// then may the blob be served. The scan stops early once want (a name
// the client asks for; "" for any) is among the names found, so a common
// fetch reads few rows; a blob no row names costs a full scan, which is
// what a probe for another hash gets. found is false for a blob nothing
// names, even when its file is still on disk (collection removes it
// later).
//
// Every chat is visible to the one access token the gateway has; when
// people with chats of their own arrive, this is where the scan narrows
// to the asking person's chats.
func (s *Service) BlobRefs(ctx context.Context, sum, want string) (ref BlobRef, found bool, err error) {
	return s.blobRefs(ctx, sum, want, nil, "")
}

// blobRefs is BlobRefs over the chats visible reports true for (nil: all).
// With visible set, a live upload counts only when person uploaded it.
func (s *Service) blobRefs(ctx context.Context, sum, want string, visible func(chat string) bool, person string) (ref BlobRef, found bool, err error) {
	if !validSum(sum) {
		return BlobRef{}, false, nil
	}
	key := []byte(sum)
	// add records one referencing attachment; it reports whether the scan
	// may stop.
	add := func(a Attachment) bool {
		if a.SHA256 != sum {
			return false
		}
		if !found {
			found, ref.Type = true, a.Type
		}
		if a.Name != "" && !slices.Contains(ref.Names, a.Name) && len(ref.Names) < maxRefNames {
			ref.Names = append(ref.Names, a.Name)
		}
		return want == "" || a.Name == want
	}
	errStop := errors.New("stop")
	err = s.store.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketUploads).Get(key); v != nil {
			var u upload
			if json.Unmarshal(v, &u) == nil && (visible == nil || slices.Contains(u.By, person)) && add(u.Attachment) {
				return errStop
			}
		}
		for _, parent := range [][]byte{bucketRecords, bucketPending} {
			p := tx.Bucket(parent)
			err := p.ForEachBucket(func(chat []byte) error {
				if err := ctx.Err(); err != nil {
					return err
				}
				if visible != nil && !visible(string(chat)) {
					return nil // a chat the person cannot see names nothing for them
				}
				return p.Bucket(chat).ForEach(func(_, v []byte) error {
					if !bytes.Contains(v, key) || !bytes.Contains(v, attachmentsKey) {
						return nil
					}
					atts, _, err := rowAttachments(chat, v)
					if err != nil {
						return err
					}
					for _, a := range atts {
						if add(a) {
							return errStop
						}
					}
					return nil
				})
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err == errStop {
		err = nil
	}
	if err != nil {
		return BlobRef{}, false, err
	}
	if b := s.opt.Blobs; !found && b != nil && b.shared != nil {
		// An upload made on another node of the cluster, not named yet.
		u, ok, err := b.sharedUpload(ctx, sum)
		if err != nil {
			return BlobRef{}, false, err
		}
		if ok && (visible == nil || slices.Contains(u.By, person)) {
			add(u.Attachment)
		}
	}
	if i := slices.Index(ref.Names, want); i > 0 {
		ref.Names[0], ref.Names[i] = ref.Names[i], ref.Names[0]
	}
	return ref, found, nil
}
