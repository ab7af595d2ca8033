package chats

import (
	"github.com/mirror-gateway/mirror/runtime/boundary"
)

// recallMemory answers recall_memory in chat: a search of the memory notes
// that belong to the chat's owner (its creator), and of no one else's. An
// owner's chats read only the owner's own notes too: a note another
// person's chat wrote may carry what that person told the model to
// remember, and it must not steer a chat with more rights (owners read
// every note in /api/memory, as people, not as model input).
func (s *Service) recallMemory(chat string, r boundary.Recall) (string, error) {
	if s.opt.DataDir == "" {
		return "No memory is kept here (no data dir).", nil
	}
	notes, err := boundary.ReadNotes(s.opt.DataDir)
	if err != nil {
		return "", err
	}
	if reg := s.opt.People; reg != nil {
		owner := reg.Creator(chat)
		mine := notes[:0]
		for _, n := range notes {
			if reg.NoteOwner(n.Person, n.Chat) == owner {
				mine = append(mine, n)
			}
		}
		notes = mine
	}
	return boundary.SearchNotes(r, notes), nil
}
