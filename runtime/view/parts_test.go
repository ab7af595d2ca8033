package view

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/tokens"
)

// photo is an image attachment as a stored row references it: metadata
// only, no bytes (the view never reads them).
func photo(n, w, h int) provider.Part {
	return provider.Part{Kind: provider.PartImage, MediaType: "image/jpeg", Name: fmt.Sprintf("photo%d.jpg", n),
		Size: int64(1000 * n), SHA256: fmt.Sprintf("%064x", n), Width: w, Height: h}
}

// A user row's attachments reach its message, and their tokens, by the
// rule of the provider the view is sized for, are in the message's count
// and so in the request's estimate.
func TestPartsReachTheView(t *testing.T) {
	var c conv
	c.user("", 0).Parts = []provider.Part{photo(1, 1280, 720)} // a photo without caption
	c.answer("A harbour at dusk.", 6)
	c.user("and these?", 4).Parts = []provider.Part{photo(2, 1000, 1000), photo(3, 200, 200)}
	for _, kind := range []string{"", "openai", "anthropic", "gemini"} {
		t.Run("provider "+kind, func(t *testing.T) {
			in := Input{Rows: c.rows, Budget: mustBudget(t, 0, "auto"), Provider: kind}
			v, err := Materialize(in)
			if err != nil {
				t.Fatal(err)
			}
			if len(v.Messages) != 3 {
				t.Fatalf("%d messages: %+v", len(v.Messages), v.Messages)
			}
			first, last := v.Messages[0], v.Messages[2]
			if len(first.Parts) != 1 || first.Parts[0].Name != "photo1.jpg" || len(last.Parts) != 2 {
				t.Fatalf("parts lost: %+v / %+v", first.Parts, last.Parts)
			}
			if want := provider.PartsTokens(kind, first.Parts); first.Tokens != want {
				t.Fatalf("caption-less photo counts %d, want %d", first.Tokens, want)
			}
			if want := 4 + provider.PartsTokens(kind, last.Parts); last.Tokens != want {
				t.Fatalf("message counts %d, want %d", last.Tokens, want)
			}
			if kind == "" && first.Tokens != tokens.ImageDefault {
				t.Fatalf("no provider: %d, want seed 000's %d", first.Tokens, tokens.ImageDefault)
			}
			if want := in.Overhead + historyTokensOf(v.Messages); v.Size != want {
				t.Fatalf("size %d, want %d", v.Size, want)
			}
		})
	}
}

func historyTokensOf(ms []provider.Message) int {
	n := 0
	for _, m := range ms {
		n += m.Tokens
	}
	return n + tokens.Overhead(len(ms))
}

// Attachments keep the view append-only: turn after turn, the messages
// with their parts extend the previous turn's bytes, pinned by a golden
// file.
func TestPartsAppendOnly(t *testing.T) {
	var c conv
	var prev []byte
	var log bytes.Buffer
	for n := 1; n <= 4; n++ {
		c.user(fmt.Sprintf("photo %d", n), 3).Parts = []provider.Part{photo(n, 640*n, 480)}
		v, err := Materialize(Input{Rows: c.rows, Budget: mustBudget(t, 0, "auto"), Provider: "anthropic"})
		if err != nil {
			t.Fatal(err)
		}
		cur, err := json.Marshal(v.Messages)
		if err != nil {
			t.Fatal(err)
		}
		if prev != nil && !bytes.HasPrefix(cur, prev[:len(prev)-1]) {
			t.Fatalf("turn %d does not extend turn %d:\n%s", n, n-1, firstDiff(prev, cur))
		}
		prev = cur
		fmt.Fprintf(&log, "turn %d: size %d\n%s\n", n, v.Size, cur)
		c.answer(fmt.Sprintf("Seen photo %d.", n), 4)
	}
	golden(t, "parts.golden", log.Bytes())
}
