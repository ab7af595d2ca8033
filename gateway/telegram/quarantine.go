package telegram

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// quarantineBucket holds the updates that could not be handled: ones that
// could not be read and ones whose handling panicked. Each is kept with its
// error, under its update_id (zero-padded, so the keys sort by id), and the
// offset moves past it in the same transaction, so a poison update is met
// once, never again after a restart.
var quarantineBucket = []byte("telegram.quarantine")

// Quarantine limits: an update is kept up to maxQuarantineRaw bytes, and
// the bucket keeps the newest maxQuarantined updates, so a stream of bad
// updates cannot fill the disk.
const (
	maxQuarantineRaw   = 64 << 10
	maxQuarantineStack = 16 << 10
	maxQuarantined     = 1000
)

// Kinds of quarantined updates.
const (
	kindUnreadable = "unreadable" // not a valid update
	kindPanic      = "panic"      // its handling panicked
)

// quarantined is one record of the quarantine bucket.
type quarantined struct {
	UpdateID int       `json:"update_id"`
	Kind     string    `json:"kind"`
	Error    string    `json:"error"`
	At       string    `json:"at,omitempty"`    // where it panicked: function file:line
	Stack    string    `json:"stack,omitempty"` // the panicking goroutine's stack
	Time     time.Time `json:"time"`
	// Update is the raw update as received, cut to maxQuarantineRaw.
	Update    string `json:"update"`
	Truncated bool   `json:"truncated,omitempty"`
}

func quarantineKey(id int) []byte { return []byte(fmt.Sprintf("%020d", id)) }

// handlePanic is a recovered panic of an update's handling.
type handlePanic struct {
	val   any
	at    string
	stack []byte
}

func (p *handlePanic) Error() string { return fmt.Sprintf("panic: %v", p.val) }

// handleSafe handles u, turning a panic into a *handlePanic: one update
// must never take the gateway down with it, nor, by coming back after
// every restart, keep it down.
func (b *Bot) handleSafe(p polled) (hp *handlePanic, err error) {
	defer func() {
		if r := recover(); r != nil {
			hp = &handlePanic{val: r, at: panicSite(), stack: debug.Stack()}
		}
	}()
	return nil, b.handle(p.u, readTopics(p.raw))
}

// panicSite is the first frame outside the runtime of a panicking
// goroutine, called from the deferred recover: where the panic happened.
func panicSite() string {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, "runtime.") {
			return fmt.Sprintf("%s %s:%d", f.Function, shortPath(f.File), f.Line)
		}
		if !more {
			return ""
		}
	}
}

// shortPath keeps the last two elements of a source path (package/file.go):
// enough to find the line, without the build machine's directories.
func shortPath(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		if j := strings.LastIndexByte(p[:i], '/'); j >= 0 {
			return p[j+1:]
		}
	}
	return p
}

// process handles one received update, the one place both polling and the
// webhook go through. An update that cannot be read, or whose handling
// panics, is quarantined, logged once, and the offset committed past it;
// serving goes on. It returns an error only when the update must come again:
// a transient failure of its handling, or a quarantine that could not be
// stored.
func (b *Bot) process(p polled) error {
	b.handleMu.Lock()
	defer b.handleMu.Unlock()
	id := p.u.UpdateID
	if p.bad != nil {
		return b.quarantine(id, p.raw, quarantined{Kind: kindUnreadable, Error: p.bad.Error()})
	}
	hp, err := b.handleSafe(p)
	if hp == nil {
		return err
	}
	return b.quarantine(id, p.raw, quarantined{Kind: kindPanic, Error: hp.Error(), At: hp.at, Stack: string(hp.stack)})
}

// quarantine stores update id with what went wrong and commits the offset
// past it, in one transaction. It logs the update (its id and error, never
// its text) and tells its sender only the first time, so a quarantine
// retried after a failed write is not reported twice.
func (b *Bot) quarantine(id int, raw []byte, q quarantined) error {
	q.UpdateID, q.Time = id, b.opt.Now().UTC()
	if len(q.Error) > 1000 {
		q.Error = strings.ToValidUTF8(q.Error[:1000], "")
	}
	if len(q.Stack) > maxQuarantineStack {
		q.Stack = q.Stack[:maxQuarantineStack]
	}
	q.Update = string(raw)
	if len(raw) > maxQuarantineRaw {
		q.Update, q.Truncated = string(raw[:maxQuarantineRaw]), true
	}
	v, err := json.Marshal(q)
	if err != nil {
		return err
	}
	key, next := quarantineKey(id), []byte(strconv.Itoa(id+1))
	fresh := false
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = b.store.Write(ctx, func(tx *bolt.Tx) error {
		qb, err := tx.CreateBucketIfNotExists(quarantineBucket)
		if err != nil {
			return err
		}
		fresh = qb.Get(key) == nil
		if err := qb.Put(key, v); err != nil {
			return err
		}
		if err := pruneQuarantine(qb); err != nil {
			return err
		}
		if b.opt.Offsets != nil {
			return nil // cluster mode: the shared offset, below
		}
		return tx.Bucket(bucket).Put([]byte("offset"), next)
	})
	if err == nil {
		err = b.commitShared(id + 1)
	}
	if err != nil {
		b.log.Warn("telegram: an update to quarantine could not be stored; it comes again", "update", id, "err", err)
		return err
	}
	if fresh {
		attrs := []any{"update", id, "kind", q.Kind, "err", q.Error}
		if q.At != "" {
			attrs = append(attrs, "at", q.At)
		}
		b.log.Error("telegram: update quarantined and skipped (kept in the database, bucket "+string(quarantineBucket)+")", attrs...)
		b.tellBad(raw)
	}
	return nil
}

// pruneQuarantine drops the oldest records beyond maxQuarantined. It
// counts with a cursor: a write transaction's Stats miss its own puts.
func pruneQuarantine(qb *bolt.Bucket) error {
	n := 0
	c := qb.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
	}
	for ; n > maxQuarantined; n-- {
		k, _ := c.First()
		if err := qb.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// readQuarantine returns the quarantined updates, oldest update first.
func readQuarantine(db *bolt.DB) ([]quarantined, error) {
	var out []quarantined
	err := db.View(func(tx *bolt.Tx) error {
		qb := tx.Bucket(quarantineBucket)
		if qb == nil {
			return nil
		}
		return qb.ForEach(func(_, v []byte) error {
			var q quarantined
			if err := json.Unmarshal(v, &q); err != nil {
				return err
			}
			out = append(out, q)
			return nil
		})
	})
	return out, err
}
