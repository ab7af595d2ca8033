package boundary

import (
	"reflect"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// A text that is no one row (the cards of evicted turns) is labelled by
// its role alone, never "event 0".
func TestReflectPromptLabelsOnlyRealEvents(t *testing.T) {
	msgs := ReflectPrompt([]Doc{{Role: "user", Text: "Earlier turns: the blue door."}, {Seq: 9, Role: "assistant", Text: "Yes."}})
	want := "The conversation, oldest first:\n\n[user]\nEarlier turns: the blue door.\n\n[event 9, assistant]\nYes.\n\nWrite the notes now."
	if msgs[1].Content != want {
		t.Errorf("transcript:\n%s\nwant:\n%s", msgs[1].Content, want)
	}
}

func TestReflectPrompt(t *testing.T) {
	msgs := ReflectPrompt([]Doc{
		{Seq: 3, Role: "user", Text: "Deploy from staging, please.\n"},
		{Seq: 4, Role: "assistant", Text: "Done: `make ship` ran on staging."},
	})
	if len(msgs) != 2 || msgs[0].Role != provider.RoleSystem || msgs[1].Role != provider.RoleUser {
		t.Fatalf("messages %+v", msgs)
	}
	want := "The conversation, oldest first:\n\n[event 3, user]\nDeploy from staging, please.\n\n[event 4, assistant]\nDone: `make ship` ran on staging.\n\nWrite the notes now."
	if msgs[1].Content != want {
		t.Errorf("transcript:\n%s\nwant:\n%s", msgs[1].Content, want)
	}
	if !strings.Contains(msgs[0].Content, `"## "`) || !strings.Contains(msgs[0].Content, "NOTHING") {
		t.Errorf("system prompt does not say the format: %s", msgs[0].Content)
	}
}

func TestParseNotes(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Note
	}{
		{"headings", "## Deploys\nFrom staging with `make ship`.\n\n## The operator\nPrefers short answers.\n",
			[]Note{{"Deploys", "From staging with `make ship`."}, {"The operator", "Prefers short answers."}}},
		{"intro and title dropped", "# What I learned\n\n## A\nbody a\n",
			[]Note{{"A", "body a"}}},
		{"one-line intro dropped", "Here is what I learned:\n## A\nbody a",
			[]Note{{"A", "body a"}}},
		{"longer preamble kept", "Context first.\nIt matters.\n## A\nbody a",
			[]Note{{"Context first.", "Context first.\nIt matters."}, {"A", "body a"}}},
		{"plain answer", "The build needs Go 1.26.\nIt fails on 1.25.",
			[]Note{{"The build needs Go 1.26.", "The build needs Go 1.26.\nIt fails on 1.25."}}},
		{"fenced", "```markdown\n## A\nbody\n```", []Note{{"A", "body"}}},
		{"heading inside code stays", "## Shell\n```\n## not a heading\n```\n",
			[]Note{{"Shell", "```\n## not a heading\n```"}}},
		{"empty title", "## \nbody only", []Note{{"body only", "body only"}}},
		{"empty note skipped", "## \n\n## B\nb", []Note{{"B", "b"}}},
		{"crlf", "## A\r\nb\r\n", []Note{{"A", "b"}}},
		{"nothing", "NOTHING", nil},
		{"nothing dotted", "Nothing.", nil},
		{"empty", "  \n ", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ParseNotes(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseNotes(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}
