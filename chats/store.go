package chats

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mirror-gateway/mirror/chats/dbcheck"
	"github.com/mirror-gateway/mirror/runtime/ids"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Buckets owned by this package in the one database file.
var (
	bucketChats     = []byte("chats")      // chat id → Chat
	bucketRecords   = []byte("records")    // chat id → bucket: seq (8 bytes, big endian) → Event
	bucketPending   = []byte("pending")    // chat id → bucket: message id → Message
	bucketClientIDs = []byte("client_ids") // chat id → bucket: client_id → message id
)

// ErrLocked is returned by Open when another process holds the database.
var ErrLocked = errors.New("the database is in use by another mirror process")

// Store is the chats' part of the bbolt database. Writes from every chat go
// through one committer goroutine that folds all writes waiting at that moment
// into one transaction: one fsync serves many chats, and a lone write is
// committed at once instead of waiting for a batch timer.
type Store struct {
	db       *bolt.DB
	writes   chan *write
	stop     chan struct{}
	finished chan struct{}
	wg       sync.WaitGroup

	// carry are the writers whose buffered writes ride every commit
	// (Carry); set before the first write.
	carry []Carrier
	// ahead keeps the file written past its high-water mark (the
	// committer's alone).
	ahead *ahead

	// commitHook, when set (tests), runs inside every commit and may fail it.
	commitHook func() error
	// archiveHook, when set (tests), runs inside a boundary's commit and may fail it.
	archiveHook func() error
}

type write struct {
	fn   func(tx *bolt.Tx) error
	done chan error
}

// maxGroup bounds how many writes share one transaction, so one commit never
// grows without limit under load.
const maxGroup = 512

// initialMap is the least bbolt maps of a database, and so what a new file
// grows to at its first commit past its first pages.
const initialMap = 1 << 20

// OpenDB opens (creating if needed) the bbolt file at path with mode 0600. A
// database held by another process is reported as ErrLocked after timeout;
// a damaged one as a *dbcheck.Damage (errors.Is dbcheck.ErrDamaged), left
// as it was.
func OpenDB(path string, timeout time.Duration) (*bolt.DB, error) {
	db, _, err := OpenDBReport(path, timeout)
	return db, err
}

// OpenDBReport is OpenDB that also returns what the check at open found
// (nil for a new file): Report.Tree says the whole tree was walked, which
// happens when the previous process did not close the file (CloseDB).
func OpenDBReport(path string, timeout time.Duration) (*bolt.DB, *dbcheck.Report, error) {
	// Like etcd: the freelist is not written on every commit, which saves
	// pages per commit on the hot path; CloseDB writes it once at a clean
	// close. Without it bbolt rebuilds the freelist at open by walking the
	// file in a goroutine nothing can recover, so the file is checked
	// first (dbcheck.OpenFileReport, whole when bbolt will walk it), under
	// the lock bbolt then keeps.
	//
	// A new file is mapped, and grown, a mebibyte at once (initialMap):
	// bbolt starts at 32 KiB and doubles, and each step remaps the file and
	// syncs its new size inside a commit, the first ones in the first turns.
	var rep *dbcheck.Report
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, FreelistType: bolt.FreelistMapType, NoFreelistSync: true,
		InitialMmapSize: initialMap, OpenFile: dbcheck.OpenFileReport(timeout, &rep)})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, nil, fmt.Errorf("%s: %w (stop the other one, or use another --data dir)", path, ErrLocked)
	}
	if errors.Is(err, dbcheck.ErrDamaged) {
		return nil, rep, err // it names the file and what to do
	}
	if err != nil {
		return nil, nil, fmt.Errorf("open database %s: %w", path, err)
	}
	return db, rep, nil
}

// CloseDB closes a database OpenDB opened, once nothing else writes it:
// it writes the freelist in one last commit and leaves the clean-shutdown
// marker (dbcheck.MarkClean), so the next open reads the freelist and
// checks the meta pages and the freelist only, instead of walking the
// whole tree. A process killed before this leaves no valid marker: the
// next open walks and checks everything.
func CloseDB(db *bolt.DB) error {
	path := db.Path()
	err := db.Update(func(tx *bolt.Tx) error {
		// Under the writer's lock: this commit, and only it, writes the
		// freelist (bbolt reads the flag when it commits).
		db.NoFreelistSync = false
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return dbcheck.MarkClean(path)
}

// NewStore creates the chats' buckets in db and starts the committer.
func NewStore(db *bolt.DB) (*Store, error) {
	err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketChats, bucketRecords, bucketPending, bucketClientIDs, bucketOutputs, bucketHeld, bucketArchive, bucketProcs, bucketUploads} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		if err := buildIndexes(tx); err != nil {
			return err
		}
		if err := markClientIDs(tx); err != nil {
			return err
		}
		return buildSets(tx)
	})
	if err != nil {
		return nil, fmt.Errorf("create buckets: %w", err)
	}
	s := &Store{db: db, writes: make(chan *write, maxGroup), stop: make(chan struct{}), finished: make(chan struct{}), ahead: openAhead(db)}
	s.wg.Add(1)
	go s.commitLoop()
	return s, nil
}

// markClientIDs gives the client_ids index of a store written before its
// watermark (clientIDsIndexed) one, once: that code indexed every client id
// in the commit of its message, so each chat's index holds its record's
// through the chat's seq. Without it, loading a chat would take every
// client id its record ever had as owed. The client_ids bucket's own
// sequence (1) says it is done.
func markClientIDs(tx *bolt.Tx) error {
	top := tx.Bucket(bucketClientIDs)
	if top.Sequence() >= 1 {
		return nil
	}
	var chats [][]byte
	err := top.ForEachBucket(func(k []byte) error {
		chats = append(chats, bytes.Clone(k))
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range chats {
		c, ok, err := loadChat(tx, string(k))
		if err != nil || !ok {
			continue // its metadata is damaged or gone: nothing to mark against
		}
		if err := top.Bucket(k).SetSequence(c.Seq); err != nil {
			return err
		}
	}
	return top.SetSequence(1)
}

// Close stops the committer after the writes already queued are committed.
// It does not close the database, which belongs to whoever opened it.
func (s *Store) Close() {
	close(s.stop)
	s.wg.Wait()
	s.ahead.off()
}

// DB returns the underlying database, for read transactions.
func (s *Store) DB() *bolt.DB { return s.db }

// Write runs fn in a read-write transaction shared with other writers and
// returns once that transaction is committed (or failed). fn may be run twice
// if another write in its group fails, so it must only touch the transaction.
func (s *Store) Write(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	w := &write{fn: fn, done: make(chan error, 1)}
	select {
	case s.writes <- w:
	case <-s.stop:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once queued, the write is committed or failed soon; waiting for it
	// without the context keeps "acknowledged" and "committed" the same thing.
	select {
	case err := <-w.done:
		return err
	case <-s.finished:
		select {
		case err := <-w.done:
			return err
		default:
			return ErrClosed
		}
	}
}

func (s *Store) commitLoop() {
	defer s.wg.Done()
	defer close(s.finished)
	group := make([]*write, 0, maxGroup)
	for {
		var first *write
		select {
		case first = <-s.writes:
		case <-s.stop:
			// Commit whatever is queued, then refuse the rest.
			for {
				select {
				case w := <-s.writes:
					s.commit([]*write{w})
				default:
					return
				}
			}
		}
		group = append(group[:0], first)
	more:
		for len(group) < maxGroup {
			select {
			case w := <-s.writes:
				group = append(group, w)
			default:
				break more
			}
		}
		s.commit(group)
		// The array outlives the group: cleared, it holds no write (and no
		// chat its closure names) until the next commit fills it again.
		clear(group)
	}
}

// Carrier writes what another part of the gateway buffered (the cost
// ledger's queued costs, monitor.CarryCosts) into tx, a commit of the
// store's, and returns done (nil when it wrote nothing), called with
// whether tx committed.
type Carrier func(tx *bolt.Tx) (done func(committed bool), err error)

// Carry makes c ride every commit of the store: what it buffered becomes
// durable with the next chat's write instead of with a synced commit of its
// own. Call it before the store's first write.
func (s *Store) Carry(c Carrier) { s.carry = append(s.carry, c) }

// commit runs a group in one transaction. If any write fails, the group is
// rolled back and each write is retried alone, so one bad write cannot take
// the others with it.
func (s *Store) commit(group []*write) { s.commitCarrying(group, true) }

// commitCarrying is commit, with the carriers' writes when carry (a retry
// alone goes without them: theirs come again with the next commit).
func (s *Store) commitCarrying(group []*write, carry bool) {
	var dones []func(bool)
	err := s.db.Update(func(tx *bolt.Tx) error {
		s.ahead.fill(tx)
		for _, w := range group {
			if err := w.fn(tx); err != nil {
				return err
			}
		}
		if carry {
			for _, c := range s.carry {
				done, err := c(tx)
				if done != nil {
					dones = append(dones, done)
				}
				if err != nil {
					return err
				}
			}
		}
		if s.commitHook != nil {
			return s.commitHook()
		}
		return nil
	})
	for _, d := range dones {
		d(err == nil)
	}
	if err == nil || len(group) == 1 && !(carry && len(dones) > 0) {
		for _, w := range group {
			w.done <- err
		}
		return
	}
	for _, w := range group {
		s.commitCarrying([]*write{w}, false)
	}
}

func seqKey(seq uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return k[:]
}

// subBucket returns the chat's bucket inside parent, creating it when create.
func subBucket(tx *bolt.Tx, parent []byte, chat string, create bool) (*bolt.Bucket, error) {
	p := tx.Bucket(parent)
	if create {
		return p.CreateBucketIfNotExists([]byte(chat))
	}
	return p.Bucket([]byte(chat)), nil
}

// loadChat reads a chat's metadata.
func loadChat(tx *bolt.Tx, id string) (Chat, bool, error) {
	v := tx.Bucket(bucketChats).Get([]byte(id))
	if v == nil {
		return Chat{}, false, nil
	}
	var c Chat
	if err := json.Unmarshal(v, &c); err != nil {
		return Chat{}, false, fmt.Errorf("chat %s: corrupt metadata: %w", id, err)
	}
	return c, true, nil
}

// eventsSince calls fn for each stored event of chat with seq > since, in order.
func eventsSince(tx *bolt.Tx, chat string, since uint64, fn func(*Event) error) error {
	b, _ := subBucket(tx, bucketRecords, chat, false)
	if b == nil {
		return nil
	}
	c := b.Cursor()
	for k, v := c.Seek(seqKey(since + 1)); k != nil; k, v = c.Next() {
		ev, err := decodeRow(b, chat, k, v)
		if err != nil {
			return err
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
	return nil
}

// textRef marks a stored row that names the row holding its message's text
// (Message.TextAt) instead of repeating it. Inside a JSON string a quote is
// always escaped, so these bytes only ever occur as the key.
var textRef = []byte(`"text_at":`)

// decodeRow decodes one row of chat's record (b is its bucket) and fills
// in a message text the row names instead of repeating (Message.TextAt).
func decodeRow(b *bolt.Bucket, chat string, k, v []byte) (*Event, error) {
	return decodeRowDepth(b, chat, k, v, 0)
}

func decodeRowDepth(b *bolt.Bucket, chat string, k, v []byte, depth int) (*Event, error) {
	ev := &Event{}
	if err := ev.UnmarshalJSON(v); err != nil {
		return nil, fmt.Errorf("chat %s: corrupt record row %d: %w", chat, binary.BigEndian.Uint64(k), err)
	}
	m := ev.Message()
	if m == nil {
		return ev, nil
	}
	fin, _ := ev.Payload.(*TurnFinished)
	switch at := m.TextAt; {
	case at == 0:
		m.textAt = ev.Seq
	case at == ev.Seq && fin != nil: // turn.finished: the message is the reply
		m.Text, m.textAt = fin.Reply, at
	default:
		sv := b.Get(seqKey(at))
		if sv == nil || depth > 2 {
			return nil, fmt.Errorf("chat %s: record row %d names row %d for its text, which is missing", chat, ev.Seq, at)
		}
		src, err := decodeRowDepth(b, chat, seqKey(at), sv, depth+1)
		if err != nil {
			return nil, err
		}
		m.Text = rowText(src)
		m.textAt = at
	}
	m.TextAt = 0
	return ev, nil
}

// rowText is the text a row holds that other rows may name (TextAt): its
// message's, or a tool result's content.
func rowText(ev *Event) string {
	if m := ev.Message(); m != nil {
		return m.Text
	}
	if r, ok := ev.Payload.(*ToolResult); ok && r.Result != nil {
		return r.Result.Content
	}
	return ""
}

// rowBytes is how ev is stored: its wire bytes, except that a message text
// already held by another row of the record is named (Message.TextAt), not
// repeated. A picked message would otherwise be stored twice (accepted and
// picked, three times when a boundary carries it), and a finished turn's
// reply twice (reply and message).
func rowBytes(ev *Event) []byte {
	c, ok := ev.Payload.(carrier)
	if !ok {
		return ev.JSON()
	}
	m := c.carried()
	if m == nil || m.Text == "" {
		return ev.JSON()
	}
	at := m.textAt
	if fin, ok := ev.Payload.(*TurnFinished); ok && fin.Reply == m.Text {
		at = ev.Seq
	} else if at == ev.Seq {
		at = 0
	}
	if at == 0 {
		return ev.JSON()
	}
	ref := *m
	ref.Text, ref.TextAt = "", at
	return marshalFrame(&ev.Header, c.carrying(&ref))
}

// Frame is one stored event as a socket sends it: its seq and wire bytes.
type Frame struct {
	Seq uint64
	Raw []byte
}

// readFrames reads chat's stored events after seq after, in order, until
// their bytes reach maxBytes (at least one event is read). more says
// whether events remain after the last one returned.
func readFrames(tx *bolt.Tx, chat string, after uint64, maxBytes int) (out []Frame, more bool, err error) {
	b, _ := subBucket(tx, bucketRecords, chat, false)
	if b == nil {
		return nil, false, nil
	}
	size := 0
	c := b.Cursor()
	for k, v := c.Seek(seqKey(after + 1)); k != nil; k, v = c.Next() {
		if len(out) > 0 && size+len(v) > maxBytes {
			return out, true, nil
		}
		raw := bytes.Clone(v) // v lives in the mmap only while tx is open
		if bytes.Contains(v, textRef) {
			ev, err := decodeRow(b, chat, k, v)
			if err != nil {
				return nil, false, err
			}
			raw = ev.JSON()
		}
		size += len(raw)
		out = append(out, Frame{Seq: binary.BigEndian.Uint64(k), Raw: raw})
	}
	return out, false, nil
}

// rowType is the type of a stored row, read from its first bytes without
// decoding it (every row is an Event encoded with "type" first); "" when
// the row does not start that way.
func rowType(v []byte) string {
	return string(rowTypeBytes(v))
}

// rowTypeBytes is rowType without a copy: it points into v.
func rowTypeBytes(v []byte) []byte {
	rest, ok := bytes.CutPrefix(v, []byte(`{"type":"`))
	if !ok {
		return nil
	}
	t, _, _ := bytes.Cut(rest, []byte(`"`))
	return t
}

// transcriptRow reports whether rows of this type show a message of the
// transcript (what a snapshot lists).
func transcriptRow(typ string) bool {
	switch typ {
	case EvMessagePicked, EvAssistantStep, EvContinuity, EvTurnFinished, EvTurnFailed, EvBoundary, EvFileSent:
		return true
	}
	return false
}

// markRow reports whether rows of this type are marks (see Mark).
func markRow(typ string) bool {
	switch typ {
	case EvClear, EvCompact, EvBoundary, EvBoundaryFailed, EvTurnFailed, EvDiagnostic:
		return true
	}
	return false
}

// transcriptMark is the mark a row draws: the event as it was sent live,
// without what the page's messages carry already (a boundary's record, a
// failed turn's partial answer).
func transcriptMark(ev *Event) *Event {
	p := ev.Payload
	switch q := p.(type) {
	case *BoundaryCrossed:
		c := *q
		c.Record = ""
		p = &c
	case *TurnFailed:
		c := *q
		c.Message = nil
		p = &c
	}
	return NewEvent(ev.Chat, ev.Seq, ev.Time, p)
}

// transcriptMessage is the message a transcript row shows, as a snapshot
// lists it; ok is false for a row that shows none.
func transcriptMessage(ev *Event) (Message, bool) {
	switch p := ev.Payload.(type) {
	case *BoundaryCrossed:
		return Message{ID: ids.Message(ev.Seq), Role: RoleBoundary, Seq: ev.Seq, Time: ev.Time,
			Text: p.Record, State: MsgDone}, true
	case *MessagePicked, *AssistantStep, *Continuity, *TurnFinished, *TurnFailed, *FileSent:
		msg := ev.Message()
		if msg == nil {
			return Message{}, false
		}
		m := *msg
		if !isTranscript(m) || (m.State == MsgStep && strings.TrimSpace(m.Text) == "") {
			return Message{}, false // tool traffic is shown live, not in the transcript
		}
		return m, true
	}
	return Message{}, false
}

// Page limits of what one snapshot or chat.history frame carries: the
// newest messages whose text adds up to PageBytes (always at least one), at
// most PageMessages of them. They bound what opening a chat costs, however
// long the chat is.
const (
	PageBytes    = 512 << 10
	PageMessages = 200
)

// transcriptPage reads the transcript messages of chat stored before seq
// before (0: from the newest), newest first, within PageBytes and
// PageMessages, and returns them oldest first, with the marks among and
// after them (marks before the oldest message only when no older page
// exists). more says older ones exist; next is the seq the next page ends
// before. pins are the pinned states later rows gave messages.
func transcriptPage(tx *bolt.Tx, chat string, before uint64, pins map[string]bool) (out []Message, marks []Mark, more bool, next uint64, err error) {
	b, _ := subBucket(tx, bucketRecords, chat, false)
	if b == nil {
		return nil, nil, false, 0, nil
	}
	c := b.Cursor()
	var k, v []byte
	if before == 0 {
		k, v = c.Last()
	} else if k, v = c.Seek(seqKey(before)); k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	size := 0
	var rows []uint64 // the row seq of each message of out
	// heard holds, by message id, what the latest message.transcribed
	// row (later than the message) gave it: attachments with transcripts,
	// or why they were not heard.
	heard := map[string]*Message{}
	for ; k != nil; k, v = c.Prev() {
		typ := rowType(v)
		if typ == EvMessageTranscribed {
			ev, err := decodeRow(b, chat, k, v)
			if err != nil {
				return nil, nil, false, 0, err
			}
			if p, ok := ev.Payload.(*MessageTranscribed); ok && p.Message != nil && heard[p.Message.ID] == nil {
				p.Message.TranscribeError = p.Error
				heard[p.Message.ID] = p.Message
			}
			continue
		}
		if !transcriptRow(typ) && !markRow(typ) {
			continue
		}
		ev, err := decodeRow(b, chat, k, v)
		if err != nil {
			return nil, nil, false, 0, err
		}
		if m, ok := transcriptMessage(ev); ok {
			if len(out) >= PageMessages || (len(out) > 0 && size+len(m.Text) > PageBytes) {
				more = true
				break
			}
			if p, ok := pins[m.ID]; ok {
				m.Pinned = p
			}
			if h, ok := heard[m.ID]; ok && ev.Type == EvMessagePicked {
				m.Attachments, m.TranscribeError = h.Attachments, h.TranscribeError
			}
			size += len(m.Text)
			out = append(out, m)
			rows = append(rows, ev.Seq)
			next = ev.Seq
		}
		if markRow(typ) {
			marks = append(marks, Mark{Event: transcriptMark(ev)})
		}
	}
	// more is exact: the row the loop stopped at shows a message.
	if more {
		// Marks older than the oldest message go with the next page.
		keep := marks[:0]
		for _, mk := range marks {
			if mk.Seq >= next {
				keep = append(keep, mk)
			}
		}
		marks = keep
	}
	slices.Reverse(out)
	slices.Reverse(rows)
	slices.Reverse(marks)
	for i := range marks {
		// A row that shows a message and a mark (a failed turn's partial
		// answer and its error) shows the message first.
		marks[i].At = sort.Search(len(rows), func(j int) bool { return rows[j] > marks[i].Seq })
	}
	return out, marks, more, next, nil
}
