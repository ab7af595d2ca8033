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
	// The filter runs inside the listing, before its bound of 2000 notes,
	// so other people's notes never crowd out the owner's own.
	keep := func(n boundary.NoteFile) (boundary.NoteFile, bool) { return n, true }
	if reg := s.opt.People; reg != nil {
		owner := reg.Creator(chat)
		keep = func(n boundary.NoteFile) (boundary.NoteFile, bool) {
			return n, reg.NoteOwner(n.Person, n.Chat) == owner
		}
	}
	notes, err := boundary.ListNotes(s.opt.DataDir, keep)
	if err != nil {
		return "", err
	}
	return boundary.SearchNotes(r, notes), nil
}
