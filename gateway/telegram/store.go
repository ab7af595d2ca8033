package telegram

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/chats/people"
	bolt "go.etcd.io/bbolt"
)

// bucket is this package's bucket in the shared database. Keys:
//
//	offset             next getUpdates offset (decimal)
//	cur/<place>        the place's current Mirror chat; a place is a Telegram
//	                   chat ("<tg>") or a forum topic of one ("<tg>:<thread>"),
//	                   written by place.String, read by parsePlace (topics.go)
//	tn/<place>         a forum topic's name, from its creation or last rename
//	f/<place>/<chat>   followState of that pair
//	m/<tg>/<msg>       sentRecord: the Mirror message a Telegram message shows
//	                   (a person's message passed on, or a reply of the bot)
//	x/<chat>/<msg>     sentRecord: a Redirect of that pending message begun
//	                   (so a repeated press finishes it instead of losing it)
//	mm/<chat>/<msg>    "<tg>:<message_id>": the Telegram message a person's
//	                   message with attachments came from (a transcript
//	                   replies to it)
//	g/<place>/<group>/<message_id>  groupPart: a part of an album still
//	                   gathering (committed with the offset past its update)
//	p/<CODE>           Pairing waiting for approval
//	u/<user>           Pairing approved: that user has access
//
// Updates that could not be handled are in a bucket of their own,
// quarantineBucket (quarantine.go).
var bucket = []byte("telegram")

// ErrUnknownCode is returned for a pairing code that is not waiting (never
// issued, approved already, or expired).
var ErrUnknownCode = errors.New("no such pairing code (it may have expired: codes last an hour)")

func initBucket(s *chats.Store) error {
	err := s.DB().Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucket)
		return err
	})
	if err != nil {
		return fmt.Errorf("telegram: create bucket: %w", err)
	}
	return nil
}

// write commits fn through the store's group committer. It is not
// cancelled with the bot: what was sent must be recorded. In cluster mode
// it is the leader's write, replicated (replica.go).
func (b *Bot) write(fn func(bk stateBucket) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if b.opt.Replica != nil {
		return b.replicate(ctx, fn, true)
	}
	return b.store.Write(ctx, func(tx *bolt.Tx) error { return fn(tx.Bucket(bucket)) })
}

func (b *Bot) read(fn func(bk stateBucket) error) error {
	return b.store.DB().View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucket)
		if bk == nil {
			return nil
		}
		return fn(bk)
	})
}

func tgKey(prefix string, parts ...any) []byte {
	var sb strings.Builder
	sb.WriteString(prefix)
	for _, p := range parts {
		sb.WriteByte('/')
		fmt.Fprint(&sb, p)
	}
	return []byte(sb.String())
}

// followState is what a follower persists: the last durable chat event it
// handled, and the Telegram messages of the turn it streams, so a restart
// edits them instead of sending the reply again.
type followState struct {
	TG int64 `json:"tg"`
	// Thread is the forum topic followed (0: the whole chat, or General).
	Thread  int    `json:"thread,omitempty"`
	Chat    string `json:"chat"`
	LastSeq uint64 `json:"last_seq"`
	Turn    string `json:"turn,omitempty"`
	MsgIDs  []int  `json:"msg_ids,omitempty"`
	// Landed says the final text of Turn is in MsgIDs.
	Landed bool `json:"landed,omitempty"`
	// Interrupted says Turn stopped with the gateway before it landed: the
	// turn resuming it continues in MsgIDs. An id of 0 in MsgIDs is a part
	// sent whose id was lost with Telegram's answer.
	Interrupted bool `json:"interrupted,omitempty"`
	// Asks maps an approval or recovery id to the message with its buttons;
	// Acks a pending Mirror message id to its "queued" reply.
	Asks map[string]int `json:"asks,omitempty"`
	Acks map[string]int `json:"acks,omitempty"`
}

func loadFollows(s *chats.Store) ([]followState, error) {
	var out []followState
	err := s.DB().View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		for k, v := c.Seek([]byte("f/")); k != nil && strings.HasPrefix(string(k), "f/"); k, v = c.Next() {
			var st followState
			if err := json.Unmarshal(v, &st); err != nil {
				return fmt.Errorf("telegram: corrupt follow record %s: %w", k, err)
			}
			out = append(out, st)
		}
		return nil
	})
	return out, err
}

// Pairing is a request for access by a Telegram user who is not in
// telegram.allowed_users.
type Pairing struct {
	Code      string    `json:"code"`
	User      int64     `json:"user"`
	Chat      int64     `json:"chat"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// ApprovedAt is set once approved.
	ApprovedAt *time.Time `json:"approved_at,omitempty"`
	// Person is the name of the person the approval linked the user to
	// (chats/people); empty for a pairing approved before people existed.
	Person string `json:"person,omitempty"`
}

// codeAlphabet leaves out letters and digits that read alike (0/O, 1/I).
const codeAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"

func newCode() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = codeAlphabet[int(b[i])%len(codeAlphabet)]
	}
	return string(b[:])
}

// pairingFor returns the user's waiting code, issuing one when none is
// valid at now; issued says it is new. Expired codes are pruned first.
func pairingFor(bk stateBucket, user, chat int64, name string, now time.Time) (p Pairing, issued bool, err error) {
	if err := pruneExpired(bk, now); err != nil {
		return Pairing{}, false, err
	}
	for _, p := range pendingPairings(bk, now) {
		if p.User == user {
			return p, false, nil
		}
	}
	p = Pairing{Code: newCode(), User: user, Chat: chat, Name: name, CreatedAt: now.UTC(), ExpiresAt: now.Add(PairingTTL).UTC()}
	v, _ := json.Marshal(p)
	return p, true, bk.Put(tgKey("p", p.Code), v)
}

func pendingPairings(bk stateBucket, now time.Time) []Pairing {
	var out []Pairing
	c := bk.Cursor()
	for k, v := c.Seek([]byte("p/")); k != nil && strings.HasPrefix(string(k), "p/"); k, v = c.Next() {
		var p Pairing
		if json.Unmarshal(v, &p) == nil && now.Before(p.ExpiresAt) {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out
}

// approve gives the user of a waiting code access, linking them to the
// person named person: a new member named "tg-USER" when person is empty,
// the named person when one exists, else a new member of that name.
func approve(bk stateBucket, code, person string, now time.Time) (Pairing, error) {
	if err := pruneExpired(bk, now); err != nil {
		return Pairing{}, err
	}
	code = strings.ToUpper(strings.TrimSpace(code))
	v := bk.Get(tgKey("p", code))
	var p Pairing
	if v == nil || json.Unmarshal(v, &p) != nil || !now.Before(p.ExpiresAt) {
		if v != nil {
			_ = bk.Delete(tgKey("p", code))
		}
		return Pairing{}, fmt.Errorf("pairing code %q: %w", code, ErrUnknownCode)
	}
	t := now.UTC()
	p.ApprovedAt = &t
	if person == "" {
		person = "tg-" + strconv.FormatInt(p.User, 10)
	}
	who, err := people.LinkNewTx(bk.Tx(), person, p.User, now)
	if err != nil {
		return Pairing{}, err
	}
	p.Person = who.Name
	nv, _ := json.Marshal(p)
	if err := bk.Put(tgKey("u", p.User), nv); err != nil {
		return Pairing{}, err
	}
	return p, bk.Delete(tgKey("p", code))
}

// ListPairings returns the codes waiting for approval, oldest first, read
// straight from the database (for `mirror pair list` when no gateway runs).
func ListPairings(db *bolt.DB, now time.Time) ([]Pairing, error) {
	var out []Pairing
	err := db.View(func(tx *bolt.Tx) error {
		if bk := tx.Bucket(bucket); bk != nil {
			out = pendingPairings(bk, now)
		}
		return nil
	})
	return out, err
}

// ApprovePairing gives the user of a waiting code access, writing straight
// to the database (for `mirror pair approve` when no gateway runs).
func ApprovePairing(db *bolt.DB, code, person string, now time.Time) (Pairing, error) {
	var p Pairing
	err := db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(bucket)
		if err != nil {
			return err
		}
		p, err = approve(bk, code, person, now)
		return err
	})
	return p, err
}

// allowed reports whether user has access: linked to a person, in
// allowed_users, or paired (see as).
func (b *Bot) allowed(user int64) bool {
	_, ok := b.as(user)
	return ok
}

// currentChat is the current Mirror chat of a Telegram chat without topics.
func (b *Bot) currentChat(tg int64) string { return b.chatAt(at(tg)) }

// chatAt is the current Mirror chat of place p: one indexed read of
// cur/<place>, however many places there are.
func (b *Bot) chatAt(p place) string {
	var id string
	_ = b.read(func(bk stateBucket) error {
		id = string(bk.Get(tgKey("cur", p)))
		return nil
	})
	return id
}

func parseUint(b []byte) uint64 {
	n, _ := strconv.ParseUint(string(b), 10, 64)
	return n
}
