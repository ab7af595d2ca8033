package chats

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Cluster mode: besides the chats it owns, every node follows the whole
// records stream and applies every other chat's flushes to its bbolt, so
// each node's file is a full, eventually consistent replica of the log.
// The chat list, search and list watchers read the local file, so they
// show every chat of the cluster on every node, not only those this node
// ran.

// bucketFollow holds how far this node followed the records stream
// (followKey: a stream sequence, 8 bytes big endian), so a restart
// resumes there instead of re-reading the whole stream.
var (
	bucketFollow = []byte("cluster_follow")
	followKey    = []byte("pos")
)

// Follow applies one flush of chat from the records stream, at stream
// sequence pos, to this node's bbolt, exactly as catching up does (the
// flush and the chat's new LogPos in one write), then tells list watchers
// and the search index. It is idempotent: a flush at or below the chat's
// LogPos is skipped, so a restart that re-reads part of the stream, or an
// Adopt that already caught up, writes nothing twice. A gap in a chat's
// positions is expected (positions are stream sequences shared by every
// chat); only the per-chat order matters, which the stream keeps. Chats
// this node owns are skipped: their owner applies its own flushes.
func (s *Service) Follow(ctx context.Context, chat string, pos uint64, f *Flush) error {
	if s.opt.RecordLog == nil {
		return errors.New("chats: Follow is for cluster mode (Options.RecordLog)")
	}
	if f == nil || pos == 0 {
		return fmt.Errorf("%w: Follow without a flush or a position", ErrBadInput)
	}
	if err := f.Validate(chat); err != nil {
		return err
	}
	if s.owns(chat) {
		return nil
	}
	var (
		applied, created bool
		meta             Chat
	)
	err := s.store.Write(ctx, func(tx *bolt.Tx) (err error) {
		applied, created, meta, err = s.putFlushAt(tx, chat, pos, f)
		return err
	})
	if err != nil || !applied {
		return err
	}
	// A copy of the chat loaded here without owning it (a read) holds
	// what bbolt held before: it leaves memory, the next read loads this.
	if s.loaded(chat) && !s.owns(chat) {
		s.unload(chat, fmt.Errorf("chat %s changed on its owner; it is read again from the record", chat))
	}
	if f.Purge {
		s.removedHere(chat)
		return nil
	}
	s.followDelete(meta)
	s.indexLater(chat)
	s.notifyList(meta, created, nil)
	return nil
}

// followDelete keeps this node's purge of a followed chat in step with
// its owner's: a chat deleted there is purged from here too once its
// undo window and purgeGrace have passed, unless the owner's purge
// arrives first (the usual case: it cancels this one); a restored chat
// has none due. The purge goes to the chat's owner, or takes the chat
// when nobody owns it (its owner died), so a deleted chat goes even when
// the node that deleted it is gone.
func (s *Service) followDelete(meta Chat) {
	if meta.DeleteAt == nil {
		s.cancelPurge(meta.ID)
		return
	}
	s.schedulePurge(meta.ID, meta.DeleteAt.Add(purgeGrace))
}

// owns says this node adopted chat (and was not disowned).
func (s *Service) owns(chat string) bool {
	s.replica.mu.Lock()
	defer s.replica.mu.Unlock()
	return s.replica.m[chat] != nil
}

// loaded says the chat's actor is in memory.
func (s *Service) loaded(chat string) bool {
	sh := s.shardOf(chat)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.m[chat] != nil
}

// Followed is the records stream's sequence this node followed up to
// (0: none), where following resumes after a restart.
func (s *Service) Followed() (uint64, error) {
	var pos uint64
	err := s.store.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketFollow); b != nil {
			if v := b.Get(followKey); len(v) == 8 {
				pos = binary.BigEndian.Uint64(v)
			}
		}
		return nil
	})
	return pos, err
}

// SetFollowed records that every message of the records stream up to
// sequence pos was followed (applied, or not this node's to apply). It
// never moves backwards.
func (s *Service) SetFollowed(ctx context.Context, pos uint64) error {
	return s.store.Write(ctx, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketFollow)
		if err != nil {
			return err
		}
		if v := b.Get(followKey); len(v) == 8 && binary.BigEndian.Uint64(v) >= pos {
			return nil
		}
		return b.Put(followKey, binary.BigEndian.AppendUint64(nil, pos))
	})
}
