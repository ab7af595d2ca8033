package chats

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/ids"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/openai"
	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
	"github.com/mirror-gateway/mirror/runtime/view"
)

// TestViewRowsKeptBetweenTurns: the rows an actor keeps between turns
// (rows, viewRows) are, after each change of the conversation, the rows a
// build from nothing gives: messages appended, a step whose calls a later
// message closes, a pin and a transcript changing a message in place, a
// boundary replacing the conversation, a clear.
func TestViewRowsKeptBetweenTurns(t *testing.T) {
	seq := uint64(1)
	msg := func(role, state, text string) Message {
		seq++
		return Message{ID: ids.Message(seq), Seq: seq, Role: role, State: state, Text: text, Tokens: 3}
	}
	user := func(a *actor) { a.msgs = append(a.msgs, msg(provider.RoleUser, MsgPicked, "question")) }
	answer := func(a *actor) { a.msgs = append(a.msgs, msg(provider.RoleAssistant, MsgDone, "answer")) }
	a := &actor{s: &Service{}, pins: map[string]bool{}}
	for _, tc := range []struct {
		name   string
		change func(a *actor)
	}{
		{"a turn", func(a *actor) { user(a); answer(a) }},
		{"another turn", func(a *actor) { user(a); answer(a) }},
		{"a step with calls left open", func(a *actor) {
			user(a)
			m := msg(provider.RoleAssistant, MsgStep, "")
			m.ToolCalls = []provider.ToolCall{{ID: "c1", Name: "shell"}, {ID: "c2", Name: "shell"}}
			a.msgs = append(a.msgs, m)
			r := msg(provider.RoleTool, MsgDone, "ran")
			r.ToolCallID, r.Tool = "c1", "shell"
			a.msgs = append(a.msgs, r)
		}},
		{"a message after the open call", func(a *actor) { user(a); answer(a) }},
		{"a pin", func(a *actor) {
			m := a.msgs[1]
			m.Pinned = true
			a.replay(NewEvent("c", seq+1, time.Now(), &MessagePinned{Message: &m}))
		}},
		{"a transcript", func(a *actor) {
			a.msgs[0].Attachments = []Attachment{{Type: "audio/ogg", SHA256: "s1"}}
			a.touch() // attachments set in place, as a message arrives with them
			a.rows()  // kept with the audio not heard yet
			a.replayTranscribed(&MessageTranscribed{Message: &Message{ID: a.msgs[0].ID,
				Attachments: []Attachment{{Type: "audio/ogg", SHA256: "s1", Transcript: "heard"}}}})
		}},
		{"a boundary", func(a *actor) {
			kept := a.msgs[len(a.msgs)-4:]
			carried := append([]Message(nil), kept...)
			seq++
			a.replay(NewEvent("c", seq, time.Now(), &BoundaryCrossed{Reason: "hard"}))
			a.msgs = append(a.msgs, msg(provider.RoleUser, MsgContinuity, "where the work stands"))
			a.msgs = append(a.msgs, carried...)
		}},
		{"a clear", func(a *actor) {
			seq++
			a.replay(NewEvent("c", seq, time.Now(), &Cleared{}))
			user(a)
			answer(a)
		}},
	} {
		a.rows() // the rows kept before the change
		tc.change(a)
		got := a.rows()
		want := (&actor{s: a.s, msgs: a.msgs, conv: a.conv}).rows()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("after %s: kept rows\n%s\nwant\n%s", tc.name, rowsString(got), rowsString(want))
		}
	}
}

func rowsString(rows []view.Row) string {
	s := ""
	for _, r := range rows {
		s += strconv.FormatUint(r.Seq, 10) + ":" + string(r.Kind) + ":" + r.Text + " pinned=" + strconv.FormatBool(r.Pinned) + "\n"
	}
	return s
}

// rowsGuard is the chat's Turner, recording whether a turn changed the
// rows it was given: the actor hands its kept rows to turn after turn.
type rowsGuard struct {
	Turner
	mu      sync.Mutex
	changed []string
	turns   int
}

func (g *rowsGuard) Run(ctx context.Context, in runtime.TurnInput, onDelta func(string) error) (runtime.TurnResult, error) {
	before := make([]view.Row, len(in.Rows))
	for i, r := range in.Rows {
		r.Parts = slices.Clone(r.Parts)
		before[i] = r
	}
	res, err := g.Turner.Run(ctx, in, onDelta)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.turns++
	for i := range before {
		if !reflect.DeepEqual(before[i], in.Rows[i]) {
			g.changed = append(g.changed, fmt.Sprintf("row %d (m%d)", i, before[i].Seq))
		}
	}
	return res, err
}

// The rows a chat hands a turn are shared with the next turns, so a turn
// never changes them, even one that writes a voice note's transcript.
func TestTurnLeavesItsRowsAsGiven(t *testing.T) {
	stt := &providertest.Whisper{Text: "Please book a table for two."}
	f := &playOpenAI{}
	a := newAttachEnv(t, openai.New(openai.Config{Name: "p", BaseURL: f.serve(t)}), config.KindOpenAI, transcribing(stt.Serve(t)))
	g := &rowsGuard{Turner: a.svc.opt.Turner}
	a.svc.opt.Turner = g
	c, s := a.openChat()
	a.turn(s, c.ID, "first")
	att := a.upload(oggBytes(), "audio/ogg", "voice.ogg")
	a.turn(s, c.ID, "see the voice note", att.SHA256)
	a.turn(s, c.ID, "and?")
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.turns != 3 || len(stt.Files()) != 1 {
		t.Fatalf("%d turns, %d transcriptions", g.turns, len(stt.Files()))
	}
	if len(g.changed) > 0 {
		t.Fatalf("a turn changed the rows it was given: %v", g.changed)
	}
}
