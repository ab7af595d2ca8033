package chats

import (
	"context"
	"fmt"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// Regenerate asks a user message again (message.regenerate): a new pending
// message with its text and attachments, naming it in Regenerates, queued
// like any other. Nothing is rewritten: the first answer stays in the
// record and the transcript, and the new turn's answer follows the new
// message. The model reads the question twice, as the person asked it
// twice. Only a message a turn picked up can be asked again; clientID
// makes a repeated request answer the same message, as message.send does.
func (s *Service) Regenerate(ctx context.Context, chat, msg, clientID string, o Origin) (Message, error) {
	if s.routed(ctx, chat) {
		return routeOp[Message](ctx, s, chat, opFrame{Op: opRegenerate, Msg: msg, ClientID: clientID}, o)
	}
	if clientID == "" || len(clientID) > MaxClientID {
		return Message{}, fmt.Errorf("%w: client_id must be 1 to %d bytes", ErrBadInput, MaxClientID)
	}
	return doValue(ctx, s, chat, func(a *actor) (Message, error) {
		orig := a.findPicked(msg)
		if orig == nil {
			sm, err := a.storedMessage(msg)
			if err != nil {
				return Message{}, err
			}
			orig = sm
		}
		switch {
		case orig == nil:
			return Message{}, fmt.Errorf("message %s: %w", msg, ErrNotFound)
		case orig.Role != provider.RoleUser:
			return Message{}, fmt.Errorf("%w: message %s is not a person's message; regenerate the message it answers", ErrBadInput, msg)
		case orig.State == MsgPending:
			return Message{}, fmt.Errorf("%w: message %s is not answered yet", ErrBadInput, msg)
		case orig.State == MsgDeleted:
			return Message{}, fmt.Errorf("message %s was deleted: %w", msg, ErrNotFound)
		}
		sums := make([]string, 0, len(orig.Attachments))
		for _, at := range orig.Attachments {
			sums = append(sums, at.SHA256)
		}
		atts, err := s.attachments(ctx, sums)
		if err != nil {
			return Message{}, err
		}
		return a.send(ctx, orig.Text, clientID, ModeQueue, atts, o, a.count(orig.Text), orig.ID)
	})
}
