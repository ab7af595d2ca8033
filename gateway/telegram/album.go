package telegram

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/mirror-gateway/mirror/chats"
)

// Albums. Telegram sends each part of an album (one media_group_id) as an
// update of its own, with the caption on one of them. The parts are
// gathered and passed on as one message once no part came for the quiet
// interval (on the bot's clock). Gathering is durable: a part's file is
// stored and its record (g/<place>/<group>/<message_id>) committed in the
// same write that moves the offset past its update, so an update
// Telegram was told is handled is never lost, even if the gateway dies
// while the album gathers; a start passes on what a previous run had
// gathered. Passing the album on is idempotent (its client id is derived
// from its first part), so a crash after the chat took it and before the
// records went sends nothing twice.

// groupPart is the record of one gathered album part.
type groupPart struct {
	Msg     int    `json:"msg"`
	User    int64  `json:"user"`
	Caption string `json:"caption,omitempty"`
	// Sums are the part's stored attachments (none when its file could
	// not be passed on; the person was told then).
	Sums []string `json:"sums,omitempty"`
}

// groupKey names an album: where it was sent (a topic's album goes to the
// topic's chat) and its media_group_id.
type groupKey struct {
	where place
	group string
}

// gathering is an album being gathered: the armed flush, and whether the
// person's message budget was charged for it already.
type gathering struct {
	stop     func() bool
	admitted bool
	tries    int
}

func groupPrefix(where place, group string) string { return string(tgKey("g", where, group)) + "/" }

func groupPartKey(where place, group string, msg int) []byte {
	return []byte(groupPrefix(where, group) + fmt.Sprintf("%012d", msg))
}

// validGroup reports whether a media_group_id can name keys.
func validGroup(g string) bool {
	return g != "" && len(g) <= 64 && !strings.ContainsAny(g, "/\x00")
}

// gatheringGroup reports whether parts of group are stored already.
func (b *Bot) gatheringGroup(where place, group string) bool {
	found := false
	_ = b.read(func(bk stateBucket) error {
		k, _ := bk.Cursor().Seek([]byte(groupPrefix(where, group)))
		found = k != nil && strings.HasPrefix(string(k), groupPrefix(where, group))
		return nil
	})
	return found
}

// readGroup returns the stored parts of group, in message order.
func readGroup(bk stateBucket, where place, group string) ([]groupPart, [][]byte) {
	var parts []groupPart
	var keys [][]byte
	prefix := groupPrefix(where, group)
	c := bk.Cursor()
	for k, v := c.Seek([]byte(prefix)); k != nil && strings.HasPrefix(string(k), prefix); k, v = c.Next() {
		var p groupPart
		keys = append(keys, append([]byte(nil), k...))
		if json.Unmarshal(v, &p) == nil {
			parts = append(parts, p)
		}
	}
	sort.SliceStable(parts, func(i, j int) bool { return parts[i].Msg < parts[j].Msg })
	return parts, keys
}

// armGroup (re)starts the quiet interval of an album: it is passed on
// after d unless another part comes first.
func (b *Bot) armGroup(k groupKey, d time.Duration) {
	b.groupsMu.Lock()
	defer b.groupsMu.Unlock()
	if b.ctx.Err() != nil {
		return // closing: the next start passes it on
	}
	g := b.groups[k]
	if g == nil {
		g = &gathering{}
		b.groups[k] = g
	} else if g.stop != nil {
		g.stop()
	}
	g.stop = b.clk.AfterFunc(d, func() { b.flushGroupTimer(k) })
}

// flushGroupTimer runs a due flush, counted in the bot's goroutines so
// Close waits for it.
func (b *Bot) flushGroupTimer(k groupKey) {
	b.mu.Lock()
	if b.closed || b.opt.Leader != nil && b.lead == nil {
		// Closing, or the stint ended: the next (or the new leader)
		// passes it on.
		b.mu.Unlock()
		return
	}
	b.wg.Add(1)
	b.mu.Unlock()
	defer b.wg.Done()
	// One at a time with update handling: the album's send finds or makes
	// the Telegram chat's current chat like a message's does.
	b.handleMu.Lock()
	defer b.handleMu.Unlock()
	b.flushGroup(k)
}

// resumeGroups arms every album a previous run had begun gathering.
func (b *Bot) resumeGroups() {
	seen := map[groupKey]bool{}
	_ = b.read(func(bk stateBucket) error {
		c := bk.Cursor()
		for k, _ := c.Seek([]byte("g/")); k != nil && strings.HasPrefix(string(k), "g/"); k, _ = c.Next() {
			f := strings.Split(string(k), "/")
			if len(f) != 4 {
				continue
			}
			where, err := parsePlace(f[1])
			if err != nil {
				continue
			}
			seen[groupKey{where, f[2]}] = true
		}
		return nil
	})
	for k := range seen {
		b.armGroup(k, b.albumQuiet())
	}
}

func (b *Bot) albumQuiet() time.Duration {
	if b.opt.AlbumQuiet > 0 {
		return b.opt.AlbumQuiet
	}
	return DefaultAlbumQuiet
}

// flushGroup passes a gathered album on as one message: every part's
// attachments, the captions as its text. A transient failure tries again
// later; a refusal is told to the person. Either way the parts' records
// go only once the album was passed on or refused. It runs under
// handleMu.
func (b *Bot) flushGroup(k groupKey) {
	b.groupsMu.Lock()
	g := b.groups[k]
	if g == nil {
		g = &gathering{}
		b.groups[k] = g
	}
	b.groupsMu.Unlock()
	var parts []groupPart
	var keys [][]byte
	_ = b.read(func(bk stateBucket) error { parts, keys = readGroup(bk, k.where, k.group); return nil })
	forget := func(more func(bk stateBucket) error) error {
		err := b.write(func(bk stateBucket) error {
			for _, key := range keys {
				if err := bk.Delete(key); err != nil {
					return err
				}
			}
			if more != nil {
				return more(bk)
			}
			return nil
		})
		if err == nil {
			b.groupsMu.Lock()
			if b.groups[k] == g {
				delete(b.groups, k)
			}
			b.groupsMu.Unlock()
		}
		return err
	}
	if len(parts) == 0 {
		_ = forget(nil)
		return
	}
	var captions, sums []string
	for _, p := range parts {
		if c := strings.TrimSpace(p.Caption); c != "" && !contains(captions, c) {
			captions = append(captions, c)
		}
		sums = append(sums, p.Sums...)
	}
	text := strings.Join(captions, "\n\n")
	first := parts[0]
	retry := func(err error) {
		g.tries++
		wait := min(time.Duration(1<<min(g.tries, 6))*time.Second, time.Minute)
		b.log.Warn("telegram: album not passed on yet; trying again", "tg", k.where.tg, "thread", k.where.thread, "err", err, "retry_in", wait)
		b.armGroup(k, wait)
	}
	if len(sums) == 0 && text == "" {
		if err := forget(nil); err != nil {
			retry(err)
		}
		return
	}
	sc, ok := b.as(first.User)
	if !ok {
		if err := forget(nil); err != nil {
			retry(err)
		}
		return
	}
	if !g.admitted {
		if !b.admitSend(k.where, sc, first.User, first.Msg) {
			if err := forget(nil); err != nil {
				retry(err)
			}
			return
		}
		g.admitted = true
	}
	chat, err := b.ensureChat(k.where, sc)
	if err != nil {
		retry(err)
		return
	}
	msg, err := sc.SendAttached(b.ctx, chat, text, fmt.Sprintf("tg:%d:%d", k.where.tg, first.Msg), chats.ModeQueue, sums, chats.Origin{})
	if err != nil {
		if transient(err) && !errors.Is(err, chats.ErrUnknownAttachment) {
			if b.ctx.Err() == nil {
				retry(err)
			}
			return
		}
		b.notify(k.where, "Your album was not passed on: "+err.Error(), nil, first.Msg)
		if err := forget(nil); err != nil {
			retry(err)
		}
		return
	}
	v, _ := json.Marshal(sentRecord{Chat: chat, Msg: msg.ID, Text: text, Atts: sums})
	if err := forget(func(bk stateBucket) error {
		for _, p := range parts {
			if err := bk.Put(tgKey("m", k.where.tg, p.Msg), v); err != nil {
				return err
			}
		}
		return bk.Put(tgKey("mm", chat, msg.ID), []byte(fmt.Sprintf("%d:%d", k.where.tg, first.Msg)))
	}); err != nil {
		retry(err) // sent again under the same client id: the chat answers the message it has
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// editGathered changes the caption of a part still being gathered; it
// reports whether msg was one.
func (b *Bot) editGathered(where place, group string, msg int, caption string) (bool, error) {
	if !validGroup(group) {
		return false, nil
	}
	key := groupPartKey(where, group, msg)
	found := false
	err := b.write(func(bk stateBucket) error {
		v := bk.Get(key)
		var p groupPart
		if v == nil || json.Unmarshal(v, &p) != nil {
			return nil
		}
		found = true
		p.Caption = caption
		nv, _ := json.Marshal(p)
		return bk.Put(key, nv)
	})
	return found, err
}

// stopGroups stops every armed flush (Close).
func (b *Bot) stopGroups() {
	b.groupsMu.Lock()
	defer b.groupsMu.Unlock()
	for _, g := range b.groups {
		if g.stop != nil {
			g.stop()
		}
	}
}
