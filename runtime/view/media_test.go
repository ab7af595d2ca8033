package view

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
)

// imageConv is a conversation whose first message carries two photos and
// a PDF, followed by enough turns that the photos are old.
func imageConv(pinned bool) (*conv, []provider.Part) {
	c := &conv{}
	parts := []provider.Part{
		providertest.NewPart(provider.PartImage, "image/png", "a.png", providertest.PNG(8, 6)),
		providertest.NewPart(provider.PartImage, "image/jpeg", "b.jpg", []byte("jpeg bytes")),
		providertest.NewPart(provider.PartDocument, "application/pdf", "brief.pdf", providertest.PDF),
	}
	parts[0].Width, parts[0].Height = 800, 600
	r := c.user("what are these?", 5)
	r.Parts, r.Pinned = parts, pinned
	c.answer("Two photos and a brief.", 8)
	for i := range 8 {
		c.user(fmt.Sprintf("question %d", i), 4)
		c.answer(fmt.Sprintf("answer %d", i), 4)
	}
	return c, parts
}

// A checkpoint masks the images of old turns like old tool output: each
// becomes a pointer naming it and the handle tool_output gives it back by,
// the message's text and its other parts stay, and the view built again
// with that checkpoint in force is the same bytes, before and after later
// rows. A pinned message keeps its images; without tool_output offered
// the pointer names no handle.
func TestCheckpointMasksOldImages(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pinned bool
		roster []string
	}{
		{"masked", false, fullRoster},
		{"no tool_output", false, []string{"shell"}},
		{"pinned", true, fullRoster},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, parts := imageConv(tc.pinned)
			in := Input{Rows: c.rows, Budget: mustBudget(t, 16000, "full"), Overhead: 500, Roster: tc.roster,
				Signals: Signals{Compact: true}, Provider: "anthropic"}
			v, err := Materialize(in)
			if err != nil {
				t.Fatal(err)
			}
			if v.Checkpoint == nil {
				t.Fatal("no checkpoint")
			}
			if tc.pinned {
				// Never masked: kept whole (here evicted, and kept verbatim
				// as a pin after the cards).
				if len(v.Checkpoint.MaskedImages) != 0 || strings.Contains(string(marshal(t, v.Messages)), "[Image a.png") {
					t.Fatalf("a pinned message's images were masked: %v", v.Checkpoint.MaskedImages)
				}
				return
			}
			first := v.Messages[0]
			if first.Seq != 1 {
				t.Fatalf("the first message is seq %d (evicted?): %s", first.Seq, v.Checkpoint.Reason)
			}
			if fmt.Sprint(v.Checkpoint.MaskedImages) != "[1]" {
				t.Fatalf("masked images %v, want [1]; %s", v.Checkpoint.MaskedImages, v.Checkpoint.Reason)
			}
			if len(first.Parts) != 1 || first.Parts[0].Kind != provider.PartDocument {
				t.Fatalf("the masked message keeps %d parts, want the PDF only", len(first.Parts))
			}
			want := `[Image a.png (image/png, 800×600 pixels) of m1 cleared from this view at a checkpoint.`
			handle := fmt.Sprintf(` Get it back with tool_output {"tool_call_id": "%s"}.]`, ImageHandle(parts[0]))
			if !strings.HasPrefix(first.Content, want) || !strings.HasSuffix(first.Content, "\n\nwhat are these?") ||
				!strings.Contains(first.Content, "[Image b.jpg (image/jpeg) of m1") {
				t.Fatalf("the masked message reads %q", first.Content)
			}
			if got := strings.Contains(first.Content, handle); got != (tc.roster[0] == ToolOutput) {
				t.Fatalf("handle shown %v in %q", got, first.Content)
			}
			if !strings.HasPrefix(ImageHandle(parts[0]), "img_"+parts[0].SHA256[:16]) {
				t.Fatalf("handle %s", ImageHandle(parts[0]))
			}
			if first.Tokens >= 5+2*1000 {
				t.Fatalf("the masked message still counts %d tokens", first.Tokens)
			}

			// The checkpoint in force gives the same bytes, and later rows
			// only append.
			in.Checkpoint, in.Signals = v.Checkpoint, Signals{}
			again, err := Materialize(in)
			if err != nil || again.Checkpoint != nil {
				t.Fatalf("again: %v, checkpoint %v", err, again.Checkpoint)
			}
			a, b := marshal(t, v.Messages), marshal(t, again.Messages)
			if string(a) != string(b) {
				t.Fatalf("the view changed with the checkpoint in force:\n%s\n%s", a, b)
			}
			c.user("one more", 3)
			in.Rows = c.rows
			later, err := Materialize(in)
			if err != nil {
				t.Fatal(err)
			}
			for i := range v.Messages {
				x, _ := json.Marshal(v.Messages[i])
				y, _ := json.Marshal(later.Messages[i])
				if string(x) != string(y) {
					t.Fatalf("message %d changed after a later row:\n%s\n%s", i, x, y)
				}
			}
		})
	}
}

// A result that brought an image back carries it in a user message right
// after the step's results (a tool message is text on every provider);
// masking that result drops the image with it.
func TestRecoveredImageFollowsTheResults(t *testing.T) {
	c := &conv{}
	c.user("look again", 3)
	img := providertest.NewPart(provider.PartImage, "image/png", "a.png", providertest.PNG(4, 4))
	c.add(Row{Kind: KindAssistant, ToolCalls: []provider.ToolCall{{ID: "c1", Name: ToolOutput}, {ID: "c2", Name: "shell"}}, Tokens: 20})
	r := c.add(Row{Kind: KindTool, ToolCallID: "c1", ToolName: ToolOutput, Text: "The image a.png is attached again.", Tokens: 9})
	r.Parts = []provider.Part{img}
	c.add(Row{Kind: KindTool, ToolCallID: "c2", ToolName: "shell", Text: "ok", Tokens: 1})
	v, err := Materialize(Input{Rows: c.rows, Budget: mustBudget(t, 128000, "auto"), Roster: fullRoster, Provider: "openai"})
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range v.Messages {
		roles = append(roles, m.Role)
		if m.Role == provider.RoleTool && len(m.Parts) > 0 {
			t.Fatal("a tool message carries parts")
		}
	}
	if got := strings.Join(roles, " "); got != "user assistant tool tool user" || len(v.Messages[4].Parts) != 1 || len(v.Reasoning) != len(v.Messages) {
		t.Fatalf("messages %s, last with %d parts", got, len(v.Messages[4].Parts))
	}
	if v.Messages[4].Tokens != provider.PartTokens("openai", img) {
		t.Fatalf("the image message counts %d tokens", v.Messages[4].Tokens)
	}
	b := &build{in: Input{}, count: func(s string) int { return len(s) / 4 }, tools: map[string]bool{ToolOutput: true}}
	e := b.mask(b.entryOf(r), 0)
	if len(e.parts) != 0 {
		t.Fatal("a masked result keeps the image it brought back")
	}
}
