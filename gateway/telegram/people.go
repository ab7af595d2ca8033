package telegram

import (
	"encoding/json"
	"slices"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/chats/people"
)

// as returns the chats as a Telegram user may use them, and whether the
// user has access at all. A user linked to a person (`mirror person link`,
// or an approved pairing) is that person. A user allowed the older ways,
// in telegram.allowed_users or paired before people existed, is the first
// owner: a single user sees everything, as before. The bot filters
// nothing itself: every call through the Scope asks package chats.
func (b *Bot) as(user int64) (chats.Scope, bool) {
	reg := b.svc.People()
	if reg != nil {
		if p, ok := reg.ByTelegram(user); ok {
			return b.svc.As(p), true
		}
	}
	if !b.allowedOldWay(user, reg != nil) {
		return chats.Scope{}, false
	}
	if reg == nil {
		return b.svc.As(people.Person{Name: "owner", Role: people.RoleOwner, First: true}), true
	}
	first, err := reg.First()
	if err != nil {
		b.log.Error("telegram: the first owner", "err", err)
		return chats.Scope{}, false
	}
	return b.svc.As(first), true
}

// allowedOldWay reports whether user is in allowed_users, or was paired
// (with people kept, only before pairings named a person: a linked user's
// access is their person's).
func (b *Bot) allowedOldWay(user int64, withPeople bool) bool {
	if slices.Contains(b.cfg.AllowedUsers, user) {
		return true
	}
	ok := false
	_ = b.read(func(bk stateBucket) error {
		v := bk.Get(tgKey("u", user))
		ok = v != nil && !(withPeople && pairedPerson(v))
		return nil
	})
	return ok
}

// joinGroupChat lets a group's allowed member write to the group's chat:
// a group is one chat shared by the allowed members who speak in it (its
// replies are visible to the whole group anyway).
func (b *Bot) joinGroupChat(sc chats.Scope, chat string) {
	reg := b.svc.People()
	if reg == nil || sc.Level(chat) >= people.Write {
		return
	}
	if _, err := reg.Share(chat, sc.Person().Name, people.Write); err != nil {
		b.log.Warn("telegram: share the group's chat", "chat", chat, "err", err)
	}
}

// pairedPerson reports whether a stored approval linked its user to a
// person: then that link, not the approval, gives access (a revoked
// person's old approval gives none).
func pairedPerson(v []byte) bool {
	var p Pairing
	return json.Unmarshal(v, &p) == nil && p.Person != ""
}
